/* The fixed cost of a call through the C interface: 10^7 calls in a loop
   of gaspi_proc_rank (nothing behind it), gaspi_queue_size and
   gaspi_notify_reset (one atomic swap behind it), three times; rank 0
   prints ns per call. Not part of compare-gpi2.sh's table.

   Usage: gaspi-run -n 2 ./calls */
#include "bench.h"

int main (void)
{
  gaspi_rank_t rank;
  init_two (&rank);
  OK (gaspi_segment_create (0, 4096, GASPI_GROUP_ALL, GASPI_BLOCK, GASPI_MEM_INITIALIZED));
  long n = 10000000;
  for (int rep = 0; rep < 3; rep++) {
  gaspi_number_t q; gaspi_notification_t old; gaspi_rank_t r;
  double t = now_s ();
  for (long i = 0; i < n; i++) OK (gaspi_proc_rank (&r));
  double a = (now_s () - t) * 1e9 / n;
  t = now_s ();
  for (long i = 0; i < n; i++) OK (gaspi_queue_size (0, &q));
  double b = (now_s () - t) * 1e9 / n;
  t = now_s ();
  for (long i = 0; i < n; i++) OK (gaspi_notify_reset (0, 1000 + (rank * 8), &old));
  double c = (now_s () - t) * 1e9 / n;
  if (rank == 0) printf ("ns/call: proc_rank %.1f queue_size %.1f notify_reset %.1f\n", a, b, c);
  }
  OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
  OK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
