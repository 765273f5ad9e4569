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
