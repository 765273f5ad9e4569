// nvshmem_bw.cu -- NVSHMEM's one-sided write bandwidth between two GPUs,
// beside gaspi-bench gpu-bw: PE 0 issues a window of `window` puts of
// `size` bytes into the same place of PE 1's buffer, then quiet; one
// kernel launch per window, the grid sharing each put (every block puts
// its part with nvshmemx_putmem_nbi_block, then nvshmem_quiet by its
// thread 0). Windows as gpu-bw: 64 below 1 MiB, 8 from 1 MiB on; 100
// windows after 5 warm-up; a window is timed with CUDA events around its
// launch. Reported per size: median time per put [p10 - p90] and GB/s of
// the median (1 GB = 1e9 B).
//
// Then the same windows timed as gaspi-bench gpu-bw times ours: on the
// host, from the launch until cudaStreamSynchronize returns (ours: from
// the first write until `wait` returns), one window at a time; the
// record's transport says "host-synchronised". The event-timed figure
// leaves out what a host needs to learn that a window is done, and the
// launches overlap each other there.
//
// Grid: blocks = size / 32 KiB, between 1 and the multiprocessor count;
// 512 threads (32 below 4 KiB).
//
// Usage: nvshmem_bw PE UID_FILE [--quick] [--sizes a,b,...]
// (started by bench/peers/nvshmem-run.sh).
#include "nvshmem_common.cuh"

#include <chrono>

__global__ void put_window(char* dst, const char* src, size_t size, int window, int peer) {
    const size_t blocks = gridDim.x;
    const size_t chunk = ((size + blocks - 1) / blocks + 15) / 16 * 16;
    const size_t first = chunk * blockIdx.x;
    const size_t len = first >= size ? 0 : (chunk < size - first ? chunk : size - first);
    for (int w = 0; w < window; ++w) {
        if (len) nvshmemx_putmem_nbi_block(dst + first, src + first, len, peer);
    }
    __syncthreads();
    if (threadIdx.x == 0) nvshmem_quiet();
}

// One JSON record: `variant` follows the transport name, `timing` says how
// a window was timed.
static void print_bw(const char* variant, const char* timing, size_t size, const Stats& s, int window, int blocks,
                     int threads) {
    printf("{\"bench\":\"nvshmem-bw\",\"transport\":\"nvshmem putmem_nbi_block%s\",\"ranks\":2,\"size\":%zu,"
           "\"iters\":%zu,\"median_us\":%.4f,\"p10_us\":%.4f,\"p90_us\":%.4f,\"gbps\":%.4f,"
           "\"note\":\"window %d then quiet, %s; %d blocks x %d threads; GPUs 0 -> 1; NVSHMEM %s\"}\n",
           variant, size, s.n * window, s.median, s.p10, s.p90, (double)size / s.median / 1e3, window, timing,
           blocks, threads, nvshmem_version_string());
    fflush(stdout);
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PE UID_FILE [--quick] [--sizes a,b,...]\n", argv[0]);
        return 2;
    }
    const int pe = atoi(argv[1]);
    bool quick = false;
    std::vector<size_t> sizes = {8, 4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (int i = 3; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            sizes.clear();
            for (char* t = strtok(argv[++i], ","); t; t = strtok(nullptr, ",")) sizes.push_back(strtoull(t, nullptr, 10));
        }
    }
    start_pe(pe, argv[2]);
    const int peer = 1 - pe;
    size_t max = *std::max_element(sizes.begin(), sizes.end());
    const size_t send_off = (max + 65535) / 65536 * 65536;
    char* buf = (char*)nvshmem_malloc(2 * send_off);
    if (!buf) {
        fprintf(stderr, "nvshmem_malloc failed\n");
        return 2;
    }
    CUDA_CHECK(cudaMemset(buf, pe + 1, 2 * send_off));
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, pe));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    const int iters = quick ? 20 : 100, warm = 5;
    std::vector<cudaEvent_t> ev(iters + warm + 1);
    for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
    for (size_t size : sizes) {
        const int window = size >= (1u << 20) ? 8 : 64;
        const int blocks = (int)std::min<size_t>(std::max<size_t>(size / (32u << 10), 1), (size_t)sms);
        const int threads = size < 4096 ? 32 : 512;
        CUDA_CHECK(cudaDeviceSynchronize());
        nvshmem_barrier_all();
        if (pe == 0) {
            for (int i = 0; i < iters + warm; ++i) {
                CUDA_CHECK(cudaEventRecord(ev[i], stream));
                put_window<<<blocks, threads, 0, stream>>>(buf, buf + send_off, size, window, peer);
                CUDA_CHECK(cudaGetLastError());
            }
            CUDA_CHECK(cudaEventRecord(ev[iters + warm], stream));
            CUDA_CHECK(cudaStreamSynchronize(stream));
            std::vector<double> per_put;
            for (int i = warm; i < iters + warm; ++i) {
                float ms = 0;
                CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
                per_put.push_back((double)ms * 1e3 / window);
            }
            print_bw("", "one launch per window", size, stats(per_put), window, blocks, threads);
            std::vector<double> host_put;
            for (int i = 0; i < iters + warm; ++i) {
                const auto t0 = std::chrono::steady_clock::now();
                put_window<<<blocks, threads, 0, stream>>>(buf, buf + send_off, size, window, peer);
                CUDA_CHECK(cudaGetLastError());
                CUDA_CHECK(cudaStreamSynchronize(stream));
                const std::chrono::duration<double, std::micro> dt = std::chrono::steady_clock::now() - t0;
                if (i >= warm) host_put.push_back(dt.count() / window);
            }
            print_bw(" host-synchronised", "timed on the host from the launch to cudaStreamSynchronize", size,
                     stats(host_put), window, blocks, threads);
        }
        nvshmem_barrier_all();
    }
    // PE 1's buffer holds what PE 0 put (bytes of value 1).
    nvshmem_barrier_all();
    if (pe == 1) {
        std::vector<char> got(std::min<size_t>(max, 1 << 20));
        CUDA_CHECK(cudaMemcpy(got.data(), buf, got.size(), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < got.size(); ++i) {
            if (got[i] != 1) {
                fprintf(stderr, "PE 1: byte %zu is %d, expected 1\n", i, got[i]);
                return 1;
            }
        }
    }
    for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
    nvshmem_free(buf);
    nvshmem_finalize();
    return 0;
}
