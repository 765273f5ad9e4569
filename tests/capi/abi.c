/* The ABI of GASPI_types.h against GPI-2 1.6's published values (LP64):
   typedef widths, return codes and enum values, the gaspi_config_t layout
   at compile time; GASPI_BLOCK/GASPI_TEST (static consts in GPI-2, not
   constant expressions in C) and the library's answers at run time. The
   Rust side checks the same numbers in runtime/capi/src/types.rs. */
#include "check.h"
#include <stddef.h>
#include <string.h>

#define SIZE(t, n) _Static_assert (sizeof (t) == (n), "sizeof " #t)
#define VALUE(c, v) _Static_assert ((c) == (v), #c)
#define OFFSET(f, n) _Static_assert (offsetof (gaspi_config_t, f) == (n), "offset of " #f)

SIZE (gaspi_char, 1);
SIZE (gaspi_uchar, 1);
SIZE (gaspi_short, 2);
SIZE (gaspi_ushort, 2);
SIZE (gaspi_int, 4);
SIZE (gaspi_uint, 4);
SIZE (gaspi_long, 8);
SIZE (gaspi_ulong, 8);
SIZE (gaspi_float, 4);
SIZE (gaspi_double, 8);
SIZE (gaspi_timeout_t, 8);
SIZE (gaspi_rank_t, 2);
SIZE (gaspi_group_t, 1);
SIZE (gaspi_number_t, 4);
SIZE (gaspi_pointer_t, 8);
SIZE (gaspi_reduce_state_t, 8);
SIZE (gaspi_queue_id_t, 1);
SIZE (gaspi_size_t, 8);
SIZE (gaspi_segment_id_t, 1);
SIZE (gaspi_offset_t, 8);
SIZE (gaspi_atomic_value_t, 8);
SIZE (gaspi_time_t, 4);
SIZE (gaspi_cycles_t, 8);
SIZE (gaspi_notification_id_t, 4);
SIZE (gaspi_notification_t, 4);
SIZE (gaspi_statistic_counter_t, 4);
SIZE (gaspi_string_t, 8);
SIZE (gaspi_memory_description_t, 4);
SIZE (gaspi_return_t, 4);
SIZE (gaspi_state_t, 4);
SIZE (gaspi_network_t, 4);
SIZE (gaspi_dev_config_t, 32);
SIZE (gaspi_config_t, 144);

OFFSET (logger, 0);
OFFSET (sn_port, 4);
OFFSET (sn_persistent, 16);
OFFSET (sn_timeout, 24);
OFFSET (dev_config, 32);
OFFSET (network, 64);
OFFSET (queue_size_max, 68);
OFFSET (queue_num, 72);
OFFSET (group_max, 76);
OFFSET (segment_max, 80);
OFFSET (transfer_size_max, 88);
OFFSET (notification_num, 96);
OFFSET (passive_queue_size_max, 100);
OFFSET (passive_transfer_size_max, 104);
OFFSET (allreduce_buf_size, 112);
OFFSET (allreduce_elem_max, 120);
OFFSET (rw_list_elem_max, 124);
OFFSET (build_infrastructure, 128);
OFFSET (user_defined, 136);

