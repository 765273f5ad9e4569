/* Shared helpers of the C microbenchmarks of bench/capi/: written against
   GASPI.h only, so the same source builds against this runtime's libGPI2
   and against GPI-2 1.6's (bench/compare-gpi2.sh does both).

   Every figure is the distribution over BATCHES timed batches (one more,
   untimed, warms caches and connections first) of the time per operation
   in a batch; each program prints one line per point:

     <bench> size=<bytes> median_us=<m> p10_us=<a> p90_us=<b> batches=<n> iters=<per batch>

   (write-bw adds median_gbs / p10_gbs / p90_gbs). The iterations per batch
   come from a short calibration run, agreed on by both ranks through an
   allreduce (MAX), so a batch lasts about TARGET_BATCH_S on the slower
   library and both ranks run the same count. */
#ifndef CAPI_BENCH_H
#define CAPI_BENCH_H

#define _POSIX_C_SOURCE 199309L
#include <GASPI.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define OK(call)                                                               \
  do                                                                           \
    {                                                                          \
      gaspi_return_t r_ = (call);                                              \
      if (r_ != GASPI_SUCCESS)                                                 \
        {                                                                      \
          fprintf (stderr, "%s:%d: %s: return code %d\n", __FILE__, __LINE__,  \
                   #call, (int) r_);                                           \
          exit (1);                                                            \
        }                                                                      \
    }                                                                          \
  while (0)

#define BATCHES 15

/* The message sizes of pingpong and write-bw: 8 B to 1 MiB. */
static const gaspi_size_t SIZES[] = { 8, 64, 512, 4096, 32768, 262144, 1048576 };
#define NSIZES ((int) (sizeof SIZES / sizeof SIZES[0]))
#define TARGET_BATCH_S 0.02

static inline double now_s (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static inline int cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* Sorts v and returns its q-quantile (nearest rank). */
static inline double quantile (double *v, int n, double q)
{
  qsort (v, (size_t) n, sizeof v[0], cmp_double);
  int i = (int) (q * (n - 1) + 0.5);
  return v[i];
}

/* Iterations per batch so that one batch lasts about TARGET_BATCH_S,
   from `seconds` measured for `probe` iterations on this rank; both ranks
   get the same count (the larger of their wishes). */
static inline long agree_iters (double seconds, long probe, long lo, long hi)
{
  double per = seconds / (double) probe;
  long want = per > 0 ? (long) (TARGET_BATCH_S / per) : hi;
  if (want < lo)
    want = lo;
  if (want > hi)
    want = hi;
  long agreed = 0;
  OK (gaspi_allreduce (&want, &agreed, 1, GASPI_OP_MAX, GASPI_TYPE_LONG,
                       GASPI_GROUP_ALL, GASPI_BLOCK));
  return agreed;
}

/* One timed step of a benchmark (its argument: what to do). */
typedef void (*bench_step) (void *arg);

/* Rank 0 runs `step` in BATCHES timed batches, after a warm-up pass and a
   timed probe of 4 steps that sizes the batches (agree_iters, 4 to 20000
   steps); us[b] is then the microseconds per request of batch b, a step
   making `per_step` requests. Every rank calls it (the sizing is agreed);
   only rank 0 steps. Returns the steps per batch. */
static inline long timed_batches (gaspi_rank_t rank, bench_step step, void *arg, int per_step,
                                  double *us)
{
  long steps;
  if (rank == 0)
    {
      long probe = 4;
      double t = 0; /* the second pass is timed: the first warms up */
      for (int pass = 0; pass < 2; pass++)
        {
          t = now_s ();
          for (long w = 0; w < probe; w++)
            step (arg);
        }
      steps = agree_iters (now_s () - t, probe, 4, 20000);
    }
  else
    steps = agree_iters (0, 1, 4, 4);
  if (rank == 0)
    for (int b = 0; b <= BATCHES; b++)
      {
        double t0 = now_s ();
        for (long w = 0; w < steps; w++)
          step (arg);
        if (b > 0)
          us[b - 1] = (now_s () - t0) * 1e6 / (double) (steps * per_step);
      }
  return steps;
}

/* Prints one point: per-batch microseconds per operation in us[]. */
static inline void report (const char *bench, unsigned long size, double *us, long iters)
{
  double m = quantile (us, BATCHES, 0.5), p10 = quantile (us, BATCHES, 0.1),
         p90 = quantile (us, BATCHES, 0.9);
  printf ("%s size=%lu median_us=%.3f p10_us=%.3f p90_us=%.3f batches=%d iters=%ld\n",
          bench, size, m, p10, p90, BATCHES, iters);
  fflush (stdout);
}

static inline void init_two (gaspi_rank_t *rank)
{
  gaspi_rank_t num;
  OK (gaspi_proc_init (GASPI_BLOCK));
  OK (gaspi_proc_rank (rank));
  OK (gaspi_proc_num (&num));
  if (num != 2)
    {
      fprintf (stderr, "run with 2 ranks\n");
      exit (1);
    }
}

#endif
