//! The profiling names `pgaspi_*` (`include/PGASPI.h`), as MPI's `PMPI_*`.
//!
//! Each is a naked function that only jumps to the `gaspi_*` function of
//! the same name: a jump leaves every argument register as the caller set
//! it, so one definition serves every signature. `build.rs` links the
//! library with `-Bsymbolic-functions`, so the jump reaches this library's
//! `gaspi_*` even when a profiling layer defines its own `gaspi_*` and
//! calls `pgaspi_*` from it (through the dynamic linker the jump would
//! land in the profiler again, and recurse). `tests/capi/profile.c`
//! checks exactly that.

use crate::collectives::*;
use crate::comm::*;
use crate::ext::*;
use crate::process::*;

/// Defines `pgaspi_X` as a jump to `gaspi_X` for each pair.
macro_rules! profiling_names {
    ($($p:ident => $g:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($p), "`: `", stringify!($g), "` under its profiling name.")]
            #[cfg(target_arch = "x86_64")]
            #[unsafe(naked)]
            #[no_mangle]
            pub extern "C" fn $p() {
                core::arch::naked_asm!("jmp {f}", f = sym $g)
            }
            #[doc = concat!("`", stringify!($p), "`: `", stringify!($g), "` under its profiling name.")]
            #[cfg(target_arch = "aarch64")]
            #[unsafe(naked)]
            #[no_mangle]
            pub extern "C" fn $p() {
                core::arch::naked_asm!("b {f}", f = sym $g)
            }
        )*
    };
}

profiling_names! {
    pgaspi_config_get => gaspi_config_get,
    pgaspi_config_set => gaspi_config_set,
    pgaspi_version => gaspi_version,
    pgaspi_proc_init => gaspi_proc_init,
    pgaspi_proc_term => gaspi_proc_term,
    pgaspi_proc_rank => gaspi_proc_rank,
    pgaspi_proc_num => gaspi_proc_num,
    pgaspi_proc_kill => gaspi_proc_kill,
    pgaspi_connect => gaspi_connect,
    pgaspi_disconnect => gaspi_disconnect,
    pgaspi_group_create => gaspi_group_create,
    pgaspi_group_delete => gaspi_group_delete,
    pgaspi_group_add => gaspi_group_add,
    pgaspi_group_commit => gaspi_group_commit,
    pgaspi_group_num => gaspi_group_num,
    pgaspi_group_size => gaspi_group_size,
    pgaspi_group_ranks => gaspi_group_ranks,
    pgaspi_group_max => gaspi_group_max,
    pgaspi_segment_alloc => gaspi_segment_alloc,
    pgaspi_segment_delete => gaspi_segment_delete,
    pgaspi_segment_register => gaspi_segment_register,
    pgaspi_segment_create => gaspi_segment_create,
    pgaspi_segment_bind => gaspi_segment_bind,
    pgaspi_segment_use => gaspi_segment_use,
    pgaspi_segment_num => gaspi_segment_num,
    pgaspi_segment_list => gaspi_segment_list,
    pgaspi_segment_ptr => gaspi_segment_ptr,
    pgaspi_segment_max => gaspi_segment_max,
    pgaspi_write => gaspi_write,
    pgaspi_read => gaspi_read,
    pgaspi_write_list => gaspi_write_list,
    pgaspi_read_list => gaspi_read_list,
    pgaspi_wait => gaspi_wait,
    pgaspi_barrier => gaspi_barrier,
    pgaspi_allreduce => gaspi_allreduce,
    pgaspi_allreduce_user => gaspi_allreduce_user,
    pgaspi_atomic_fetch_add => gaspi_atomic_fetch_add,
    pgaspi_atomic_compare_swap => gaspi_atomic_compare_swap,
    pgaspi_passive_send => gaspi_passive_send,
    pgaspi_passive_receive => gaspi_passive_receive,
    pgaspi_notify => gaspi_notify,
    pgaspi_notify_waitsome => gaspi_notify_waitsome,
    pgaspi_notify_reset => gaspi_notify_reset,
    pgaspi_write_notify => gaspi_write_notify,
    pgaspi_write_list_notify => gaspi_write_list_notify,
    pgaspi_read_notify => gaspi_read_notify,
    pgaspi_read_list_notify => gaspi_read_list_notify,
    pgaspi_queue_size => gaspi_queue_size,
    pgaspi_queue_num => gaspi_queue_num,
    pgaspi_queue_size_max => gaspi_queue_size_max,
    pgaspi_queue_create => gaspi_queue_create,
    pgaspi_queue_delete => gaspi_queue_delete,
    pgaspi_transfer_size_min => gaspi_transfer_size_min,
    pgaspi_transfer_size_max => gaspi_transfer_size_max,
    pgaspi_notification_num => gaspi_notification_num,
    pgaspi_passive_transfer_size_min => gaspi_passive_transfer_size_min,
    pgaspi_passive_transfer_size_max => gaspi_passive_transfer_size_max,
    pgaspi_atomic_max => gaspi_atomic_max,
    pgaspi_allreduce_buf_size => gaspi_allreduce_buf_size,
    pgaspi_allreduce_elem_max => gaspi_allreduce_elem_max,
    pgaspi_queue_max => gaspi_queue_max,
    pgaspi_network_type => gaspi_network_type,
    pgaspi_build_infrastructure => gaspi_build_infrastructure,
    pgaspi_time_ticks => gaspi_time_ticks,
    pgaspi_time_get => gaspi_time_get,
    pgaspi_print_error => gaspi_print_error,
    pgaspi_state_vec_get => gaspi_state_vec_get,
    pgaspi_statistic_verbosity_level => gaspi_statistic_verbosity_level,
    pgaspi_statistic_counter_max => gaspi_statistic_counter_max,
    pgaspi_statistic_counter_info => gaspi_statistic_counter_info,
    pgaspi_statistic_counter_get => gaspi_statistic_counter_get,
    pgaspi_statistic_counter_reset => gaspi_statistic_counter_reset,
    pgaspi_initialized => gaspi_initialized,
    pgaspi_proc_local_rank => gaspi_proc_local_rank,
    pgaspi_proc_local_num => gaspi_proc_local_num,
    pgaspi_cpu_frequency => gaspi_cpu_frequency,
    pgaspi_print_affinity_mask => gaspi_print_affinity_mask,
    pgaspi_numa_socket => gaspi_numa_socket,
    pgaspi_set_socket_affinity => gaspi_set_socket_affinity,
    pgaspi_error_str => gaspi_error_str,
    pgaspi_proc_ping => gaspi_proc_ping,
    pgaspi_segment_avail_local => gaspi_segment_avail_local,
    pgaspi_segment_size => gaspi_segment_size,
    pgaspi_rw_list_elem_max => gaspi_rw_list_elem_max,
    pgaspi_delay => gaspi_delay,
    pgaspi_segment_alloc_gpu => gaspi_segment_alloc_gpu,
    pgaspi_segment_create_gpu => gaspi_segment_create_gpu,
    pgaspi_device_context => gaspi_device_context,
}
