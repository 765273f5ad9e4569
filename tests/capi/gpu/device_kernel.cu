// The device API driven through the C interface (decision 0025), 2 ranks
// on one host:
// - rank 1 makes segment 0 with gaspi_segment_create_gpu (GASPI_Ext.h) and
//   binds a cudaMalloc'd buffer as segment 1 with gaspi_segment_use; rank 0
//   makes host segments 0 and 1;
// - rank 1 takes the kernel argument with gaspi_device_context and launches
//   a persistent kernel: it waits on notification 0 of segment 0, adds 1 to
//   each byte that came with it into segment 1, and answers with the device
//   API's gaspi_write_notify from segment 1 into rank 0's host segment 0
//   (notification 1, the same value), until it receives GASPI_STOP_VALUE;
// - rank 0 sends ROUNDS messages of N pseudo-random bytes with
//   gaspi_write_notify and checks every answer byte.
// Prints "rank R: device kernel checked"; exits 1 with the reason
// otherwise. Needs a CUDA GPU: run by tests/capi/gpu/run.sh.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "../check.h"
#include "gaspi_device.cuh"

#define N (64u * 1024u)
#define ROUNDS 20u

#define CUDA(call)                                                             \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
              cudaGetErrorString(e_));                                         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static void fill(unsigned char* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (unsigned char)(x >> 24);
  }
}

// status[0]: rounds answered; status[1]: 0, or the device call's error code.
__global__ void answer(const __grid_constant__ gaspi_device_ctx ctx, unsigned int* status) {
  __shared__ int id_s;
  __shared__ unsigned int value_s;
  const unsigned int t = threadIdx.x;
  for (;;) {
    if (t < 32) {
      unsigned int seen = 0;
      // 30 s: a missing message ends the kernel instead of hanging it.
      const int id = gaspi_notify_waitsome_value(ctx, 0, 0, 1, 30000000000ull, &seen);
      if (t == 0) {
        id_s = id;
        value_s = id >= 0 ? gaspi_notify_reset(ctx, 0, (unsigned int)id) : 0u;
      }
    }
    __syncthreads();
    const int id = id_s;
    const unsigned int value = value_s;
    gaspi_fence_acq_rel();  // the data's reads after the first warp's acquire
    __syncthreads();
    if (id < 0 || value == 0u) {
      if (t == 0) status[1] = id < 0 ? (unsigned int)id : 0xdeadu;
      return;
    }
    if (value == GASPI_STOP_VALUE) return;
    const unsigned char* in = gaspi_segment_ptr(ctx, 0, 0);
    unsigned char* out = gaspi_segment_ptr(ctx, 1, 0);
    for (unsigned int i = t; i < N; i += blockDim.x) out[i] = (unsigned char)(in[i] + 1u);
    __syncthreads();
    const int rc = gaspi_write_notify(ctx, 1, 0, 0, 0, N, N, 1, value);
    if (rc != GASPI_DEV_SUCCESS) {
      if (t == 0) status[1] = (unsigned int)rc;
      return;
    }
    if (t == 0) status[0] += 1;
  }
}

int main() {
  CHECK(gaspi_proc_init(GASPI_BLOCK));
  gaspi_rank_t rank, num;
  CHECK(gaspi_proc_rank(&rank));
  CHECK(gaspi_proc_num(&num));
  ASSERT(num == 2);
  void* bound = nullptr;
  if (rank == 1) {
    CUDA(cudaSetDevice(0));
    CHECK(gaspi_segment_create_gpu(0, N, GASPI_GROUP_ALL, GASPI_BLOCK, 0));
    CUDA(cudaMalloc(&bound, N));
    CHECK(gaspi_segment_use(1, bound, N, GASPI_GROUP_ALL, GASPI_BLOCK, 0));
  } else {
    CHECK(gaspi_segment_create(0, 2 * N, GASPI_GROUP_ALL, GASPI_BLOCK, GASPI_MEM_INITIALIZED));
    CHECK(gaspi_segment_create(1, N, GASPI_GROUP_ALL, GASPI_BLOCK, GASPI_MEM_INITIALIZED));
  }

  if (rank == 1) {
    gaspi_device_ctx ctx;
    // Too small an argument is refused.
    EXPECT_CODE(gaspi_device_context(0, &ctx, sizeof ctx - 1), GASPI_ERR_INV_SIZE);
    CHECK(gaspi_device_context(0, &ctx, sizeof ctx));
    ASSERT(ctx.rank == 1 && ctx.nranks == 2 && ctx.nsegments >= 2);
    unsigned int* status;
    CUDA(cudaMallocHost(&status, 2 * sizeof(unsigned int)));
    status[0] = status[1] = 0;
    cudaStream_t stream;
    CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    answer<<<1, 256, 0, stream>>>(ctx, status);
    CUDA(cudaGetLastError());
    CHECK(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK));  // the kernel runs
    CUDA(cudaStreamSynchronize(stream));
    if (status[1] != 0 || status[0] != ROUNDS) {
      fprintf(stderr, "kernel: %u rounds answered, error %d\n", status[0], (int)status[1]);
      exit(1);
    }
    printf("rank 1: the kernel answered %u rounds with the device API\n", status[0]);
    CUDA(cudaStreamDestroy(stream));
    CUDA(cudaFreeHost(status));
  } else {
    CHECK(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK));
    gaspi_pointer_t p;
    CHECK(gaspi_segment_ptr(0, &p));
    unsigned char* seg = (unsigned char*)p;
    unsigned char* want = (unsigned char*)malloc(N);
    ASSERT(want != nullptr);
    for (unsigned int round = 1; round <= ROUNDS; round++) {
      fill(seg, N, round);
      CHECK(gaspi_write_notify(0, 0, 1, 0, 0, N, 0, round, 0, GASPI_BLOCK));
      CHECK(gaspi_wait(0, GASPI_BLOCK));
      gaspi_notification_id_t got;
      gaspi_notification_t v;
      CHECK(gaspi_notify_waitsome(0, 1, 1, &got, 20000));
      CHECK(gaspi_notify_reset(0, 1, &v));
      ASSERT(v == round);
      fill(want, N, round);
      for (unsigned int i = 0; i < N; i++) {
        if (seg[N + i] != (unsigned char)(want[i] + 1u)) {
          fprintf(stderr, "round %u: byte %u is %u, expected %u\n", round, i, seg[N + i],
                  (unsigned char)(want[i] + 1u));
          exit(1);
        }
      }
    }
    CHECK(gaspi_notify(0, 1, 0, GASPI_STOP_VALUE, 0, GASPI_BLOCK));
    CHECK(gaspi_wait(0, GASPI_BLOCK));
    free(want);
    printf("rank 0: %u rounds of %u bytes answered by rank 1's kernel, every byte checked\n",
           ROUNDS, N);
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK));
  CHECK(gaspi_segment_delete(1));
  CHECK(gaspi_segment_delete(0));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK));
  if (rank == 1) CUDA(cudaFree(bound));
  printf("rank %d: device kernel checked\n", rank);
  CHECK(gaspi_proc_term(GASPI_BLOCK));
  return 0;
}
