// Floors of the ways a host thread can move a few bytes between its own
// pinned memory and GPU memory, one at a time, waited for by spinning on a
// pinned word: what a small GPU-segment write across hosts pays at each end
// (issue 41). Build and run on the GPU machine:
//   nvcc -O2 -o small_copy_floor small_copy_floor.cu -lcuda && ./small_copy_floor
// Prints one JSON line per way: median, p10, p90 in microseconds.
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x) do { auto e_ = (x); if (e_ != 0) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); exit(1); } } while (0)

static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void report(const char* what, size_t bytes, std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    printf("{\"way\":\"%s\",\"bytes\":%zu,\"median_us\":%.2f,\"p10_us\":%.2f,\"p90_us\":%.2f}\n", what, bytes,
           v[n / 2], v[n / 10], v[n * 9 / 10]);
    fflush(stdout);
}

// The agent's mailbox, in pinned host memory mapped into the device.
struct alignas(64) Mailbox {
    volatile unsigned long long seq;   // host -> agent: request number
    volatile unsigned long long done;  // agent -> host
    volatile unsigned long long op;    // 1: device -> host, 2: host payload -> device + word, 3: stop
    volatile unsigned long long src;
    volatile unsigned long long dst;
    volatile unsigned long long len;
    volatile unsigned long long word;  // op 2: host-mapped word written after the data
    unsigned long long pad;
    unsigned char payload[8192];
};

__global__ void agent(Mailbox* mb) {
    unsigned long long seen = 0;
    int lane = threadIdx.x;
    for (;;) {
        unsigned long long s;
        if (lane == 0) {
            while ((s = mb->seq) == seen) {
            }
        }
        s = __shfl_sync(0xffffffff, s, 0);
        __threadfence_system();
        unsigned long long op = mb->op, src = mb->src, dst = mb->dst, len = mb->len;
        if (op == 3) return;
        const unsigned char* from = op == 1 ? (const unsigned char*)src : (const unsigned char*)mb->payload;
        unsigned char* to = (unsigned char*)dst;
        // 16-byte pieces where aligned, else bytes.
        if ((len & 15) == 0 && ((src | dst) & 15) == 0 || op == 2 && (len & 15) == 0 && (dst & 15) == 0) {
            const uint4* f = (const uint4*)from;
            uint4* t = (uint4*)to;
            for (unsigned long long i = lane; i < len / 16; i += 32) t[i] = f[i];
        } else {
            for (unsigned long long i = lane; i < len; i += 32) to[i] = from[i];
        }
        __syncwarp();
        __threadfence_system();
        if (lane == 0) {
            if (op == 2) *(volatile unsigned int*)mb->word = (unsigned int)s;
            mb->done = s;
        }
        seen = s;
    }
}

// The same agent with each request in one read: a line of 8-byte words,
// each its 4-byte value beside the request's 4-byte number (as NCCL's LL
// protocol does), read by the warp at once; a request is whole when every
// word carries its number. Words 0-6: op | len, src (2), dst (2), word (2);
// words 8 - 23: an inline payload of up to 64 bytes.
struct alignas(256) LlBox {
    volatile unsigned long long w[32];
    volatile unsigned long long done;
};

__global__ void ll_agent(LlBox* box) {
    unsigned int want = 1;
    int lane = threadIdx.x;
    for (;;) {
        unsigned long long v;
        for (;;) {
            v = box->w[lane];
            bool ok = (unsigned int)(v >> 32) == want || (lane == 7 || lane > 23);
            if (__all_sync(0xffffffff, ok)) break;
        }
        unsigned int mine = (unsigned int)v;
        unsigned int h0 = __shfl_sync(0xffffffff, mine, 0);
        unsigned int op = h0 >> 24, len = h0 & 0xffffff;
        unsigned long long src = (unsigned long long)__shfl_sync(0xffffffff, mine, 1) |
                                 ((unsigned long long)__shfl_sync(0xffffffff, mine, 2) << 32);
        unsigned long long dst = (unsigned long long)__shfl_sync(0xffffffff, mine, 3) |
                                 ((unsigned long long)__shfl_sync(0xffffffff, mine, 4) << 32);
        unsigned long long word = (unsigned long long)__shfl_sync(0xffffffff, mine, 5) |
                                  ((unsigned long long)__shfl_sync(0xffffffff, mine, 6) << 32);
        if (op == 3) return;
        if (op == 1) {
            // Device -> host: 16-byte pieces, then the system fence, then done.
            const uint4* f = (const uint4*)src;
            uint4* t = (uint4*)dst;
            for (unsigned int i = lane; i < len / 16; i += 32) t[i] = f[i];
            for (unsigned int i = (len & ~15u) + lane; i < len; i += 32)
                ((unsigned char*)dst)[i] = ((const unsigned char*)src)[i];
        } else {
            // Inline payload -> device: lane 8 + k holds bytes 4k .. 4k + 3.
            if (lane >= 8 && lane < 24 && (unsigned int)(lane - 8) * 4 < len)
                ((unsigned int*)dst)[lane - 8] = mine;
        }
        __syncwarp();
        __threadfence_system();
        if (lane == 0) {
            if (op == 2) *(volatile unsigned int*)word = want;
            box->done = want;
        }
        want++;
    }
}

