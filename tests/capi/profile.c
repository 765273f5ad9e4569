/* The profiling names (PGASPI.h), used as a PMPI-style profiler would: this
   program defines gaspi_barrier and gaspi_write_notify itself, counts the
   calls and forwards them to pgaspi_barrier / pgaspi_write_notify. If
   pgaspi_X reached the program's gaspi_X instead of the library's, the
   calls would recurse until the stack overflows; if it did nothing, the
   data check below would fail. Prints "rank R: profiling checked". */
#include <stdint.h>
#include <stdio.h>

#include <PGASPI.h>

#include "check.h"

static int barriers, write_notifies;

gaspi_return_t
gaspi_barrier (const gaspi_group_t group, const gaspi_timeout_t timeout_ms)
{
  barriers++;
  return pgaspi_barrier (group, timeout_ms);
}

gaspi_return_t
gaspi_write_notify (const gaspi_segment_id_t segment_id_local,
                    const gaspi_offset_t offset_local,
                    const gaspi_rank_t rank,
                    const gaspi_segment_id_t segment_id_remote,
                    const gaspi_offset_t offset_remote,
                    const gaspi_size_t size,
                    const gaspi_notification_id_t notification_id,
                    const gaspi_notification_t notification_value,
                    const gaspi_queue_id_t queue,
                    const gaspi_timeout_t timeout_ms)
{
  write_notifies++;
  return pgaspi_write_notify (segment_id_local, offset_local, rank,
                              segment_id_remote, offset_remote, size,
                              notification_id, notification_value, queue,
                              timeout_ms);
}

int
main (void)
{
  CHECK (pgaspi_proc_init (GASPI_BLOCK));
  gaspi_rank_t rank, num, prank;
  CHECK (gaspi_proc_rank (&rank));
  CHECK (pgaspi_proc_rank (&prank));
  ASSERT (rank == prank);
  CHECK (gaspi_proc_num (&num));
  /* Bad input is refused under the profiling name too. */
  EXPECT_CODE (pgaspi_proc_rank (NULL), GASPI_ERR_NULLPTR);
  CHECK (gaspi_segment_create (0, 4096, GASPI_GROUP_ALL, GASPI_BLOCK,
                               GASPI_MEM_INITIALIZED));
  gaspi_pointer_t p;
  CHECK (gaspi_segment_ptr (0, &p));
  uint64_t *words = p;
  const gaspi_rank_t right = (rank + 1) % num;
  const gaspi_rank_t left = (rank + num - 1) % num;
  for (int round = 1; round <= 10; round++)
    {
      words[0] = 1000 * rank + round;
      CHECK (gaspi_write_notify (0, 0, right, 0, 8 * (size_t) round, 8, 0,
                                 round, 0, GASPI_BLOCK));
      gaspi_notification_id_t id;
      gaspi_notification_t v;
      CHECK (gaspi_notify_waitsome (0, 0, 1, &id, 10000));
      CHECK (gaspi_notify_reset (0, 0, &v));
      ASSERT (v == (gaspi_notification_t) round);
      ASSERT (words[round] == 1000u * left + round);
      CHECK (gaspi_wait (0, GASPI_BLOCK));
      CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
    }
  ASSERT (write_notifies == 10);
  ASSERT (barriers == 10);
  CHECK (pgaspi_segment_delete (0));
  printf ("rank %d: profiling checked\n", rank);
  CHECK (pgaspi_proc_term (GASPI_BLOCK));
  return 0;
}
