/* The error codes of bad input, GPI-2 1.6's for each fault; nothing
   crashes, and the job still works afterwards. Runs with 2 ranks or more. */
#include "check.h"
#include <stdint.h>

int main (void)
{
  gaspi_rank_t rank, num;
  gaspi_notification_id_t id;
  gaspi_notification_t v;
  gaspi_atomic_value_t old;
  gaspi_number_t n;

  /* Before init. */
  EXPECT_CODE (gaspi_proc_rank (&rank), GASPI_ERR_NOINIT);
  EXPECT_CODE (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK), GASPI_ERR_NOINIT);
  EXPECT_CODE (gaspi_write (0, 0, 0, 0, 0, 8, 0, GASPI_BLOCK), GASPI_ERR_NOINIT);
  EXPECT_CODE (gaspi_proc_term (GASPI_BLOCK), GASPI_ERR_NOINIT);
  EXPECT_CODE (gaspi_config_get (NULL), GASPI_ERR_NULLPTR);
  gaspi_time_t t0; /* as in GPI-2, time works before init */
  CHECK (gaspi_time_get (&t0));
  gaspi_config_t c;
  CHECK (gaspi_config_get (&c));
  /* GPI-2 1.6's refusals in gaspi_config_set, and ours (group ids are one
     byte); nothing of a refused configuration is kept. */
  gaspi_config_t bad = c;
  bad.rw_list_elem_max = 256;
  EXPECT_CODE (gaspi_config_set (bad), GASPI_ERR_CONFIG);
  bad = c;
  bad.queue_size_max = 4097;
  EXPECT_CODE (gaspi_config_set (bad), GASPI_ERR_CONFIG);
  bad = c;
  bad.group_max = 257;
  EXPECT_CODE (gaspi_config_set (bad), GASPI_ERR_CONFIG);
  bad = c;
  bad.transfer_size_max = (1ul << 30) + 1;
  EXPECT_CODE (gaspi_config_set (bad), GASPI_ERR_CONFIG);
  bad = c;
  bad.sn_port = 80;
  EXPECT_CODE (gaspi_config_set (bad), GASPI_ERR_CONFIG);
  bad = c;
  bad.allreduce_elem_max = 0;
  EXPECT_CODE (gaspi_config_set (bad), GASPI_ERR_CONFIG);
  gaspi_config_t now;
  CHECK (gaspi_config_get (&now));
  ASSERT (now.rw_list_elem_max == 255 && now.group_max == 32
          && now.allreduce_elem_max == 255);
  c.queue_size_max = 4; /* to fill a queue below */
  CHECK (gaspi_config_set (c));

  CHECK (gaspi_proc_init (GASPI_BLOCK));
  EXPECT_CODE (gaspi_proc_init (GASPI_BLOCK), GASPI_ERR_INITED);
  EXPECT_CODE (gaspi_config_set (c), GASPI_ERR_INITED);
  CHECK (gaspi_proc_rank (&rank));
  CHECK (gaspi_proc_num (&num));
  gaspi_rank_t right = (rank + 1) % num;

  /* Null pointers. */
  EXPECT_CODE (gaspi_proc_rank (NULL), GASPI_ERR_NULLPTR);
  EXPECT_CODE (gaspi_segment_ptr (0, NULL), GASPI_ERR_NULLPTR);
  EXPECT_CODE (gaspi_notify_waitsome (0, 0, 1, NULL, GASPI_TEST), GASPI_ERR_NULLPTR);
  EXPECT_CODE (gaspi_group_create (NULL), GASPI_ERR_NULLPTR);
  EXPECT_CODE (gaspi_state_vec_get (NULL), GASPI_ERR_NULLPTR);
  EXPECT_CODE (gaspi_allreduce (NULL, &n, 1, GASPI_OP_SUM, GASPI_TYPE_INT,
                                GASPI_GROUP_ALL, GASPI_BLOCK),
               GASPI_ERR_NULLPTR);
  EXPECT_CODE (gaspi_allreduce_user (&n, &n, 1, 4, NULL, NULL, GASPI_GROUP_ALL,
                                     GASPI_BLOCK),
               GASPI_ERR_NULLPTR);
  EXPECT_CODE (gaspi_segment_bind (5, NULL, 4096, 0), GASPI_ERR_NULLPTR);
  EXPECT_CODE (gaspi_print_error (GASPI_ERROR, NULL), GASPI_ERR_NULLPTR);

  /* Segments. */
  EXPECT_CODE (gaspi_segment_create (1, 0, GASPI_GROUP_ALL, GASPI_BLOCK, 0),
               GASPI_ERR_INV_SEGSIZE);
  CHECK (gaspi_segment_create (0, 4096, GASPI_GROUP_ALL, GASPI_BLOCK, 0));
  EXPECT_CODE (gaspi_segment_alloc (0, 4096, 0), GASPI_ERR_INV_SEG); /* exists */
  gaspi_pointer_t p;
  EXPECT_CODE (gaspi_segment_ptr (3, &p), GASPI_ERR_INV_SEG);
  EXPECT_CODE (gaspi_segment_delete (3), GASPI_ERR_INV_SEG);

  /* One-sided calls. */
  EXPECT_CODE (gaspi_write (0, 0, num, 0, 0, 8, 0, GASPI_BLOCK), GASPI_ERR_INV_RANK);
  EXPECT_CODE (gaspi_write (3, 0, right, 0, 0, 8, 0, GASPI_BLOCK), GASPI_ERR_INV_SEG);
  EXPECT_CODE (gaspi_write (0, 4090, right, 0, 0, 8, 0, GASPI_BLOCK),
               GASPI_ERR_INV_LOC_OFF);
  EXPECT_CODE (gaspi_write (0, 0, right, 0, 4090, 8, 0, GASPI_BLOCK),
               GASPI_ERR_INV_REM_OFF);
  EXPECT_CODE (gaspi_write (0, 0, right, 0, 0, 8, 200, GASPI_BLOCK),
               GASPI_ERR_INV_QUEUE);
  EXPECT_CODE (gaspi_write_notify (0, 0, right, 0, 0, 8, 0, 0, 0, GASPI_BLOCK),
               GASPI_ERR_INV_NOTIF_VAL);
  EXPECT_CODE (gaspi_notify (0, right, 1u << 30, 1, 0, GASPI_BLOCK),
               GASPI_ERR_INV_NOTIF_ID);
  /* As GPI-2: a null old value is discarded; waiting for no notification
     succeeds at once and leaves first_id alone (but checks the segment). */
  CHECK (gaspi_notify_reset (0, 0, NULL));
  id = 4711;
  CHECK (gaspi_notify_waitsome (0, 0, 0, &id, GASPI_BLOCK));
  ASSERT (id == 4711);
  EXPECT_CODE (gaspi_notify_waitsome (3, 0, 0, &id, GASPI_BLOCK), GASPI_ERR_INV_SEG);
  /* Size 0 is a valid transfer (as in GPI-2); its other arguments are
     still checked. */
  CHECK (gaspi_write (0, 4096, right, 0, 4096, 0, 2, GASPI_BLOCK));
  CHECK (gaspi_read (0, 0, right, 0, 0, 0, 2, GASPI_BLOCK));
  CHECK (gaspi_wait (2, GASPI_BLOCK));
  EXPECT_CODE (gaspi_write (3, 0, right, 0, 0, 0, 0, GASPI_BLOCK), GASPI_ERR_INV_SEG);
  EXPECT_CODE (gaspi_write (0, 4097, right, 0, 0, 0, 0, GASPI_BLOCK),
               GASPI_ERR_INV_LOC_OFF);
  EXPECT_CODE (gaspi_read (0, 0, right, 0, 4097, 0, 0, GASPI_BLOCK),
               GASPI_ERR_INV_REM_OFF);
  EXPECT_CODE (gaspi_write_notify (0, 0, right, 0, 0, 0, 1, 0, 0, GASPI_BLOCK),
               GASPI_ERR_INV_NOTIF_VAL);
  EXPECT_CODE (gaspi_notify_waitsome (0, 8, 8, &id, GASPI_TEST), GASPI_TIMEOUT);
  EXPECT_CODE (gaspi_notify_waitsome (0, 8, 8, &id, 20), GASPI_TIMEOUT);
  gaspi_segment_id_t s[1] = { 0 };
  gaspi_offset_t o[1] = { 0 };
  gaspi_size_t z[1] = { 8 };
  EXPECT_CODE (gaspi_write_list (0, s, o, right, s, o, z, 0, GASPI_BLOCK),
               GASPI_ERR_INV_NUM);
  EXPECT_CODE (gaspi_write_list (1, s, NULL, right, s, o, z, 0, GASPI_BLOCK),
               GASPI_ERR_NULLPTR);
  gaspi_offset_t far[1] = { 4097 };
  gaspi_size_t zero[1] = { 0 };
  EXPECT_CODE (gaspi_write_list (1, s, o, right, s, far, zero, 0, GASPI_BLOCK),
               GASPI_ERR_INV_REM_OFF);

  /* A full queue (depth 4 from gaspi_config_set), then room again. */
  for (int i = 0; i < 4; i++)
    CHECK (gaspi_write (0, 0, right, 0, 64, 8, 1, GASPI_BLOCK));
  EXPECT_CODE (gaspi_write (0, 0, right, 0, 64, 8, 1, GASPI_BLOCK), GASPI_QUEUE_FULL);
  CHECK (gaspi_wait (1, GASPI_BLOCK));
  CHECK (gaspi_write (0, 0, right, 0, 64, 8, 1, GASPI_BLOCK));
  CHECK (gaspi_wait (1, GASPI_BLOCK));

  /* Atomics. */
  EXPECT_CODE (gaspi_atomic_fetch_add (0, 4, right, 1, &old, GASPI_BLOCK),
               GASPI_ERR_UNALIGN_OFF);
  EXPECT_CODE (gaspi_atomic_fetch_add (0, 8, right, 1, NULL, GASPI_BLOCK),
               GASPI_ERR_NULLPTR);

  /* Groups and collectives. */
  EXPECT_CODE (gaspi_barrier (7, GASPI_BLOCK), GASPI_ERR_INV_GROUP);
  CHECK (gaspi_group_commit (GASPI_GROUP_ALL, GASPI_BLOCK)); /* as GPI-2 */
  EXPECT_CODE (gaspi_group_size (7, &n), GASPI_ERR_INV_GROUP);
  int x = 1, y;
  EXPECT_CODE (gaspi_allreduce (&x, &y, 0, GASPI_OP_SUM, GASPI_TYPE_INT,
                                GASPI_GROUP_ALL, GASPI_BLOCK),
               GASPI_ERR_INV_NUM);
  EXPECT_CODE (gaspi_allreduce (&x, &y, 256, GASPI_OP_SUM, GASPI_TYPE_INT,
                                GASPI_GROUP_ALL, GASPI_BLOCK),
               GASPI_ERR_INV_NUM); /* above allreduce_elem_max */
  /* Not pinned to NUMA nodes (GPI-2's gaspi_run -N): GASPI_ERR_ENV. */
  gaspi_uchar socket;
  EXPECT_CODE (gaspi_numa_socket (&socket), GASPI_ERR_ENV);
  EXPECT_CODE (gaspi_proc_kill (rank, GASPI_BLOCK), GASPI_ERR_INV_RANK);
  EXPECT_CODE (gaspi_proc_ping (num, GASPI_BLOCK), GASPI_ERR_INV_RANK);
  EXPECT_CODE (gaspi_connect (num, GASPI_BLOCK), GASPI_ERR_INV_RANK);
  EXPECT_CODE (gaspi_queue_delete (200), GASPI_ERR_INV_QUEUE);

  /* GPU segments (GASPI_Ext.h): a device this host does not have, and no
     CUDA driver at all, give GASPI_ERR_DEVICE with the id left free. */
  EXPECT_CODE (gaspi_segment_alloc_gpu (6, 4096, 9999), GASPI_ERR_DEVICE);
  EXPECT_CODE (gaspi_segment_create_gpu (6, 4096, GASPI_GROUP_ALL,
                                         GASPI_BLOCK, 9999),
               GASPI_ERR_DEVICE);
  gaspi_return_t gpu = gaspi_segment_alloc_gpu (6, 4096, 0);
  if (gpu == GASPI_SUCCESS)
    CHECK (gaspi_segment_delete (6));
  else
    EXPECT_CODE (gpu, GASPI_ERR_DEVICE);
  CHECK (gaspi_segment_alloc (6, 4096, GASPI_MEM_INITIALIZED));
  CHECK (gaspi_segment_delete (6));

  /* After all that the job still works: a checked write_notify. */
  CHECK (gaspi_segment_ptr (0, &p));
  ((uint64_t *) p)[0] = 4242 + rank;
  CHECK (gaspi_write_notify (0, 0, right, 0, 256, 8, 3, 1, 0, GASPI_BLOCK));
  CHECK (gaspi_notify_waitsome (0, 3, 1, &id, 10000));
  CHECK (gaspi_notify_reset (0, 3, &v));
  ASSERT (((uint64_t *) p)[32] == 4242u + (rank + num - 1) % num);
  CHECK (gaspi_wait (0, GASPI_BLOCK));
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
  printf ("rank %d: every error code checked\n", rank);
  CHECK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
