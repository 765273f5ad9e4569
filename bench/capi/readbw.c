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

/* One step: `n` requests of `size` bytes on queue 0, then wait. */
struct rw_step
{
  int read, n;
  gaspi_rank_t peer;
  gaspi_size_t size;
};

static void step (void *arg)
{
  const struct rw_step *s = arg;
  for (int i = 0; i < s->n; i++)
    {
      if (s->read)
        OK (gaspi_read (0, MAX_SIZE, s->peer, 0, 0, s->size, 0, GASPI_BLOCK));
      else
        OK (gaspi_write (0, MAX_SIZE, s->peer, 0, 0, s->size, 0, GASPI_BLOCK));
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
        struct rw_step st = { k % 2 == 0, k < 2 ? 1 : WINDOW, peer, RSIZES[si] };
        OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
        double us[BATCHES];
        long steps = timed_batches (rank, step, &st, st.n, us);
        OK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
        if (rank == 0)
          report (names[k], (unsigned long) st.size, us, steps * st.n);
      }
  OK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
