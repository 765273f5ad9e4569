// PCIe probe (diagnostic for issue 26's 4-GPU matvec): k GPUs at once,
// each from its own host thread and pinned buffers of 64 MiB, for ~0.6 s:
//   h2d      copy engine, host -> GPU
//   d2h      copy engine, GPU -> host
//   both     h2d and d2h on two streams at once
//   st       a kernel storing into pinned host-mapped memory (as matvec's
//            products go), GPU -> host
//   st+h2d   st and h2d at once (what the matvec job moves)
// Prints per (mode, k) the summed GB/s of each direction.
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#define LEN (64UL << 20)
#define CK(x) do{cudaError_t e=(x); if(e){printf("err %s line %d\n",cudaGetErrorString(e),__LINE__);return 0;}}while(0)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
__global__ void store(float4* dst, size_t n, float v){for(size_t i=blockIdx.x*(size_t)blockDim.x+threadIdx.x;i<n;i+=(size_t)gridDim.x*blockDim.x) dst[i]=make_float4(v,v,v,v);}
struct job{int g; const char* mode; double up, down; pthread_barrier_t* bar;};
static void* run(void* p){ job* j=(job*)p; CK(cudaSetDevice(j->g));
  void *h1,*h2,*d1,*d2; CK(cudaHostAlloc(&h1,LEN,cudaHostAllocMapped|cudaHostAllocPortable)); CK(cudaHostAlloc(&h2,LEN,cudaHostAllocMapped|cudaHostAllocPortable));
  memset(h1,1,LEN); memset(h2,1,LEN); CK(cudaMalloc(&d1,LEN)); CK(cudaMalloc(&d2,LEN));
  void* hdev; CK(cudaHostGetDevicePointer(&hdev,h2,0));
  cudaStream_t s1,s2; CK(cudaStreamCreateWithFlags(&s1,cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&s2,cudaStreamNonBlocking));
  int sms; cudaDeviceGetAttribute(&sms,cudaDevAttrMultiProcessorCount,j->g);
  bool up = !strcmp(j->mode,"h2d")||!strcmp(j->mode,"both")||!strcmp(j->mode,"st+h2d");
  bool dce = !strcmp(j->mode,"d2h")||!strcmp(j->mode,"both");
  bool dst = !strcmp(j->mode,"st")||!strcmp(j->mode,"st+h2d");
  // warm up
  if(up) cudaMemcpyAsync(d1,h1,LEN,cudaMemcpyHostToDevice,s1);
  if(dce) cudaMemcpyAsync(h2,d2,LEN,cudaMemcpyDeviceToHost,s2);
  if(dst) store<<<sms,512,0,s2>>>((float4*)hdev,LEN/16,1.0f);
  CK(cudaDeviceSynchronize());
  pthread_barrier_wait(j->bar);
  double t0=now(); long nu=0,nd=0;
  while(now()-t0<0.6){
    if(up){cudaMemcpyAsync(d1,h1,LEN,cudaMemcpyHostToDevice,s1);nu++;}
    if(dce){cudaMemcpyAsync(h2,d2,LEN,cudaMemcpyDeviceToHost,s2);nd++;}
    if(dst){store<<<sms,512,0,s2>>>((float4*)hdev,LEN/16,2.0f);nd++;}
    cudaStreamSynchronize(s1); cudaStreamSynchronize(s2);
  }
  double t=now()-t0; j->up=nu*(double)LEN/t/1e9; j->down=nd*(double)LEN/t/1e9;
  cudaFreeHost(h1);cudaFreeHost(h2);cudaFree(d1);cudaFree(d2);return 0;}
int main(){int n; cudaGetDeviceCount(&n); const char* modes[]={"h2d","d2h","both","st","st+h2d"};
  for(int k=1;k<=n;k*=2){ for(int m=0;m<5;m++){ pthread_barrier_t bar; pthread_barrier_init(&bar,0,k); job js[16]; pthread_t th[16];
    for(int g=0;g<k;g++){js[g].g=g;js[g].mode=modes[m];js[g].bar=&bar;js[g].up=js[g].down=0;pthread_create(&th[g],0,run,&js[g]);}
    double u=0,d=0; for(int g=0;g<k;g++){pthread_join(th[g],0);u+=js[g].up;d+=js[g].down;}
    printf("{\"probe\":\"pcie\",\"gpus\":%d,\"mode\":\"%s\",\"h2d_gbps\":%.1f,\"d2h_gbps\":%.1f,\"mvecs_per_s_both_ways\":%.0f}\n",k,modes[m],u,d,
      (u>0&&d>0? (u<d?u:d) : (u>0?u:d))*1e9/128/1e6);
    pthread_barrier_destroy(&bar);} if(k<n && k*2>n) k=n/2; }
  return 0;}
