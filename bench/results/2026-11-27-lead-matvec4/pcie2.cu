// PCIe probe 2 (diagnostic, issue 26's 4-GPU matvec): each direction runs
// on its own host thread and stream, back to back for ~0.8 s, counted
// apart (probe 1 ran them in lock step). Per GPU g < k, at once:
//   h2d       copy engine, 2 MiB copies from a pool of 5 pinned buffers
//             (as matvec's inputs, cache-resident on the host)
//   h2d64     copy engine, 64 MiB copies (matvec's ceiling)
//   d2h       copy engine, 2 MiB copies into 24 pinned 2 MiB buffers
//   st        a kernel whose warps store 128 B each (one f32 per lane, as
//             matvec's products) into 24 pinned host-mapped 2 MiB buffers
// Modes: one or two of them at once.
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#define MB2 (2UL << 20)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
__global__ void store(float* dst, size_t n, float v){for(size_t i=blockIdx.x*(size_t)blockDim.x+threadIdx.x;i<n;i+=(size_t)gridDim.x*blockDim.x) dst[i]=v;}
struct dir{int g; int kind; double gbps; pthread_barrier_t* bar;};
static void* go(void* p){ dir* d=(dir*)p; cudaSetDevice(d->g); cudaStream_t s; cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking);
  int sms; cudaDeviceGetAttribute(&sms,cudaDevAttrMultiProcessorCount,d->g);
  size_t len = d->kind==1 ? (64UL<<20) : MB2; int nb = d->kind==0 ? 5 : d->kind==1 ? 1 : 24;
  void* h[24]; void* hd[24]; void* dev; cudaMalloc(&dev, len);
  for(int i=0;i<nb;i++){ cudaHostAlloc(&h[i],len,cudaHostAllocMapped|cudaHostAllocPortable); memset(h[i],1,len); cudaHostGetDevicePointer(&hd[i],h[i],0);}
  pthread_barrier_wait(d->bar);
  double t0=now(); long n=0;
  while(now()-t0<0.8){ for(int r=0;r<8;r++,n++){ int i=n%nb;
      if(d->kind<=1) cudaMemcpyAsync(dev,h[i],len,cudaMemcpyHostToDevice,s);
      else if(d->kind==2) cudaMemcpyAsync(h[i],dev,len,cudaMemcpyDeviceToHost,s);
      else store<<<sms,512,0,s>>>((float*)hd[i],len/4,1.0f);}
    cudaStreamSynchronize(s);}
  d->gbps=n*(double)len/(now()-t0)/1e9;
  for(int i=0;i<nb;i++) cudaFreeHost(h[i]); cudaFree(dev); return 0;}
int main(){int n; cudaGetDeviceCount(&n); const char* names[]={"h2d","h2d64","d2h","st"};
  int modes[][2]={{0,-1},{1,-1},{2,-1},{3,-1},{0,2},{0,3},{1,3}};
  for(int k=1;k<=n;k*=2){ for(int m=0;m<7;m++){ int nd=modes[m][1]<0?1:2; pthread_barrier_t bar; pthread_barrier_init(&bar,0,k*nd);
      dir ds[32]; pthread_t th[32]; int c=0;
      for(int g=0;g<k;g++) for(int j=0;j<nd;j++){ ds[c].g=g; ds[c].kind=modes[m][j]; ds[c].bar=&bar; pthread_create(&th[c],0,go,&ds[c]); c++; }
      double sum[4]={0,0,0,0}; for(int i=0;i<c;i++){ pthread_join(th[i],0); sum[ds[i].kind]+=ds[i].gbps; }
      printf("{\"probe\":\"pcie2\",\"gpus\":%d,\"mode\":\"%s%s%s\"",k,names[modes[m][0]],nd>1?"+":"",nd>1?names[modes[m][1]]:"");
      for(int j=0;j<4;j++) if(sum[j]>0) printf(",\"%s_gbps\":%.1f",names[j],sum[j]);
      printf("}\n"); fflush(stdout); pthread_barrier_destroy(&bar);} }
  return 0;}
