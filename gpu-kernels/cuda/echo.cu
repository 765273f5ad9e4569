// echo.cu -- the kernels of the notification round-trip benchmark.
//
// gaspi_echo is persistent: one warp waits on notification 0 of segment
// `in_seg` (host-mapped, written by the CPU), clears it, and answers by
// setting notification 0 of segment `out_seg` of rank `ctx.rank` (also
// host-mapped, polled by the CPU) to the value it received. It repeats until
// it receives GASPI_STOP_VALUE or has answered `max_rounds` times.
//
// gaspi_echo_once is the reference "ordinary way": the CPU copies the flag
// into device memory, launches this kernel, and synchronises, once per round.
#include "gaspi_device.cuh"

extern "C" __global__ void gaspi_echo(const __grid_constant__ gaspi_device_ctx ctx, unsigned int in_seg, unsigned int out_seg,
                                      unsigned int max_rounds) {
    if (threadIdx.x >= 32) return;
    for (unsigned int round = 0; round < max_rounds; ++round) {
        const int id = gaspi_notify_waitsome(ctx, in_seg, 0, 1);
        if (id < 0) return;
        unsigned int value = 0;
        if (threadIdx.x == 0) value = gaspi_notify_reset(ctx, in_seg, (unsigned int)id);
        value = __shfl_sync(0xffffffffu, value, 0);
        if (value == GASPI_STOP_VALUE || value == 0u) return;
        if (threadIdx.x == 0) gaspi_notify(ctx, ctx.rank, out_seg, 0, value);
        __syncwarp();
    }
}

extern "C" __global__ void gaspi_echo_once(const unsigned int* flag, unsigned int* answer) {
    answer[0] = flag[0];
}

// The physical floor of the round trip, outside the runtime: one thread
// polls a flag in pinned host-mapped memory with volatile loads and echoes
// each round's value into another such flag, no fences, no API.
extern "C" __global__ void gaspi_echo_raw(volatile unsigned int* flag, volatile unsigned int* answer,
                                          unsigned int rounds) {
    if (threadIdx.x != 0) return;
    for (unsigned int round = 1; round <= rounds; ++round) {
        while (*flag != round) {
        }
        *answer = round;
    }
}

// The raw echo with one polling thread per warp of the block: their reads
// across PCIe are in flight at different times, so a new value is seen
// sooner than by one thread waiting for each read to return. The first
// warp to see a round answers it (shared-memory atomicMax decides).
// Measured on an H100: 2 warps 1.8-1.97 us against 2.2-2.5 for one thread;
// 4 warps 3.8-4.2 (the reads queue behind each other). Two reads in flight
// from one thread, staggered by 0 to 2400 cycles, gained nothing (removed).
extern "C" __global__ void gaspi_echo_raw_multi(volatile unsigned int* flag, volatile unsigned int* answer,
                                                unsigned int rounds) {
    __shared__ unsigned int claimed;
    if (threadIdx.x == 0) claimed = 0;
    __syncthreads();
    if ((threadIdx.x & 31u) != 0) return;
    unsigned int last = 0;
    while (last < rounds) {
        const unsigned int v = *flag;
        if (v > last) {
            last = v;
            if (atomicMax(&claimed, v) < v) *answer = v;
        }
    }
}

