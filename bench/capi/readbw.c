/* Reads beside writes, 8 B to 4 MiB, 2 ranks: rank 0 reads from (and, in
   the same batch order, writes to) rank 1's segment, the way a GASPI
   program does both:
     read-one    one gaspi_read, then gaspi_wait (time per read)
     write-one   one gaspi_write, then gaspi_wait (time per write)
     read-win    windows of WINDOW gaspi_read, then gaspi_wait (time per read)
     write-win   windows of WINDOW gaspi_write, then gaspi_wait
   Issue 41 asks for a read within 1.1x of a write of the same size over
   the same transport, and ahead of GPI-2 at every size. Rank 1 only waits
   in the barriers.

   Usage: readbw */
#include "bench.h"

#define WINDOW 16
#define MAX_SIZE (4UL << 20)

static const gaspi_size_t RSIZES[] = { 8, 4096, 65536, 1048576, 4194304 };
#define NRSIZES ((int) (sizeof RSIZES / sizeof RSIZES[0]))

/* One step of `kind`: `n` requests of `size` bytes on queue 0, then wait. */
static void step (int read, int n, gaspi_rank_t peer, gaspi_size_t size)
{
  for (int i = 0; i < n; i++)
    {
      if (read)
        OK (gaspi_read (0, MAX_SIZE, peer, 0, 0, size, 0, GASPI_BLOCK));
      else
        OK (gaspi_write (0, MAX_SIZE, peer, 0, 0, size, 0, GASPI_BLOCK));
    }
  OK (gaspi_wait (0, GASPI_BLOCK));
}

int main (void)
{
  gaspi_rank_t rank;
  init_two (&rank);
  gaspi_rank_t peer = (gaspi_rank_t) (1 - rank);
  OK (gaspi_segment_create (0, 2 * MAX_SIZE, GASPI_GROUP_ALL, GASPI_BLOCK,
                            GASPI_MEM_INITIALIZED));
  static const char *names[4] = { "read-one", "write-one", "read-win", "write-win" };
  for (int si = 0; si < NRSIZES; si++)
    for (int k = 0; k < 4; k++)
      {
        gaspi_size_t size = RSIZES[si];
        int read = k % 2 == 0, n = k < 2 ? 1 : WINDOW;
        OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
        double us[BATCHES];
        long steps = 1;
        if (rank == 0)
          {
            long probe = 4;
            double t = 0; /* the second pass is timed: the first warms up */
            for (int pass = 0; pass < 2; pass++)
              {
                t = now_s ();
                for (long w = 0; w < probe; w++)
                  step (read, n, peer, size);
              }
            steps = agree_iters (now_s () - t, probe, 4, 20000);
          }
        else
          steps = agree_iters (0, 1, 4, 4);
        if (rank == 0)
          {
            for (int b = 0; b <= BATCHES; b++)
              {
                double t0 = now_s ();
                for (long w = 0; w < steps; w++)
                  step (read, n, peer, size);
                if (b > 0)
                  us[b - 1] = (now_s () - t0) * 1e6 / (double) (steps * n);
              }
          }
        OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
        if (rank == 0)
          report (names[k], (unsigned long) size, us, steps * n);
      }
  OK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
