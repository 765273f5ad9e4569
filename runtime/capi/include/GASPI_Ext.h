/*
 * GASPI_Ext.h: GPI-2 1.6's extensions of the GASPI interface, and the
 * gaspi-rs extension gaspi_device_context, served by libGPI2 of gaspi-rs.
 */
#ifndef GPI2_EXT_H
#define GPI2_EXT_H

#include "GASPI.h"

#ifdef __cplusplus
extern "C"
{
#endif

  /* 1 after gaspi_proc_init, 0 before it and after gaspi_proc_term. */
  gaspi_return_t gaspi_initialized (gaspi_number_t * initialized);
  /* Rank and number of ranks on this host (from the launcher). */
  gaspi_return_t gaspi_proc_local_rank (gaspi_rank_t * const local_rank);
  gaspi_return_t gaspi_proc_local_num (gaspi_rank_t * const local_num);
  /* Always 1000.0: the tick of gaspi_time_ticks is a nanosecond. */
  gaspi_return_t gaspi_cpu_frequency (gaspi_float * const cpu_mhz);
  /* Formats like printf and writes the line to stdout at once. */
  void gaspi_printf (const char *fmt, ...);
  /* gaspi_printf on rank `rank` only. */
  void gaspi_printf_to (gaspi_rank_t rank, const char *fmt, ...);
  /* Prints the CPUs this process may run on. */
  void gaspi_print_affinity_mask (void);
  /* GASPI_ERR_ENV unless the ranks were pinned to NUMA nodes
     (GASPI_SET_NUMA_SOCKET=1, as GPI-2's gaspi_run -N sets); then the NUMA
     node of the first CPU this process may run on. */
  gaspi_return_t gaspi_numa_socket (gaspi_uchar * const socket);
  /* Binds this process to the CPUs of NUMA node `socket`;
     GASPI_ERR_INV_NUM for a node this host does not have. */
  gaspi_return_t gaspi_set_socket_affinity (const gaspi_uchar socket);
  /* A static string naming the code (never free it). */
  gaspi_string_t gaspi_error_str (gaspi_return_t error_code);
  gaspi_return_t gaspi_proc_ping (const gaspi_rank_t rank, gaspi_timeout_t tout);
  /* The lowest segment id not in use on this rank. */
  gaspi_return_t gaspi_segment_avail_local (gaspi_segment_id_t * const avail_seg_id);
  /* The size of a segment of this rank, or of another rank's segment once
     that rank registered it with this one or created it in a group with
     it (GASPI_ERR_INV_SEG before). */
  gaspi_return_t gaspi_segment_size (const gaspi_segment_id_t segment_id,
                                     const gaspi_rank_t rank,
                                     gaspi_size_t * const size);
  gaspi_return_t gaspi_rw_list_elem_max (gaspi_number_t * const elem_max);
  /* A short pause for spin loops. */
  void gaspi_delay (void);

  /* gaspi-rs extensions: gaspi_segment_alloc / gaspi_segment_create of a
     segment in the memory of CUDA device `device` (zeroed, notification
     words where GASPI_GPU_NOTIFICATIONS says, host-mapped by default).
     gaspi_segment_ptr then gives its device address. GASPI_ERR_DEVICE
     without a CUDA driver or for a device this host does not have. A
     cudaMalloc'd pointer passed to gaspi_segment_bind / gaspi_segment_use
     becomes a GPU segment as well (see GASPI.h). */
  gaspi_return_t gaspi_segment_alloc_gpu (const gaspi_segment_id_t segment_id,
                                          const gaspi_size_t size,
                                          const gaspi_uint device);
  gaspi_return_t gaspi_segment_create_gpu (const gaspi_segment_id_t segment_id,
                                           const gaspi_size_t size,
                                           const gaspi_group_t group,
                                           const gaspi_timeout_t timeout_ms,
                                           const gaspi_uint device);

  /* gaspi-rs extension: writes the kernel argument of the device API
     (struct gaspi_device_ctx of gpu-kernels/cuda/gaspi_device.cuh,
     1216 bytes; declare it const __grid_constant__ in the kernel's
     parameters) for CUDA device `device` into arg, which holds arg_size
     bytes. Call it after creating the segments the kernels use; the
     context stays valid until gaspi_proc_term. GASPI_ERR_INV_SIZE when
     arg_size is too small, GASPI_ERR_DEVICE without a usable GPU. */
  gaspi_return_t gaspi_device_context (const gaspi_uint device,
                                       void *const arg,
                                       const gaspi_size_t arg_size);

#ifdef __cplusplus
}
#endif

#endif /* GPI2_EXT_H */
