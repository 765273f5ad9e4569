// Latency of reading a descriptor right after an acquire / fence (issue 26,
// gpu26 helper). One thread, a dependency chain per iteration:
// sync op -> index -> descriptor load -> next flag address. Cycles per
// iteration; MODE 6 (no load, an opaque register op) is the floor.
// nvcc -arch=sm_90 -o lat lat.cu
#include <cstdio>
struct Desc { unsigned long long a, b, c, d; };
struct Inl { Desc d[16]; };
template <int MODE, int SYNC>
__global__ void lat(const __grid_constant__ Inl inl, const Desc* tab, unsigned* flag, int iters,
                    unsigned long long* out) {
    __shared__ Desc sh[16];
    if (threadIdx.x < 16) sh[threadIdx.x] = tab[threadIdx.x];
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned long long v = 0, t0 = 0;
    for (int i = 0; i < iters; ++i) {
        if (i == 10) t0 = clock64();
        unsigned f;
        const unsigned* fp = flag + (unsigned)v;
        if (SYNC == 1) asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(f) : "l"(fp) : "memory");
        else if (SYNC == 2) { asm volatile("fence.acq_rel.sys;" ::: "memory"); f = (unsigned)v; }
        else asm volatile("ld.volatile.u32 %0, [%1];" : "=r"(f) : "l"(fp) : "memory");
        const unsigned j = (3u + f) & 15u;
        const unsigned long long* p = &tab[j].a;
        if (MODE == 0) asm volatile("ld.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
        else if (MODE == 1) asm volatile("ld.global.nc.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
        else if (MODE == 2) asm volatile("ld.global.nc.L1::evict_last.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
        else if (MODE == 3) v = inl.d[j].a;
        else if (MODE == 4) v = *(volatile unsigned long long*)&sh[j].a;
        else if (MODE == 5) asm volatile("ld.global.nc.L1::evict_unchanged.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
        else asm volatile("and.b64 %0, %1, 256;" : "=l"(v) : "l"((unsigned long long)j));
    }
    out[0] = (clock64() - t0) / (iters - 10);
    out[1] = v;
}
template <int M, int S> unsigned long long run(const Inl& inl, Desc* tab, unsigned* flag, unsigned long long* out) {
    lat<M, S><<<1, 32>>>(inl, tab, flag, 2000, out);
    cudaDeviceSynchronize();
    unsigned long long r[2]; cudaMemcpy(r, out, 16, cudaMemcpyDeviceToHost); return r[0];
}
int main() {
    Desc* tab; unsigned* flag; unsigned long long* out;
    cudaMalloc(&tab, 16 * sizeof(Desc)); cudaMalloc(&flag, 64); cudaMalloc(&out, 16);
    cudaMemset(tab, 0, 16 * sizeof(Desc)); cudaMemset(flag, 0, 64);
    Inl inl{};
    const char* modes[] = {"ld.global", "ld.global.nc", "nc.L1::evict_last", "grid_constant param", "shared", "nc.L1::evict_unchanged", "no load (floor)"};
    for (int rep = 0; rep < 2; ++rep) {
#define ROW(M) printf("LAT %-24s volatile-ld %5llu  acquire %5llu  fence %5llu cycles/iter\n", modes[M], run<M,0>(inl,tab,flag,out), run<M,1>(inl,tab,flag,out), run<M,2>(inl,tab,flag,out));
        ROW(6) ROW(0) ROW(1) ROW(2) ROW(5) ROW(3) ROW(4)
    }
    printf("LAT err %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
