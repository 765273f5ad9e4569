/* Write bandwidth, 8 B to 1 MiB, 2 ranks: rank 0 posts windows of WINDOW
   gaspi_write calls of one size to rank 1's segment, then gaspi_wait on
   the queue (the usual GASPI streaming pattern: post a window, complete
   it, reuse the buffer); the figure per batch is the time per write and
   the bandwidth size / time. Rank 1 only waits in the barrier.

   Usage: writebw */
#include "bench.h"

#define WINDOW 16
#define MAX_SIZE (1UL << 20)

/* One window of WINDOW writes of `size` bytes to `peer`, then wait. */
struct window
{
  gaspi_rank_t peer;
  gaspi_size_t size;
};

static void write_window (void *arg)
{
  const struct window *w = arg;
  for (int i = 0; i < WINDOW; i++)
    OK (gaspi_write (0, MAX_SIZE, w->peer, 0, 0, w->size, 0, GASPI_BLOCK));
  OK (gaspi_wait (0, GASPI_BLOCK));
}

int main (void)
{
  gaspi_rank_t rank;
  init_two (&rank);
  gaspi_rank_t peer = (gaspi_rank_t) (1 - rank);
  OK (gaspi_segment_create (0, 2 * MAX_SIZE, GASPI_GROUP_ALL, GASPI_BLOCK,
                            GASPI_MEM_INITIALIZED));
  for (int si = 0; si < NSIZES; si++)
    {
      gaspi_size_t size = SIZES[si];
      struct window win = { peer, size };
      OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
      double us[BATCHES];
      long windows = timed_batches (rank, write_window, &win, WINDOW, us);
      OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
      if (rank == 0)
        {
          double gbs[BATCHES];
          for (int b = 0; b < BATCHES; b++)
            gbs[b] = (double) size / us[b] * 1e-3;
          double m = quantile (gbs, BATCHES, 0.5), lo = quantile (gbs, BATCHES, 0.1),
                 hi = quantile (gbs, BATCHES, 0.9);
          printf ("write-bw size=%lu median_gbs=%.3f p10_gbs=%.3f p90_gbs=%.3f ",
                  (unsigned long) size, m, lo, hi);
          report ("us_per_write", (unsigned long) size, us, windows * WINDOW);
        }
    }
  OK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
