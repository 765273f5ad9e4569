/* A rank killed mid-job: the last rank kills itself after the first
   barrier; the survivors' calls that need it return GASPI_ERROR (no hang,
   even with GASPI_BLOCK), the state vector marks it GASPI_STATE_CORRUPT,
   and calls among the survivors keep working. Run with --keep-going. */
#include "check.h"
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

int main (void)
{
  gaspi_rank_t rank, num;
  CHECK (gaspi_proc_init (GASPI_BLOCK));
  CHECK (gaspi_proc_rank (&rank));
  CHECK (gaspi_proc_num (&num));
  CHECK (gaspi_segment_create (0, 4096, GASPI_GROUP_ALL, GASPI_BLOCK, 0));
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
  gaspi_rank_t victim = num - 1;
  /* The victim dies only once every survivor has left the first barrier
     (each tells it so): a member dying while others are still inside a
     barrier fails it there (decision 0018), which is not what this first
     barrier is for, and when that happens must not depend on scheduling
     (decision 0035). */
  if (rank == victim)
    {
      for (gaspi_rank_t told = 0; told < victim; told++)
        {
          gaspi_notification_id_t id;
          gaspi_notification_t v;
          CHECK (gaspi_notify_waitsome (0, 0, victim, &id, GASPI_BLOCK));
          CHECK (gaspi_notify_reset (0, id, &v));
        }
      fflush (stdout);
      raise (SIGKILL);
    }
  /* Not waited for here: once the victim is gone, a wait on a queue with
     requests to it fails naming it, as the one below must. */
  CHECK (gaspi_notify (0, victim, rank, 1, 0, GASPI_BLOCK));

  /* The barrier cannot complete: it fails, naming no hang. */
  EXPECT_CODE (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK), GASPI_ERROR);
  gaspi_state_t states[64];
  CHECK (gaspi_state_vec_get (states));
  ASSERT (states[victim] == GASPI_STATE_CORRUPT);
  for (gaspi_rank_t r = 0; r < victim; r++)
    ASSERT (states[r] == GASPI_STATE_HEALTHY);

  /* One-sided calls to the dead rank fail, posting or waiting. */
  gaspi_return_t posted = gaspi_write_notify (0, 0, victim, 0, 0, 8, 0, 1, 0,
                                              GASPI_BLOCK);
  ASSERT (posted == GASPI_ERROR
          || (posted == GASPI_SUCCESS && gaspi_wait (0, GASPI_BLOCK) == GASPI_ERROR));
  gaspi_atomic_value_t old;
  EXPECT_CODE (gaspi_atomic_fetch_add (0, 0, victim, 1, &old, GASPI_BLOCK),
               GASPI_ERROR);
  EXPECT_CODE (gaspi_proc_ping (victim, 1000), GASPI_ERROR);

  /* Survivors still reach each other. */
  if (victim > 1 && rank <= 1)
    {
      gaspi_rank_t peer = rank == 0 ? 1 : 0;
      gaspi_pointer_t p;
      CHECK (gaspi_segment_ptr (0, &p));
      ((uint64_t *) p)[0] = 77 + rank;
      CHECK (gaspi_write_notify (0, 0, peer, 0, 64, 8, 1, 1, 1, GASPI_BLOCK));
      gaspi_notification_id_t id;
      gaspi_notification_t v;
      CHECK (gaspi_notify_waitsome (0, 1, 1, &id, 10000));
      CHECK (gaspi_notify_reset (0, 1, &v));
      ASSERT (((uint64_t *) p)[8] == 77u + peer);
      CHECK (gaspi_wait (1, GASPI_BLOCK));
    }
  printf ("rank %d: survived rank %d\n", rank, victim);
  fflush (stdout);
  /* Leave without gaspi_proc_term's goodbye to the dead rank mattering. */
  gaspi_proc_term (5000);
  return 0;
}