VALUE (GASPI_ERROR, -1);
VALUE (GASPI_SUCCESS, 0);
VALUE (GASPI_TIMEOUT, 1);
VALUE (GASPI_ERR_EMFILE, 2);
VALUE (GASPI_ERR_ENV, 3);
VALUE (GASPI_ERR_SN_PORT, 4);
VALUE (GASPI_ERR_CONFIG, 5);
VALUE (GASPI_ERR_NOINIT, 6);
VALUE (GASPI_ERR_INITED, 7);
VALUE (GASPI_ERR_NULLPTR, 8);
VALUE (GASPI_ERR_INV_SEGSIZE, 9);
VALUE (GASPI_ERR_INV_SEG, 10);
VALUE (GASPI_ERR_INV_GROUP, 11);
VALUE (GASPI_ERR_INV_RANK, 12);
VALUE (GASPI_ERR_INV_QUEUE, 13);
VALUE (GASPI_ERR_INV_LOC_OFF, 14);
VALUE (GASPI_ERR_INV_REM_OFF, 15);
VALUE (GASPI_ERR_INV_COMMSIZE, 16);
VALUE (GASPI_ERR_INV_NOTIF_VAL, 17);
VALUE (GASPI_ERR_INV_NOTIF_ID, 18);
VALUE (GASPI_ERR_INV_NUM, 19);
VALUE (GASPI_ERR_INV_SIZE, 20);
VALUE (GASPI_ERR_MANY_SEG, 21);
VALUE (GASPI_ERR_MANY_GRP, 22);
VALUE (GASPI_QUEUE_FULL, 23);
VALUE (GASPI_ERR_UNALIGN_OFF, 24);
VALUE (GASPI_ERR_ACTIVE_COLL, 25);
VALUE (GASPI_ERR_DEVICE, 26);
VALUE (GASPI_ERR_SN, 27);
VALUE (GASPI_ERR_MEMALLOC, 28);
VALUE (GASPI_OP_MIN, 0);
VALUE (GASPI_OP_MAX, 1);
VALUE (GASPI_OP_SUM, 2);
VALUE (GASPI_TYPE_INT, 0);
VALUE (GASPI_TYPE_UINT, 1);
VALUE (GASPI_TYPE_FLOAT, 2);
VALUE (GASPI_TYPE_DOUBLE, 3);
VALUE (GASPI_TYPE_LONG, 4);
VALUE (GASPI_TYPE_ULONG, 5);
VALUE (GASPI_IB, 0);
VALUE (GASPI_ROCE, 1);
VALUE (GASPI_ETHERNET, 2);
VALUE (GASPI_GEMINI, 3);
VALUE (GASPI_ARIES, 4);
VALUE (GASPI_OFI, 5);
VALUE (GASPI_MEM_UNINITIALIZED, 0);
VALUE (GASPI_MEM_INITIALIZED, 1);
VALUE (GASPI_ALLOC_DEFAULT, 0);
VALUE (GASPI_STATE_HEALTHY, 0);
VALUE (GASPI_STATE_CORRUPT, 1);
VALUE (GASPI_STATISTIC_ARGUMENT_NONE, 0);
VALUE (GASPI_STATISTIC_ARGUMENT_RANK, 1);
VALUE (GASPI_TOPOLOGY_NONE, 0);
VALUE (GASPI_TOPOLOGY_STATIC, 1);
VALUE (GASPI_TOPOLOGY_DYNAMIC, 2);

int main (void)
{
  ASSERT (GASPI_BLOCK == 0xfffffffffffffffful);
  ASSERT (GASPI_TEST == 0);
  ASSERT (GASPI_GROUP_ALL == 0);
  /* The library's defaults are GPI-2 1.6's. */
  gaspi_config_t c;
  CHECK (gaspi_config_get (&c));
  ASSERT (c.queue_num == 8 && c.queue_size_max == 1024);
  ASSERT (c.segment_max == 255 && c.notification_num == 65536);
  ASSERT (c.transfer_size_max == 1ul << 30);
  ASSERT (c.build_infrastructure == GASPI_TOPOLOGY_STATIC);
  float version;
  CHECK (gaspi_version (&version));
  ASSERT (version == 1.6f);
  ASSERT (strcmp (gaspi_error_str (GASPI_ERR_MEMALLOC), "Memory allocation failed") == 0);
  ASSERT (strcmp (gaspi_error_str (GASPI_ERROR), "general error") == 0);
  EXPECT_CODE (gaspi_proc_num (NULL), GASPI_ERR_NOINIT);
  printf ("ABI checked\n");
  return 0;
}
