// nvshmem_pingpong.cu -- NVSHMEM's kernel-to-kernel ping-pong between two
// GPUs, measured the way gaspi-bench gpu-pingpong --device-driven measures
// ours (bench/src/gpu.rs, gpu-kernels/cuda/echo.cu gaspi_gpu_pingpong):
// one persistent kernel per PE; round r: PE 0 sends `size` bytes with
// putmem_signal_nbi (signal := r, NVSHMEM_SIGNAL_SET) into PE 1's buffer,
// PE 1 waits with signal_wait_until(>= r) and answers the same way; PE 0
// records each round trip with %globaltimer. Half round trip, rounds 10..
// (the first 10 are warm-up), median [p10 - p90].
//
// Styles (the same launch as ours):
//   thread: one thread, nvshmem_putmem_signal_nbi + nvshmem_signal_wait_until;
//   warp:   sizes below 16 KiB: one warp, nvshmemx_putmem_signal_nbi_warp;
//   block:  from 16 KiB: 512 threads, nvshmemx_putmem_signal_nbi_block;
//           thread 0 waits, then the block synchronises.
// The thread style runs up to 64 KiB (one thread copying more takes ms).
//
// Usage: nvshmem_pingpong PE UID_FILE [--quick] [--sizes a,b,c]
// (started by bench/peers/nvshmem-run.sh).
#include "nvshmem_common.cuh"

#include <string>

__device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Style 0: thread, 1: warp, 2: block. A kernel of its own per style, as
// gaspi-bench's (gpu-kernels/cuda/echo.cu): compiled into one, the
// styles' copies would share one register allocation.
template <int Style>
__global__ void __launch_bounds__(Style == 2 ? 512 : 32)
    pingpong(char* buf, uint64_t* sig, size_t size, size_t send_off, int rounds, int me, int peer,
             unsigned long long* times) {
    if (Style == 0 && threadIdx.x != 0) return;
    for (int r = 1; r <= rounds; ++r) {
        unsigned long long t0 = 0;
        if (me == 0) {
            t0 = globaltimer_ns();
            if (Style == 0) nvshmem_putmem_signal_nbi(buf, buf + send_off, size, sig, r, NVSHMEM_SIGNAL_SET, peer);
            else if (Style == 1) nvshmemx_putmem_signal_nbi_warp(buf, buf + send_off, size, sig, r, NVSHMEM_SIGNAL_SET, peer);
            else nvshmemx_putmem_signal_nbi_block(buf, buf + send_off, size, sig, r, NVSHMEM_SIGNAL_SET, peer);
        }
        if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, (uint64_t)r);
        if (Style == 1) __syncwarp();
        if (Style == 2) __syncthreads();
        if (me == 0) {
            if (threadIdx.x == 0) times[r - 1] = globaltimer_ns() - t0;
        } else if (Style == 0) {
            nvshmem_putmem_signal_nbi(buf, buf + send_off, size, sig, r, NVSHMEM_SIGNAL_SET, peer);
        } else if (Style == 1) {
            nvshmemx_putmem_signal_nbi_warp(buf, buf + send_off, size, sig, r, NVSHMEM_SIGNAL_SET, peer);
        } else {
            nvshmemx_putmem_signal_nbi_block(buf, buf + send_off, size, sig, r, NVSHMEM_SIGNAL_SET, peer);
        }
    }
    // Whatever is still in flight from this PE lands before the kernel ends.
    if (threadIdx.x == 0) nvshmem_quiet();
}

static int rounds_for(size_t size, int base) {
    size_t by_size = std::max<size_t>((256u << 20) / std::max<size_t>(size, 1), 100);
    return (int)std::min<size_t>((size_t)base, by_size);
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PE UID_FILE [--quick] [--sizes a,b,...]\n", argv[0]);
        return 2;
    }
    const int pe = atoi(argv[1]);
    bool quick = false;
    std::vector<size_t> sizes = {8, 64, 512, 4096, 16384, 32768, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (int i = 3; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            sizes.clear();
            for (char* t = strtok(argv[++i], ","); t; t = strtok(nullptr, ",")) sizes.push_back(strtoull(t, nullptr, 10));
        }
    }
    start_pe(pe, argv[2]);
    const int peer = 1 - pe;
    const int base = quick ? 500 : 5000;
    size_t max = *std::max_element(sizes.begin(), sizes.end());
    const size_t send_off = (max + 65535) / 65536 * 65536;
    char* buf = (char*)nvshmem_malloc(2 * send_off);
    uint64_t* sig = (uint64_t*)nvshmem_malloc(sizeof(uint64_t));
    if (!buf || !sig) {
        fprintf(stderr, "nvshmem_malloc failed\n");
        return 2;
    }
    CUDA_CHECK(cudaMemset(buf, pe + 1, 2 * send_off));
    unsigned long long* times = nullptr;
    CUDA_CHECK(cudaMallocHost(&times, sizeof(unsigned long long) * base));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    const char* names[3] = {"thread", "warp", "block"};
    for (size_t size : sizes) {
        const int rounds = rounds_for(size, base);
        for (int variant = 0; variant < 2; ++variant) {
            // variant 0: thread; 1: warp below 16 KiB, block from there (as ours).
            if (variant == 0 && size > (64u << 10)) continue;
            const int style = variant == 0 ? 0 : (size >= (16u << 10) ? 2 : 1);
            const int threads = style == 0 ? 1 : (style == 1 ? 32 : 512);
            CUDA_CHECK(cudaMemset(sig, 0, sizeof(uint64_t)));
            CUDA_CHECK(cudaDeviceSynchronize());
            nvshmem_barrier_all();
            if (style == 0) pingpong<0><<<1, threads, 0, stream>>>(buf, sig, size, send_off, rounds, pe, peer, times);
            else if (style == 1) pingpong<1><<<1, threads, 0, stream>>>(buf, sig, size, send_off, rounds, pe, peer, times);
            else pingpong<2><<<1, threads, 0, stream>>>(buf, sig, size, send_off, rounds, pe, peer, times);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaStreamSynchronize(stream));
            nvshmem_barrier_all();
            if (pe == 0) {
                std::vector<double> half;
                for (int i = 10; i < rounds; ++i) half.push_back((double)times[i] / 1e3 / 2.0);
                Stats s = stats(half);
                printf("{\"bench\":\"nvshmem-pingpong\",\"transport\":\"nvshmem %s\",\"ranks\":2,\"size\":%zu,"
                       "\"iters\":%zu,\"median_us\":%.4f,\"p10_us\":%.4f,\"p90_us\":%.4f,"
                       "\"note\":\"half round trip; PEs on GPUs 0 and 1; %d threads; putmem_signal_nbi%s + "
                       "signal_wait_until; NVSHMEM %s\"}\n",
                       names[style], size, s.n, s.median, s.p10, s.p90, threads,
                       style == 0 ? "" : (style == 1 ? "_warp" : "_block"), nvshmem_version_string());
                fflush(stdout);
            }
        }
    }
    // The last message's data: PE 1's buffer holds what PE 0 sent (value 1).
    char probe = 0;
    CUDA_CHECK(cudaMemcpy(&probe, buf, 1, cudaMemcpyDeviceToHost));
    if (probe != (char)(peer + 1)) {
        fprintf(stderr, "PE %d: received byte %d, expected %d\n", pe, probe, peer + 1);
        return 1;
    }
    nvshmem_barrier_all();
    CUDA_CHECK(cudaFreeHost(times));
    nvshmem_free(sig);
    nvshmem_free(buf);
    nvshmem_finalize();
    return 0;
}
