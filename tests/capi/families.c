/* Every call family of GASPI.h and GASPI_Ext.h, each with a check that
   fails when the call does the wrong thing. Runs with any number of ranks
   >= 2. */
#include "check.h"
#include <stdint.h>
#include <string.h>

static gaspi_rank_t rank, num;

static void barrier (void)
{
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
}

static void configuration (void)
{
  gaspi_config_t c;
  CHECK (gaspi_config_get (&c));
  ASSERT (c.queue_num == 8);
  ASSERT (c.segment_max == 255);
  ASSERT (c.queue_size_max == 1024);
  c.notification_num = 4096;
  c.queue_num = 17; /* more than GASPI's 16 queues */
  EXPECT_CODE (gaspi_config_set (c), GASPI_ERR_CONFIG);
  c.queue_num = 6;
  c.allreduce_elem_max = 20000; /* more than one allreduce of the runtime */
  c.group_max = 100;           /* more than the default 32 */
  CHECK (gaspi_config_set (c));
  CHECK (gaspi_config_get (&c));
  ASSERT (c.queue_num == 6 && c.notification_num == 4096);
  ASSERT (c.allreduce_elem_max == 20000 && c.group_max == 100);
}

static void information (void)
{
  gaspi_number_t n;
  gaspi_size_t s;
  float version;
  CHECK (gaspi_version (&version));
  ASSERT (version > 1.59f && version < 1.61f);
  CHECK (gaspi_queue_num (&n));
  ASSERT (n == 6); /* from gaspi_config_set */
  CHECK (gaspi_notification_num (&n));
  ASSERT (n == 4096);
  CHECK (gaspi_segment_max (&n));
  ASSERT (n == 255);
  CHECK (gaspi_queue_size_max (&n));
  ASSERT (n == 1024);
  CHECK (gaspi_queue_max (&n));
  ASSERT (n == 16);
  CHECK (gaspi_transfer_size_max (&s));
  ASSERT (s == 1ul << 30);
  CHECK (gaspi_transfer_size_min (&s));
  ASSERT (s == 0); /* size 0 is a valid transfer */
  CHECK (gaspi_passive_transfer_size_max (&s));
  ASSERT (s >= 1024);
  CHECK (gaspi_allreduce_elem_max (&n));
  ASSERT (n == 20000); /* from gaspi_config_set */
  CHECK (gaspi_allreduce_buf_size (&s));
  ASSERT (s == 160000);
  CHECK (gaspi_group_max (&n));
  ASSERT (n == 100);
  CHECK (gaspi_rw_list_elem_max (&n));
  ASSERT (n >= 255);
  gaspi_atomic_value_t amax;
  CHECK (gaspi_atomic_max (&amax));
  ASSERT (amax == 0xfffffffffffffffful);
  gaspi_network_t net;
  CHECK (gaspi_network_type (&net));
  ASSERT (net == GASPI_ETHERNET);
  gaspi_rank_t lr, ln;
  CHECK (gaspi_proc_local_rank (&lr));
  CHECK (gaspi_proc_local_num (&ln));
  ASSERT (lr == rank && ln == num); /* one host */
  gaspi_cycles_t t0, t1;
  gaspi_float mhz;
  gaspi_time_t ms;
  CHECK (gaspi_time_ticks (&t0));
  CHECK (gaspi_cpu_frequency (&mhz));
  CHECK (gaspi_time_get (&ms));
  CHECK (gaspi_time_ticks (&t1));
  ASSERT (t1 > t0 && mhz > 0 && ms >= 0);
  for (gaspi_rank_t r = 0; r < num; r++)
    CHECK (gaspi_proc_ping (r, 5000));
  CHECK (gaspi_connect ((rank + 1) % num, GASPI_BLOCK));
  CHECK (gaspi_disconnect ((rank + 1) % num, GASPI_BLOCK));
  gaspi_delay ();
}

