// ring_stress.cu -- drives the request ring from many GPU threads at once,
// for the device check of the producer protocol (full ring, wraparound).
//
// Warp 0 of block 0 first posts one write_notify request (warp-collective)
// to `rank`; then every thread posts `per_thread` notify requests to
// segment `seg` of `rank` with id = global thread id mod 64 and
// value = global thread id * per_thread + i + 1; then every thread waits
// for local completion (gaspi_ring_quiet). `rank` must be reachable only
// through the ring.
#include "gaspi_device.cuh"

extern "C" __global__ void ring_stress(const __grid_constant__ gaspi_device_ctx ctx, unsigned int rank, unsigned int local_seg,
                                       unsigned int seg, unsigned int per_thread, int* status) {
    const unsigned int gtid = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.x == 0 && threadIdx.x < 32) {
        const int rc = gaspi_write_notify_warp(ctx, local_seg, 128, rank, seg, 256, 512, 5, 0xabcdu);
        if (threadIdx.x == 0 && rc != GASPI_DEV_SUCCESS) atomicExch(status, rc);
    }
    __syncthreads();
    for (unsigned int i = 0; i < per_thread; ++i) {
        const int rc = gaspi_notify(ctx, rank, seg, gtid % 64u, gtid * per_thread + i + 1u);
        if (rc != GASPI_DEV_SUCCESS) atomicExch(status, rc);
    }
    gaspi_ring_quiet(ctx);
}

// Reports the field offsets of the structs shared with Rust (one thread).
extern "C" __global__ void gaspi_layout_probe(unsigned long long* out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) gaspi_layout_offsets(out);
}
