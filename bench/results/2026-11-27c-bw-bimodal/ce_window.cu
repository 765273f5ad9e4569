// ce_window.cu -- issue 26 diagnostic (not part of the product): one
// process, GPUs 0 -> 1 with peer access, windows of 8 copies of SIZE
// bytes timed on the host from the first call to cuStreamSynchronize's
// return (as gaspi-bench gpu-bw times ours), per way of submitting:
//   single: 8 x cuMemcpyAsync        batch8: one cuMemcpyBatchAsync of 8
//   1+7: cuMemcpyAsync, then a batch of 7 (the runtime's default path)
// For 1+7 also the host time of each call and the GPU time between two
// events around the window, and a CPU loop's time (is the host slower?).
// Prints one line per way: median [p10 - p90] us per window, GB/s.
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s; cuGetErrorString(r_, &s); fprintf(stderr, "%s: %s\n", #x, s); exit(1); } } while (0)
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
struct St { double med, p10, p90; };
static St stats(std::vector<double> v) { std::sort(v.begin(), v.end()); size_t n = v.size(); return {v[n / 2], v[n / 10], v[n * 9 / 10]}; }
static void pr(const char* what, std::vector<double> v, size_t bytes) {
    St s = stats(v);
    printf("%-14s %8.2f us [%6.2f - %6.2f]  %6.1f GB/s\n", what, s.med, s.p10, s.p90, bytes / s.med / 1e3);
}
int main(int argc, char** argv) {
    size_t size = argc > 1 ? strtoull(argv[1], 0, 0) : (1 << 20);
    const int W = 8, N = 100;
    CK(cuInit(0));
    CUdevice d0, d1; CK(cuDeviceGet(&d0, 0)); CK(cuDeviceGet(&d1, 1));
    CUcontext c0, c1; CK(cuDevicePrimaryCtxRetain(&c0, d0)); CK(cuDevicePrimaryCtxRetain(&c1, d1));
    CK(cuCtxSetCurrent(c1)); CUdeviceptr dst; CK(cuMemAlloc(&dst, size)); CK(cuCtxEnablePeerAccess(c0, 0));
    CK(cuCtxSetCurrent(c0)); CUdeviceptr src; CK(cuMemAlloc(&src, size)); CK(cuCtxEnablePeerAccess(c1, 0));
    CUstream st; CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUevent e0, e1; CK(cuEventCreate(&e0, CU_EVENT_DEFAULT)); CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CUmemcpyAttributes at = {}; at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    at.srcLocHint.type = CU_MEM_LOCATION_TYPE_INVALID; at.dstLocHint.type = CU_MEM_LOCATION_TYPE_INVALID;
    CUdeviceptr ds[W], ss[W]; size_t sz[W];
    for (int i = 0; i < W; ++i) { ds[i] = dst; ss[i] = src; sz[i] = size; }
    auto batch = [&](int from) { size_t a0 = 0; CK(cuMemcpyBatchAsync(ds + from, ss + from, sz + from, W - from, &at, &a0, 1, st)); };
    // CPU speed: a dependent integer chain.
    std::vector<double> cpu;
    for (int k = 0; k < 20; ++k) { auto t = clk::now(); volatile unsigned long x = 1; for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul; cpu.push_back(us(t, clk::now())); }
    std::vector<double> single, b8, b17, b17gpu, c_copy, c_batch, c_sync, b17any;
    for (int it = 0; it < N + 10; ++it) {
        // single
        auto t = clk::now();
        for (int i = 0; i < W; ++i) CK(cuMemcpyAsync(dst, src, size, st));
        CK(cuStreamSynchronize(st));
        double a = us(t, clk::now());
        // batch of 8
        t = clk::now(); batch(0); CK(cuStreamSynchronize(st));
        double b = us(t, clk::now());
        // 1 + 7
        t = clk::now(); CK(cuMemcpyAsync(dst, src, size, st)); auto t1 = clk::now();
        batch(1); auto t2 = clk::now(); CK(cuStreamSynchronize(st)); auto t3 = clk::now();
        // 1 + 7 with events around it (GPU time)
        CK(cuEventRecord(e0, st)); CK(cuMemcpyAsync(dst, src, size, st)); batch(1); CK(cuEventRecord(e1, st));
        CK(cuStreamSynchronize(st)); float ms = 0; CK(cuEventElapsedTime(&ms, e0, e1));
        // 1 + 7, sources read in any order
        at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
        auto t4 = clk::now(); CK(cuMemcpyAsync(dst, src, size, st)); batch(1); CK(cuStreamSynchronize(st)); double any = us(t4, clk::now());
        at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        if (it >= 10) {
            single.push_back(a); b8.push_back(b); b17.push_back(us(t, t3)); b17gpu.push_back(ms * 1e3);
            c_copy.push_back(us(t, t1)); c_batch.push_back(us(t1, t2)); c_sync.push_back(us(t2, t3)); b17any.push_back(any);
        }
    }
    size_t bytes = size * W;
    printf("size %zu, window %d\n", size, W);
    pr("single", single, bytes); pr("batch8", b8, bytes); pr("1+7", b17, bytes); pr("1+7 gpu", b17gpu, bytes); pr("1+7 any", b17any, bytes);
    St a = stats(c_copy), b = stats(c_batch), c = stats(c_sync), p = stats(cpu);
    printf("1+7 calls: memcpy %.2f, batch %.2f, sync %.2f us; cpu loop %.1f us\n", a.med, b.med, c.med, p.med);
    return 0;
}
