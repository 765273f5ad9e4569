// gaspi_device.cuh -- the device-side GASPI API, for a user's own kernels.
//
// A persistent kernel can receive, compute and send without returning to
// the host: it waits for notifications with gaspi_notify_waitsome, clears
// them with gaspi_notify_reset, and sends with gaspi_write_notify /
// gaspi_notify. A kernel that sends to the same peer segment again and
// again may prepare the route once (gaspi_write_route_prepare) and send
// with the *_via calls, which skip finding the segment descriptors each
// time (0.05 - 0.15 us a call between two GPUs: the plain calls find those of
// segments 0-3 of ranks 0-7 in the kernel argument, decision 0053, and
// start loading the source before checking the rest, decision 0057).
// Everything it needs arrives in one gaspi_device_ctx, passed to the
// kernel by value (built by the runtime; see gpu-kernels/src/device_ctx.rs
// for the Rust mirror).
//
// Where a target is directly reachable (a segment of this GPU, a peer GPU's
// segment opened with CUDA IPC, host-mapped memory) the calling threads
// store the data themselves, fence at system scope, and one thread stores
// the notification: data first, then the flag. Otherwise the request goes
// into the host-mapped request ring and the rank's CPU progress engine
// carries it out (gpu-kernels/src/ring.rs describes the protocol). The
// warp's and the block's calls start loading the source at once, each
// thread its part: what other threads wrote into it must be ordered before
// the call (__syncwarp() / __syncthreads()), as for any data one thread
// writes and another reads.
//
// Memory-model notes. Notification words may be written by the CPU or by
// another GPU, so they are read with ld.acquire.sys (system scope) and
// written with a relaxed store after gaspi_fence() (fence.acq_rel.sys: with
// the store, a release at system scope). A waiting warp
// that finds a word set orders its later reads of the data after that load
// (acquire, then __syncwarp for the other lanes); block-wide waits add a
// __syncthreads and a system fence in every thread.
//
// Include with #include "gaspi_device.cuh" (NVRTC: registered as a header
// by gaspi_gpu_kernels::compile). Needs sm_70 or newer; no other header.

#ifndef GASPI_DEVICE_CUH
#define GASPI_DEVICE_CUH

typedef unsigned int gaspi_u32;
typedef unsigned long long gaspi_u64;

// Return codes of the device calls (ids returned by waitsome are >= 0).
#define GASPI_DEV_SUCCESS 0
#define GASPI_DEV_ERR_ARG (-1)      // bad segment, offset, size, id or value 0
#define GASPI_DEV_ERR_NO_ROUTE (-2) // not directly reachable and no ring
#define GASPI_DEV_TIMEOUT (-3)      // waitsome: nothing set within the time

// Timeout meaning "wait forever".
#define GASPI_BLOCK 0xffffffffffffffffull

// Ring request kinds (ring.rs: OP_WRITE_NOTIFY, OP_NOTIFY, OP_WRITE).
#define GASPI_RING_OP_WRITE_NOTIFY 1u
#define GASPI_RING_OP_NOTIFY 2u
#define GASPI_RING_OP_WRITE 3u
#define GASPI_RING_MAGIC 0x47524e47u
#define GASPI_RING_VERSION 2u
// Slot flag (ring.rs: FLAG_INLINE): the bytes are in the ticket's payload.
#define GASPI_RING_FLAG_INLINE 1u
// Descriptor flag (device_ctx.rs: SEGMENT_RING_INLINE): ring requests to
// this segment cross a network transport; a write of at most
// ctx.ring_inline_max bytes carries its bytes in the ring (decision 0093).
#define GASPI_SEGMENT_RING_INLINE 1u

// Value that stops the example kernels (device_ctx.rs: STOP_VALUE).
#define GASPI_STOP_VALUE 0xffffffffu

// ---------------------------------------------------------------------------
// Layout shared with Rust. Change together with src/device_ctx.rs and
// src/ring.rs; the static_asserts below and the const asserts there check it.
// ---------------------------------------------------------------------------

// One segment as seen from this GPU (device_ctx.rs: SegmentDesc).
struct gaspi_segment_desc {
    gaspi_u64 data;          // device-visible address of byte 0; 0: not directly reachable
    gaspi_u64 size;          // bytes
    gaspi_u64 notifications; // device-visible address of word 0; 0: not directly reachable
    gaspi_u32 notification_count; // 0: no such segment
    gaspi_u32 flags;         // GASPI_SEGMENT_RING_INLINE or 0
};

// Segment ids and ranks whose descriptors the kernel argument also holds
// inline (device_ctx.rs: INLINE_SEGMENTS, INLINE_RANKS).
#define GASPI_INLINE_SEGMENTS 4u
#define GASPI_INLINE_RANKS 8u

// The kernel argument (device_ctx.rs: DeviceCtx). Declare it
// `const __grid_constant__ gaspi_device_ctx ctx` in a kernel's parameters:
// then the inline descriptors are read from the constant bank, which no
// fence or acquire empties (a write_notify right after a wait starts about
// 0.13 us sooner than from the tables, issue 26). Without the qualifier
// the kernel still works, but the compiler may copy the argument into
// every thread's local memory.
struct gaspi_device_ctx {
    gaspi_u32 rank;
    gaspi_u32 nranks;
    gaspi_u32 nsegments;
    gaspi_u32 ring_capacity;  // power of two; 0: no ring
    gaspi_u64 local;          // const gaspi_segment_desc[nsegments]
    gaspi_u64 remote;         // const gaspi_segment_desc[nranks * nsegments]
    gaspi_u64 ring;           // gaspi_ring_header*, slots follow it (host-mapped)
    gaspi_u64 ring_producer;  // gaspi_ring_producer* (device memory)
    // Copies of the tables' entries for segments < GASPI_INLINE_SEGMENTS
    // (of ranks < GASPI_INLINE_RANKS): local[seg], and remote[rank][seg]
    // at rank * GASPI_INLINE_SEGMENTS + seg. Zero where the tables have no
    // such entry (a segment id >= nsegments, a rank >= nranks): the write
    // calls rely on it to refuse those ids without comparing them.
    gaspi_segment_desc inline_local[GASPI_INLINE_SEGMENTS];
    gaspi_segment_desc inline_remote[GASPI_INLINE_RANKS * GASPI_INLINE_SEGMENTS];
    gaspi_u64 ring_payload;     // one payload of ring_inline_max bytes per slot (host-mapped); 0: none
    gaspi_u32 ring_inline_max;  // bytes of each payload; 0: none
    gaspi_u32 reserved;
};

// The ring header, in host-mapped memory (ring.rs: RingHeader).
struct alignas(128) gaspi_ring_header {
    gaspi_u64 tail;            // consumer: requests taken out
    unsigned char pad0[120];
    gaspi_u64 completed;       // consumer: requests whose source data is no longer needed
    unsigned char pad1[120];
    gaspi_u32 capacity;
    gaspi_u32 slot_size;
    gaspi_u32 magic;
    gaspi_u32 version;
    gaspi_u32 inline_max;      // bytes of each slot's payload after the slots; 0: none
    unsigned char pad2[108];
};

// The producers' ticket counter and their shared view of the consumer's
// tail, in device memory (ring.rs: RingProducer).
struct alignas(128) gaspi_ring_producer {
    gaspi_u64 head;
    gaspi_u64 tail_seen;
    gaspi_u32 poller;
    unsigned char pad[108];
};

// One request slot (ring.rs: RingSlot).
struct alignas(64) gaspi_ring_slot {
    gaspi_u64 seq;             // ticket + 1 once published
    gaspi_u32 op;
    gaspi_u32 target_rank;
    gaspi_u32 local_segment;
    gaspi_u32 remote_segment;
    gaspi_u64 local_offset;
    gaspi_u64 remote_offset;
    gaspi_u64 size;
    gaspi_u32 notification_id;
    gaspi_u32 value;
    gaspi_u32 flags;           // GASPI_RING_FLAG_INLINE or 0
    gaspi_u32 reserved;
};

// Sizes are checked everywhere. Offsets need offsetof, which NVRTC lacks:
// with nvcc they are static_asserts, and under NVRTC gaspi_layout_offsets
// reports them at run time (the device check compares them with Rust's
// offset_of!, gaspi_gpu_kernels::LAYOUT_OFFSETS).
#if defined(__CUDACC_RTC__)
#define GASPI_CHECK_OFFSET(type, field, offset) static_assert(sizeof(type) > (offset), #type " layout")
#else
#define GASPI_CHECK_OFFSET(type, field, offset) static_assert(__builtin_offsetof(type, field) == (offset), #type " layout")
#endif

static_assert(sizeof(gaspi_segment_desc) == 32, "gaspi_segment_desc layout");
static_assert(sizeof(gaspi_device_ctx) == 1216, "gaspi_device_ctx layout");
static_assert(sizeof(gaspi_ring_header) == 384, "gaspi_ring_header layout");
static_assert(sizeof(gaspi_ring_producer) == 128, "gaspi_ring_producer layout");
static_assert(sizeof(gaspi_ring_slot) == 64, "gaspi_ring_slot layout");
GASPI_CHECK_OFFSET(gaspi_segment_desc, notifications, 16);
GASPI_CHECK_OFFSET(gaspi_segment_desc, notification_count, 24);
GASPI_CHECK_OFFSET(gaspi_device_ctx, local, 16);
GASPI_CHECK_OFFSET(gaspi_device_ctx, ring_producer, 40);
GASPI_CHECK_OFFSET(gaspi_device_ctx, inline_local, 48);
GASPI_CHECK_OFFSET(gaspi_device_ctx, inline_remote, 176);
GASPI_CHECK_OFFSET(gaspi_ring_producer, tail_seen, 8);
GASPI_CHECK_OFFSET(gaspi_ring_producer, poller, 16);
GASPI_CHECK_OFFSET(gaspi_ring_header, completed, 128);
GASPI_CHECK_OFFSET(gaspi_ring_header, capacity, 256);
GASPI_CHECK_OFFSET(gaspi_ring_header, version, 268);
GASPI_CHECK_OFFSET(gaspi_ring_slot, op, 8);
GASPI_CHECK_OFFSET(gaspi_ring_slot, local_offset, 24);
GASPI_CHECK_OFFSET(gaspi_ring_slot, size, 40);
GASPI_CHECK_OFFSET(gaspi_ring_slot, notification_id, 48);
GASPI_CHECK_OFFSET(gaspi_ring_slot, flags, 56);
GASPI_CHECK_OFFSET(gaspi_ring_slot, reserved, 60);
GASPI_CHECK_OFFSET(gaspi_ring_header, inline_max, 272);
GASPI_CHECK_OFFSET(gaspi_device_ctx, ring_payload, 1200);
GASPI_CHECK_OFFSET(gaspi_device_ctx, ring_inline_max, 1208);