static void segments (void)
{
  gaspi_number_t n;
  gaspi_segment_id_t ids[8], avail;
  gaspi_size_t size;
  CHECK (gaspi_segment_create (0, 1 << 16, GASPI_GROUP_ALL, GASPI_BLOCK,
                               GASPI_MEM_INITIALIZED));
  CHECK (gaspi_segment_alloc (1, 1 << 12, GASPI_ALLOC_DEFAULT));
  for (gaspi_rank_t r = 0; r < num; r++)
    CHECK (gaspi_segment_register (1, r, GASPI_BLOCK));
  static uint64_t user_memory[1024];
  CHECK (gaspi_segment_use (2, user_memory, sizeof user_memory, GASPI_GROUP_ALL,
                            GASPI_BLOCK, 0));
  barrier ();
  CHECK (gaspi_segment_num (&n));
  ASSERT (n == 3);
  CHECK (gaspi_segment_list (8, ids));
  ASSERT (ids[0] == 0 && ids[1] == 1 && ids[2] == 2);
  CHECK (gaspi_segment_avail_local (&avail));
  ASSERT (avail == 3);
  CHECK (gaspi_segment_size (1, rank, &size));
  ASSERT (size == 1 << 12);
  /* Peers' sizes too, once they registered or created their segments
     with us (the barrier above follows both). */
  for (gaspi_rank_t r = 0; r < num; r++)
    {
      CHECK (gaspi_segment_size (0, r, &size));
      ASSERT (size == 1 << 16);
      CHECK (gaspi_segment_size (1, r, &size));
      ASSERT (size == 1 << 12);
    }
  EXPECT_CODE (gaspi_segment_size (5, (rank + 1) % num, &size), GASPI_ERR_INV_SEG);
  EXPECT_CODE (gaspi_segment_size (0, num, &size), GASPI_ERR_INV_RANK);
  gaspi_pointer_t p;
  CHECK (gaspi_segment_ptr (2, &p));
  ASSERT (p == (void *) user_memory);
  /* A scratch segment comes and goes. */
  CHECK (gaspi_segment_alloc (9, 4096, GASPI_MEM_UNINITIALIZED));
  CHECK (gaspi_segment_delete (9));
  CHECK (gaspi_segment_num (&n));
  ASSERT (n == 3);
}

/* One-sided calls into the right neighbour's segment 0, checked there. */
static void one_sided (void)
{
  gaspi_rank_t right = (rank + 1) % num, left = (rank + num - 1) % num;
  gaspi_pointer_t p;
  CHECK (gaspi_segment_ptr (0, &p));
  uint64_t *w = (uint64_t *) p; /* 8192 words */
  gaspi_notification_id_t id;
  gaspi_notification_t v;

  /* write */
  for (int i = 0; i < 64; i++)
    w[i] = 1000 * rank + i;
  CHECK (gaspi_write (0, 0, right, 0, 512 * 8, 64 * 8, 0, GASPI_BLOCK));
  CHECK (gaspi_wait (0, GASPI_BLOCK));
  barrier ();
  for (int i = 0; i < 64; i++)
    ASSERT (w[512 + i] == 1000u * left + i);

  /* read: the right neighbour's words 0..64 (its own stamp) */
  CHECK (gaspi_read (0, 1024 * 8, right, 0, 0, 64 * 8, 1, GASPI_BLOCK));
  CHECK (gaspi_wait (1, GASPI_BLOCK));
  for (int i = 0; i < 64; i++)
    ASSERT (w[1024 + i] == 1000u * right + i);
  barrier ();

  /* write_list: two pieces to two places */
  gaspi_segment_id_t sl[2] = { 0, 0 }, sr[2] = { 0, 0 };
  gaspi_offset_t ol[2] = { 0, 8 * 8 }, orr[2] = { 2048 * 8, 2100 * 8 };
  gaspi_size_t sz[2] = { 8 * 8, 4 * 8 };
  CHECK (gaspi_write_list (2, sl, ol, right, sr, orr, sz, 0, GASPI_BLOCK));
  CHECK (gaspi_wait (0, GASPI_BLOCK));
  barrier ();
  for (int i = 0; i < 8; i++)
    ASSERT (w[2048 + i] == 1000u * left + i);
  for (int i = 0; i < 4; i++)
    ASSERT (w[2100 + i] == 1000u * left + 8 + i);

  /* read_list: the same pieces back from the right neighbour */
  gaspi_offset_t back[2] = { 3000 * 8, 3100 * 8 };
  CHECK (gaspi_read_list (2, sl, back, right, sr, ol, sz, 0, GASPI_BLOCK));
  CHECK (gaspi_wait (0, GASPI_BLOCK));
  for (int i = 0; i < 8; i++)
    ASSERT (w[3000 + i] == 1000u * right + i);
  for (int i = 0; i < 4; i++)
    ASSERT (w[3100 + i] == 1000u * right + 8 + i);
  barrier ();

  /* write_list_notify: data, then notification 5 with value 55 */
  gaspi_offset_t orr2[2] = { 4000 * 8, 4100 * 8 };
  CHECK (gaspi_write_list_notify (2, sl, ol, right, sr, orr2, sz, 0, 5, 55, 0,
                                  GASPI_BLOCK));
  CHECK (gaspi_notify_waitsome (0, 5, 1, &id, 10000));
  CHECK (gaspi_notify_reset (0, id, &v));
  ASSERT (id == 5 && v == 55);
  ASSERT (w[4000] == 1000u * left && w[4100 + 3] == 1000u * left + 11);
  CHECK (gaspi_wait (0, GASPI_BLOCK));

  /* read_notify: local notification 7 once the data is here */
  CHECK (gaspi_read_notify (0, 5000 * 8, right, 0, 0, 16 * 8, 7, 2,
                            GASPI_BLOCK));
  CHECK (gaspi_notify_waitsome (0, 7, 1, &id, 10000));
  CHECK (gaspi_notify_reset (0, 7, &v));
  ASSERT (v != 0);
  ASSERT (w[5000 + 15] == 1000u * right + 15);
  CHECK (gaspi_wait (2, GASPI_BLOCK));

  /* notify alone, and write_notify */
  CHECK (gaspi_notify (0, right, 9, 99, 3, GASPI_BLOCK));
  CHECK (gaspi_notify_waitsome (0, 9, 1, &id, 10000));
  CHECK (gaspi_notify_reset (0, id, &v));
  ASSERT (id == 9 && v == 99);
  CHECK (gaspi_write_notify (0, 0, right, 0, 6000 * 8, 8, 10, 3, 3, GASPI_BLOCK));
  CHECK (gaspi_notify_waitsome (0, 10, 1, &id, 10000));
  CHECK (gaspi_notify_reset (0, 10, &v));
  ASSERT (v == 3 && w[6000] == 1000u * left);
  /* nothing is left set */
  EXPECT_CODE (gaspi_notify_waitsome (0, 0, 4096, &id, GASPI_TEST), GASPI_TIMEOUT);
  CHECK (gaspi_wait (3, GASPI_BLOCK));
  barrier ();
}

