/* write_notify ping-pong, half round trip, 8 B to 1 MiB, 2 ranks.

   Usage: pingpong [naive]

   The pattern (default) is the one a latency-bound GASPI program uses:
   - rank 0 posts gaspi_write_notify, rank 1 waits for it with
     gaspi_notify_waitsome and replies the same way;
   - each side resets (gaspi_notify_reset) the notification it received
     after its reply is posted, not before, so the reset is off the
     critical path; this is safe because rounds alternate between two
     notification ids per direction (the peer reuses an id only two rounds
     later, after it received our reply that follows the reset);
   - messages leave from a send area and land in a receive area, so no
     side sends the bytes it has just received;
   - the queue is drained with gaspi_wait every WAIT_EVERY rounds, not every
     round: a write_notify needs no local completion here (the send area
     never changes), and the peer's reply already tells the sender that
     its message arrived; draining only keeps the queue from filling up
     (WAIT_EVERY is a quarter of gaspi_queue_size_max, at most 64).

   `naive` is the pattern of the first bench/capi/latency.c (waitsome,
   reset, then write_notify and gaspi_wait every round, one id per
   direction), kept to show what those two habits cost. */
#include "bench.h"
#include <string.h>

#define MAX_SIZE (1UL << 20)
#define SEND_AT MAX_SIZE

static const gaspi_notification_id_t PING[2] = { 0, 64 };
static const gaspi_notification_id_t PONG[2] = { 128, 192 };

static gaspi_rank_t rank, peer;
static unsigned long round_no;
static int has_unreset;
static gaspi_notification_id_t unreset;
static long wait_every;

static void post (gaspi_size_t size, gaspi_notification_id_t id)
{
  OK (gaspi_write_notify (0, SEND_AT, peer, 0, 0, size, id, 1, 0, GASPI_BLOCK));
  if (has_unreset)
    {
      gaspi_notification_t old;
      OK (gaspi_notify_reset (0, unreset, &old));
      has_unreset = 0;
    }
  if (round_no % (unsigned long) wait_every == 0)
    OK (gaspi_wait (0, GASPI_BLOCK));
}

static void receive (gaspi_notification_id_t id)
{
  gaspi_notification_id_t got;
  OK (gaspi_notify_waitsome (0, id, 1, &got, GASPI_BLOCK));
  unreset = got;
  has_unreset = 1;
}

static void round_trip (gaspi_size_t size)
{
  int k = (int) (round_no % 2);
  round_no++;
  if (rank == 0)
    {
      post (size, PING[k]);
      receive (PONG[k]);
    }
  else
    {
      receive (PING[k]);
      post (size, PONG[k]);
    }
}

static void round_trip_naive (gaspi_size_t size)
{
  gaspi_notification_id_t got;
  gaspi_notification_t old;
  if (rank == 0)
    {
      OK (gaspi_write_notify (0, SEND_AT, peer, 0, 0, size, PING[0], 1, 0, GASPI_BLOCK));
      OK (gaspi_notify_waitsome (0, PONG[0], 1, &got, GASPI_BLOCK));
      OK (gaspi_notify_reset (0, got, &old));
    }
  else
    {
      OK (gaspi_notify_waitsome (0, PING[0], 1, &got, GASPI_BLOCK));
      OK (gaspi_notify_reset (0, got, &old));
      OK (gaspi_write_notify (0, SEND_AT, peer, 0, 0, size, PONG[0], 1, 0, GASPI_BLOCK));
    }
  OK (gaspi_wait (0, GASPI_BLOCK));
}

/* Resets what is still set and drains the queue between sizes. */
static void finish (void)
{
  if (has_unreset)
    {
      gaspi_notification_t old;
      OK (gaspi_notify_reset (0, unreset, &old));
      has_unreset = 0;
    }
  OK (gaspi_wait (0, GASPI_BLOCK));
  OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
}

int main (int argc, char **argv)
{
  int naive = argc > 1 && strcmp (argv[1], "naive") == 0;
  void (*rt) (gaspi_size_t) = naive ? round_trip_naive : round_trip;
  init_two (&rank);
  peer = (gaspi_rank_t) (1 - rank);
  gaspi_number_t qmax;
  OK (gaspi_queue_size_max (&qmax));
  wait_every = qmax / 4 < 64 ? (long) (qmax / 4) : 64;
  if (wait_every < 1)
    wait_every = 1;
  OK (gaspi_segment_create (0, 2 * MAX_SIZE, GASPI_GROUP_ALL, GASPI_BLOCK,
                            GASPI_MEM_INITIALIZED));
  for (int si = 0; si < NSIZES; si++)
    {
      gaspi_size_t size = SIZES[si];
      OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
      long probe = 16;
      double t = 0; /* the second pass is timed: the first warms up */
      for (int pass = 0; pass < 2; pass++)
        {
          t = now_s ();
          for (long i = 0; i < probe; i++)
            rt (size);
        }
      long iters = agree_iters (now_s () - t, probe, 16, 200000);
      double us[BATCHES];
      for (int b = 0; b <= BATCHES; b++)
        {
          double t0 = now_s ();
          for (long i = 0; i < iters; i++)
            rt (size);
          if (b > 0)
            us[b - 1] = (now_s () - t0) * 1e6 / (double) iters / 2;
        }
      finish ();
      if (rank == 0)
        report (naive ? "pingpong-naive" : "pingpong", (unsigned long) size, us, iters);
    }
  OK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