#define GASPI_LAYOUT_FIELDS 20

// Writes the offsets of the shared structs' fields, in the order of
// gaspi_gpu_kernels::LAYOUT_OFFSETS, to out[0..GASPI_LAYOUT_FIELDS].
__device__ inline void gaspi_layout_offsets(gaspi_u64* out) {
    gaspi_segment_desc d;
    gaspi_device_ctx c;
    gaspi_ring_header h;
    gaspi_ring_slot s;
#define GASPI_OFF(obj, field) ((gaspi_u64)((const char*)&(obj).field - (const char*)&(obj)))
    out[0] = GASPI_OFF(d, size);
    out[1] = GASPI_OFF(d, notifications);
    out[2] = GASPI_OFF(d, notification_count);
    out[3] = GASPI_OFF(c, local);
    out[4] = GASPI_OFF(c, ring_producer);
    out[5] = GASPI_OFF(h, completed);
    out[6] = GASPI_OFF(h, capacity);
    out[7] = GASPI_OFF(h, version);
    out[8] = GASPI_OFF(s, op);
    out[9] = GASPI_OFF(s, target_rank);
    out[10] = GASPI_OFF(s, local_offset);
    out[11] = GASPI_OFF(s, size);
    out[12] = GASPI_OFF(s, notification_id);
    out[13] = GASPI_OFF(s, reserved);
    out[14] = GASPI_OFF(c, inline_local);
    out[15] = GASPI_OFF(c, inline_remote);
    out[16] = GASPI_OFF(h, inline_max);
    out[17] = GASPI_OFF(s, flags);
    out[18] = GASPI_OFF(c, ring_payload);
    out[19] = GASPI_OFF(c, ring_inline_max);
#undef GASPI_OFF
}

// ---------------------------------------------------------------------------
// Memory-order primitives (generic addresses: device, peer or host-mapped).
// ---------------------------------------------------------------------------