// The notify-rtt benchmark's kernel (gaspi-bench notify-rtt): one warp
// waits on notification 0 of its local segment `in_seg`, clears it, and
// answers with notification 0 of segment `out_seg` on rank `peer`.
// `variant` picks how, to measure what each memory-order choice costs on
// words that live across PCIe:
//   0: the device API as is (gaspi_notify_waitsome, gaspi_notify_reset,
//      gaspi_notify);
//   bit 0: poll with relaxed (volatile) loads, one acquire fence after a hit;
//   bit 1: clear the word with a plain store instead of an atomic exchange;
//   bit 2: answer with __threadfence_system + a relaxed store (no st.release);
//   bit 3: answer first and clear after (rounds alternate between ids 0 and
//          32, as the CPU side does then), so the clear's round trip across
//          PCIe is off the critical path: the device-side counterpart of the
//          CPU ping-pong's deferred reset. The device API calls are used as is.
//   bit 4: take the value from the scan (gaspi_notify_waitsome_value), clear
//          with a posted store (gaspi_notify_clear), answer with gaspi_notify:
//          no read across PCIe between seeing the request and answering.
//   bit 5: with bit 4, answer with a relaxed store and no fence (not a valid
//          gaspi_notify after data writes; measures what the fence costs).
//   bits 3+4: value from the scan, answer at once with gaspi_notify_relaxed,
//          then gaspi_notify_clear and gaspi_fence off the critical path
//          (ids alternate).
//   bit 7: the CPU counts up: gaspi_notify_wait_above (no clear) and
//          gaspi_notify_relaxed (no fence); with bit 8 two warps poll and the
//          first to see a round answers (launch with 64 threads); with bit 9
//          as well the CPU sends each round to ids 0 and 32 and warp w polls
//          id 32 * w: two pollers on two lines, so one's read across PCIe
//          never waits behind (or merges with) the other's.
//   bit 10: with bit 7, gaspi_notify_wait_above_relaxed (no acquire: the
//          value is the whole message).
//   bit 6: raw on the runtime's words: one thread polls notification 0 with
//          volatile loads for the round's value (the CPU counts up, so no
//          clear is needed) and answers with a volatile store: the floor
//          kernel, but on the segments' words and across two processes.
// Issue 19 exploration: the plain request/answer pattern (wait, reset,
// answer on notification 0) with each of its three steps done one of
// several ways, to find what each costs across PCIe. `mode` (variant >> 12):
//   bits 0-1 poll:   0 gaspi_notify_waitsome (acquire loads);
//                    1 relaxed loads, fence.acq_rel.sys after the hit;
//                    2 relaxed loads, one ld.acquire.sys of the hit word;
//                    3 relaxed loads only (no acquire: cost reference).
//   bits 2-3 reset:  0 gaspi_notify_reset (atomic exchange, value used);
//                    1 atomic exchange issued, value taken from the scan
//                      (the exchange's result is only checked after the
//                      answer: a wrong round shows as a wrong answer later);
//                    2 plain store of 0, value from the scan;
//                    3 atomicCAS(seen -> 0), value used.
//   bits 4-5 answer: 0 gaspi_notify (fence.sc.sys + relaxed store);
//                    1 fence.acq_rel.sys + relaxed store;
//                    2 st.release.sys;
//                    3 relaxed store, no fence (cost reference).
//   bit 6: with an 8-byte payload (the round, as u64) stored at byte 64 of
//          the answer's segment before the flag (gaspi_write_notify's job);
//          with answer 0 it is gaspi_write_notify_thread itself, copying
//          from byte 64 of the local segment.
__device__ __forceinline__ gaspi_u32 gaspi_probe_load_relaxed(const gaspi_u32* p) {
    gaspi_u32 v;
    asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void gaspi_probe_fence_acq_rel() {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}
__device__ __forceinline__ void gaspi_probe_store_relaxed(gaspi_u32* p, gaspi_u32 v) {
    asm volatile("st.relaxed.sys.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

__device__ inline void gaspi_echo_modes(const gaspi_device_ctx& ctx, unsigned int in_seg, unsigned int peer,
                                        unsigned int out_seg, unsigned int max_rounds, unsigned int mode) {
    const gaspi_segment_desc* in = gaspi_local_segment(ctx, in_seg);
    const gaspi_segment_desc* out = gaspi_remote_segment(ctx, peer, out_seg);
    gaspi_u32* word = reinterpret_cast<gaspi_u32*>(in->notifications);
    gaspi_u32* answer = reinterpret_cast<gaspi_u32*>(out->notifications);
    const unsigned int poll = mode & 3u, reset = (mode >> 2) & 3u, ans = (mode >> 4) & 3u;
    // Without a direct route to the data the answer goes without payload
    // (the CPU side counts the payloads that did not arrive).
    const bool payload = (mode & 64u) != 0u && out->data != 0 && in->data != 0;
    for (unsigned int round = 0; round < max_rounds; ++round) {
        gaspi_u32 seen = 0;
        if (poll == 0u) {
            if (gaspi_notify_waitsome_value(ctx, in_seg, 0, 1, GASPI_BLOCK, &seen) < 0) return;
        } else {
            if (threadIdx.x == 0) {
                while ((seen = gaspi_probe_load_relaxed(word)) == 0u) {
                }
                if (poll == 1u) gaspi_probe_fence_acq_rel();
                if (poll == 2u) seen = gaspi_load_acquire_u32(word);
            }
            seen = __shfl_sync(0xffffffffu, seen, 0);
            __syncwarp();
        }
        if (threadIdx.x == 0) {
            gaspi_u32 value = seen;
            gaspi_u32 late = 0;
            if (reset == 0u) value = gaspi_notify_reset(ctx, in_seg, 0);
            else if (reset == 1u) late = atomicExch_system(word, 0u);
            else if (reset == 2u) *reinterpret_cast<volatile gaspi_u32*>(word) = 0u;
            else value = atomicCAS_system(word, seen, 0u);
            if (value == GASPI_STOP_VALUE || value == 0u) return;
            if (payload && ans == 0u) {
                *reinterpret_cast<volatile gaspi_u64*>(in->data + 64) = (gaspi_u64)value;
                gaspi_write_notify_thread(ctx, in_seg, 64, peer, out_seg, 64, 8, 0, value);
            } else {
                if (payload) *reinterpret_cast<volatile gaspi_u64*>(out->data + 64) = (gaspi_u64)value;
                if (ans == 0u) gaspi_notify(ctx, peer, out_seg, 0, value);
                else if (ans == 1u) { gaspi_probe_fence_acq_rel(); gaspi_probe_store_relaxed(answer, value); }
                else if (ans == 2u) gaspi_store_release_u32(answer, value);
                else gaspi_probe_store_relaxed(answer, value);
            }
            if (reset == 1u && late != value) {
                // Another round arrived between the scan and the exchange:
                // answer 0 so the CPU reports the mismatch.
                gaspi_probe_store_relaxed(answer, 1u);
            }
        }
        __syncwarp();
    }
}

extern "C" __global__ void gaspi_echo_peer(const __grid_constant__ gaspi_device_ctx ctx, unsigned int in_seg, unsigned int peer,
                                           unsigned int out_seg, unsigned int max_rounds, unsigned int variant) {
    if (threadIdx.x >= 32 && !(variant & 256u)) return;
    const gaspi_segment_desc* in = gaspi_local_segment(ctx, in_seg);
    const gaspi_segment_desc* out = gaspi_remote_segment(ctx, peer, out_seg);
    if (in == nullptr || out == nullptr || out->notifications == 0) return;
    const bool deferred = (variant & 8u) != 0u;
    if (variant & 2048u) {
        gaspi_echo_modes(ctx, in_seg, peer, out_seg, max_rounds, variant >> 12);
        return;
    }
    if (variant & 64u) {
        if (threadIdx.x != 0) return;
        volatile gaspi_u32* word = reinterpret_cast<volatile gaspi_u32*>(in->notifications);
        volatile gaspi_u32* answer = reinterpret_cast<volatile gaspi_u32*>(out->notifications);
        for (unsigned int round = 1; round <= max_rounds; ++round) {
            while (*word != round) {
            }
            *answer = round;
        }
        return;
    }
    if (variant & 128u) {
        // The CPU counts up (round r sends value r): wait for a value above
        // the last one answered, answer it at once; nothing to clear, so
        // nothing to fence. With bit 8 the block's two warps both poll
        // (lane 0 each) and the first to see a round answers it.
        __shared__ unsigned int claimed;
        if (threadIdx.x == 0) claimed = 0;
        __syncthreads();
        if ((threadIdx.x & 31u) != 0) return;
        if (!(variant & 256u) && threadIdx.x != 0) return;
        const unsigned int id = (variant & 512u) ? 32u * (threadIdx.x >> 5) : 0u;
        unsigned int last = 0;
        while (last < max_rounds) {
            unsigned int value = 0;
            const int rc = (variant & 1024u)
                               ? gaspi_notify_wait_above_relaxed(ctx, in_seg, id, last, GASPI_BLOCK, &value)
                               : gaspi_notify_wait_above(ctx, in_seg, id, last, GASPI_BLOCK, &value);
            if (rc != GASPI_DEV_SUCCESS) return;
            if (value == GASPI_STOP_VALUE) return;
            last = value;
            if (atomicMax(&claimed, value) < value) gaspi_notify_relaxed(ctx, peer, out_seg, 0, value);
        }
        return;
    }
    if (variant & 16u) {
        for (unsigned int round = 0; round < max_rounds; ++round) {
            const unsigned int want = deferred ? 32u * ((round + 1u) & 1u) : 0u;
            unsigned int value = 0;
            const int id = gaspi_notify_waitsome_value(ctx, in_seg, want, 1, GASPI_BLOCK, &value);
            if (id < 0 || value == GASPI_STOP_VALUE) return;
            if (threadIdx.x == 0) {
                volatile gaspi_u32* answer = reinterpret_cast<volatile gaspi_u32*>(out->notifications) + id;
                if (deferred) {
                    // Answer at once, then clear and fence while the CPU
                    // turns around: it sends to this id again only after
                    // our next answer, which the fence orders after the clear.
                    gaspi_notify_relaxed(ctx, peer, out_seg, (unsigned int)id, value);
                    gaspi_notify_clear(ctx, in_seg, (unsigned int)id);
                    gaspi_fence();
                } else {
                    gaspi_notify_clear(ctx, in_seg, (unsigned int)id);
                    if (variant & 32u) {
                        *answer = value;
                    } else {
                        gaspi_notify(ctx, peer, out_seg, (unsigned int)id, value);
                    }
                }
            }
            __syncwarp();
        }
        return;
    }
    for (unsigned int round = 0; round < max_rounds; ++round) {
        // The CPU's round r (from 1) uses id 32 * (r % 2) when deferred.
        const unsigned int id = deferred ? 32u * ((round + 1u) & 1u) : 0u;
        gaspi_u32* word = reinterpret_cast<gaspi_u32*>(in->notifications) + id;
        gaspi_u32* answer = reinterpret_cast<gaspi_u32*>(out->notifications) + id;
        if (variant & 1u) {
            if (threadIdx.x == 0) {
                while (*reinterpret_cast<volatile gaspi_u32*>(word) == 0u) {
                }
                __threadfence_system();
            }
            __syncwarp();
        } else if (gaspi_notify_waitsome(ctx, in_seg, id, 1) < 0) {
            return;
        }
        unsigned int value = 0;
        if (threadIdx.x == 0) {
            if (deferred) {
                // The word was seen set (with an acquire); read it, clear later.
                value = *reinterpret_cast<volatile gaspi_u32*>(word);
            } else if (variant & 2u) {
                value = *reinterpret_cast<volatile gaspi_u32*>(word);
                *reinterpret_cast<volatile gaspi_u32*>(word) = 0u;
            } else {
                value = gaspi_notify_reset(ctx, in_seg, id);
            }
        }
        value = __shfl_sync(0xffffffffu, value, 0);
        if (value == GASPI_STOP_VALUE || value == 0u) return;
        if (threadIdx.x == 0) {
            if (variant & 4u) {
                __threadfence_system();
                *reinterpret_cast<volatile gaspi_u32*>(answer) = value;
            } else {
                gaspi_notify(ctx, peer, out_seg, id, value);
            }
            // The CPU sends to this id again only after our next answer.
            if (deferred) gaspi_notify_reset(ctx, in_seg, id);
        }
        __syncwarp();
    }
}

// GPU-to-GPU ping-pong driven by the kernels (gaspi-bench gpu-pingpong):
// warp 0 of each side waits; one warp copies (the *_warp kernels, launched
// with 32 threads) or the whole block (the *_block kernels, launched with
// up to 512: large messages). The initiator sends `size` bytes from offset
// `send_off` of `seg` to offset 0 of `seg` on `peer` with notification 0,
// the responder answers the same way with notification 1. The initiator
// records each round trip (globaltimer ns) in times[round]. Round r's
// notifications carry r. How the device API is used (`Style`):
//   0 (gaspi_gpu_pingpong_waitsome_*): gaspi_notify_waitsome +
//      gaspi_notify_reset, then the warp's or the block's write_notify;
//   2 (gaspi_gpu_pingpong_count_*): as 0, but waiting with
//      gaspi_notify_wait_above and no reset (NVSHMEM's warp/block-level
//      putmem_signal + signal_wait_until);
//   3 (gaspi_gpu_pingpong_route_*): as 2, sending along a route prepared
//      before the loop (gaspi_write_notify_warp_via / gaspi_write_notify_via);
//   1 (gaspi_gpu_pingpong_thread): one thread does everything:
//      gaspi_notify_wait_above (the values count up, so nothing is
//      cleared) and gaspi_write_notify_thread (NVSHMEM's thread-level
//      putmem_signal + signal_wait_until).
// Each (style, width) is a kernel of its own, as a user's kernel sending
// one way would be: compiled into one kernel, the block's, the warp's and
// the one thread's copies shared one register allocation, whose size (up
// to 128 for 512 threads) limited how far each path could keep its loads
// ahead (issue 26). bench/peers/nvshmem_pingpong.cu is built the same way.
template <unsigned int Style, bool Block>
__device__ __forceinline__ void gaspi_gpu_pingpong_body(const gaspi_device_ctx& ctx, unsigned int seg, unsigned int peer,
                                                        unsigned long long size, unsigned long long send_off,
                                                        unsigned int rounds, unsigned int initiator,
                                                        unsigned long long* times) {
    const gaspi_u32 wait_id = initiator ? 1u : 0u;
    const gaspi_u32 send_id = initiator ? 0u : 1u;
    if (!Block && threadIdx.x >= 32) return;
    const bool waiter = threadIdx.x < 32;
    // Style 3 prepares the route once; the others find it on every call.
    gaspi_write_route route;
    if (Style == 3u) route = gaspi_write_route_prepare(ctx, seg, peer, seg);
    auto send = [&](unsigned int r) {
        if (Style == 3u) {
            if (Block) gaspi_write_notify_via(ctx, route, send_off, 0, size, send_id, r);
            else gaspi_write_notify_warp_via(ctx, route, send_off, 0, size, send_id, r);
        } else if (Block) {
            gaspi_write_notify(ctx, seg, send_off, peer, seg, 0, size, send_id, r);
        } else {
            gaspi_write_notify_warp(ctx, seg, send_off, peer, seg, 0, size, send_id, r);
        }
    };
    for (unsigned int r = 1; r <= rounds; ++r) {
        gaspi_u64 t0 = 0;
        if (initiator) {
            t0 = gaspi_globaltimer_ns();
            send(r);
        }
        if (Style == 2u || Style == 3u) {
            if (threadIdx.x == 0) {
                gaspi_u32 seen = 0;
                gaspi_notify_wait_above(ctx, seg, wait_id, r - 1u, GASPI_BLOCK, &seen);
            }
            if (waiter) __syncwarp();
        } else if (waiter) {
            if (gaspi_notify_waitsome(ctx, seg, wait_id, 1) < 0) return;
            if (threadIdx.x == 0) gaspi_notify_reset(ctx, seg, wait_id);
            __syncwarp();
        }
        if (Block) __syncthreads();
        if (initiator) {
            if (threadIdx.x == 0) times[r - 1] = gaspi_globaltimer_ns() - t0;
        } else {
            send(r);
        }
    }
}

#define GASPI_GPU_PINGPONG_KERNEL(NAME, STYLE, BLOCK, THREADS)                                                        \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                             \
        NAME(const __grid_constant__ gaspi_device_ctx ctx, unsigned int seg, unsigned int peer,                       \
             unsigned long long size, unsigned long long send_off, unsigned int rounds, unsigned int initiator,       \
             unsigned long long* times) {                                                                             \
        gaspi_gpu_pingpong_body<STYLE, BLOCK>(ctx, seg, peer, size, send_off, rounds, initiator, times);             \
    }
GASPI_GPU_PINGPONG_KERNEL(gaspi_gpu_pingpong_waitsome_warp, 0u, false, 32)
GASPI_GPU_PINGPONG_KERNEL(gaspi_gpu_pingpong_waitsome_block, 0u, true, 512)
GASPI_GPU_PINGPONG_KERNEL(gaspi_gpu_pingpong_count_warp, 2u, false, 32)
GASPI_GPU_PINGPONG_KERNEL(gaspi_gpu_pingpong_count_block, 2u, true, 512)
GASPI_GPU_PINGPONG_KERNEL(gaspi_gpu_pingpong_route_warp, 3u, false, 32)
GASPI_GPU_PINGPONG_KERNEL(gaspi_gpu_pingpong_route_block, 3u, true, 512)
#undef GASPI_GPU_PINGPONG_KERNEL

// Style 1: one thread (launched with one).
extern "C" __global__ void __launch_bounds__(32)
    gaspi_gpu_pingpong_thread(const __grid_constant__ gaspi_device_ctx ctx, unsigned int seg, unsigned int peer,
                              unsigned long long size, unsigned long long send_off, unsigned int rounds,
                              unsigned int initiator, unsigned long long* times) {
    const gaspi_u32 wait_id = initiator ? 1u : 0u;
    const gaspi_u32 send_id = initiator ? 0u : 1u;
    if (threadIdx.x != 0) return;
    for (unsigned int r = 1; r <= rounds; ++r) {
        const gaspi_u64 t0 = gaspi_globaltimer_ns();
        gaspi_u32 seen = 0;
        if (initiator && gaspi_write_notify_thread(ctx, seg, send_off, peer, seg, 0, size, send_id, r) != 0) return;
        if (gaspi_notify_wait_above(ctx, seg, wait_id, r - 1u, GASPI_BLOCK, &seen) != 0) return;
        if (initiator) {
            times[r - 1] = gaspi_globaltimer_ns() - t0;
        } else if (gaspi_write_notify_thread(ctx, seg, send_off, peer, seg, 0, size, send_id, r) != 0) {
            return;
        }
    }
}

// gaspi-bench gpu-bw --device-driven: a window of `window` writes of `size`
// bytes from `src_off` of segment `seg` into `dst_off` of rank `peer`'s,
// the grid sharing each write as NVSHMEM's bandwidth program shares its
// puts (bench/peers/nvshmem_bw.cu): block b writes bytes [b * chunk, ...)
// of every write with the block's gaspi_write_via, chunk = size / blocks
// rounded up to 16 B; then its thread 0 sets notification b to `value`
// along the same route (the putmem_nbi_block + quiet of that program).
// The first failed call's code goes to *err.
extern "C" __global__ void __launch_bounds__(512)
    gaspi_gpu_bw_block(const __grid_constant__ gaspi_device_ctx ctx, unsigned int seg, unsigned int peer,
                       unsigned long long size, unsigned long long src_off, unsigned long long dst_off,
                       unsigned int window, unsigned int value, unsigned long long* err) {
    const gaspi_u64 blocks = gridDim.x;
    const gaspi_u64 chunk = ((size + blocks - 1u) / blocks + 15u) / 16u * 16u;
    const gaspi_u64 first = chunk * blockIdx.x;
    const gaspi_u64 len = first >= size ? 0u : (chunk < size - first ? chunk : size - first);
    const gaspi_write_route w = gaspi_write_route_prepare(ctx, seg, peer, seg);
    for (unsigned int i = 0; i < window; ++i) {
        const int rc = gaspi_write_via(ctx, w, src_off + first, dst_off + first, len);
        if (rc != GASPI_DEV_SUCCESS) {
            if (threadIdx.x == 0) atomicCAS(err, 0ull, (unsigned long long)(-rc));
            return;
        }
    }
    // Every thread's stores before thread 0's notification (its fence is
    // cumulative).
    __syncthreads();
    if (threadIdx.x == 0) {
        const int rc = gaspi_notify_via(ctx, w, blockIdx.x, value);
        if (rc != GASPI_DEV_SUCCESS) atomicCAS(err, 0ull, (unsigned long long)(-rc));
    }
}