static void atomics (void)
{
  gaspi_atomic_value_t old;
  /* Everybody adds rank+1 to word 7000 of rank 0. */
  CHECK (gaspi_atomic_fetch_add (0, 7000 * 8, 0, rank + 1, &old, GASPI_BLOCK));
  barrier ();
  CHECK (gaspi_atomic_fetch_add (0, 7000 * 8, 0, 0, &old, GASPI_BLOCK));
  ASSERT (old == (gaspi_atomic_value_t) num * (num + 1) / 2);
  barrier ();
  /* Exactly one rank's compare-and-swap wins. */
  CHECK (gaspi_atomic_compare_swap (0, 7008, 0, 0, 100 + rank, &old, GASPI_BLOCK));
  barrier ();
  gaspi_atomic_value_t now;
  CHECK (gaspi_atomic_fetch_add (0, 7008, 0, 0, &now, GASPI_BLOCK));
  ASSERT (now >= 100 && now < 100u + num);
  ASSERT ((old == 0) == (now == 100u + rank));
  barrier ();
}

static void passive (void)
{
  gaspi_pointer_t p;
  CHECK (gaspi_segment_ptr (1, &p));
  char *bytes = (char *) p;
  if (rank != 0)
    {
      snprintf (bytes, 64, "passive from %d", rank);
      CHECK (gaspi_passive_send (1, 0, 0, 64, GASPI_BLOCK));
    }
  else
    {
      int seen = 0;
      for (int m = 1; m < num; m++)
        {
          gaspi_rank_t from;
          char want[64];
          CHECK (gaspi_passive_receive (1, 128, &from, 64, 10000));
          snprintf (want, sizeof want, "passive from %d", from);
          ASSERT (strcmp (bytes + 128, want) == 0);
          ASSERT (from > 0 && from < num && !(seen & (1 << from)));
          seen |= 1 << from;
        }
    }
  barrier ();
}

static void groups (void)
{
  gaspi_group_t g;
  gaspi_number_t n, before;
  CHECK (gaspi_group_num (&before));
  ASSERT (before == 1);
  CHECK (gaspi_group_max (&n));
  ASSERT (n >= 2);
  CHECK (gaspi_group_create (&g));
  ASSERT (g != GASPI_GROUP_ALL);
  for (gaspi_rank_t r = 0; r < num; r += 2)
    CHECK (gaspi_group_add (g, r));
  if (rank % 2 == 0)
    {
      CHECK (gaspi_group_commit (g, 10000));
      CHECK (gaspi_group_size (g, &n));
      ASSERT (n == (num + 1u) / 2);
      gaspi_rank_t members[64];
      CHECK (gaspi_group_ranks (g, members));
      for (gaspi_number_t i = 0; i < n; i++)
        ASSERT (members[i] == 2 * i);
      CHECK (gaspi_barrier (g, 10000));
      int one = 1, count = 0;
      CHECK (gaspi_allreduce (&one, &count, 1, GASPI_OP_SUM, GASPI_TYPE_INT, g,
                              10000));
      ASSERT (count == (int) n);
    }
  CHECK (gaspi_group_num (&n));
  ASSERT (n == 2);
  CHECK (gaspi_group_delete (g));
  CHECK (gaspi_group_num (&n));
  ASSERT (n == before);
  barrier ();
}