__device__ __forceinline__ gaspi_u32 gaspi_load_acquire_u32(const gaspi_u32* p) {
    gaspi_u32 v;
    asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ gaspi_u64 gaspi_load_acquire_u64(const gaspi_u64* p) {
    gaspi_u64 v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// Acquire load at device scope: for words only this GPU's threads write.
__device__ __forceinline__ gaspi_u64 gaspi_load_acquire_gpu_u64(const gaspi_u64* p) {
    gaspi_u64 v;
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void gaspi_store_release_u32(gaspi_u32* p, gaspi_u32 v) {
    asm volatile("st.release.sys.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void gaspi_store_release_u64(gaspi_u64* p, gaspi_u64 v) {
    asm volatile("st.release.sys.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}

// Orders this thread's earlier memory accesses before its later ones at
// system scope, for release / acquire patterns (fence.acq_rel.sys, SASS
// MEMBAR.ALL.SYS). The device API used __threadfence_system() (fence.sc.sys,
// MEMBAR.SC.SYS) before: sequential consistency between fences is more than
// a flag published after its data needs, and it cost about 0.35 us more per
// answer across PCIe (H100, gaspi-bench notify-rtt variants 2048 and 67584,
// issue 19).
__device__ __forceinline__ void gaspi_fence_acq_rel() {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

// The notification store that follows a gaspi_fence_acq_rel(): the fence
// already orders every earlier write before it at system scope, and a
// relaxed (volatile) store after it is measurably cheaper across PCIe than
// st.release.sys, which fences again (H100: 4.5 us instead of 5.5 us for a
// CPU -> kernel -> CPU notification round trip, gaspi-bench notify-rtt).
__device__ __forceinline__ void gaspi_store_after_fence_u32(gaspi_u32* p, gaspi_u32 v) {
    *reinterpret_cast<volatile gaspi_u32*>(p) = v;
}

__device__ __forceinline__ gaspi_u32 gaspi_lane_id() {
    gaspi_u32 lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

__device__ __forceinline__ gaspi_u64 gaspi_globaltimer_ns() {
    gaspi_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ gaspi_u32 gaspi_block_thread() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

__device__ __forceinline__ gaspi_u32 gaspi_block_threads() {
    return blockDim.x * blockDim.y * blockDim.z;
}

// ---------------------------------------------------------------------------
// Segment tables.
// ---------------------------------------------------------------------------

// This rank's segment `seg`, or null when the id has no entry.
__device__ __forceinline__ const gaspi_segment_desc* gaspi_local_segment(const gaspi_device_ctx& ctx, gaspi_u32 seg) {
    if (seg >= ctx.nsegments || ctx.local == 0) return nullptr;
    const gaspi_segment_desc* d = reinterpret_cast<const gaspi_segment_desc*>(ctx.local) + seg;
    return d->notification_count == 0 ? nullptr : d;
}

// Where segment `seg` of `rank` sits in the remote table (unchecked).
__device__ __forceinline__ const gaspi_segment_desc* gaspi_remote_entry(const gaspi_device_ctx& ctx, gaspi_u32 rank,
                                                                       gaspi_u32 seg) {
    return reinterpret_cast<const gaspi_segment_desc*>(ctx.remote) + (gaspi_u64)rank * ctx.nsegments + seg;
}

// Segment `seg` of `rank`, or null when unknown.
__device__ __forceinline__ const gaspi_segment_desc* gaspi_remote_segment(const gaspi_device_ctx& ctx, gaspi_u32 rank, gaspi_u32 seg) {
    if (rank >= ctx.nranks || seg >= ctx.nsegments || ctx.remote == 0) return nullptr;
    const gaspi_segment_desc* d = gaspi_remote_entry(ctx, rank, seg);
    return d->notification_count == 0 ? nullptr : d;
}

// A whole descriptor, read through the read-only data cache: the tables
// are a snapshot the runtime writes before the launch and never during it
// (DeviceContext), which is what ld.global.nc needs. A sender reads them
// right after a wait, whose acquire loads emptied the L1 (issue 26).
__device__ __forceinline__ gaspi_segment_desc gaspi_desc_load(const gaspi_segment_desc* p) {
    const ulonglong2* q = reinterpret_cast<const ulonglong2*>(p);
    const ulonglong2 a = __ldg(q);
    const ulonglong2 b = __ldg(q + 1);
    gaspi_segment_desc d;
    d.data = a.x;
    d.size = a.y;
    d.notifications = b.x;
    d.notification_count = (gaspi_u32)b.y;
    d.flags = (gaspi_u32)(b.y >> 32);
    return d;
}

// Address of byte `offset` of local segment `seg` (null if out of range).
__device__ __forceinline__ unsigned char* gaspi_segment_ptr(const gaspi_device_ctx& ctx, gaspi_u32 seg, gaspi_u64 offset) {
    const gaspi_segment_desc* d = gaspi_local_segment(ctx, seg);
    if (!d || d->data == 0 || offset >= d->size) return nullptr;
    return reinterpret_cast<unsigned char*>(d->data) + offset;
}

// ---------------------------------------------------------------------------
// Waiting for and clearing notifications.
// ---------------------------------------------------------------------------

// gaspi_notify_waitsome_timeout (below) that also gives, in *value of every
// lane, the value the scan saw in the returned word. Warp-collective.
// Reading the word again, or clearing it with gaspi_notify_reset (an atomic
// exchange), costs a round trip when the words are host-mapped (about 1 us
// across PCIe); a kernel that answers requests can take the value from here
// and clear the word with gaspi_notify_clear, a posted write.
__device__ inline int gaspi_notify_waitsome_value(const gaspi_device_ctx& ctx, gaspi_u32 seg,
                                                  gaspi_u32 begin, gaspi_u32 num, gaspi_u64 timeout_ns,
                                                  gaspi_u32* value) {
    const gaspi_segment_desc* d = gaspi_local_segment(ctx, seg);
    if (!d || d->notifications == 0 || num == 0 || (gaspi_u64)begin + num > d->notification_count) {
        return GASPI_DEV_ERR_ARG;
    }
    const gaspi_u32* words = reinterpret_cast<const gaspi_u32*>(d->notifications) + begin;
    const gaspi_u32 lane = gaspi_lane_id();
    const gaspi_u64 start = timeout_ns == GASPI_BLOCK ? 0 : gaspi_globaltimer_ns();
    for (;;) {
        for (gaspi_u32 base = 0; base < num; base += 32) {
            const gaspi_u64 i = (gaspi_u64)base + lane;
            const gaspi_u32 v = i < num ? gaspi_load_acquire_u32(words + i) : 0u;
            const gaspi_u32 hit = __ballot_sync(0xffffffffu, v != 0u);
            if (hit != 0u) {
                // The lane that saw the word did an acquire; __syncwarp orders
                // the other lanes' later accesses after it.
                __syncwarp();
                const gaspi_u32 first = (gaspi_u32)(__ffs((int)hit) - 1);
                *value = __shfl_sync(0xffffffffu, v, first);
                return (int)(begin + base + first);
            }
            if (num - base <= 32u) break;
        }
        if (timeout_ns != GASPI_BLOCK && gaspi_globaltimer_ns() - start >= timeout_ns) {
            return GASPI_DEV_TIMEOUT;
        }
    }
}

// Waits until one of the notification words begin..begin+num of local
// segment `seg` is non-zero and returns the first such id; at most
// timeout_ns nanoseconds (GASPI_BLOCK: forever; 0: look once).
// Call from all 32 lanes of a converged warp: the lanes scan 32 words at a
// time and all of them return the same answer. Negative on error/timeout.
__device__ inline int gaspi_notify_waitsome_timeout(const gaspi_device_ctx& ctx, gaspi_u32 seg,
                                                    gaspi_u32 begin, gaspi_u32 num, gaspi_u64 timeout_ns) {
    gaspi_u32 value;
    return gaspi_notify_waitsome_value(ctx, seg, begin, num, timeout_ns, &value);
}

// gaspi_notify_waitsome_timeout with no time limit (warp-collective).
__device__ inline int gaspi_notify_waitsome(const gaspi_device_ctx& ctx, gaspi_u32 seg, gaspi_u32 begin, gaspi_u32 num) {
    return gaspi_notify_waitsome_timeout(ctx, seg, begin, num, GASPI_BLOCK);
}

// Waits until notification `id` of local segment `seg` holds a value above
// `last` (unsigned) and gives it in *value; at most timeout_ns nanoseconds
// (GASPI_BLOCK: forever). For senders that count up (each notification's
// value a sequence number, as with NVSHMEM's signal_wait_until): then the
// word needs no clearing between messages, so a persistent kernel answers
// without a clear and without the fence that would order the clear before
// its answer. One thread (any number of threads may wait on the same word;
// each returns). GASPI_DEV_SUCCESS, GASPI_DEV_TIMEOUT or GASPI_DEV_ERR_ARG.
// Host-mapped words are read across PCIe, about 1 us per read: two warps
// polling the same word (one lane each) see a new value about 0.4 us sooner
// than one on an H100; let the first answer (an atomicMax on a __shared__
// counter decides, see gaspi_echo_peer in echo.cu). Four are slower than one.
template <bool Acquire>
__device__ inline int gaspi_notify_wait_above_impl(const gaspi_device_ctx& ctx, gaspi_u32 seg, gaspi_u32 id,
                                                   gaspi_u32 last, gaspi_u64 timeout_ns, gaspi_u32* value) {
    const gaspi_segment_desc* d = gaspi_local_segment(ctx, seg);
    if (!d || d->notifications == 0 || id >= d->notification_count) return GASPI_DEV_ERR_ARG;
    const gaspi_u32* word = reinterpret_cast<const gaspi_u32*>(d->notifications) + id;
    const gaspi_u64 start = timeout_ns == GASPI_BLOCK ? 0 : gaspi_globaltimer_ns();
    for (;;) {
        const gaspi_u32 v = Acquire ? gaspi_load_acquire_u32(word) : *reinterpret_cast<const volatile gaspi_u32*>(word);
        if (v > last) {
            *value = v;
            return GASPI_DEV_SUCCESS;
        }
        if (timeout_ns != GASPI_BLOCK && gaspi_globaltimer_ns() - start >= timeout_ns) {
            return GASPI_DEV_TIMEOUT;
        }
    }
}

__device__ inline int gaspi_notify_wait_above(const gaspi_device_ctx& ctx, gaspi_u32 seg, gaspi_u32 id,
                                              gaspi_u32 last, gaspi_u64 timeout_ns, gaspi_u32* value) {
    return gaspi_notify_wait_above_impl<true>(ctx, seg, id, last, timeout_ns, value);
}

// gaspi_notify_wait_above without the acquire: polls with plain (volatile)
// loads, so a later read of data written before the notification may still
// see old bytes. For signals whose value is the whole message (a doorbell,
// a sequence number, an answer); to read data that came with it, call
// gaspi_fence() after it returns. On an H100, two warps polling this way
// answer a CPU -> kernel -> CPU round trip in 1.78 - 1.98 us (median of
// each of 10 runs, p90 at most 2.00); with gaspi_notify_wait_above some
// rounds take one PCIe read longer (~2.85 us), which made the median of 6
// of 21 runs 2.7 - 2.9 us (gaspi-bench notify-rtt variants 1408 and 384).
__device__ inline int gaspi_notify_wait_above_relaxed(const gaspi_device_ctx& ctx, gaspi_u32 seg, gaspi_u32 id,
                                                      gaspi_u32 last, gaspi_u64 timeout_ns, gaspi_u32* value) {
    return gaspi_notify_wait_above_impl<false>(ctx, seg, id, last, timeout_ns, value);
}

// Block-collective waitsome: the first warp waits, every thread of the block
// gets the id. Call from all threads of a block whose size is a multiple of 32.
__device__ inline int gaspi_notify_waitsome_block(const gaspi_device_ctx& ctx, gaspi_u32 seg, gaspi_u32 begin, gaspi_u32 num) {
    __shared__ int gaspi_waitsome_result;
    const gaspi_u32 t = gaspi_block_thread();
    if (t < 32u) {
        const int id = gaspi_notify_waitsome(ctx, seg, begin, num);
        if (t == 0u) gaspi_waitsome_result = id;
    }
    __syncthreads();
    const int id = gaspi_waitsome_result;
    // Every thread fences so its reads of the data that came with the
    // notification are ordered after the first warp's acquire.
    gaspi_fence_acq_rel();
    __syncthreads(); // the shared slot may be reused by the next call
    return id;
}

// Atomically sets notification `id` of local segment `seg` to 0 and returns
// the value it had (0 also for an id outside the segment). One thread.
// A notification set at the same time is either returned here or stays set,
// never lost: hence an atomic exchange, which on host-mapped words is a
// round trip across PCIe (about 1.3 us on an H100, issue 19: a plain store
// instead measured 3.4 against 4.7 us per request/answer round trip, but a
// store can wipe a notification that arrived after the scan). Where the
// sender cannot send again before it sees an answer, gaspi_notify_clear
// is that store.
__device__ inline gaspi_u32 gaspi_notify_reset(const gaspi_device_ctx& ctx, gaspi_u32 seg, gaspi_u32 id) {
    const gaspi_segment_desc* d = gaspi_local_segment(ctx, seg);
    if (!d || d->notifications == 0 || id >= d->notification_count) return 0u;
    gaspi_u32* word = reinterpret_cast<gaspi_u32*>(d->notifications) + id;
    return atomicExch_system(word, 0u);
}

// Sets notification `id` of local segment `seg` to 0 with a plain store: no
// read back, so no round trip when the word is host-mapped (a posted
// write). Only for a word that nobody can set again before the clear is
// visible: for example a request that its sender repeats only after our
// answer, cleared before the answer is sent (the answer's fence orders the
// clear before it). Otherwise use gaspi_notify_reset. One thread.
__device__ inline void gaspi_notify_clear(const gaspi_device_ctx& ctx, gaspi_u32 seg, gaspi_u32 id) {
    const gaspi_segment_desc* d = gaspi_local_segment(ctx, seg);
    if (!d || d->notifications == 0 || id >= d->notification_count) return;
    *reinterpret_cast<volatile gaspi_u32*>(reinterpret_cast<gaspi_u32*>(d->notifications) + id) = 0u;
}

// ---------------------------------------------------------------------------
// The request ring (producer side).
// ---------------------------------------------------------------------------

// Takes a ticket for one request; waits (polls) while the ring is full.
// The caller must have checked that the context has a ring
// (gaspi_ring_present). Called by one thread; lanes of a warp that post at
// the same time are aggregated: one atomic reserves their tickets and one
// lane waits for room for all of them, so 8,192 posting threads do not
// each poll the host-mapped tail across PCIe. (Hence the ring needs at
// least 32 slots: ring.rs RING_MIN_CAPACITY.) The slot (and its payload)
// of the ticket is the caller's until gaspi_ring_publish.
__device__ __forceinline__ bool gaspi_ring_present(const gaspi_device_ctx& ctx) {
    return ctx.ring != 0 && ctx.ring_producer != 0 && ctx.ring_capacity >= 32u;
}

// Waits until the consumer's tail is above `last - room` (room for ticket
// `last` among `room` slots or payloads), which an unpublished `last`
// never passes. Room is judged from the tail last seen by any producer
// (device memory, cheap); one producer at a time reads the host-mapped
// tail across PCIe and publishes it. With every warp reading it, a full
// ring flooded PCIe with reads and slowed the progress engine's own
// stream work, which kept the ring full (gaspi-gpu-tests full-ring: 8-37 s
// instead of about 1 s on nvidia-h200-x2).
__device__ inline void gaspi_ring_wait_room(const gaspi_device_ctx& ctx, gaspi_u64 last, gaspi_u64 room) {
    gaspi_ring_header* header = reinterpret_cast<gaspi_ring_header*>(ctx.ring);
    gaspi_ring_producer* producer = reinterpret_cast<gaspi_ring_producer*>(ctx.ring_producer);
    unsigned int pause = 64;
    while (last - gaspi_load_acquire_gpu_u64(&producer->tail_seen) >= room) {
        if (atomicCAS(&producer->poller, 0u, 1u) == 0u) {
            const gaspi_u64 tail = gaspi_load_acquire_u64(&header->tail);
            __threadfence(); // what the tail's acquire saw comes before its publication
            atomicMax(&producer->tail_seen, tail);
            atomicExch(&producer->poller, 0u);
            if (last - tail < room) break;
        }
        __nanosleep(pause);
        if (pause < 2048u) pause *= 2u;
    }
}

__device__ inline gaspi_u64 gaspi_ring_reserve(const gaspi_device_ctx& ctx) {
    gaspi_ring_producer* producer = reinterpret_cast<gaspi_ring_producer*>(ctx.ring_producer);
    const gaspi_u32 group = __activemask();
    const gaspi_u32 lane = gaspi_lane_id();
    const gaspi_u32 leader = (gaspi_u32)(__ffs((int)group) - 1);
    const gaspi_u32 count = (gaspi_u32)__popc((int)group);
    gaspi_u64 base = 0;
    if (lane == leader) base = atomicAdd(&producer->head, (gaspi_u64)count);
    base = __shfl_sync(group, base, (int)leader);
    const gaspi_u64 ticket = base + (gaspi_u32)__popc((int)(group & ((1u << lane) - 1u)));
    // Full: wait until the consumer has taken (last ticket - capacity);
    // that ticket belongs to an earlier reservation since count <= 32 <= capacity.
    if (lane == leader) gaspi_ring_wait_room(ctx, base + count - 1u, (gaspi_u64)ctx.ring_capacity);
    __syncwarp(group);
    return ticket;
}

// Writes the request of `ticket` (from gaspi_ring_reserve) and publishes it.
__device__ inline void gaspi_ring_publish(const gaspi_device_ctx& ctx, gaspi_u64 ticket, gaspi_u32 op, gaspi_u32 rank,
                                          gaspi_u32 local_seg, gaspi_u64 local_off, gaspi_u32 remote_seg,
                                          gaspi_u64 remote_off, gaspi_u64 size, gaspi_u32 id, gaspi_u32 value,
                                          gaspi_u32 flags) {
    gaspi_ring_slot* slots = reinterpret_cast<gaspi_ring_slot*>(ctx.ring + sizeof(gaspi_ring_header));
    gaspi_ring_slot* s = slots + (ticket & (gaspi_u64)(ctx.ring_capacity - 1u));
    s->op = op;
    s->target_rank = rank;
    s->local_segment = local_seg;
    s->remote_segment = remote_seg;
    s->local_offset = local_off;
    s->remote_offset = remote_off;
    s->size = size;
    s->notification_id = id;
    s->value = value;
    s->flags = flags;
    s->reserved = 0u;
    // Publish: the field stores (and this thread's earlier writes) become
    // visible to the CPU before seq does.
    gaspi_store_release_u64(&s->seq, ticket + 1ull);
}

// Posts one request (gaspi_ring_reserve, then gaspi_ring_publish); waits
// (polls) while the ring is full. Called by one thread (lanes of a warp
// posting together are aggregated).
__device__ inline int gaspi_ring_post(const gaspi_device_ctx& ctx, gaspi_u32 op, gaspi_u32 rank,
                                      gaspi_u32 local_seg, gaspi_u64 local_off,
                                      gaspi_u32 remote_seg, gaspi_u64 remote_off, gaspi_u64 size,
                                      gaspi_u32 id, gaspi_u32 value) {
    if (!gaspi_ring_present(ctx)) return GASPI_DEV_ERR_NO_ROUTE;
    const gaspi_u64 ticket = gaspi_ring_reserve(ctx);
    gaspi_ring_publish(ctx, ticket, op, rank, local_seg, local_off, remote_seg, remote_off, size, id, value, 0u);
    return GASPI_DEV_SUCCESS;
}

// Waits until the progress engine has finished with the source data of every
// request posted so far (local completion of ring requests). One thread.
__device__ inline int gaspi_ring_quiet(const gaspi_device_ctx& ctx) {
    if (ctx.ring == 0 || ctx.ring_producer == 0) return GASPI_DEV_SUCCESS;
    const gaspi_ring_header* header = reinterpret_cast<const gaspi_ring_header*>(ctx.ring);
    gaspi_ring_producer* producer = reinterpret_cast<gaspi_ring_producer*>(ctx.ring_producer);
    const gaspi_u64 posted = atomicAdd(&producer->head, 0ull);
    while (gaspi_load_acquire_u64(&header->completed) < posted) {
        __nanosleep(256);
    }
    return GASPI_DEV_SUCCESS;
}

// ---------------------------------------------------------------------------
// Sending.
// ---------------------------------------------------------------------------

// The checked route of a write_notify (identical in every calling thread).
struct gaspi_route {
    const unsigned char* src;
    unsigned char* dst;
    gaspi_u32* word;
    bool direct;
};

// A write route resolved once: the two segments' descriptors of a
// sender's (local segment, rank, remote segment), read from the tables by
// gaspi_write_route_prepare, for the *_via write_notify calls below. Each
// plain write_notify reads both descriptors again, and every
// write_notify's fence (fence.acq_rel.sys) and every wait's acquire empty
// the L1, so those reads go to L2 or further: on two H100s joined by
// NVLink that is 0.3 - 0.45 us of a 3.2 - 3.3 us kernel-to-kernel half
// round trip (issue 26, decision 0051). A kernel that sends to the same
// peer segment in a loop prepares the route before the loop: it lives in
// registers, and each call still checks offsets, size and id against it.
// The tables do not change during a launch (DeviceContext), so a route
// stays valid for the whole launch; it must not outlive it.
struct gaspi_write_route {
    gaspi_segment_desc local;
    gaspi_segment_desc remote;
    gaspi_u32 rank;
    gaspi_u32 local_seg;
    gaspi_u32 remote_seg;
    gaspi_u32 valid; // 0: an id out of range or no tables (every call fails)
};

// Both descriptors are read whole and independently of each other (their
// addresses come from the kernel argument alone), so the two reads overlap:
// reading the remote descriptor only once the local one had been checked
// cost a second round trip to L2 per call (issue 26). Segments below
// GASPI_INLINE_SEGMENTS (of ranks below GASPI_INLINE_RANKS) come from the
// kernel argument's inline copies, in the constant bank: after a wait the
// tables' lines are gone from the L1 (ld.global.nc's too: an acquire took
// 554 cycles to a table read against 315 to the argument, H100), and a
// write_notify reading them started up to 0.13 us later (decision 0053).
// Ids in that range skip the checks against nsegments, nranks and the
// table pointers, which their zero entries make redundant: up to 0.14 us
// less per plain call between two H100s (decision 0053, gpu26b).
__device__ inline gaspi_write_route gaspi_write_route_prepare(const gaspi_device_ctx& ctx, gaspi_u32 local_seg,
                                                              gaspi_u32 rank, gaspi_u32 remote_seg) {
    gaspi_write_route w;
    w.rank = rank;
    w.local_seg = local_seg;
    w.remote_seg = remote_seg;
    if (local_seg < GASPI_INLINE_SEGMENTS && remote_seg < GASPI_INLINE_SEGMENTS && rank < GASPI_INLINE_RANKS) {
        // The inline copies are zero where the tables have no entry (a
        // segment id >= nsegments, a rank >= nranks), and gaspi_route_write
        // refuses a descriptor with no notifications: so these ids need no
        // check against nsegments, nranks or the table pointers here.
        w.valid = 1u;
        w.local = ctx.inline_local[local_seg];
        w.remote = ctx.inline_remote[rank * GASPI_INLINE_SEGMENTS + remote_seg];
        return w;
    }
    w.valid = local_seg < ctx.nsegments && remote_seg < ctx.nsegments && rank < ctx.nranks && ctx.local != 0 &&
              ctx.remote != 0;
    if (w.valid) {
        w.local = local_seg < GASPI_INLINE_SEGMENTS
                      ? ctx.inline_local[local_seg]
                      : gaspi_desc_load(reinterpret_cast<const gaspi_segment_desc*>(ctx.local) + local_seg);
        w.remote = rank < GASPI_INLINE_RANKS && remote_seg < GASPI_INLINE_SEGMENTS
                       ? ctx.inline_remote[rank * GASPI_INLINE_SEGMENTS + remote_seg]
                       : gaspi_desc_load(gaspi_remote_entry(ctx, rank, remote_seg));
    } else {
        w.local = gaspi_segment_desc{};
        w.remote = gaspi_segment_desc{};
    }
    return w;
}

// Whether the source range of a write along `w` lies in the local
// segment and the destination is a direct one, the part of
// gaspi_route_write an early load needs (gaspi_early_batch_load): only
// this keeps the loads from faulting; the rest is checked after.
__device__ __forceinline__ bool gaspi_route_may_load(const gaspi_write_route& w, gaspi_u64 local_off, gaspi_u64 size) {
    return w.valid && w.local.data != 0 && local_off <= w.local.size && size <= w.local.size - local_off &&
           w.remote.notifications != 0 && w.remote.data != 0;
}

// The checked route of one write_notify along `w`.
__device__ inline int gaspi_route_write(const gaspi_write_route& w, gaspi_u64 local_off, gaspi_u64 remote_off,
                                        gaspi_u64 size, gaspi_u32 id, gaspi_u32 value, gaspi_route* r) {
    const gaspi_segment_desc& l = w.local;
    const gaspi_segment_desc& d = w.remote;
    if (value == 0u || !w.valid) return GASPI_DEV_ERR_ARG;
    if (l.notification_count == 0 || local_off > l.size || size > l.size - local_off || (size != 0 && l.data == 0)) {
        return GASPI_DEV_ERR_ARG;
    }
    if (d.notification_count == 0 || id >= d.notification_count || remote_off > d.size ||
        size > d.size - remote_off) {
        return GASPI_DEV_ERR_ARG;
    }
    r->src = reinterpret_cast<const unsigned char*>(l.data) + local_off;
    r->direct = d.notifications != 0 && (size == 0 || d.data != 0);
    r->dst = r->direct ? reinterpret_cast<unsigned char*>(d.data) + remote_off : nullptr;
    r->word = r->direct ? reinterpret_cast<gaspi_u32*>(d.notifications) + id : nullptr;
    return GASPI_DEV_SUCCESS;
}

// Copies `count` elements of T with `n` cooperating threads (this one is
// number `t`), GASPI_COPY_BATCH loads in flight per thread before their
// stores: a load from device memory takes ~0.5 us, and one load then one
// store per step left one warp copying 64 KiB to a peer GPU at ~2.6 GB/s
// (gaspi-bench gpu-pingpong --device-driven, session 6). The ranges must
// not overlap (as for memcpy).
#define GASPI_COPY_BATCH 8u
// Every batch is predicated, so a partial one keeps its loads in flight
// too: copied one element after the other, a block of 512 threads took
// about 1 us longer for 32 KiB (4 elements each) than for 64 KiB
// (gaspi-bench gpu-pingpong, issue 26).
template <typename T>
__device__ inline void gaspi_copy_elems(T* __restrict__ d, const T* __restrict__ s, gaspi_u64 count, gaspi_u32 t,
                                        gaspi_u32 n) {
    for (gaspi_u64 i = t; i < count; i += GASPI_COPY_BATCH * (gaspi_u64)n) {
        T v[GASPI_COPY_BATCH];
#pragma unroll
        for (gaspi_u32 k = 0; k < GASPI_COPY_BATCH; ++k) {
            if (i + k * (gaspi_u64)n < count) v[k] = s[i + k * (gaspi_u64)n];
        }
#pragma unroll
        for (gaspi_u32 k = 0; k < GASPI_COPY_BATCH; ++k) {
            if (i + k * (gaspi_u64)n < count) d[i + k * (gaspi_u64)n] = v[k];
        }
    }
}

// The start of a copy whose ends are 16-byte aligned, loaded before the
// route's checks have all been made (see gaspi_early_batch_load): thread
// `t` of `n` holds vectors t, t + n, ... below GASPI_EARLY_BATCH * n, and
// thread (size / 16) % n the last size % 16 bytes in pieces of 8, 4, 2
// and 1. `loaded`: whether it was loaded (else nothing is held). E vectors
// a thread: GASPI_EARLY_BATCH for the warp's calls, GASPI_THREAD_EARLY for
// the one thread's, GASPI_BLOCK_EARLY for the block's.
#define GASPI_EARLY_BATCH 1u
template <gaspi_u32 E>
struct gaspi_early_batch_n {
    uint4 v[E];
    gaspi_u64 p8;
    gaspi_u32 p4;
    unsigned short p2;
    unsigned char p1;
    bool loaded;
};
typedef gaspi_early_batch_n<GASPI_EARLY_BATCH> gaspi_early_batch;

// Loads the start of copying `size` bytes from `src` to `dst` when
// `may_load` (the source range lies in the local segment, so the loads
// cannot fault) and both ends are 16-byte aligned. After a wait, the first
// load waits for the acquire to drain and misses the emptied L1; issued
// before the checks against the remote descriptor and the copy's set-up,
// those run in its shadow instead of in front of it, and the loads that
// follow find the acquire done. One vector per thread is enough for that in
// a warp: 2 or 4 were no faster and take more registers (issue 26, decision
// 0057); a block's call takes GASPI_BLOCK_EARLY (decision 0058).
template <gaspi_u32 E>
__device__ __forceinline__ void gaspi_early_batch_load(gaspi_early_batch_n<E>& b, const unsigned char* src,
                                                       const unsigned char* dst, gaspi_u64 size, gaspi_u32 t,
                                                       gaspi_u32 n, bool may_load) {
    b.loaded = may_load && ((reinterpret_cast<gaspi_u64>(dst) | reinterpret_cast<gaspi_u64>(src)) & 15u) == 0;
    if (!b.loaded) return;
    const gaspi_u64 count = size / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
#pragma unroll
    for (gaspi_u32 k = 0; k < E; ++k) {
        if (t + k * (gaspi_u64)n < count) b.v[k] = s[t + k * (gaspi_u64)n];
    }
    const gaspi_u32 rem = (gaspi_u32)(size & 15u);
    if (rem != 0 && t == count % n) {
        // 16-byte aligned at first, so each piece is aligned to its size.
        const unsigned char* p = src + count * 16;
        if (rem & 8u) b.p8 = *reinterpret_cast<const gaspi_u64*>(p);
        p += rem & 8u;
        if (rem & 4u) b.p4 = *reinterpret_cast<const gaspi_u32*>(p);
        p += rem & 4u;
        if (rem & 2u) b.p2 = *reinterpret_cast<const unsigned short*>(p);
        p += rem & 2u;
        if (rem & 1u) b.p1 = *p;
    }
}

// gaspi_copy_elems for one thread alone: the next batch's loads are issued
// before this batch's stores, so up to 16 loads are in flight rather than
// 8 and then none (one thread copies 4 KiB in 32 batches). Costs twice the
// registers of a batch (16 x 16 bytes), hence only here: a kernel that also
// copies with a block of 512 threads must stay within 128 registers.
template <typename T>
__device__ inline void gaspi_copy_elems_alone(T* __restrict__ d, const T* __restrict__ s, gaspi_u64 count) {
    gaspi_u64 i = 0;
    if (GASPI_COPY_BATCH <= count) {
        T v[GASPI_COPY_BATCH];
#pragma unroll
        for (gaspi_u32 k = 0; k < GASPI_COPY_BATCH; ++k) v[k] = s[k];
        for (;;) {
            const gaspi_u64 j = i + GASPI_COPY_BATCH;
            if (j + GASPI_COPY_BATCH > count) {
#pragma unroll
                for (gaspi_u32 k = 0; k < GASPI_COPY_BATCH; ++k) d[i + k] = v[k];
                i = j;
                break;
            }
            T w[GASPI_COPY_BATCH];
#pragma unroll
            for (gaspi_u32 k = 0; k < GASPI_COPY_BATCH; ++k) w[k] = s[j + k];
#pragma unroll
            for (gaspi_u32 k = 0; k < GASPI_COPY_BATCH; ++k) d[i + k] = v[k];
#pragma unroll
            for (gaspi_u32 k = 0; k < GASPI_COPY_BATCH; ++k) v[k] = w[k];
            i = j;
        }
    }
    gaspi_copy_elems(d + i, s + i, count - i, 0u, 1u);
}

// Copies size bytes with `n` cooperating threads (this one is number `t`):
// 16-byte vectors when both ends allow, else 4-byte words, else bytes.
__device__ inline void gaspi_copy(unsigned char* dst, const unsigned char* src, gaspi_u64 size, gaspi_u32 t, gaspi_u32 n) {
    const gaspi_u64 a = reinterpret_cast<gaspi_u64>(dst) | reinterpret_cast<gaspi_u64>(src);
    gaspi_u64 done = 0;
    if ((a & 15u) == 0) {
        gaspi_copy_elems(reinterpret_cast<uint4*>(dst), reinterpret_cast<const uint4*>(src), size / 16, t, n);
        done = size / 16 * 16;
    } else if ((a & 3u) == 0) {
        gaspi_copy_elems(reinterpret_cast<gaspi_u32*>(dst), reinterpret_cast<const gaspi_u32*>(src), size / 4, t, n);
        done = size / 4 * 4;
    }
    for (gaspi_u64 i = done + t; i < size; i += n) dst[i] = src[i];
}

// gaspi_copy by one thread alone (gaspi_copy_elems_alone).
__device__ inline void gaspi_copy_alone(unsigned char* dst, const unsigned char* src, gaspi_u64 size) {
    const gaspi_u64 a = reinterpret_cast<gaspi_u64>(dst) | reinterpret_cast<gaspi_u64>(src);
    gaspi_u64 done = 0;
    if ((a & 15u) == 0) {
        gaspi_copy_elems_alone(reinterpret_cast<uint4*>(dst), reinterpret_cast<const uint4*>(src), size / 16);
        done = size / 16 * 16;
    } else if ((a & 3u) == 0) {
        gaspi_copy_elems_alone(reinterpret_cast<gaspi_u32*>(dst), reinterpret_cast<const gaspi_u32*>(src), size / 4);
        done = size / 4 * 4;
    }
    for (gaspi_u64 i = done; i < size; ++i) dst[i] = src[i];
}

// Inline ring requests (decision 0093, UCX's *inline* protocol). A write
// to a segment whose ring route crosses a network transport
// (GASPI_SEGMENT_RING_INLINE) of at most ctx.ring_inline_max bytes copies
// its source into its ticket's payload, host-mapped memory after the ring's
// slots, and publishes the request with GASPI_RING_FLAG_INLINE: the CPU
// sends the bytes from there, with no copy out of GPU memory (about 6 us
// for a few bytes on an H200, bench/gpu/small_copy_floor.cu) and no stream
// work on the sending side. The copy is posted PCIe writes; the source may
// be reused as soon as the call returns.
// One thread alone copies into host-mapped memory slower than the copy
// engine does beyond a few KiB (64 KiB: 109 us a half round trip against
// 62 us staged, one H200 under MPS, session 3 of issue 41): its calls
// carry at most this many bytes inline.
#define GASPI_RING_INLINE_THREAD_MAX 4096u

__device__ __forceinline__ bool gaspi_ring_inline(const gaspi_device_ctx& ctx, const gaspi_write_route& w,
                                                  gaspi_u64 size, gaspi_u64 limit) {
    return (w.remote.flags & GASPI_SEGMENT_RING_INLINE) != 0u && ctx.ring_payload != 0 &&
           size <= (gaspi_u64)ctx.ring_inline_max && size <= limit && gaspi_ring_present(ctx);
}

// The payload of `ticket`'s slot: the slot's until it is published, so no
// wait of its own. (A lane waiting here for an earlier ticket held by a
// lane of its own warp deadlocked at the warp's reconvergence point, with
// fewer payloads than slots; session 3 of issue 41.)
__device__ __forceinline__ unsigned char* gaspi_ring_payload(const gaspi_device_ctx& ctx, gaspi_u64 ticket) {
    return reinterpret_cast<unsigned char*>(ctx.ring_payload) +
           (ticket & (gaspi_u64)(ctx.ring_capacity - 1u)) * (gaspi_u64)ctx.ring_inline_max;
}

// Publishes the inline write along `w` of `ticket`, whose payload is
// written (and, by other threads, fenced before this).
__device__ __forceinline__ void gaspi_ring_publish_inline(const gaspi_device_ctx& ctx, gaspi_u64 ticket, gaspi_u32 op,
                                                          const gaspi_write_route& w, gaspi_u64 local_off,
                                                          gaspi_u64 remote_off, gaspi_u64 size, gaspi_u32 id,
                                                          gaspi_u32 value) {
    gaspi_ring_publish(ctx, ticket, op, w.rank, w.local_seg, local_off, w.remote_seg, remote_off, size, id, value,
                       GASPI_RING_FLAG_INLINE);
}

// An inline request posted by one thread (gaspi_ring_inline holds). Its
// own payload stores come before the slot's release store.
__device__ inline int gaspi_ring_post_inline_thread(const gaspi_device_ctx& ctx, gaspi_u32 op,
                                                    const gaspi_write_route& w, const unsigned char* src,
                                                    gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size,
                                                    gaspi_u32 id, gaspi_u32 value) {
    const gaspi_u64 ticket = gaspi_ring_reserve(ctx);
    unsigned char* payload = gaspi_ring_payload(ctx, ticket);
    gaspi_copy_alone(payload, src, size);
    gaspi_ring_publish_inline(ctx, ticket, op, w, local_off, remote_off, size, id, value);
    return GASPI_DEV_SUCCESS;
}

// An inline request posted by a whole warp (all 32 lanes, same arguments):
// lane 0 takes the ticket, every lane copies its part of the payload, and
// after __syncwarp lane 0 fences at system scope (cumulative: the other
// lanes' payload stores come first) and publishes.
__device__ inline int gaspi_ring_post_inline_warp(const gaspi_device_ctx& ctx, gaspi_u32 op,
                                                  const gaspi_write_route& w, const unsigned char* src,
                                                  gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size,
                                                  gaspi_u32 id, gaspi_u32 value) {
    const gaspi_u32 lane = gaspi_lane_id();
    gaspi_u64 ticket = 0;
    gaspi_u64 payload = 0;
    if (lane == 0u) {
        ticket = gaspi_ring_reserve(ctx);
        payload = reinterpret_cast<gaspi_u64>(gaspi_ring_payload(ctx, ticket));
    }
    ticket = __shfl_sync(0xffffffffu, ticket, 0);
    payload = __shfl_sync(0xffffffffu, payload, 0);
    gaspi_copy(reinterpret_cast<unsigned char*>(payload), src, size, lane, 32u);
    __syncwarp();
    if (lane == 0u) {
        gaspi_fence_acq_rel();
        gaspi_ring_publish_inline(ctx, ticket, op, w, local_off, remote_off, size, id, value);
    }
    return GASPI_DEV_SUCCESS;
}

// An inline request posted by a whole block (all threads, same arguments),
// as the warp's with barriers.
__device__ inline int gaspi_ring_post_inline_block(const gaspi_device_ctx& ctx, gaspi_u32 op,
                                                   const gaspi_write_route& w, const unsigned char* src,
                                                   gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size,
                                                   gaspi_u32 id, gaspi_u32 value) {
    __shared__ gaspi_u64 gaspi_inline_ticket;
    __shared__ gaspi_u64 gaspi_inline_payload;
    const gaspi_u32 t = gaspi_block_thread();
    if (t == 0u) {
        gaspi_inline_ticket = gaspi_ring_reserve(ctx);
        gaspi_inline_payload = reinterpret_cast<gaspi_u64>(gaspi_ring_payload(ctx, gaspi_inline_ticket));
    }
    __syncthreads();
    const gaspi_u64 ticket = gaspi_inline_ticket;
    gaspi_copy(reinterpret_cast<unsigned char*>(gaspi_inline_payload), src, size, t, gaspi_block_threads());
    // Every thread has read the ticket and stored its part: thread 0 may
    // publish, and take the next call's ticket into the shared slot.
    __syncthreads();
    if (t == 0u) {
        gaspi_fence_acq_rel();
        gaspi_ring_publish_inline(ctx, ticket, op, w, local_off, remote_off, size, id, value);
    }
    return GASPI_DEV_SUCCESS;
}

// gaspi_copy of `size` bytes whose start `b` may already be loaded
// (gaspi_early_batch_load with the same src, dst, size, t and n): stores
// it and copies the rest. With a warp copying, the early vectors cover
// 512 B; the rest's loads go out after their stores, which wait for them,
// but by then the acquire has drained (32 KiB from 512 threads with one
// early vector each: 0.05 - 0.1 us faster than without, issue 26).
template <gaspi_u32 E>
__device__ inline void gaspi_copy_after(const gaspi_early_batch_n<E>& b, unsigned char* dst, const unsigned char* src,
                                        gaspi_u64 size, gaspi_u32 t, gaspi_u32 n) {
    gaspi_u64 from = 0;
    gaspi_u64 to = size;
    if (b.loaded) {
        const gaspi_u64 count = size / 16;
        uint4* d = reinterpret_cast<uint4*>(dst);
#pragma unroll
        for (gaspi_u32 k = 0; k < E; ++k) {
            if (t + k * (gaspi_u64)n < count) d[t + k * (gaspi_u64)n] = b.v[k];
        }
        const gaspi_u32 rem = (gaspi_u32)(size & 15u);
        if (rem != 0 && t == count % n) {
            unsigned char* p = dst + count * 16;
            if (rem & 8u) *reinterpret_cast<gaspi_u64*>(p) = b.p8;
            p += rem & 8u;
            if (rem & 4u) *reinterpret_cast<gaspi_u32*>(p) = b.p4;
            p += rem & 4u;
            if (rem & 2u) *reinterpret_cast<unsigned short*>(p) = b.p2;
            p += rem & 2u;
            if (rem & 1u) *p = b.p1;
        }
        // The vectors after the early ones (16-byte aligned still).
        const gaspi_u64 first = E * (gaspi_u64)n;
        from = (count < first ? count : first) * 16;
        to = count * 16;
    }
    if (to > from) gaspi_copy(dst + from, src + from, to - from, t, n);
}

// Sets notification `id` of segment `seg` on `rank` to `value` (non-zero),
// after this thread's earlier writes. One thread. Direct store when the
// word is reachable, otherwise a ring request.
__device__ inline int gaspi_notify(const gaspi_device_ctx& ctx, gaspi_u32 rank, gaspi_u32 seg, gaspi_u32 id, gaspi_u32 value) {
    if (value == 0u) return GASPI_DEV_ERR_ARG;
    const gaspi_segment_desc* d = gaspi_remote_segment(ctx, rank, seg);
    if (!d || id >= d->notification_count) return GASPI_DEV_ERR_ARG;
    if (d->notifications != 0) {
        gaspi_fence_acq_rel();
        gaspi_store_after_fence_u32(reinterpret_cast<gaspi_u32*>(d->notifications) + id, value);
        return GASPI_DEV_SUCCESS;
    }
    return gaspi_ring_post(ctx, GASPI_RING_OP_NOTIFY, rank, 0u, 0ull, seg, 0ull, 0ull, id, value);
}

// Sets notification `id` of segment `seg` on `rank` to `value` (non-zero)
// without ordering it after this thread's earlier writes: no fence, which
// saves about 1 us per call when the word is across PCIe (H100,
// gaspi-bench notify-rtt). For a signal whose content is its value (an
// answer, a doorbell) and for replies ordered by a gaspi_fence issued
// earlier, off the critical path; use gaspi_notify when data written
// before must arrive first. One thread. Ring targets keep ring order.
__device__ inline int gaspi_notify_relaxed(const gaspi_device_ctx& ctx, gaspi_u32 rank, gaspi_u32 seg, gaspi_u32 id,
                                           gaspi_u32 value) {
    if (value == 0u) return GASPI_DEV_ERR_ARG;
    const gaspi_segment_desc* d = gaspi_remote_segment(ctx, rank, seg);
    if (!d || id >= d->notification_count) return GASPI_DEV_ERR_ARG;
    if (d->notifications != 0) {
        gaspi_store_after_fence_u32(reinterpret_cast<gaspi_u32*>(d->notifications) + id, value);
        return GASPI_DEV_SUCCESS;
    }
    return gaspi_ring_post(ctx, GASPI_RING_OP_NOTIFY, rank, 0u, 0ull, seg, 0ull, 0ull, id, value);
}

// Orders every write of this thread before it (data, notifications,
// clears) before every write after it, at system scope: what gaspi_notify
// does before its store, as a call of its own to place off the critical
// path (e.g. after answering with gaspi_notify_relaxed and clearing the
// request with gaspi_notify_clear).
__device__ __forceinline__ void gaspi_fence() {
    gaspi_fence_acq_rel();
}

// Vectors the one-thread write_notify loads before its checks, when they
// and the tail are the whole message (below 80 bytes with 4). With one
// vector a 64-byte message was loaded after the checks: 2.85 us half round
// trip between two H100s against NVSHMEM's 2.90, with 4 vectors 2.62
// (gaspi-bench gpu-pingpong --device-driven, issue 26); 4 vectors take 64
// bytes of registers, only in kernels that call the one-thread form.
#ifndef GASPI_THREAD_EARLY
#define GASPI_THREAD_EARLY 4u
#endif

// write_notify by one thread along a prepared route (gaspi_write_route_prepare).
__device__ inline int gaspi_write_notify_thread_via(const gaspi_device_ctx& ctx, const gaspi_write_route& w,
                                                    gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size,
                                                    gaspi_u32 id, gaspi_u32 value) {
    const unsigned char* src = reinterpret_cast<const unsigned char*>(w.local.data) + local_off;
    const unsigned char* dst = reinterpret_cast<const unsigned char*>(w.remote.data) + remote_off;
    // Early only when that is the whole copy (GASPI_THREAD_EARLY vectors and
    // the tail): one thread's store of the early part would wait for its
    // load and hold back the rest's loads behind it (in-order issue), 0.15
    // - 0.2 us more from 64 B on with one early vector (issue 26).
    gaspi_early_batch_n<GASPI_THREAD_EARLY> b;
    gaspi_early_batch_load(b, src, dst, size, 0u, 1u,
                           size < 16u * (GASPI_THREAD_EARLY + 1u) && gaspi_route_may_load(w, local_off, size));
    gaspi_route r;
    const int rc = gaspi_route_write(w, local_off, remote_off, size, id, value, &r);
    if (rc != GASPI_DEV_SUCCESS) return rc;
    if (r.direct) {
        if (b.loaded) gaspi_copy_after(b, r.dst, r.src, size, 0u, 1u);
        else gaspi_copy_alone(r.dst, r.src, size);
        gaspi_fence_acq_rel();
        gaspi_store_after_fence_u32(r.word, value);
        return GASPI_DEV_SUCCESS;
    }
    if (gaspi_ring_inline(ctx, w, size, GASPI_RING_INLINE_THREAD_MAX)) {
        return gaspi_ring_post_inline_thread(ctx, GASPI_RING_OP_WRITE_NOTIFY, w, r.src, local_off, remote_off, size,
                                             id, value);
    }
    gaspi_fence_acq_rel();
    return gaspi_ring_post(ctx, GASPI_RING_OP_WRITE_NOTIFY, w.rank, w.local_seg, local_off, w.remote_seg, remote_off,
                           size, id, value);
}

// write_notify by one thread.
__device__ inline int gaspi_write_notify_thread(const gaspi_device_ctx& ctx, gaspi_u32 local_seg, gaspi_u64 local_off,
                                                gaspi_u32 rank, gaspi_u32 remote_seg, gaspi_u64 remote_off,
                                                gaspi_u64 size, gaspi_u32 id, gaspi_u32 value) {
    return gaspi_write_notify_thread_via(ctx, gaspi_write_route_prepare(ctx, local_seg, rank, remote_seg), local_off,
                                         remote_off, size, id, value);
}

// write_notify by a whole warp along a prepared route (all 32 lanes, same
// arguments): the lanes copy, each fences, lane 0 stores the notification
// or posts the request. Every lane reads part of the source: writes to it
// by other lanes must come before the call (__syncwarp()).
__device__ inline int gaspi_write_notify_warp_via(const gaspi_device_ctx& ctx, const gaspi_write_route& w,
                                                  gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size,
                                                  gaspi_u32 id, gaspi_u32 value) {
    const gaspi_u32 lane = gaspi_lane_id();
    const unsigned char* src = reinterpret_cast<const unsigned char*>(w.local.data) + local_off;
    const unsigned char* dst = reinterpret_cast<const unsigned char*>(w.remote.data) + remote_off;
    gaspi_early_batch b;
    gaspi_early_batch_load(b, src, dst, size, lane, 32u, gaspi_route_may_load(w, local_off, size));
    gaspi_route r;
    int rc = gaspi_route_write(w, local_off, remote_off, size, id, value, &r);
    if (rc != GASPI_DEV_SUCCESS) return rc;
    if (!r.direct && gaspi_ring_inline(ctx, w, size, ~0ull)) {
        return gaspi_ring_post_inline_warp(ctx, GASPI_RING_OP_WRITE_NOTIFY, w, r.src, local_off, remote_off, size, id,
                                           value);
    }
    if (r.direct) gaspi_copy_after(b, r.dst, r.src, size, lane, 32u);
    gaspi_fence_acq_rel();
    __syncwarp();
    if (lane == 0u) {
        if (r.direct) {
            gaspi_store_after_fence_u32(r.word, value);
        } else {
            rc = gaspi_ring_post(ctx, GASPI_RING_OP_WRITE_NOTIFY, w.rank, w.local_seg, local_off, w.remote_seg,
                                 remote_off, size, id, value);
        }
    }
    return __shfl_sync(0xffffffffu, rc, 0);
}

// write_notify by a whole warp (all 32 lanes, same arguments).
__device__ inline int gaspi_write_notify_warp(const gaspi_device_ctx& ctx, gaspi_u32 local_seg, gaspi_u64 local_off,
                                              gaspi_u32 rank, gaspi_u32 remote_seg, gaspi_u64 remote_off,
                                              gaspi_u64 size, gaspi_u32 id, gaspi_u32 value) {
    return gaspi_write_notify_warp_via(ctx, gaspi_write_route_prepare(ctx, local_seg, rank, remote_seg), local_off,
                                       remote_off, size, id, value);
}

// Early vectors a thread of a block's call loads before its checks (see
// gaspi_early_batch_load): with 512 threads, 4 cover 32 KiB, so up to there
// the whole copy's loads are in flight before the route is checked. Against
// one vector a thread, with the checks in thread 0 behind a barrier, the
// plain block call took 3.04 / 3.44 / 4.16 us instead of 3.22 / 3.60 / 4.37
// (16 / 32 / 64 KiB, half round trip between two H100s; NVSHMEM's block
// put 3.17 / 3.66 / 4.54 in the same call), 2 vectors 3.01 / 3.54 / 4.29
// (decision 0058). It takes 16 registers: a kernel of 512 threads, whose
// limit is 128, may define it to 1 or 2 before the #include if it spills.
#ifndef GASPI_BLOCK_EARLY
#define GASPI_BLOCK_EARLY 4u
#endif

// The block's write_notify along `w` (gaspi_write_notify_via and
// gaspi_write_notify). Every thread checks the route itself, in the shadow
// of its early loads, so no barrier comes before the copy: thread 0
// checking for the block and handing the route on behind a barrier (as
// 5fa1458 did) kept every load waiting for those checks. After the copy
// one barrier, then thread 0 fences and stores the notification: the
// barrier orders the other threads' stores before thread 0's fence, and a
// fence at system scope is cumulative (PTX memory model), the pattern NCCL
// and NVSHMEM use to publish a block's data; a fence in every thread
// before the barrier cost about 1 us per call with 16 warps copying 32 or
// 64 KiB over NVLink (issue 26). The direct path returns after that
// barrier (every thread knows the outcome); the ring path hands thread 0's
// result round.
__device__ inline int gaspi_write_notify_block_along(const gaspi_device_ctx& ctx, const gaspi_write_route& w,
                                                     gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size,
                                                     gaspi_u32 id, gaspi_u32 value) {
    __shared__ int gaspi_write_notify_result;
    const gaspi_u32 t = gaspi_block_thread();
    const gaspi_u32 n = gaspi_block_threads();
    const unsigned char* src = reinterpret_cast<const unsigned char*>(w.local.data) + local_off;
    const unsigned char* dst = reinterpret_cast<const unsigned char*>(w.remote.data) + remote_off;
    gaspi_early_batch_n<GASPI_BLOCK_EARLY> b;
    gaspi_early_batch_load(b, src, dst, size, t, n, gaspi_route_may_load(w, local_off, size));
    gaspi_route r;
    const int rc = gaspi_route_write(w, local_off, remote_off, size, id, value, &r);
    if (rc != GASPI_DEV_SUCCESS) return rc;
    if (r.direct) {
        gaspi_copy_after(b, r.dst, r.src, size, t, n);
        __syncthreads();
        if (t == 0u) {
            gaspi_fence_acq_rel();
            gaspi_store_after_fence_u32(r.word, value);
        }
        return GASPI_DEV_SUCCESS;
    }
    if (gaspi_ring_inline(ctx, w, size, ~0ull)) {
        return gaspi_ring_post_inline_block(ctx, GASPI_RING_OP_WRITE_NOTIFY, w, r.src, local_off, remote_off, size, id,
                                            value);
    }
    // The progress engine reads the source: every thread's writes to it
    // come before thread 0's fence and request.
    __syncthreads();
    if (t == 0u) {
        gaspi_fence_acq_rel();
        gaspi_write_notify_result = gaspi_ring_post(ctx, GASPI_RING_OP_WRITE_NOTIFY, w.rank, w.local_seg, local_off,
                                                    w.remote_seg, remote_off, size, id, value);
    }
    __syncthreads();
    const int result = gaspi_write_notify_result;
    __syncthreads(); // the shared slot may be reused by the next call
    return result;
}

// write_notify by a whole block along a prepared route (all threads, same
// arguments; gaspi_write_notify_block_along). Every thread reads part of
// the source: writes to it by other threads of the block must come before
// the call (__syncthreads()), as for any data one thread writes and another
// reads; the call itself starts loading at once. When it returns the
// source may be reused (direct path) or must be kept until
// gaspi_ring_quiet (ring path).
__device__ inline int gaspi_write_notify_via(const gaspi_device_ctx& ctx, const gaspi_write_route& w,
                                             gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size, gaspi_u32 id,
                                             gaspi_u32 value) {
    return gaspi_write_notify_block_along(ctx, w, local_off, remote_off, size, id, value);
}

// write_notify by a whole block (all threads, same arguments; the source
// as for gaspi_write_notify_via). Every thread finds the route itself
// (segments 0-3 of ranks 0-7 from the kernel argument, decision 0053).
__device__ inline int gaspi_write_notify(const gaspi_device_ctx& ctx, gaspi_u32 local_seg, gaspi_u64 local_off,
                                         gaspi_u32 rank, gaspi_u32 remote_seg, gaspi_u64 remote_off,
                                         gaspi_u64 size, gaspi_u32 id, gaspi_u32 value) {
    return gaspi_write_notify_block_along(
        ctx, gaspi_write_route_prepare(ctx, local_seg, rank, remote_seg), local_off, remote_off, size, id, value);
}

// ---------------------------------------------------------------------------
// Writing without a notification (GASPI's gaspi_write).
// ---------------------------------------------------------------------------
//
// A write_notify fences before its notification: every call waits until
// its stores have reached the target. A kernel that moves a large buffer
// in pieces (each block its part of each of several writes) pays that
// wait per piece; gaspi_write copies without a fence or notification, and
// one gaspi_notify after the last piece publishes them all. With the grid
// sharing each write of a window of eight 1 MiB writes between two H100s,
// a block's write_notify per piece reached 0.90 of NVSHMEM's
// putmem_nbi_block + quiet, these writes and one gaspi_notify_via per
// block 0.96 - 0.98 (gaspi-bench gpu-bw --device-driven, decision 0059).
//
// When the data is at the target: once a gaspi_notify (gaspi_notify_via,
// or a write_notify) issued after the write has been seen there -- by the
// same thread for gaspi_write_thread, and for the warp's / block's forms
// by one thread after __syncwarp() / __syncthreads(), which orders the
// other threads' stores before its fence (cumulativity, as in the block's
// write_notify) -- or once the kernel has ended. Through the ring (a target not
// directly reachable) the request is served in ring order before any
// request posted after it; the source must then stay unchanged until
// gaspi_ring_quiet.

// The checked route of a write along `w` without a notification: the
// checks of gaspi_route_write but the id and value. Not shared with it:
// that one's order of checks is part of the tuned write_notify paths
// (written in terms of this one, the sm_90 code of every ping-pong kernel
// changed).
__device__ inline int gaspi_route_write_data(const gaspi_write_route& w, gaspi_u64 local_off, gaspi_u64 remote_off,
                                             gaspi_u64 size, gaspi_route* r) {
    const gaspi_segment_desc& l = w.local;
    const gaspi_segment_desc& d = w.remote;
    if (!w.valid) return GASPI_DEV_ERR_ARG;
    if (l.notification_count == 0 || local_off > l.size || size > l.size - local_off || (size != 0 && l.data == 0)) {
        return GASPI_DEV_ERR_ARG;
    }
    if (d.notification_count == 0 || remote_off > d.size || size > d.size - remote_off) return GASPI_DEV_ERR_ARG;
    r->src = reinterpret_cast<const unsigned char*>(l.data) + local_off;
    r->direct = d.notifications != 0 && (size == 0 || d.data != 0);
    r->dst = r->direct ? reinterpret_cast<unsigned char*>(d.data) + remote_off : nullptr;
    r->word = nullptr;
    return GASPI_DEV_SUCCESS;
}

// The ring request of a write along `w` (one thread, after a fence that
// orders the source's writes before it).
__device__ inline int gaspi_write_post(const gaspi_device_ctx& ctx, const gaspi_write_route& w, gaspi_u64 local_off,
                                       gaspi_u64 remote_off, gaspi_u64 size) {
    gaspi_fence_acq_rel();
    return gaspi_ring_post(ctx, GASPI_RING_OP_WRITE, w.rank, w.local_seg, local_off, w.remote_seg, remote_off, size,
                           0u, 0u);
}

// gaspi_notify along a prepared route (gaspi_write_route_prepare): the
// remote segment's descriptor is already in registers, where gaspi_notify
// reads it from the table in memory, two dependent loads after the writes
// it publishes (about 3% of a window of eight 1 MiB writes between two
// H100s, gpu-bw --device-driven). One thread; refuses a route that
// refuses writes, an id beyond the segment's notifications and value 0.
__device__ inline int gaspi_notify_via(const gaspi_device_ctx& ctx, const gaspi_write_route& w, gaspi_u32 id,
                                       gaspi_u32 value) {
    const gaspi_segment_desc& d = w.remote;
    if (value == 0u || !w.valid || id >= d.notification_count) return GASPI_DEV_ERR_ARG;
    if (d.notifications != 0) {
        gaspi_fence_acq_rel();
        gaspi_store_after_fence_u32(reinterpret_cast<gaspi_u32*>(d.notifications) + id, value);
        return GASPI_DEV_SUCCESS;
    }
    return gaspi_ring_post(ctx, GASPI_RING_OP_NOTIFY, w.rank, 0u, 0ull, w.remote_seg, 0ull, 0ull, id, value);
}

// gaspi_write by one thread along a prepared route.
__device__ inline int gaspi_write_thread_via(const gaspi_device_ctx& ctx, const gaspi_write_route& w,
                                             gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size) {
    gaspi_route r;
    const int rc = gaspi_route_write_data(w, local_off, remote_off, size, &r);
    if (rc != GASPI_DEV_SUCCESS) return rc;
    if (r.direct) {
        gaspi_copy_alone(r.dst, r.src, size);
        return GASPI_DEV_SUCCESS;
    }
    if (gaspi_ring_inline(ctx, w, size, GASPI_RING_INLINE_THREAD_MAX)) {
        return gaspi_ring_post_inline_thread(ctx, GASPI_RING_OP_WRITE, w, r.src, local_off, remote_off, size, 0u, 0u);
    }
    return gaspi_write_post(ctx, w, local_off, remote_off, size);
}

// gaspi_write by one thread.
__device__ inline int gaspi_write_thread(const gaspi_device_ctx& ctx, gaspi_u32 local_seg, gaspi_u64 local_off,
                                         gaspi_u32 rank, gaspi_u32 remote_seg, gaspi_u64 remote_off, gaspi_u64 size) {
    return gaspi_write_thread_via(ctx, gaspi_write_route_prepare(ctx, local_seg, rank, remote_seg), local_off,
                                  remote_off, size);
}

// gaspi_write by a whole warp along a prepared route (all 32 lanes, same
// arguments; the source as for gaspi_write_notify_warp_via).
__device__ inline int gaspi_write_warp_via(const gaspi_device_ctx& ctx, const gaspi_write_route& w,
                                           gaspi_u64 local_off, gaspi_u64 remote_off, gaspi_u64 size) {
    const gaspi_u32 lane = gaspi_lane_id();
    gaspi_route r;
    int rc = gaspi_route_write_data(w, local_off, remote_off, size, &r);
    if (rc != GASPI_DEV_SUCCESS) return rc;
    if (r.direct) {
        gaspi_copy(r.dst, r.src, size, lane, 32u);
        return GASPI_DEV_SUCCESS;
    }
    if (gaspi_ring_inline(ctx, w, size, ~0ull)) {
        return gaspi_ring_post_inline_warp(ctx, GASPI_RING_OP_WRITE, w, r.src, local_off, remote_off, size, 0u, 0u);
    }
    // The progress engine reads the source: every lane's writes to it
    // come before lane 0's fence and request.
    __syncwarp();
    if (lane == 0u) rc = gaspi_write_post(ctx, w, local_off, remote_off, size);
    return __shfl_sync(0xffffffffu, rc, 0);
}

// gaspi_write by a whole warp (all 32 lanes, same arguments).
__device__ inline int gaspi_write_warp(const gaspi_device_ctx& ctx, gaspi_u32 local_seg, gaspi_u64 local_off,
                                       gaspi_u32 rank, gaspi_u32 remote_seg, gaspi_u64 remote_off, gaspi_u64 size) {
    return gaspi_write_warp_via(ctx, gaspi_write_route_prepare(ctx, local_seg, rank, remote_seg), local_off,
                                remote_off, size);
}

// gaspi_write by a whole block along a prepared route (all threads, same
// arguments; the source as for gaspi_write_notify_via). The direct path
// has no barrier: a thread returns once its stores are issued.
__device__ inline int gaspi_write_via(const gaspi_device_ctx& ctx, const gaspi_write_route& w, gaspi_u64 local_off,
                                      gaspi_u64 remote_off, gaspi_u64 size) {
    __shared__ int gaspi_write_result;
    gaspi_route r;
    const int rc = gaspi_route_write_data(w, local_off, remote_off, size, &r);
    if (rc != GASPI_DEV_SUCCESS) return rc;
    const gaspi_u32 t = gaspi_block_thread();
    if (r.direct) {
        gaspi_copy(r.dst, r.src, size, t, gaspi_block_threads());
        return GASPI_DEV_SUCCESS;
    }
    if (gaspi_ring_inline(ctx, w, size, ~0ull)) {
        return gaspi_ring_post_inline_block(ctx, GASPI_RING_OP_WRITE, w, r.src, local_off, remote_off, size, 0u, 0u);
    }
    __syncthreads();
    if (t == 0u) gaspi_write_result = gaspi_write_post(ctx, w, local_off, remote_off, size);
    __syncthreads();
    const int result = gaspi_write_result;
    __syncthreads(); // the shared slot may be reused by the next call
    return result;
}

// gaspi_write by a whole block (all threads, same arguments).
__device__ inline int gaspi_write(const gaspi_device_ctx& ctx, gaspi_u32 local_seg, gaspi_u64 local_off,
                                  gaspi_u32 rank, gaspi_u32 remote_seg, gaspi_u64 remote_off, gaspi_u64 size) {
    return gaspi_write_via(ctx, gaspi_write_route_prepare(ctx, local_seg, rank, remote_seg), local_off, remote_off,
                           size);
}

#endif // GASPI_DEVICE_CUH