static void ll_post(LlBox* b, unsigned int seq, unsigned int op, unsigned int len, unsigned long long src,
                    unsigned long long dst, unsigned long long word, const unsigned int* payload) {
    unsigned int vals[24] = {(op << 24) | len, (unsigned int)src, (unsigned int)(src >> 32), (unsigned int)dst,
                             (unsigned int)(dst >> 32), (unsigned int)word, (unsigned int)(word >> 32), 0};
    for (unsigned int k = 0; payload && k < (len + 3) / 4; k++) vals[8 + k] = payload[k];
    for (int i = 0; i < 24; i++) {
        if (i == 7) continue;
        b->w[i] = ((unsigned long long)seq << 32) | vals[i];
    }
}

int main(int argc, char** argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 3000;
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    unsigned char* host;
    CK(cudaHostAlloc((void**)&host, 1 << 20, cudaHostAllocMapped | cudaHostAllocPortable));
    unsigned int* flag;
    CK(cudaHostAlloc((void**)&flag, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    unsigned int* dflag;
    CK(cudaHostGetDevicePointer((void**)&dflag, flag, 0));
    unsigned char* dev;
    CK(cudaMalloc((void**)&dev, 1 << 20));
    CK(cudaMemset(dev, 1, 1 << 20));
    volatile unsigned int* vflag = flag;
    size_t sizes[] = {8, 64, 4096};
    unsigned int seq = 0;
    auto spin = [&](unsigned int want) { while (vflag[0] != want) { } };

    for (size_t sz : sizes) {
        std::vector<double> v;
        // 1. async copy out + stream write of a pinned word, spun on (ours today).
        for (int i = 0; i < iters; i++) {
            double t = now_us();
            CK(cudaMemcpyAsync(host, dev, sz, cudaMemcpyDeviceToHost, st));
            CK(cuStreamWriteValue32((CUstream)st, (CUdeviceptr)dflag, ++seq, 0));
            spin(seq);
            v.push_back(now_us() - t);
        }
        report("d2h_async_copy_then_stream_word", sz, v);
        v.clear();
        for (int i = 0; i < iters; i++) {
            double t = now_us();
            CK(cudaMemcpy(host, dev, sz, cudaMemcpyDeviceToHost));
            v.push_back(now_us() - t);
        }
        report("d2h_sync_copy", sz, v);
        v.clear();
        // 2. apply: host payload -> device, then a host-mapped word.
        for (int i = 0; i < iters; i++) {
            double t = now_us();
            if (sz <= 64) {
                CUstreamBatchMemOpParams p[16];
                memset(p, 0, sizeof p);
                // 8-byte values (a batch holds at most 16 operations).
                for (size_t k = 0; k < sz / 8; k++) {
                    p[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
                    p[k].writeValue.address = (CUdeviceptr)(dev + 8 * k);
                    p[k].writeValue.value64 = 7;
                    p[k].writeValue.flags = 0;
                }
                p[sz / 8].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
                p[sz / 8].writeValue.address = (CUdeviceptr)dflag;
                p[sz / 8].writeValue.value = ++seq;
                CK(cuStreamBatchMemOp((CUstream)st, sz / 8 + 1, p, 0));
            } else {
                CK(cudaMemcpyAsync(dev, host, sz, cudaMemcpyHostToDevice, st));
                CK(cuStreamWriteValue32((CUstream)st, (CUdeviceptr)dflag, ++seq, 0));
            }
            spin(seq);
            v.push_back(now_us() - t);
        }
        report(sz <= 64 ? "h2d_batch_values_then_word" : "h2d_async_copy_then_word", sz, v);
        v.clear();
    }
    {
        std::vector<double> v;
        for (int i = 0; i < iters; i++) {
            double t = now_us();
            CK(cuStreamWriteValue32((CUstream)st, (CUdeviceptr)dflag, ++seq, 0));
            spin(seq);
            v.push_back(now_us() - t);
        }
        report("stream_word_only", 4, v);
    }
    // 3. A resident agent (one warp) serving a mailbox in mapped memory.
    Mailbox* mb;
    CK(cudaHostAlloc((void**)&mb, sizeof(Mailbox), cudaHostAllocMapped | cudaHostAllocPortable));
    memset(mb, 0, sizeof(Mailbox));
    Mailbox* dmb;
    CK(cudaHostGetDevicePointer((void**)&dmb, mb, 0));
    cudaStream_t ast;
    CK(cudaStreamCreateWithFlags(&ast, cudaStreamNonBlocking));
    agent<<<1, 32, 0, ast>>>(dmb);
    CK(cudaGetLastError());
    unsigned long long aseq = 0;
    unsigned char* dhost;
    CK(cudaHostGetDevicePointer((void**)&dhost, host, 0));
    for (size_t sz : sizes) {
        std::vector<double> v;
        for (int i = 0; i < iters; i++) {
            double t = now_us();
            mb->op = 1; mb->src = (unsigned long long)dev; mb->dst = (unsigned long long)dhost; mb->len = sz;
            std::atomic_thread_fence(std::memory_order_release);
            mb->seq = ++aseq;
            while (mb->done != aseq) { }
            v.push_back(now_us() - t);
        }
        report("agent_d2h", sz, v);
        v.clear();
        for (int i = 0; i < iters; i++) {
            double t = now_us();
            memset(mb->payload, i, sz);
            mb->op = 2; mb->dst = (unsigned long long)dev; mb->len = sz; mb->word = (unsigned long long)dflag;
            std::atomic_thread_fence(std::memory_order_release);
            mb->seq = ++aseq;
            while (vflag[0] != (unsigned int)aseq) { }
            v.push_back(now_us() - t);
        }
        report("agent_h2d_then_word", sz, v);
        v.clear();
    }
    mb->op = 3;
    std::atomic_thread_fence(std::memory_order_release);
    mb->seq = ++aseq;
    CK(cudaStreamSynchronize(ast));
    {
        LlBox* lb;
        CK(cudaHostAlloc((void**)&lb, sizeof(LlBox), cudaHostAllocMapped | cudaHostAllocPortable));
        memset((void*)lb, 0, sizeof(LlBox));
        LlBox* dlb;
        CK(cudaHostGetDevicePointer((void**)&dlb, lb, 0));
        ll_agent<<<1, 32, 0, ast>>>(dlb);
        CK(cudaGetLastError());
        unsigned int ls = 0;
        vflag[0] = 0;
        unsigned int payload[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
        for (size_t sz : {(size_t)8, (size_t)64, (size_t)4096}) {
            std::vector<double> v;
            for (int i = 0; i < iters; i++) {
                double t = now_us();
                ll_post(lb, ++ls, 1, sz, (unsigned long long)dev, (unsigned long long)dhost, 0, nullptr);
                while (lb->done != ls) { }
                v.push_back(now_us() - t);
            }
            report("ll_agent_d2h", sz, v);
            if (sz > 64) continue;
            v.clear();
            for (int i = 0; i < iters; i++) {
                double t = now_us();
                ll_post(lb, ++ls, 2, sz, 0, (unsigned long long)dev, (unsigned long long)dflag, payload);
                while (vflag[0] != ls) { }
                v.push_back(now_us() - t);
            }
            report("ll_agent_inline_h2d_then_word", sz, v);
        }
        ll_post(lb, ++ls, 3, 0, 0, 0, 0, nullptr);
        CK(cudaStreamSynchronize(ast));
    }
    printf("{\"done\":true}\n");
    return 0;
}
