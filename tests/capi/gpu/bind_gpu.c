/* GPU memory bound as a segment through the C interface (decision 0025),
   2 ranks on one host:
   - rank 1 binds a cudaMalloc'd buffer with gaspi_segment_use; rank 0
     creates a host segment;
   - rank 0 write_notifies pseudo-random bytes into rank 1's GPU memory;
     rank 1 waits on the notification and checks them on a copy back to the
     host;
   - rank 1 write_notifies other bytes from its GPU memory into rank 0's
     host segment, rank 0 checks them, and reads rank 1's GPU memory back
     with gaspi_read;
   - bad input: a range past the end of the GPU allocation gets
     GASPI_ERR_INV_SEGSIZE with nothing bound; managed memory is bound as a
     host segment; cudaMallocAsync memory is bound or refused with
     GASPI_ERR_DEVICE and nothing bound (printed); a malloc'd pointer on a host
     with a CUDA driver is still bound as a host segment, and rank 1 writes
     into it from its GPU segment.
   Prints "rank R: GPU bind checked" on success; exits 1 with the reason
   otherwise. Needs a CUDA GPU: run by tests/capi/gpu/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "../check.h"

#define N (1u << 20)  /* bytes per message */
#define GPU_BYTES (4u * N)

#define CUDA(call)                                                             \
  do                                                                           \
    {                                                                          \
      cudaError_t e_ = (call);                                                 \
      if (e_ != cudaSuccess)                                                   \
        {                                                                      \
          fprintf (stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,       \
                   cudaGetErrorString (e_));                                   \
          exit (1);                                                            \
        }                                                                      \
    }                                                                          \
  while (0)

/* Deterministic pseudo-random bytes (xorshift64), the same on both ranks. */
static void
fill (unsigned char *p, size_t n, uint64_t seed)
{
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++)
    {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      p[i] = (unsigned char) (x >> 24);
    }
}

static void
expect_bytes (const unsigned char *got, uint64_t seed, const char *what)
{
  unsigned char *want = malloc (N);
  ASSERT (want != NULL);
  fill (want, N, seed);
  for (size_t i = 0; i < N; i++)
    if (got[i] != want[i])
      {
        fprintf (stderr, "%s: byte %zu is %u, expected %u\n", what, i,
                 got[i], want[i]);
        exit (1);
      }
  free (want);
}

static void
wait_notification (gaspi_segment_id_t seg, gaspi_notification_id_t id,
                   gaspi_notification_t value)
{
  gaspi_notification_id_t got;
  gaspi_notification_t v;
  CHECK (gaspi_notify_waitsome (seg, id, 1, &got, 20000));
  ASSERT (got == id);
  CHECK (gaspi_notify_reset (seg, id, &v));
  ASSERT (v == value);
}

