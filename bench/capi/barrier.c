/* Barrier latency on GASPI_GROUP_ALL, 2 ranks: batches of back-to-back
   gaspi_barrier calls; the figure is the time per barrier.

   Usage: barrier */
#include "bench.h"

int main (void)
{
  gaspi_rank_t rank;
  init_two (&rank);
  OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
  long probe = 16;
  double t = 0; /* the second pass is timed: the first warms up */
  for (int pass = 0; pass < 2; pass++)
    {
      t = now_s ();
      for (long i = 0; i < probe; i++)
        OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
    }
  long iters = agree_iters (now_s () - t, probe, 16, 200000);
  double us[BATCHES];
  for (int b = 0; b <= BATCHES; b++)
    {
      double t0 = now_s ();
      for (long i = 0; i < iters; i++)
        OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
      if (b > 0)
        us[b - 1] = (now_s () - t0) * 1e6 / (double) iters;
    }
  if (rank == 0)
    report ("barrier", 0, us, iters);
  OK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
