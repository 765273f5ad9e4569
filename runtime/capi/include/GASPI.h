/*
 * GASPI.h: the GASPI C interface of GPI-2 1.6, served by libGPI2 of
 * gaspi-rs (runtime/capi). Written from GPI-2 1.6's published interface.
 *
 * Every call returns a gaspi_return_t: GASPI_SUCCESS, GASPI_TIMEOUT (the
 * call may be repeated), GASPI_ERROR, or a GASPI_ERR_* code naming the bad
 * argument. Unlike GPI-2, arguments are checked in every build, and a null
 * pointer argument gives GASPI_ERR_NULLPTR, never a crash. Calls before
 * gaspi_proc_init give GASPI_ERR_NOINIT. Blocking calls take a timeout in
 * milliseconds, or GASPI_BLOCK, or GASPI_TEST.
 */
#ifndef GASPI_H
#define GASPI_H

#include "GASPI_types.h"

#ifdef __cplusplus
extern "C"
{
#endif

  /* ---- configuration and process management ---- */

  /* The configuration gaspi_proc_init will use (the environment's
     GASPI_* variables, then what gaspi_config_set gave). */
  gaspi_return_t gaspi_config_get (gaspi_config_t * const config);
  /* Before gaspi_proc_init only (GASPI_ERR_INITED after). What GPI-2 1.6
     refuses gives GASPI_ERR_CONFIG (rw_list_elem_max above 255,
     queue_size_max above 4096, ...), and a group_max above 256; nothing
     of a refused configuration is kept. allreduce_elem_max is honoured
     (above 8192 elements an allreduce runs in pieces). */
  gaspi_return_t gaspi_config_set (const gaspi_config_t new_config);
  /* 1.6: the GPI-2 version whose interface this library serves. */
  gaspi_return_t gaspi_version (float *version);
  /* Starts this rank under gaspi-run, srun, mpirun or alone (one rank).
     timeout_ms bounds the wait for the other ranks. A GASPI_* variable
     that cannot be read gives GASPI_ERR_CONFIG. */
  gaspi_return_t gaspi_proc_init (const gaspi_timeout_t timeout_ms);
  /* Ends this rank's part; GASPI_TIMEOUT if another thread is still inside
     a call after timeout_ms. */
  gaspi_return_t gaspi_proc_term (const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_proc_rank (gaspi_rank_t * const rank);
  gaspi_return_t gaspi_proc_num (gaspi_rank_t * const proc_num);
  /* Stops another rank (it exits at once). Own rank: GASPI_ERR_INV_RANK. */
  gaspi_return_t gaspi_proc_kill (const gaspi_rank_t rank,
                                  const gaspi_timeout_t timeout_ms);
  /* No-op returning GASPI_SUCCESS for a valid rank: gaspi-rs connects all
     ranks at gaspi_proc_init (GASPI_TOPOLOGY_STATIC). */
  gaspi_return_t gaspi_connect (const gaspi_rank_t rank,
                                const gaspi_timeout_t timeout_ms);
  /* No-op returning GASPI_SUCCESS for a valid rank (see gaspi_connect). */
  gaspi_return_t gaspi_disconnect (const gaspi_rank_t rank,
                                   const gaspi_timeout_t timeout_ms);

  /* ---- groups ---- */

  gaspi_return_t gaspi_group_create (gaspi_group_t * const group);
  gaspi_return_t gaspi_group_delete (const gaspi_group_t group);
  gaspi_return_t gaspi_group_add (const gaspi_group_t group,
                                  const gaspi_rank_t rank);
  /* GASPI_GROUP_ALL is committed at init: committing it succeeds. */
  gaspi_return_t gaspi_group_commit (const gaspi_group_t group,
                                     const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_group_num (gaspi_number_t * const group_num);
  gaspi_return_t gaspi_group_size (const gaspi_group_t group,
                                   gaspi_number_t * const group_size);
  /* group_ranks must hold gaspi_group_size entries. */
  gaspi_return_t gaspi_group_ranks (const gaspi_group_t group,
                                    gaspi_rank_t * const group_ranks);
  gaspi_return_t gaspi_group_max (gaspi_number_t * const group_max);

  /* ---- segments ---- */

  /* Segments are always zeroed, whatever alloc_policy says. */
  gaspi_return_t gaspi_segment_alloc (const gaspi_segment_id_t segment_id,
                                      const gaspi_size_t size,
                                      const gaspi_alloc_t alloc_policy);
  gaspi_return_t gaspi_segment_delete (const gaspi_segment_id_t segment_id);
  gaspi_return_t gaspi_segment_register (const gaspi_segment_id_t segment_id,
                                         const gaspi_rank_t rank,
                                         const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_segment_create (const gaspi_segment_id_t segment_id,
                                       const gaspi_size_t size,
                                       const gaspi_group_t group,
                                       const gaspi_timeout_t timeout_ms,
                                       const gaspi_alloc_t alloc_policy);
  /* pointer must stay valid until gaspi_segment_delete; the runtime never
     frees it. Device memory (cudaMalloc, cuMemAlloc: the CUDA driver
     reports CU_MEMORYTYPE_DEVICE) becomes a GPU segment of its device,
     reached by same-host peers through CUDA IPC and by kernels through
     gaspi_device_context, its notification words host-mapped; any other
     pointer (host, page-locked, managed memory) a host segment.
     GASPI_ERR_INV_SEGSIZE when pointer + size runs past the GPU
     allocation, GASPI_ERR_DEVICE when the driver cannot export it
     (cudaMallocAsync pools, cuMemCreate); nothing is bound then.
     memory_description is ignored (the driver tells the memory's kind). */
  gaspi_return_t gaspi_segment_bind (gaspi_segment_id_t const segment_id,
                                     gaspi_pointer_t const pointer,
                                     gaspi_size_t const size,
                                     gaspi_memory_description_t const memory_description);
  /* gaspi_segment_bind, registration with the group's members and a
     barrier of the group. */
  gaspi_return_t gaspi_segment_use (gaspi_segment_id_t const segment_id,
                                    gaspi_pointer_t const pointer,
                                    gaspi_size_t const size,
                                    gaspi_group_t const group,
                                    gaspi_timeout_t const timeout,
                                    gaspi_memory_description_t const memory_description);
  gaspi_return_t gaspi_segment_num (gaspi_number_t * const segment_num);
  /* Writes the ids of this rank's segments, ascending; num must be at
     least gaspi_segment_num (GASPI_ERR_INV_NUM otherwise). */
  gaspi_return_t gaspi_segment_list (const gaspi_number_t num,
                                     gaspi_segment_id_t * const segment_id_list);
  /* The address of a local segment's first byte (a GPU address for a GPU
     segment). */
  gaspi_return_t gaspi_segment_ptr (const gaspi_segment_id_t segment_id,
                                    gaspi_pointer_t * ptr);
  gaspi_return_t gaspi_segment_max (gaspi_number_t * const segment_max);

  /* ---- one-sided communication ---- */

  /* The timeout of the posting calls bounds the wait for room in the
     queue: a full queue gives GASPI_QUEUE_FULL at once, as in GPI-2.
     A request takes one queue entry, its notification included (GPI-2
     takes one more for a notification). size may be 0 (as GPI-2): nothing
     moves, the other arguments are checked, a notification is delivered. */
  gaspi_return_t gaspi_write (const gaspi_segment_id_t segment_id_local,
                              const gaspi_offset_t offset_local,
                              const gaspi_rank_t rank,
                              const gaspi_segment_id_t segment_id_remote,
                              const gaspi_offset_t offset_remote,
                              const gaspi_size_t size,
                              const gaspi_queue_id_t queue,
                              const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_read (const gaspi_segment_id_t segment_id_local,
                             const gaspi_offset_t offset_local,
                             const gaspi_rank_t rank,
                             const gaspi_segment_id_t segment_id_remote,
                             const gaspi_offset_t offset_remote,
                             const gaspi_size_t size,
                             const gaspi_queue_id_t queue,
                             const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_write_list (const gaspi_number_t num,
                                   gaspi_segment_id_t * const segment_id_local,
                                   gaspi_offset_t * const offset_local,
                                   const gaspi_rank_t rank,
                                   gaspi_segment_id_t * const segment_id_remote,
                                   gaspi_offset_t * const offset_remote,
                                   gaspi_size_t * const size,
                                   const gaspi_queue_id_t queue,
                                   const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_read_list (const gaspi_number_t num,
                                  gaspi_segment_id_t * const segment_id_local,
                                  gaspi_offset_t * const offset_local,
                                  const gaspi_rank_t rank,
                                  gaspi_segment_id_t * const segment_id_remote,
                                  gaspi_offset_t * const offset_remote,
                                  gaspi_size_t * const size,
                                  const gaspi_queue_id_t queue,
                                  const gaspi_timeout_t timeout_ms);
  /* Local completion of everything posted on queue. */
  gaspi_return_t gaspi_wait (const gaspi_queue_id_t queue,
                             const gaspi_timeout_t timeout_ms);

  /* ---- collectives ---- */

  gaspi_return_t gaspi_barrier (const gaspi_group_t group,
                                const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_allreduce (const gaspi_pointer_t buffer_send,
                                  gaspi_pointer_t const buffer_receive,
                                  const gaspi_number_t num,
                                  const gaspi_operation_t operation,
                                  const gaspi_datatype_t datatype,
                                  const gaspi_group_t group,
                                  const gaspi_timeout_t timeout_ms);
  /* reduce_operation runs on the rank that combines the contributions
     (the group's first member); result never aliases the operands. A
     callback that fails makes the call return its code on that rank. */
  gaspi_return_t gaspi_allreduce_user (const gaspi_pointer_t buffer_send,
                                       gaspi_pointer_t const buffer_receive,
                                       const gaspi_number_t num,
                                       const gaspi_size_t element_size,
                                       gaspi_reduce_operation_t const reduce_operation,
                                       gaspi_reduce_state_t const reduce_state,
                                       const gaspi_group_t group,
                                       const gaspi_timeout_t timeout_ms);

  /* ---- atomics (8-byte aligned offsets) ----
     A call that returns GASPI_TIMEOUT either had no effect or sent its
     request, which the target then applies exactly once; the next call of
     this rank with the same segment, offset, rank and values adopts that
     request (returns its old value) instead of sending another. So a loop
     that repeats the call while it returns GASPI_TIMEOUT (GASPI_TEST
     included) applies it once. A timed-out call never repeated still takes
     effect. (Decision 0029 of gaspi-rs.) */

  gaspi_return_t gaspi_atomic_fetch_add (const gaspi_segment_id_t segment_id,
                                         const gaspi_offset_t offset,
                                         const gaspi_rank_t rank,
                                         const gaspi_atomic_value_t val_add,
                                         gaspi_atomic_value_t * const val_old,
                                         const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_atomic_compare_swap (const gaspi_segment_id_t segment_id,
                                            const gaspi_offset_t offset,
                                            const gaspi_rank_t rank,
                                            const gaspi_atomic_value_t comparator,
                                            const gaspi_atomic_value_t val_new,
                                            gaspi_atomic_value_t * const val_old,
                                            const gaspi_timeout_t timeout_ms);

  /* ---- passive communication ---- */

  gaspi_return_t gaspi_passive_send (const gaspi_segment_id_t segment_id_local,
                                     const gaspi_offset_t offset_local,
                                     const gaspi_rank_t rank,
                                     const gaspi_size_t size,
                                     const gaspi_timeout_t timeout_ms);
  /* Receives the oldest message into the segment at offset_local. size
     is not enforced: the message is written whole; one that does not fit
     the segment stays queued and the call gives GASPI_ERR_INV_LOC_OFF. */
  gaspi_return_t gaspi_passive_receive (const gaspi_segment_id_t segment_id_local,
                                        const gaspi_offset_t offset_local,
                                        gaspi_rank_t * const rem_rank,
                                        const gaspi_size_t size,
                                        const gaspi_timeout_t timeout_ms);

  /* ---- notifications ---- */

  gaspi_return_t gaspi_notify (const gaspi_segment_id_t segment_id_remote,
                               const gaspi_rank_t rank,
                               const gaspi_notification_id_t notification_id,
                               const gaspi_notification_t notification_value,
                               const gaspi_queue_id_t queue,
                               const gaspi_timeout_t timeout_ms);
  /* num 0: GASPI_SUCCESS at once, first_id not written (as GPI-2). */
  gaspi_return_t gaspi_notify_waitsome (const gaspi_segment_id_t segment_id_local,
                                        const gaspi_notification_id_t notification_begin,
                                        const gaspi_number_t num,
                                        gaspi_notification_id_t * const first_id,
                                        const gaspi_timeout_t timeout_ms);
  /* A null old_notification_val discards the old value (as GPI-2). */
  gaspi_return_t gaspi_notify_reset (const gaspi_segment_id_t segment_id_local,
                                     const gaspi_notification_id_t notification_id,
                                     gaspi_notification_t * const old_notification_val);
  gaspi_return_t gaspi_write_notify (const gaspi_segment_id_t segment_id_local,
                                     const gaspi_offset_t offset_local,
                                     const gaspi_rank_t rank,
                                     const gaspi_segment_id_t segment_id_remote,
                                     const gaspi_offset_t offset_remote,
                                     const gaspi_size_t size,
                                     const gaspi_notification_id_t notification_id,
                                     const gaspi_notification_t notification_value,
                                     const gaspi_queue_id_t queue,
                                     const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_write_list_notify (const gaspi_number_t num,
                                          gaspi_segment_id_t * const segment_id_local,
                                          gaspi_offset_t * const offset_local,
                                          const gaspi_rank_t rank,
                                          gaspi_segment_id_t * const segment_id_remote,
                                          gaspi_offset_t * const offset_remote,
                                          gaspi_size_t * const size,
                                          const gaspi_segment_id_t segment_id_notification,
                                          const gaspi_notification_id_t notification_id,
                                          const gaspi_notification_t notification_value,
                                          const gaspi_queue_id_t queue,
                                          const gaspi_timeout_t timeout_ms);
  /* Sets notification_id of the local segment_id_local (value 1) once the
     data is here. */
  gaspi_return_t gaspi_read_notify (const gaspi_segment_id_t segment_id_local,
                                    const gaspi_offset_t offset_local,
                                    const gaspi_rank_t rank,
                                    const gaspi_segment_id_t segment_id_remote,
                                    const gaspi_offset_t offset_remote,
                                    const gaspi_size_t size,
                                    const gaspi_notification_id_t notification_id,
                                    const gaspi_queue_id_t queue,
                                    const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_read_list_notify (const gaspi_number_t num,
                                         gaspi_segment_id_t * const segment_id_local,
                                         gaspi_offset_t * const offset_local,
                                         const gaspi_rank_t rank,
                                         gaspi_segment_id_t * const segment_id_remote,
                                         gaspi_offset_t * const offset_remote,
                                         gaspi_size_t * const size,
                                         const gaspi_segment_id_t segment_id_notification,
                                         const gaspi_notification_id_t notification_id,
                                         const gaspi_queue_id_t queue,
                                         const gaspi_timeout_t timeout_ms);

  /* ---- queues, limits and information ---- */

  /* Drops what is posted on queue without waiting for it. GPI-2 1.6's
     header declares only the pgaspi_ name; both are exported. */
  gaspi_return_t pgaspi_queue_purge (const gaspi_queue_id_t queue,
                                     const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_queue_purge (const gaspi_queue_id_t queue,
                                    const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_queue_size (const gaspi_queue_id_t queue,
                                   gaspi_number_t * const queue_size);
  gaspi_return_t gaspi_queue_num (gaspi_number_t * const queue_num);
  gaspi_return_t gaspi_queue_size_max (gaspi_number_t * const queue_size_max);
  gaspi_return_t gaspi_queue_create (gaspi_queue_id_t * const queue,
                                     const gaspi_timeout_t timeout_ms);
  gaspi_return_t gaspi_queue_delete (const gaspi_queue_id_t queue);
  /* 0: size 0 is a valid transfer, as in GPI-2. */
  gaspi_return_t gaspi_transfer_size_min (gaspi_size_t * const transfer_size_min);
  gaspi_return_t gaspi_transfer_size_max (gaspi_size_t * const transfer_size_max);
  gaspi_return_t gaspi_notification_num (gaspi_number_t * const notification_num);
  gaspi_return_t gaspi_passive_transfer_size_min (gaspi_size_t * const passive_transfer_size_min);
  gaspi_return_t gaspi_passive_transfer_size_max (gaspi_size_t * const passive_transfer_size_max);
  gaspi_return_t gaspi_atomic_max (gaspi_atomic_value_t * max_value);
  gaspi_return_t gaspi_allreduce_buf_size (gaspi_size_t * const buf_size);
  gaspi_return_t gaspi_allreduce_elem_max (gaspi_number_t * const elem_max);
  gaspi_return_t gaspi_queue_max (gaspi_number_t * const queue_max);
  /* GASPI_ETHERNET (gaspi-rs picks shared memory or TCP per pair). */
  gaspi_return_t gaspi_network_type (gaspi_network_t * const network_type);
  /* GASPI_TOPOLOGY_STATIC. */
  gaspi_return_t gaspi_build_infrastructure (gaspi_number_t * const build);
  /* Nanoseconds of a monotonic clock; gaspi_cpu_frequency reports
     1000 MHz so that ticks / MHz gives microseconds, as with GPI-2. */
  gaspi_return_t gaspi_time_ticks (gaspi_cycles_t * const ticks);
  /* Milliseconds from a fixed origin (that of gaspi_time_ticks); works
     before gaspi_proc_init too, as in GPI-2. */
  gaspi_return_t gaspi_time_get (gaspi_time_t * const wtime);
  /* *error_message gets a malloc'd copy of gaspi_error_str (free it). */
  gaspi_return_t gaspi_print_error (gaspi_return_t error_code,
                                    gaspi_string_t * error_message);
  /* Writes gaspi_proc_num entries: GASPI_STATE_CORRUPT for a rank found
     dead or unreachable, GASPI_STATE_HEALTHY otherwise. */
  gaspi_return_t gaspi_state_vec_get (gaspi_state_vector_t state_vector);

  /* ---- statistics ---- */

  /* Accepted and ignored: every counter is always on. */
  gaspi_return_t gaspi_statistic_verbosity_level (gaspi_number_t _verbosity_level);
  gaspi_return_t gaspi_statistic_counter_max (gaspi_number_t * counter_max);
  /* Counters 0-3: bytes written, bytes read, milliseconds waited, bytes
     copied for peers; then calls of each operation (names like
     "calls:write_notify"). All take GASPI_STATISTIC_ARGUMENT_NONE. */
  gaspi_return_t gaspi_statistic_counter_info (gaspi_statistic_counter_t counter,
                                               gaspi_statistic_argument_t * counter_argument,
                                               gaspi_string_t * counter_name,
                                               gaspi_string_t * counter_description,
                                               gaspi_number_t * verbosity_level);
  gaspi_return_t gaspi_statistic_counter_get (gaspi_statistic_counter_t counter,
                                              gaspi_number_t argument,
                                              unsigned long *value);
  /* Resets every counter (gaspi-rs cannot reset one alone). */
  gaspi_return_t gaspi_statistic_counter_reset (gaspi_statistic_counter_t counter);

#ifdef __cplusplus
}
#endif

#endif /* GASPI_H */
