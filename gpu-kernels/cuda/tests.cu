// tests.cu -- kernels of the GPU integration tests (tests/bin/gpu_tests.rs).
//
// Each kernel reports through `status` (device memory or host-mapped,
// zeroed by the caller): status[0] = 0 while all is well, else a failure
// code; status[1..] = details (round, index, value seen).
#include "gaspi_device.cuh"

// The payload word i of round r, as both sides compute it.
__device__ __forceinline__ unsigned int test_pattern(unsigned int r, unsigned int i) {
    return r * 2654435761u ^ (i * 40503u + 17u);
}

__device__ inline void test_fail(unsigned int* status, unsigned int code, unsigned int a, unsigned int b, unsigned int c) {
    if (atomicCAS(status, 0u, code) == 0u) {
        status[1] = a;
        status[2] = b;
        status[3] = c;
        __threadfence_system();
    }
}

// Ping-pong with payload, one warp (also exercises the block write_notify,
// gaspi_notify_wait_above and its relaxed form, gaspi_notify_waitsome_value
// and gaspi_notify_clear).
// Round r (1..=rounds): wait for
// notification 0 of `seg` (value r), check `words` words at offset 0
// (test_pattern(r, i)), write word+1 into offset `out_off`, and send those
// words with the device-side write_notify to (peer, peer_seg) offset `out_off`,
// notification 0, value r.
extern "C" __global__ void test_echo(const __grid_constant__ gaspi_device_ctx ctx, unsigned int seg, unsigned int peer, unsigned int peer_seg,
                                     unsigned int words, unsigned int rounds, unsigned int out_off, unsigned int* status) {
    if (threadIdx.x >= 32) return;
    const unsigned int lane = threadIdx.x;
    const unsigned int* in = reinterpret_cast<const unsigned int*>(gaspi_segment_ptr(ctx, seg, 0));
    unsigned int* out = reinterpret_cast<unsigned int*>(gaspi_segment_ptr(ctx, seg, out_off));
    if (in == nullptr || out == nullptr) {
        if (lane == 0) test_fail(status, 1, 0, 0, 0);
        return;
    }
    for (unsigned int r = 1; r <= rounds; ++r) {
        // Odd rounds take the value from the scan and clear with a posted
        // store (the CPU sends round r+1 only after our answer, and the
        // answer's fence orders the clear before it); even rounds read and
        // clear with the atomic gaspi_notify_reset.
        // Every third round waits with gaspi_notify_wait_above instead (the
        // CPU counts up: round r sends value r), every sixth with
        // gaspi_notify_wait_above_relaxed + gaspi_fence.
        unsigned int seen = 0;
        int id;
        if (r % 6 == 0) {
            // The relaxed wait, then the fence that makes its hit an acquire.
            const int rc = gaspi_notify_wait_above_relaxed(ctx, seg, 0, r - 1u, GASPI_BLOCK, &seen);
            gaspi_fence();
            id = rc == GASPI_DEV_SUCCESS ? 0 : 100 - rc;
        } else if (r % 3 == 0) {
            const int rc = gaspi_notify_wait_above(ctx, seg, 0, r - 1u, GASPI_BLOCK, &seen);
            id = rc == GASPI_DEV_SUCCESS ? 0 : 100 - rc;
        } else {
            id = gaspi_notify_waitsome_value(ctx, seg, 0, 1, GASPI_BLOCK, &seen);
        }
        if (id != 0) {
            if (lane == 0) test_fail(status, 2, r, (unsigned int)id, 0);
            return;
        }
        unsigned int v = seen;
        if (r % 2 == 1) {
            if (lane == 0) gaspi_notify_clear(ctx, seg, 0);
        } else {
            if (lane == 0) v = gaspi_notify_reset(ctx, seg, 0);
            v = __shfl_sync(0xffffffffu, v, 0);
            if (v != seen) {
                if (lane == 0) test_fail(status, 6, r, v, seen);
                return;
            }
        }
        if (v != r) {
            if (lane == 0) test_fail(status, 3, r, v, 0);
            return;
        }
        bool bad = false;
        for (unsigned int i = lane; i < words; i += 32) {
            const unsigned int x = in[i];
            if (x != test_pattern(r, i) && !bad) {
                test_fail(status, 4, r, i, x);
                bad = true;
            }
            out[i] = x + 1u;
        }
        if (__any_sync(0xffffffffu, bad)) return;
        const int rc = gaspi_write_notify_warp(ctx, seg, out_off, peer, peer_seg, out_off, (gaspi_u64)words * 4u, 0, r);
        if (rc != GASPI_DEV_SUCCESS) {
            if (lane == 0) test_fail(status, 5, r, (unsigned int)(-rc), 0);
            return;
        }
    }
}

