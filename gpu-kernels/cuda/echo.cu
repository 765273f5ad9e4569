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

extern "C" __global__ void gaspi_echo(gaspi_device_ctx ctx, unsigned int in_seg, unsigned int out_seg,
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
extern "C" __global__ void gaspi_echo_peer(gaspi_device_ctx ctx, unsigned int in_seg, unsigned int peer,
                                           unsigned int out_seg, unsigned int max_rounds, unsigned int variant) {
    if (threadIdx.x >= 32) return;
    const gaspi_segment_desc* in = gaspi_local_segment(ctx, in_seg);
    const gaspi_segment_desc* out = gaspi_remote_segment(ctx, peer, out_seg);
    if (in == nullptr || out == nullptr || out->notifications == 0) return;
    const bool deferred = (variant & 8u) != 0u;
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
// one warp on each side. The initiator sends `size` bytes from offset
// `send_off` of `seg` to offset 0 of `seg` on `peer` with notification 0,
// the responder answers the same way with notification 1. The initiator
// records each round trip (globaltimer ns) in times[round].
extern "C" __global__ void gaspi_gpu_pingpong(gaspi_device_ctx ctx, unsigned int seg, unsigned int peer,
                                              unsigned long long size, unsigned long long send_off,
                                              unsigned int rounds, unsigned int initiator,
                                              unsigned long long* times) {
    if (threadIdx.x >= 32) return;
    for (unsigned int r = 1; r <= rounds; ++r) {
        if (initiator) {
            const gaspi_u64 t0 = gaspi_globaltimer_ns();
            gaspi_write_notify_warp(ctx, seg, send_off, peer, seg, 0, size, 0, r);
            if (gaspi_notify_waitsome(ctx, seg, 1, 1) < 0) return;
            if (threadIdx.x == 0) gaspi_notify_reset(ctx, seg, 1);
            __syncwarp();
            if (threadIdx.x == 0) times[r - 1] = gaspi_globaltimer_ns() - t0;
        } else {
            if (gaspi_notify_waitsome(ctx, seg, 0, 1) < 0) return;
            if (threadIdx.x == 0) gaspi_notify_reset(ctx, seg, 0);
            __syncwarp();
            gaspi_write_notify_warp(ctx, seg, send_off, peer, seg, 0, size, 1, r);
        }
    }
}
