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
extern "C" __global__ void matvec_persistent(const __grid_constant__ gaspi_device_ctx ctx, unsigned int in_seg, unsigned int work_seg,
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
        // Every warp's products in place before the block's call, whose
        // threads each copy a part of them (it loads at once).
        __syncthreads();
        const int rc = gaspi_write_notify(ctx, work_seg, offset, out_rank, out_seg, offset,
                                          (gaspi_u64)nvec * MATVEC_N * sizeof(float), word, total);
        if (rc != GASPI_DEV_SUCCESS) return;
    }
}

// (c) The server of the matvec example (examples/matvec.rs, mode gpu): a
// persistent kernel that receives batches, multiplies and replies by
// itself, with one notification per batch each way.
//
// Segment `seg` of this rank: input slot s at s * slot_bytes; product slot
// s at products_at + s * slot_bytes; the matrix (row-major) at matrix_at;
// at sync_at (zero at launch) one counter word per slot, then at sync_at +
// 256 one gate word per slot. Notification s of `seg` carries batch k
// (k % slots == s) as value k + 1; the CPU side never resets it, the
// kernel waits for the value it expects.
//
// Block 0 is the dispatcher: its first warp alone polls the slots'
// notification words (host memory, across PCIe), lane i word i, so one
// coalesced load per sweep watches every slot, and opens a slot's gate
// (device memory) when its next batch is in. Polling host memory from many
// blocks at once was measured to slow the copies into the GPU (8 pollers:
// 6 M vectors/s at batch 480 instead of 37). The other blocks form one
// group per slot (block b > 0 serves slot (b - 1) % slots), so the batches
// of different slots are computed at the same time; a group's blocks wait
// on its gate. Every block computes a fixed share of its slot's batches;
// when the peer's segment `seg` is mapped into this GPU (direct route),
// products go straight into its product slot, else into ours and the
// group's last block posts one write_notify to the ring. The last block of
// a batch (counter) sets notification slots + s on the peer to k + 1,
// after every block's system fence. Needs 1 + slots blocks at least and
// slots <= 32. Returns when notification stop_id of `seg` is non-zero.
#define MATVEC_GATE_STOP 0xffffffffu
extern "C" __global__ void matvec_serve(const __grid_constant__ gaspi_device_ctx ctx, unsigned int seg, unsigned int out_rank,
                                        unsigned int slots, unsigned long long slot_bytes,
                                        unsigned long long products_at, unsigned long long matrix_at,
                                        unsigned long long sync_at, unsigned int batch,
                                        unsigned int stop_id, unsigned int* status) {
    __shared__ float m[MATVEC_N][MATVEC_N + 1];
    __shared__ unsigned int go;
    const unsigned int t = gaspi_block_thread();
    const unsigned int threads = gaspi_block_threads();
    const gaspi_segment_desc* me = gaspi_local_segment(ctx, seg);
    const gaspi_segment_desc* peer = gaspi_remote_segment(ctx, out_rank, seg);
    const float* matrix = reinterpret_cast<const float*>(gaspi_segment_ptr(ctx, seg, matrix_at));
    unsigned int* counters = reinterpret_cast<unsigned int*>(gaspi_segment_ptr(ctx, seg, sync_at));
    unsigned int* gates = reinterpret_cast<unsigned int*>(gaspi_segment_ptr(ctx, seg, sync_at + 256));
    if (!me || !peer || !matrix || !counters || !gates || me->notifications == 0 ||
        stop_id >= me->notification_count || slots == 0 || slots > 32 || gridDim.x < slots + 1u ||
        2u * slots > peer->notification_count) {
        if (t == 0 && blockIdx.x == 0) atomicExch(status, 1u);
        return;
    }
    const gaspi_u32* words = reinterpret_cast<const gaspi_u32*>(me->notifications);
    if (blockIdx.x == 0) {
        if (t >= 32) return;
        // Lane i watches slot i: the batch it expects next is next_k + 1.
        unsigned int next_k = t;
        for (;;) {
            const unsigned int v = t < slots ? gaspi_load_acquire_u32(words + t) : 0u;
            const bool in = t < slots && v == next_k + 1u;
            if (in) {
                asm volatile("st.release.gpu.u32 [%0], %1;" : : "l"(gates + t), "r"(v) : "memory");
                next_k += slots;
            }
            const unsigned int stop = t == 0 ? gaspi_load_acquire_u32(words + stop_id) : 0u;
            if (__shfl_sync(0xffffffffu, stop, 0) != 0u) {
                if (t < slots) {
                    asm volatile("st.release.gpu.u32 [%0], %1;" : : "l"(gates + t), "r"(MATVEC_GATE_STOP) : "memory");
                }
                return;
            }
        }
    }
    for (unsigned int i = t; i < MATVEC_N * MATVEC_N; i += threads) {
        m[i / MATVEC_N][i % MATVEC_N] = matrix[i];
    }
    __syncthreads();
    const bool direct = peer->data != 0 && peer->notifications != 0;
    const unsigned int lane = t & 31u;
    const unsigned int warp = t / 32u;
    const unsigned int warps = threads / 32u;
    const unsigned int s = (blockIdx.x - 1u) % slots;         // this block's slot
    const unsigned int member = (blockIdx.x - 1u) / slots;    // its place in the group
    const unsigned int members = (gridDim.x - 1u - s + slots - 1u) / slots;
    const unsigned int share = (batch + members - 1u) / members;
    const unsigned int first = min(batch, member * share);
    const unsigned int nvec = min(batch, first + share) - first;
    for (unsigned int k = s;; k += slots) {
        if (t == 0) {
            for (;;) {
                unsigned int v;
                asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(gates + s) : "memory");
                if (v == k + 1u) { go = 1u; break; }
                if (v == MATVEC_GATE_STOP) { go = 0u; break; }
            }
        }
        __syncthreads();
        if (go == 0u) return;
        const gaspi_u64 in_off = (gaspi_u64)s * slot_bytes + (gaspi_u64)first * MATVEC_N * sizeof(float);
        const gaspi_u64 out_off = products_at + (gaspi_u64)s * slot_bytes + (gaspi_u64)first * MATVEC_N * sizeof(float);
        const float* in = reinterpret_cast<const float*>(reinterpret_cast<const unsigned char*>(me->data) + in_off);
        float* out = reinterpret_cast<float*>(
            direct ? reinterpret_cast<unsigned char*>(peer->data) + out_off
                   : reinterpret_cast<unsigned char*>(me->data) + out_off);
        for (unsigned int v0 = warp; v0 < nvec; v0 += warps * MATVEC_ILP) {
            float x[MATVEC_ILP];
#pragma unroll
            for (unsigned int u = 0; u < MATVEC_ILP; ++u) {
                const unsigned int v = v0 + u * warps;
                // .cg: the slot was rewritten by a copy since we last read it.
                x[u] = v < nvec ? __ldcg(in + v * MATVEC_N + lane) : 0.0f;
            }
#pragma unroll
            for (unsigned int u = 0; u < MATVEC_ILP; ++u) {
                const unsigned int v = v0 + u * warps; // uniform across the warp
                if (v < nvec) out[v * MATVEC_N + lane] = matvec_row(m, x[u], lane);
            }
        }
        __threadfence_system();
        __syncthreads();
        if (t == 0) {
            if (atomicAdd(counters + s, 1u) == members - 1u) {
                // Last block: every other block fenced before its increment.
                atomicExch(counters + s, 0u);
                __threadfence_system();
                const gaspi_u64 slot_off = products_at + (gaspi_u64)s * slot_bytes;
                int rc;
                if (direct) {
                    gaspi_store_after_fence_u32(reinterpret_cast<gaspi_u32*>(peer->notifications) + slots + s, k + 1u);
                    rc = GASPI_DEV_SUCCESS;
                } else {
                    rc = gaspi_ring_post(ctx, GASPI_RING_OP_WRITE_NOTIFY, out_rank, seg, slot_off, seg, slot_off,
                                         (gaspi_u64)batch * MATVEC_N * sizeof(float), slots + s, k + 1u);
                }
                if (rc != GASPI_DEV_SUCCESS) atomicExch(status, 2u);
            }
        }
        __syncthreads();
    }
}
