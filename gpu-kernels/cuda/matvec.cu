// matvec.cu -- batched 32x32 f32 matrix times vectors.
//
// Segment layout used by matvec_persistent (byte offsets; B = batch capacity
// in vectors, one vector = 32 floats = 128 bytes; G = number of blocks):
//   in_seg:   (host-mapped or GPU memory) [0, 4096) the matrix, row-major;
//             buffer b in {0,1} at 4096 + b * B * 128. Notification
//             b * G + g: "buffer b holds `value` vectors" (1..=B), set for
//             every block g, or GASPI_STOP_VALUE.
//   work_seg: result buffer b at b * B * 128 (local, usually GPU memory).
//   out_seg on out_rank: result buffer b at b * B * 128; block g sets
//             notification b * G + g to the batch's vector count once its
//             share of the results is there (the batch is done when all G
//             are set).
// Batches alternate between the buffers (batch k uses buffer k % 2), and
// the producer refills buffer b only after all G result notifications of
// its previous batch arrived (double buffering).

#include "gaspi_device.cuh"

#define MATVEC_N 32
#define MATVEC_ILP 8

// One warp per vector: lane i computes row i; the vector is spread over the
// lanes and broadcast with shuffles.
__device__ __forceinline__ float matvec_row(const float (*m)[MATVEC_N + 1], float x, unsigned int lane) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < MATVEC_N; ++j) {
        acc = fmaf(m[lane][j], __shfl_sync(0xffffffffu, x, j), acc);
    }
    return acc;
}

// (a) Launched once per batch: out[v] = matrix * in[v] for v < nvec.
// Any grid; blocks of a multiple of 32 threads.
extern "C" __global__ void matvec_batch(const float* matrix, const float* in, float* out, int nvec) {
    __shared__ float m[MATVEC_N][MATVEC_N + 1];
    for (unsigned int i = threadIdx.x; i < MATVEC_N * MATVEC_N; i += blockDim.x) {
        m[i / MATVEC_N][i % MATVEC_N] = matrix[i];
    }
    __syncthreads();
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int warps = (blockDim.x / 32u) * gridDim.x;
    for (unsigned int v = blockIdx.x * (blockDim.x / 32u) + threadIdx.x / 32u; v < (unsigned int)nvec; v += warps) {
        const float x = in[v * MATVEC_N + lane];
        out[v * MATVEC_N + lane] = matvec_row(m, x, lane);
    }
}

// (b) Persistent: G blocks (each a multiple of 32 threads) keep the matrix in
// shared memory; block g waits for the notification of its share of the
// next batch, computes it into work_seg and sends it with
// gaspi_write_notify. Stops on GASPI_STOP_VALUE.
extern "C" __global__ void matvec_persistent(gaspi_device_ctx ctx, unsigned int in_seg, unsigned int work_seg,
                                             unsigned int out_rank, unsigned int out_seg, unsigned int batch_capacity) {
    __shared__ float m[MATVEC_N][MATVEC_N + 1];
    __shared__ unsigned int batch_value;
    const unsigned int t = gaspi_block_thread();
    const unsigned int threads = gaspi_block_threads();
    const float* matrix = reinterpret_cast<const float*>(gaspi_segment_ptr(ctx, in_seg, 0));
    if (matrix == nullptr) return;
    for (unsigned int i = t; i < MATVEC_N * MATVEC_N; i += threads) {
        m[i / MATVEC_N][i % MATVEC_N] = matrix[i];
    }
    __syncthreads();
    const unsigned int lane = t & 31u;
    const unsigned int warp = t / 32u;
    const unsigned int warps = threads / 32u;
    const gaspi_u64 buffer_bytes = (gaspi_u64)batch_capacity * MATVEC_N * sizeof(float);
    const unsigned int g = blockIdx.x;
    const unsigned int blocks = gridDim.x;
    for (unsigned int k = 0;; ++k) {
        const unsigned int b = k & 1u;
        const unsigned int word = b * blocks + g;
        const int id = gaspi_notify_waitsome_block(ctx, in_seg, word, 1);
        if (id < 0) return;
        if (t == 0) batch_value = gaspi_notify_reset(ctx, in_seg, word);
        __syncthreads();
        const unsigned int value = batch_value;
        __syncthreads();
        if (value == GASPI_STOP_VALUE || value == 0u) return;
        const unsigned int total = value < batch_capacity ? value : batch_capacity;
        const unsigned int share = (total + blocks - 1u) / blocks;
        const unsigned int first = min(total, g * share);
        const unsigned int nvec = min(total, first + share) - first;
        const gaspi_u64 offset = b * buffer_bytes + (gaspi_u64)first * MATVEC_N * sizeof(float);
        const float* in = reinterpret_cast<const float*>(gaspi_segment_ptr(ctx, in_seg, 4096 + offset));
        float* out = reinterpret_cast<float*>(gaspi_segment_ptr(ctx, work_seg, offset));
        if (nvec != 0u && (in == nullptr || out == nullptr)) return;
        // Each warp keeps MATVEC_ILP loads in flight: the input may sit across
        // PCIe (host-mapped), where latency, not bandwidth, limits one block.
        for (unsigned int v0 = warp; v0 < nvec; v0 += warps * MATVEC_ILP) {
            float x[MATVEC_ILP];
#pragma unroll
            for (unsigned int u = 0; u < MATVEC_ILP; ++u) {
                const unsigned int v = v0 + u * warps;
                x[u] = v < nvec ? in[v * MATVEC_N + lane] : 0.0f;
            }
#pragma unroll
            for (unsigned int u = 0; u < MATVEC_ILP; ++u) {
                const unsigned int v = v0 + u * warps; // uniform across the warp
                if (v < nvec) out[v * MATVEC_N + lane] = matvec_row(m, x[u], lane);
            }
        }
        // gaspi_write_notify synchronises the block before it copies.
        __syncthreads();
        const int rc = gaspi_write_notify(ctx, work_seg, offset, out_rank, out_seg, offset,
                                          (gaspi_u64)nvec * MATVEC_N * sizeof(float), word, total);
        if (rc != GASPI_DEV_SUCCESS) return;
    }
}