int
main (void)
{
  CHECK (gaspi_proc_init (GASPI_BLOCK));
  gaspi_rank_t rank, num;
  CHECK (gaspi_proc_rank (&rank));
  CHECK (gaspi_proc_num (&num));
  ASSERT (num == 2);

  void *gpu = NULL;
  void *host_bound = NULL;
  gaspi_pointer_t p;
  if (rank == 1)
    {
      CUDA (cudaSetDevice (0));
      CUDA (cudaMalloc (&gpu, GPU_BYTES));
      CUDA (cudaMemset (gpu, 0, GPU_BYTES));
      CUDA (cudaDeviceSynchronize ());
      /* Past the end of the allocation: refused, nothing bound. */
      gaspi_number_t before, after;
      CHECK (gaspi_segment_num (&before));
      EXPECT_CODE (gaspi_segment_bind (5, (char *) gpu + GPU_BYTES - 4096,
                                       8192, 0),
                   GASPI_ERR_INV_SEGSIZE);
      CHECK (gaspi_segment_num (&after));
      ASSERT (before == after);
      /* Managed memory is host memory to the runtime (the CPU reaches it;
         CUDA IPC cannot export it): bound as a host segment. */
      void *managed = NULL;
      CUDA (cudaMallocManaged (&managed, 4096, cudaMemAttachGlobal));
      CHECK (gaspi_segment_bind (6, managed, 4096, 0));
      CHECK (gaspi_segment_ptr (6, &p));
      ASSERT (p == managed);
      ((unsigned char *) p)[100] = 42; /* a CPU store: host memory */
      CHECK (gaspi_segment_delete (6));
      CUDA (cudaFree (managed));
      /* Stream-ordered pool memory has no legacy IPC handle: either the
         driver exports it after all, or GASPI_ERR_DEVICE with nothing
         bound. Which one is printed. */
      void *pooled = NULL;
      CUDA (cudaMallocAsync (&pooled, 1 << 20, 0));
      CUDA (cudaStreamSynchronize (0));
      gaspi_return_t pool = gaspi_segment_bind (7, pooled, 1 << 20, 0);
      CHECK (gaspi_segment_num (&after));
      if (pool == GASPI_SUCCESS)
        {
          ASSERT (after == before + 1);
          CHECK (gaspi_segment_delete (7));
        }
      else
        {
          EXPECT_CODE (pool, GASPI_ERR_DEVICE);
          ASSERT (after == before);
        }
      printf ("rank 1: cudaMallocAsync memory bound: %s\n",
              gaspi_error_str (pool));
      CUDA (cudaFreeAsync (pooled, 0));
      CUDA (cudaStreamSynchronize (0));
      /* The whole buffer: a GPU segment, used collectively. */
      CHECK (gaspi_segment_use (0, gpu, GPU_BYTES, GASPI_GROUP_ALL,
                                GASPI_BLOCK, 0));
      CHECK (gaspi_segment_ptr (0, &p));
      ASSERT (p == gpu);
      gaspi_size_t size;
      CHECK (gaspi_segment_size (0, rank, &size));
      ASSERT (size == GPU_BYTES);
    }
  else
    CHECK (gaspi_segment_create (0, 3 * N, GASPI_GROUP_ALL, GASPI_BLOCK,
                                 GASPI_MEM_INITIALIZED));
  /* Segment 1: host memory from malloc on both ranks, with a CUDA driver
     loaded in rank 1's process: bound as host segments. */
  host_bound = calloc (1, N);
  ASSERT (host_bound != NULL);
  CHECK (gaspi_segment_use (1, host_bound, N, GASPI_GROUP_ALL, GASPI_BLOCK,
                            0));

  /* 1. host -> GPU: rank 0 writes N random bytes into rank 1's GPU memory. */
  if (rank == 0)
    {
      CHECK (gaspi_segment_ptr (0, &p));
      fill (p, N, 1);
      CHECK (gaspi_write_notify (0, 0, 1, 0, 0, N, 0, 7, 0, GASPI_BLOCK));
      CHECK (gaspi_wait (0, GASPI_BLOCK));
    }
  else
    {
      wait_notification (0, 0, 7);
      unsigned char *back = malloc (N);
      ASSERT (back != NULL);
      CUDA (cudaMemcpy (back, gpu, N, cudaMemcpyDeviceToHost));
      expect_bytes (back, 1, "host -> GPU segment");
      free (back);
      printf ("rank 1: %u bytes from rank 0's host segment arrived in "
              "cudaMalloc'd memory\n", N);
    }

  /* 2. GPU -> host: rank 1 writes other bytes from its GPU memory. */
  if (rank == 1)
    {
      unsigned char *src = malloc (N);
      ASSERT (src != NULL);
      fill (src, N, 2);
      CUDA (cudaMemcpy ((char *) gpu + N, src, N, cudaMemcpyHostToDevice));
      CUDA (cudaDeviceSynchronize ());
      free (src);
      CHECK (gaspi_write_notify (0, N, 0, 0, N, N, 1, 9, 0, GASPI_BLOCK));
      CHECK (gaspi_wait (0, GASPI_BLOCK));
    }
  else
    {
      wait_notification (0, 1, 9);
      CHECK (gaspi_segment_ptr (0, &p));
      expect_bytes ((unsigned char *) p + N, 2, "GPU segment -> host");
      /* 3. rank 0 reads rank 1's GPU memory back. */
      CHECK (gaspi_read (0, 2 * N, 1, 0, 0, N, 0, GASPI_BLOCK));
      CHECK (gaspi_wait (0, GASPI_BLOCK));
      expect_bytes ((unsigned char *) p + 2 * N, 1, "gaspi_read of GPU");
      printf ("rank 0: %u bytes from rank 1's cudaMalloc'd segment arrived "
              "and read back\n", N);
    }
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));

  /* 4. GPU segment -> a malloc'd segment of the peer. */
  if (rank == 1)
    {
      CHECK (gaspi_write_notify (0, 0, 0, 1, 0, N, 2, 11, 0, GASPI_BLOCK));
      CHECK (gaspi_wait (0, GASPI_BLOCK));
    }
  else
    {
      wait_notification (1, 2, 11);
      expect_bytes (host_bound, 1, "GPU segment -> bound host memory");
      printf ("rank 0: GPU segment -> malloc'd segment checked\n");
    }
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
  CHECK (gaspi_segment_delete (1));
  CHECK (gaspi_segment_delete (0));
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
  /* The runtime never frees bound memory: the user does, after the delete. */
  if (rank == 1)
    CUDA (cudaFree (gpu));
  free (host_bound);
  printf ("rank %d: GPU bind checked\n", rank);
  CHECK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