/* A user reduction: element-wise maximum of (value, rank) pairs, with
   the state pointer counting calls. */
typedef struct
{
  double value;
  long rank;
} pair_t;

static gaspi_return_t max_pair (gaspi_pointer_t const a, gaspi_pointer_t const b,
                                gaspi_pointer_t const out,
                                gaspi_reduce_state_t const state,
                                const gaspi_number_t num_elems,
                                const gaspi_size_t elem_size,
                                const gaspi_timeout_t timeout)
{
  (void) timeout;
  if (elem_size != sizeof (pair_t))
    return GASPI_ERROR;
  pair_t *x = a, *y = b, *r = out;
  for (gaspi_number_t i = 0; i < num_elems; i++)
    r[i] = x[i].value >= y[i].value ? x[i] : y[i];
  (*(int *) state)++;
  return GASPI_SUCCESS;
}

static void collectives (void)
{
  int is[3] = { rank + 1, -(int) rank, 7 }, ir[3];
  CHECK (gaspi_allreduce (is, ir, 3, GASPI_OP_SUM, GASPI_TYPE_INT,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  ASSERT (ir[0] == num * (num + 1) / 2 && ir[1] == -(num * (num - 1) / 2)
          && ir[2] == 7 * num);
  unsigned int us = rank + 10, ur;
  CHECK (gaspi_allreduce (&us, &ur, 1, GASPI_OP_MIN, GASPI_TYPE_UINT,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  ASSERT (ur == 10);
  float fs = rank * 0.5f, fr;
  CHECK (gaspi_allreduce (&fs, &fr, 1, GASPI_OP_MAX, GASPI_TYPE_FLOAT,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  ASSERT (fr == (num - 1) * 0.5f);
  double ds[2] = { 1.5, rank }, dr[2];
  CHECK (gaspi_allreduce (ds, dr, 2, GASPI_OP_SUM, GASPI_TYPE_DOUBLE,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  ASSERT (dr[0] == 1.5 * num && dr[1] == num * (num - 1) / 2.0);
  long ls = -(long) rank - (1l << 40), lr;
  CHECK (gaspi_allreduce (&ls, &lr, 1, GASPI_OP_MIN, GASPI_TYPE_LONG,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  ASSERT (lr == -(long) (num - 1) - (1l << 40));
  unsigned long uls = 1ul << (33 + rank), ulr;
  CHECK (gaspi_allreduce (&uls, &ulr, 1, GASPI_OP_MAX, GASPI_TYPE_ULONG,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  ASSERT (ulr == 1ul << (33 + num - 1));

  pair_t mine[2] = { { (double) rank, rank }, { -(double) rank, rank } }, best[2];
  int calls = 0;
  CHECK (gaspi_allreduce_user (mine, best, 2, sizeof (pair_t), max_pair, &calls,
                               GASPI_GROUP_ALL, GASPI_BLOCK));
  ASSERT (best[0].rank == num - 1 && best[0].value == num - 1.0);
  ASSERT (best[1].rank == 0 && best[1].value == 0.0);
  int total = 0;
  CHECK (gaspi_allreduce (&calls, &total, 1, GASPI_OP_SUM, GASPI_TYPE_INT,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  ASSERT (total >= 1); /* the callback really ran */

  /* 20000 elements (allreduce_elem_max from gaspi_config_set): more than
     one allreduce of the runtime (8192), run in pieces; and in place. */
  static long big[20000], bigr[20000];
  for (int i = 0; i < 20000; i++)
    big[i] = (long) i * (rank + 1);
  CHECK (gaspi_allreduce (big, bigr, 20000, GASPI_OP_SUM, GASPI_TYPE_LONG,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  for (int i = 0; i < 20000; i++)
    ASSERT (bigr[i] == (long) i * num * (num + 1) / 2);
  CHECK (gaspi_allreduce (big, big, 20000, GASPI_OP_MAX, GASPI_TYPE_LONG,
                          GASPI_GROUP_ALL, GASPI_BLOCK));
  for (int i = 0; i < 20000; i++)
    ASSERT (big[i] == (long) i * num);
  static pair_t many[400], manyr[400];
  for (int i = 0; i < 400; i++)
    many[i] = (pair_t) { (double) ((i + rank) % num), rank };
  CHECK (gaspi_allreduce_user (many, manyr, 400, sizeof (pair_t), max_pair,
                               &calls, GASPI_GROUP_ALL, GASPI_BLOCK));
  for (int i = 0; i < 400; i++)
    ASSERT (manyr[i].value == num - 1.0 && manyr[i].rank == (num - 1 - i % num + num) % num);
  EXPECT_CODE (gaspi_allreduce (big, bigr, 20001, GASPI_OP_SUM, GASPI_TYPE_LONG,
                                GASPI_GROUP_ALL, GASPI_BLOCK),
               GASPI_ERR_INV_NUM);
}

static void queues (void)
{
  gaspi_queue_id_t q;
  gaspi_number_t n, size;
  CHECK (gaspi_queue_create (&q, GASPI_BLOCK));
  ASSERT (q == 6);
  CHECK (gaspi_queue_num (&n));
  ASSERT (n == 7);
  gaspi_rank_t right = (rank + 1) % num;
  CHECK (gaspi_write (0, 0, right, 0, 7500 * 8, 8, q, GASPI_BLOCK));
  CHECK (gaspi_write (0, 0, right, 0, 7501 * 8, 8, q, GASPI_BLOCK));
  CHECK (gaspi_queue_size (q, &size));
  ASSERT (size == 2);
  CHECK (gaspi_wait (q, GASPI_BLOCK));
  CHECK (gaspi_queue_size (q, &size));
  ASSERT (size == 0);
  CHECK (gaspi_write (0, 0, right, 0, 7502 * 8, 8, q, GASPI_BLOCK));
  CHECK (gaspi_queue_purge (q, GASPI_BLOCK));
  CHECK (gaspi_queue_size (q, &size));
  ASSERT (size == 0);
  CHECK (gaspi_queue_delete (q));
  CHECK (gaspi_queue_num (&n));
  ASSERT (n == 6);
  barrier ();
}

static void state_and_statistics (void)
{
  gaspi_state_t states[64];
  CHECK (gaspi_state_vec_get (states));
  for (int r = 0; r < num; r++)
    ASSERT (states[r] == GASPI_STATE_HEALTHY);
  gaspi_number_t max, level;
  CHECK (gaspi_statistic_verbosity_level (1));
  CHECK (gaspi_statistic_counter_max (&max));
  ASSERT (max > 4);
  gaspi_statistic_argument_t arg;
  gaspi_string_t name, desc;
  CHECK (gaspi_statistic_counter_info (0, &arg, &name, &desc, &level));
  ASSERT (strcmp (name, "bytes_written") == 0 && desc != NULL);
  unsigned long value = 0;
  CHECK (gaspi_statistic_counter_get (0, 0, &value));
  ASSERT (value > 0); /* this rank wrote */
  int found = 0;
  for (gaspi_statistic_counter_t c = 4; c < max; c++)
    {
      CHECK (gaspi_statistic_counter_info (c, &arg, &name, &desc, &level));
      if (strcmp (name, "calls:write_notify") == 0)
        {
          CHECK (gaspi_statistic_counter_get (c, 0, &value));
          ASSERT (value >= 1);
          found = 1;
        }
    }
  ASSERT (found);
  CHECK (gaspi_statistic_counter_reset (0));
  CHECK (gaspi_statistic_counter_get (0, 0, &value));
  ASSERT (value == 0);
  EXPECT_CODE (gaspi_statistic_counter_get (max, 0, &value), GASPI_ERR_INV_NUM);

  gaspi_string_t msg;
  CHECK (gaspi_print_error (GASPI_ERR_INV_RANK, &msg));
  ASSERT (strcmp (msg, "Invalid rank") == 0);
  free (msg);
  ASSERT (strcmp (gaspi_error_str (GASPI_TIMEOUT), "timeout") == 0);
  ASSERT (strcmp (gaspi_error_str (12345), "unknown") == 0);
}

int main (void)
{
  configuration ();
  CHECK (gaspi_proc_init (GASPI_BLOCK));
  CHECK (gaspi_proc_rank (&rank));
  CHECK (gaspi_proc_num (&num));
  ASSERT (num >= 2 && num <= 32);
  information ();
  segments ();
  one_sided ();
  atomics ();
  passive ();
  groups ();
  collectives ();
  queues ();
  state_and_statistics ();
  barrier ();
  CHECK (gaspi_segment_delete (2));
  printf ("rank %d: every family checked\n", rank);
  CHECK (gaspi_proc_term (GASPI_BLOCK));
  return 0;
}
