/* Allreduce latency (GASPI_OP_SUM on doubles, GASPI_GROUP_ALL), 2 ranks,
   1 and 255 elements (255 is GPI-2's maximum, gaspi_allreduce_elem_max):
   batches of back-to-back gaspi_allreduce calls; the figure is the time
   per call. `size` in the output is the number of doubles.

   Usage: allreduce */
#include "bench.h"

int main (void)
{
  gaspi_rank_t rank;
  init_two (&rank);
  static double in[255], out[255];
  for (int i = 0; i < 255; i++)
    in[i] = rank + i;
  const gaspi_number_t counts[] = { 1, 255 };
  for (int c = 0; c < 2; c++)
    {
      gaspi_number_t n = counts[c];
      OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
      long probe = 16;
      double t = 0; /* the second pass is timed: the first warms up */
      for (int pass = 0; pass < 2; pass++)
        {
          t = now_s ();
          for (long i = 0; i < probe; i++)
            OK (gaspi_allreduce (in, out, n, GASPI_OP_SUM, GASPI_TYPE_DOUBLE,
                                 GASPI_GROUP_ALL, GASPI_BLOCK));
        }
      long iters = agree_iters (now_s () - t, probe, 16, 200000);
      double us[BATCHES];
      for (int b = 0; b <= BATCHES; b++)
        {
          double t0 = now_s ();
          for (long i = 0; i < iters; i++)
            OK (gaspi_allreduce (in, out, n, GASPI_OP_SUM, GASPI_TYPE_DOUBLE,
                                 GASPI_GROUP_ALL, GASPI_BLOCK));
          if (b > 0)
            us[b - 1] = (now_s () - t0) * 1e6 / (double) iters;
        }
      if (out[n - 1] != 2.0 * (n - 1) + 1)
        {
          fprintf (stderr, "allreduce: wrong sum %g\n", out[n - 1]);
          return 1;
        }
      if (rank == 0)
        report ("allreduce", (unsigned long) n, us, iters);
    }
  OK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
