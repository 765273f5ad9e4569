/*
 * GASPI_Threads.h: GPI-2 1.6's helper for programs that run several
 * threads in one rank, served by libGPI2 of gaspi-rs.
 *
 * A rank announces how many of its threads take part
 * (gaspi_threads_init_user, or gaspi_threads_init for one per CPU this
 * process may run on); each such thread calls gaspi_threads_register once
 * and gets an id 0, 1, ... in the order of the calls. gaspi_threads_sync
 * returns in a thread once every announced thread has called it (a
 * barrier among the rank's threads, reusable); gaspi_threads_sync_all also
 * runs gaspi_barrier (group, timeout) once for the rank before releasing
 * them. As in GPI-2, GPI-2 1.6 marks all but gaspi_threads_register and
 * gaspi_threads_sync deprecated; they are kept for the programs that use
 * them.
 *
 * Differences from GPI-2 1.6 (each also in the comment of its call):
 * - gaspi_threads_run returns GASPI_ERROR when the thread cannot be
 *   started (GPI-2 returns pthread_create's error number), and the thread
 *   is detached: its resources are freed when it returns.
 * - gaspi_threads_sync_all returns the barrier's result in every thread
 *   that takes part (GPI-2: in the thread that ran it).
 */
#ifndef GPI2_THREADS_H
#define GPI2_THREADS_H

#include "GASPI.h"

#ifdef __cplusplus
extern "C"
{
#endif

#ifndef GASPI_THREADS_DEPRECATED
#define GASPI_THREADS_DEPRECATED __attribute__ ((deprecated))
#endif

  /* The id gaspi_threads_register gave the calling thread (-1 for a
     thread that has not registered); GASPI_ERROR before
     gaspi_threads_init(_user). */
  gaspi_return_t gaspi_threads_get_tid (gaspi_int * const tid) GASPI_THREADS_DEPRECATED;

  /* The number of threads announced by gaspi_threads_init(_user), as the
     calling thread saw it when it registered (-1 before it registers);
     GASPI_ERROR before gaspi_threads_init(_user). */
  gaspi_return_t gaspi_threads_get_total (gaspi_int * const num) GASPI_THREADS_DEPRECATED;

  /* The number of CPUs this process may run on (its affinity mask). */
  gaspi_return_t gaspi_threads_get_num_cores (gaspi_int * const cores) GASPI_THREADS_DEPRECATED;

  /* gaspi_threads_init_user with one thread per CPU this process may run
     on; that number is stored in *num. */
  gaspi_return_t gaspi_threads_init (gaspi_int * const num) GASPI_THREADS_DEPRECATED;

  /* Announces use_nr_of_threads threads (at most 1024: more are counted
     as 1024). GASPI_ERROR for 0, or when threads are announced already
     (call gaspi_threads_term first). Needs no gaspi_proc_init. */
  gaspi_return_t gaspi_threads_init_user (const unsigned int use_nr_of_threads) GASPI_THREADS_DEPRECATED;

  /* Ends the announcement: gaspi_threads_init(_user) may be called again.
     Threads still running are not stopped. */
  gaspi_return_t gaspi_threads_term (void) GASPI_THREADS_DEPRECATED;

  /* Starts function (arg) in a new (detached) thread; GASPI_ERROR before
     gaspi_threads_init(_user) or when the thread cannot be started. */
  gaspi_return_t gaspi_threads_run (void *(*function) (void *), void *arg) GASPI_THREADS_DEPRECATED;

  /* Registers the calling thread: *tid is its id, 0 for the first thread
     to register, then 1, 2, ... */
  gaspi_return_t gaspi_threads_register (gaspi_int * tid);

  /* Returns once every announced thread has called it (in each round). */
  void gaspi_threads_sync (void);

  /* gaspi_threads_sync, with gaspi_barrier (g, timeout_ms) run once for
     the rank after every thread has arrived and before any is released;
     each thread returns the barrier's result (GASPI_TIMEOUT: call it
     again, in every thread, to resume). */
  gaspi_return_t gaspi_threads_sync_all (const gaspi_group_t g,
                                         const gaspi_timeout_t timeout_ms) GASPI_THREADS_DEPRECATED;

#ifdef __cplusplus
}
#endif

#endif