// Ordering, one block: round r, wait for notification 0 (value r), then
// every thread checks that all `words` words of the segment hold r (the
// data must be complete when the flag is seen); answer with a notification
// of value r to (peer, peer_seg, 0) so the sender goes on.
extern "C" __global__ void test_ordering(const __grid_constant__ gaspi_device_ctx ctx, unsigned int seg, unsigned int peer, unsigned int peer_seg,
                                         unsigned int words, unsigned int rounds, unsigned int* status) {
    __shared__ unsigned int value;
    const unsigned int* data = reinterpret_cast<const unsigned int*>(gaspi_segment_ptr(ctx, seg, 0));
    for (unsigned int r = 1; r <= rounds; ++r) {
        const int id = gaspi_notify_waitsome_block(ctx, seg, 0, 1);
        if (threadIdx.x == 0) value = id == 0 ? gaspi_notify_reset(ctx, seg, 0) : 0u;
        __syncthreads();
        const unsigned int v = value;
        __syncthreads();
        if (v != r) {
            if (threadIdx.x == 0) test_fail(status, 2, r, v, 0);
            return;
        }
        for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) {
            const unsigned int x = data[i];
            if (x != r) test_fail(status, 6, r, i, x);
        }
        __syncthreads();
        if (threadIdx.x == 0) gaspi_notify(ctx, peer, peer_seg, 0, r);
        __syncthreads();
    }
}

