/* write_notify around the ring, with checked data: in round i every rank
   writes a block stamped (rank, i) into its right neighbour's segment and
   notifies; it then waits for its left neighbour's block of round i and
   checks every word before replying in the next round. */
#include "check.h"
#include <stdint.h>

#define WORDS 512
#define ROUNDS 200

int main (void)
{
  gaspi_rank_t rank, num;
  CHECK (gaspi_proc_init (GASPI_BLOCK));
  CHECK (gaspi_proc_rank (&rank));
  CHECK (gaspi_proc_num (&num));
  const gaspi_size_t block = WORDS * sizeof (uint64_t);
  CHECK (gaspi_segment_create (0, 2 * block, GASPI_GROUP_ALL, GASPI_BLOCK,
                               GASPI_MEM_INITIALIZED));
  gaspi_pointer_t p;
  CHECK (gaspi_segment_ptr (0, &p));
  uint64_t *send = (uint64_t *) p, *recv = (uint64_t *) p + WORDS;
  gaspi_rank_t right = (rank + 1) % num, left = (rank + num - 1) % num;

  for (uint64_t i = 1; i <= ROUNDS; i++)
    {
      for (int w = 0; w < WORDS; w++)
        send[w] = ((uint64_t) rank << 48) | (i << 16) | (uint64_t) w;
      CHECK (gaspi_write_notify (0, 0, right, 0, block, block, 0,
                                 (gaspi_notification_t) i, 0, GASPI_BLOCK));
      gaspi_notification_id_t id;
      gaspi_notification_t value;
      CHECK (gaspi_notify_waitsome (0, 0, 1, &id, 10000));
      CHECK (gaspi_notify_reset (0, id, &value));
      ASSERT (id == 0);
      ASSERT (value == i);
      for (int w = 0; w < WORDS; w++)
        if (recv[w] != (((uint64_t) left << 48) | (i << 16) | (uint64_t) w))
          {
            fprintf (stderr, "round %lu word %d: got %lx\n", (unsigned long) i,
                     w, (unsigned long) recv[w]);
            return 1;
          }
      /* Our block may be overwritten only after the write left it. */
      CHECK (gaspi_wait (0, GASPI_BLOCK));
      /* The left neighbour reuses our recv only after we read it. */
      CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
    }
  printf ("rank %d: %d rounds checked\n", rank, ROUNDS);
  CHECK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
