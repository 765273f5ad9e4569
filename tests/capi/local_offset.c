/* A local "offset" that is an address difference, as GPI-2 code written
   against GPI-2's release build (which does not check local offsets) may
   pass: (char *) &variable - segment_base, far outside a 1 MiB segment.
   Every such call is refused with GASPI_ERR_INV_LOC_OFF before anything
   moves (decision 0060): the target's segment and notifications stay
   untouched. Also an offset just past the end, and one whose size runs
   over it. */
#include <stdint.h>
#include <string.h>

#include "check.h"

#define SEG_SIZE (1 << 20)

int main (void)
{
  CHECK (gaspi_proc_init (GASPI_BLOCK));
  gaspi_rank_t rank, num;
  CHECK (gaspi_proc_rank (&rank));
  CHECK (gaspi_proc_num (&num));
  CHECK (gaspi_segment_create (0, SEG_SIZE, GASPI_GROUP_ALL, GASPI_BLOCK,
                               GASPI_MEM_INITIALIZED));
  gaspi_pointer_t base;
  CHECK (gaspi_segment_ptr (0, &base));

  volatile uint64_t on_stack = UINT64_C (0x5eed0000) + rank;
  gaspi_offset_t outside
      = (gaspi_offset_t) ((char *) &on_stack - (char *) base);
  gaspi_rank_t next = (rank + 1) % num;

  EXPECT_CODE (gaspi_write (0, outside, next, 0, 0, 8, 0, GASPI_BLOCK),
               GASPI_ERR_INV_LOC_OFF);
  EXPECT_CODE (gaspi_write_notify (0, outside, next, 0, 0, 8, 1, 1, 0,
                                   GASPI_BLOCK),
               GASPI_ERR_INV_LOC_OFF);
  EXPECT_CODE (gaspi_read (0, outside, next, 0, 0, 8, 0, GASPI_BLOCK),
               GASPI_ERR_INV_LOC_OFF);
  EXPECT_CODE (gaspi_write (0, SEG_SIZE + 64, next, 0, 0, 8, 0, GASPI_BLOCK),
               GASPI_ERR_INV_LOC_OFF);
  EXPECT_CODE (gaspi_write (0, SEG_SIZE - 4, next, 0, 0, 8, 0, GASPI_BLOCK),
               GASPI_ERR_INV_LOC_OFF);
  ASSERT (on_stack == UINT64_C (0x5eed0000) + rank);
  CHECK (gaspi_wait (0, GASPI_BLOCK));
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));

  /* Nothing arrived: the segment is all zero, no notification is set. */
  const unsigned char *bytes = (const unsigned char *) base;
  for (size_t i = 0; i < SEG_SIZE; i++)
    ASSERT (bytes[i] == 0);
  gaspi_notification_id_t id;
  EXPECT_CODE (gaspi_notify_waitsome (0, 0, 16, &id, GASPI_TEST),
               GASPI_TIMEOUT);
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));

  /* The same data copied into the segment first goes through. */
  memcpy ((char *) base + 4096, (const void *) &on_stack, 8);
  CHECK (gaspi_write_notify (0, 4096, next, 0, 8192, 8, 1, 1, 0,
                             GASPI_BLOCK));
  CHECK (gaspi_wait (0, GASPI_BLOCK));
  CHECK (gaspi_notify_waitsome (0, 1, 1, &id, GASPI_BLOCK));
  gaspi_notification_t value;
  CHECK (gaspi_notify_reset (0, id, &value));
  uint64_t got;
  memcpy (&got, (char *) base + 8192, 8);
  gaspi_rank_t prev = (rank + num - 1) % num;
  ASSERT (value == 1 && got == UINT64_C (0x5eed0000) + prev);

  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
  printf ("rank %d: local offsets outside the segment refused\n", rank);
  CHECK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
