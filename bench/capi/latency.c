/* write_notify half round trip through the C interface, GPI-2 tutorial
   style: rank 0 and rank 1 bounce a block of SIZE bytes ITER times; the
   figure is the median over REPS runs of (time / ITER / 2). Usage:
   gaspi-run -n 2 ./latency [size_bytes] [iterations] */
#define _POSIX_C_SOURCE 199309L
#include <GASPI.h>
#include <GASPI_Ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define OK(call)                                                               \
  do                                                                           \
    {                                                                          \
      gaspi_return_t r_ = (call);                                              \
      if (r_ != GASPI_SUCCESS)                                                 \
        {                                                                      \
          fprintf (stderr, "%s: %s\n", #call, gaspi_error_str (r_));           \
          exit (1);                                                            \
        }                                                                      \
    }                                                                          \
  while (0)

#define REPS 7

static double now_us (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

int main (int argc, char **argv)
{
  gaspi_size_t size = argc > 1 ? strtoul (argv[1], NULL, 10) : 8;
  long iters = argc > 2 ? strtol (argv[2], NULL, 10) : 20000;
  gaspi_rank_t rank, num;
  OK (gaspi_proc_init (GASPI_BLOCK));
  OK (gaspi_proc_rank (&rank));
  OK (gaspi_proc_num (&num));
  if (num != 2)
    {
      fprintf (stderr, "run with 2 ranks\n");
      return 1;
    }
  OK (gaspi_segment_create (0, 2 * size + 64, GASPI_GROUP_ALL, GASPI_BLOCK, 0));
  gaspi_rank_t peer = 1 - rank;
  double runs[REPS];
  for (int rep = 0; rep < REPS; rep++)
    {
      OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
      double t0 = now_us ();
      for (long i = 0; i < iters; i++)
        {
          gaspi_notification_id_t id;
          gaspi_notification_t v;
          if (rank == 0)
            {
              OK (gaspi_write_notify (0, 0, peer, 0, size, size, 0, 1, 0, GASPI_BLOCK));
              OK (gaspi_notify_waitsome (0, 0, 1, &id, GASPI_BLOCK));
              OK (gaspi_notify_reset (0, 0, &v));
            }
          else
            {
              OK (gaspi_notify_waitsome (0, 0, 1, &id, GASPI_BLOCK));
              OK (gaspi_notify_reset (0, 0, &v));
              OK (gaspi_write_notify (0, 0, peer, 0, size, size, 0, 1, 0, GASPI_BLOCK));
            }
          OK (gaspi_wait (0, GASPI_BLOCK));
        }
      runs[rep] = (now_us () - t0) / iters / 2;
    }
  qsort (runs, REPS, sizeof runs[0], cmp);
  if (rank == 0)
    printf ("write_notify half round trip, %lu bytes: median %.3f us (min %.3f, max %.3f) over %d runs of %ld\n",
            (unsigned long) size, runs[REPS / 2], runs[0], runs[REPS - 1], REPS, iters);
  OK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