// The ring under pressure: every thread t of the grid writes, `per_thread`
// times, its 8-byte word (offset t*8 of `seg`, filled here with t+1) to
// (peer, peer_seg) offset (t*per_thread + j)*8, with notification t set to
// j+1 (odd j: gaspi_write_thread, then gaspi_notify). Requests go through the ring (the context forces it); thread 0 of
// each block waits for local completion at the end.
extern "C" __global__ void test_ring_flood(const __grid_constant__ gaspi_device_ctx ctx, unsigned int seg, unsigned int peer, unsigned int peer_seg,
                                           unsigned int per_thread, unsigned int* status) {
    const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long* mine = reinterpret_cast<unsigned long long*>(gaspi_segment_ptr(ctx, seg, (gaspi_u64)t * 8u));
    if (mine == nullptr) {
        test_fail(status, 1, t, 0, 0);
        return;
    }
    *mine = (unsigned long long)t + 1ull;
    for (unsigned int j = 0; j < per_thread; ++j) {
        // Odd requests as a write without notification, then a notify
        // (two requests, served in ring order).
        const gaspi_u64 dst = ((gaspi_u64)t * per_thread + j) * 8u;
        int rc = j % 2 == 1 ? gaspi_write_thread(ctx, seg, (gaspi_u64)t * 8u, peer, peer_seg, dst, 8u)
                            : gaspi_write_notify_thread(ctx, seg, (gaspi_u64)t * 8u, peer, peer_seg, dst, 8u, t, j + 1u);
        if (j % 2 == 1 && rc == GASPI_DEV_SUCCESS) rc = gaspi_notify(ctx, peer, peer_seg, t, j + 1u);
        if (rc != GASPI_DEV_SUCCESS) {
            test_fail(status, 5, t, j, (unsigned int)(-rc));
            return;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) gaspi_ring_quiet(ctx);
}

// Kernel-to-kernel ping-pong with payload between two ranks' GPU segments
// (one warp per side). Incoming words at offset 0, outgoing at `out_off`.
// Round r sends `nw` words: `words`, 64, about half of `words`, or 1 - 20
// words from one thread, so that small payloads, the early loads and their
// tails, and the batched path of gaspi_copy (and its tail) are all checked.
// Round r: the initiator fills its outgoing words with test_pattern(r, i)
// and sends them with write_notify (notification 0, value r); the responder
// waits for it, checks every word, answers with word + 1 (notification 1,
// value r); the initiator checks the answer.
extern "C" __global__ void test_gpu_pingpong(const __grid_constant__ gaspi_device_ctx ctx, unsigned int seg, unsigned int peer,
                                             unsigned int words, unsigned int rounds, unsigned int out_off,
                                             unsigned int initiator, unsigned int* status) {
    if (threadIdx.x >= 32) return;
    const unsigned int lane = threadIdx.x;
    const unsigned int* in = reinterpret_cast<const unsigned int*>(gaspi_segment_ptr(ctx, seg, 0));
    unsigned int* out = reinterpret_cast<unsigned int*>(gaspi_segment_ptr(ctx, seg, out_off));
    if (in == nullptr || out == nullptr) {
        if (lane == 0) test_fail(status, 1, 0, 0, 0);
        return;
    }
    const unsigned int wait_id = initiator ? 1u : 0u;
    // The responder answers along a route prepared once (the *_via calls);
    // one prepared for a segment or rank that does not exist refuses
    // every call.
    const gaspi_write_route route = gaspi_write_route_prepare(ctx, seg, peer, seg);
    const gaspi_write_route no_seg = gaspi_write_route_prepare(ctx, seg, peer, ctx.nsegments);
    const gaspi_write_route no_rank = gaspi_write_route_prepare(ctx, seg, ctx.nranks, seg);
    if (gaspi_write_notify_warp_via(ctx, no_seg, out_off, 0, 4, 0, 1) != GASPI_DEV_ERR_ARG ||
        gaspi_write_notify_warp_via(ctx, no_rank, out_off, 0, 4, 0, 1) != GASPI_DEV_ERR_ARG ||
        gaspi_write_notify_warp_via(ctx, route, out_off, 0, 4, 0, 0) != GASPI_DEV_ERR_ARG) {
        if (lane == 0) test_fail(status, 7, 0, 0, 0);
        return;
    }
    // The block calls (plain and along a route) refuse the same and return
    // in every thread; launched with one warp, the block is this warp.
    if (blockDim.x == 32u &&
        (gaspi_write_notify(ctx, seg, out_off, peer, ctx.nsegments, 0, 4, 0, 1) != GASPI_DEV_ERR_ARG ||
         gaspi_write_notify(ctx, seg, out_off, ctx.nranks, seg, 0, 4, 0, 1) != GASPI_DEV_ERR_ARG ||
         gaspi_write_notify(ctx, seg, out_off, peer, seg, 0, 4, 0, 0) != GASPI_DEV_ERR_ARG ||
         gaspi_write_notify_via(ctx, no_seg, out_off, 0, 4, 0, 1) != GASPI_DEV_ERR_ARG ||
         gaspi_write_notify_via(ctx, no_rank, out_off, 0, 4, 0, 1) != GASPI_DEV_ERR_ARG ||
         gaspi_write_notify_via(ctx, route, out_off, 0, 4, 0, 0) != GASPI_DEV_ERR_ARG)) {
        if (lane == 0) test_fail(status, 8, 0, 0, 0);
        return;
    }
    // The writes without a notification and the notify along a route
    // refuse the same (the block's forms, again, only where the block is
    // this warp).
    int refused = 0;
    if (lane == 0) {
        refused = gaspi_write_thread(ctx, seg, out_off, peer, ctx.nsegments, 0, 4) == GASPI_DEV_ERR_ARG &&
                  gaspi_write_thread_via(ctx, no_rank, out_off, 0, 4) == GASPI_DEV_ERR_ARG &&
                  gaspi_write_thread_via(ctx, route, out_off, 0, ~0ull) == GASPI_DEV_ERR_ARG;
    }
    if (lane == 0) {
        refused = refused && gaspi_notify_via(ctx, no_seg, 0, 1) == GASPI_DEV_ERR_ARG &&
                  gaspi_notify_via(ctx, no_rank, 0, 1) == GASPI_DEV_ERR_ARG &&
                  gaspi_notify_via(ctx, route, 0, 0) == GASPI_DEV_ERR_ARG &&
                  gaspi_notify_via(ctx, route, 0xffffffffu, 1) == GASPI_DEV_ERR_ARG;
    }
    refused = __shfl_sync(0xffffffffu, refused, 0) && gaspi_write_warp(ctx, seg, out_off, ctx.nranks, seg, 0, 4) == GASPI_DEV_ERR_ARG &&
              gaspi_write_warp_via(ctx, no_seg, out_off, 0, 4) == GASPI_DEV_ERR_ARG;
    if (blockDim.x == 32u) {
        refused = refused && gaspi_write(ctx, seg, out_off, peer, ctx.nsegments, 0, 4) == GASPI_DEV_ERR_ARG &&
                  gaspi_write_via(ctx, no_rank, out_off, 0, 4) == GASPI_DEV_ERR_ARG &&
                  gaspi_write_via(ctx, route, ~0ull, 0, 4) == GASPI_DEV_ERR_ARG;
    }
    if (!refused) {
        if (lane == 0) test_fail(status, 9, 0, 0, 0);
        return;
    }
    for (unsigned int r = 1; r <= rounds; ++r) {
        // Rounds 3 mod 8: 0 - 20 words by one thread (the one-thread call
        // loads messages below 80 bytes whole before its checks; 0 words:
        // the notification alone, which a rank on another host once never
        // got when it came through the ring's staged path).
        const unsigned int small = (r / 8u) % 21u;
        const unsigned int nw = r % 8 == 3 ? (words < small ? words : small)
                                : r % 3 == 0 ? words
                                : (r % 3 == 1 ? (words < 64 ? words : 64) : words / 2 + 1);
        if (initiator) {
            for (unsigned int i = lane; i < nw; i += 32) out[i] = test_pattern(r, i);
            __syncwarp();
            // Even rounds through the block call (a block of this one warp);
            // rounds 1 mod 4 as a write without notification, then
            // gaspi_notify: by the warp, and in rounds 5 mod 8 by lane 0
            // alone; rounds 3 mod 8 by lane 0's write_notify.
            int rc;
            if (r % 8 == 3) {
                rc = 0;
                if (lane == 0) rc = gaspi_write_notify_thread(ctx, seg, out_off, peer, seg, 0, (gaspi_u64)nw * 4u, 0, r);
                rc = __shfl_sync(0xffffffffu, rc, 0);
            } else if (r % 8 == 5) {
                rc = 0;
                if (lane == 0) rc = gaspi_write_thread(ctx, seg, out_off, peer, seg, 0, (gaspi_u64)nw * 4u);
                if (lane == 0 && rc == GASPI_DEV_SUCCESS) rc = gaspi_notify(ctx, peer, seg, 0, r);
                rc = __shfl_sync(0xffffffffu, rc, 0);
            } else if (r % 4 == 1) {
                rc = gaspi_write_warp(ctx, seg, out_off, peer, seg, 0, (gaspi_u64)nw * 4u);
                __syncwarp();
                if (lane == 0 && rc == GASPI_DEV_SUCCESS) rc = gaspi_notify(ctx, peer, seg, 0, r);
                rc = __shfl_sync(0xffffffffu, rc, 0);
            } else {
                rc = r % 2 == 0 && blockDim.x == 32u
                         ? gaspi_write_notify(ctx, seg, out_off, peer, seg, 0, (gaspi_u64)nw * 4u, 0, r)
                         : gaspi_write_notify_warp(ctx, seg, out_off, peer, seg, 0, (gaspi_u64)nw * 4u, 0, r);
            }
            if (rc != GASPI_DEV_SUCCESS) {
                if (lane == 0) test_fail(status, 5, r, (unsigned int)(-rc), 0);
                return;
            }
        }
        // Bounded (10 s): a peer that failed must not hang the test.
        const int id = gaspi_notify_waitsome_timeout(ctx, seg, wait_id, 1, 10000000000ull);
        if (id != (int)wait_id) {
            if (lane == 0) test_fail(status, 2, r, (unsigned int)id, 0);
            return;
        }
        unsigned int v = 0;
        if (lane == 0) v = gaspi_notify_reset(ctx, seg, wait_id);
        v = __shfl_sync(0xffffffffu, v, 0);
        if (v != r) {
            if (lane == 0) test_fail(status, 3, r, v, 0);
            return;
        }
        const unsigned int add = initiator ? 1u : 0u;
        bool bad = false;
        for (unsigned int i = lane; i < nw; i += 32) {
            const unsigned int x = in[i];
            if (x != test_pattern(r, i) + add && !bad) {
                test_fail(status, 4, r, i, x);
                bad = true;
            }
            if (!initiator) out[i] = x + 1u;
        }
        if (__any_sync(0xffffffffu, bad)) return;
        if (!initiator) {
            __syncwarp();
            // Even rounds through the block's call along the route; rounds
            // 1 mod 4 as the block's write along it, then gaspi_notify_via;
            // rounds 3 mod 8 by lane 0's write_notify along it.
            int rc;
            if (r % 8 == 3) {
                rc = 0;
                if (lane == 0) rc = gaspi_write_notify_thread_via(ctx, route, out_off, 0, (gaspi_u64)nw * 4u, 1, r);
                rc = __shfl_sync(0xffffffffu, rc, 0);
            } else if (r % 4 == 1 && blockDim.x == 32u) {
                rc = gaspi_write_via(ctx, route, out_off, 0, (gaspi_u64)nw * 4u);
                __syncthreads();
                if (lane == 0 && rc == GASPI_DEV_SUCCESS) rc = gaspi_notify_via(ctx, route, 1, r);
                rc = __shfl_sync(0xffffffffu, rc, 0);
            } else {
                rc = r % 2 == 0 && blockDim.x == 32u
                         ? gaspi_write_notify_via(ctx, route, out_off, 0, (gaspi_u64)nw * 4u, 1, r)
                         : gaspi_write_notify_warp_via(ctx, route, out_off, 0, (gaspi_u64)nw * 4u, 1, r);
            }
            if (rc != GASPI_DEV_SUCCESS) {
                if (lane == 0) test_fail(status, 5, r, (unsigned int)(-rc), 0);
                return;
            }
        }
    }
}
