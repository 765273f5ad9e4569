// Host memory bandwidth probe (diagnostic for issue 26's 4-GPU matvec):
// T threads each stream over their own 256 MiB buffer for ~1 s, reading
// (sum), writing (memset) or both at once (half the threads each).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define LEN (256UL << 20)
static int mode; static volatile int stop;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
struct arg{char*buf;int id;double bytes;};
static void*work(void*p){struct arg*a=p;double b=0;unsigned long s=0;
 int m = mode==2 ? (a->id&1) : mode;
 while(!stop){ if(m==0){const unsigned long*x=(const unsigned long*)a->buf;for(size_t i=0;i<LEN/8;i+=8)s+=x[i]^x[i+1]^x[i+2]^x[i+3]^x[i+4]^x[i+5]^x[i+6]^x[i+7];}
   else memset(a->buf,(int)b,LEN); b+=LEN;}
 a->bytes=b+(s==42);return 0;}
int main(int c,char**v){int T=atoi(v[1]);mode=atoi(v[2]);pthread_t th[256];struct arg a[256];
 for(int i=0;i<T;i++){a[i].buf=malloc(LEN);memset(a[i].buf,1,LEN);a[i].id=i;}
 stop=0;double t0=now();for(int i=0;i<T;i++)pthread_create(&th[i],0,work,&a[i]);
 struct timespec d={1,500000000};nanosleep(&d,0);stop=1;double tot=0;
 for(int i=0;i<T;i++){pthread_join(th[i],0);tot+=a[i].bytes;}
 printf("{\"probe\":\"membw\",\"threads\":%d,\"mode\":\"%s\",\"gbps\":%.1f}\n",T,mode==0?"read":mode==1?"write":"half-read-half-write",tot/(now()-t0)/1e9);return 0;}
