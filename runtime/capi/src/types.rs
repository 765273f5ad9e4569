//! The C types and constants of `GASPI_types.h`, with GPI-2 1.6's widths
//! and values (LP64). The unit tests at the end and
//! `tests/capi/abi.c` check the same numbers on both sides.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_ushort, c_void};

/// `gaspi_return_t` (a C enum: `int`).
pub type gaspi_return_t = c_int;
/// Milliseconds, or [`GASPI_BLOCK`], or [`GASPI_TEST`].
pub type gaspi_timeout_t = c_ulong;
/// A rank.
pub type gaspi_rank_t = c_ushort;
/// `int` (thread ids and counts of `GASPI_Threads.h`).
pub type gaspi_int = c_int;
/// A group id.
pub type gaspi_group_t = u8;
/// A count.
pub type gaspi_number_t = c_uint;
/// A pointer.
pub type gaspi_pointer_t = *mut c_void;
/// Opaque state of a user reduction.
pub type gaspi_reduce_state_t = *mut c_void;
/// A queue id.
pub type gaspi_queue_id_t = u8;
/// A size in bytes.
pub type gaspi_size_t = c_ulong;
/// A segment id.
pub type gaspi_segment_id_t = u8;
/// An offset in bytes.
pub type gaspi_offset_t = c_ulong;
/// The value of an atomic.
pub type gaspi_atomic_value_t = c_ulong;
/// A time in milliseconds.
pub type gaspi_time_t = f32;
/// Clock ticks.
pub type gaspi_cycles_t = c_ulong;
/// A notification id.
pub type gaspi_notification_id_t = c_uint;
/// A notification value.
pub type gaspi_notification_t = c_uint;
/// A statistics counter id.
pub type gaspi_statistic_counter_t = c_uint;
/// A C string.
pub type gaspi_string_t = *mut c_char;
/// Where memory bound as a segment lives.
pub type gaspi_memory_description_t = c_int;
/// `gaspi_network_t` (a C enum).
pub type gaspi_network_t = c_int;
/// `gaspi_operation_t` (a C enum).
pub type gaspi_operation_t = c_int;
/// `gaspi_datatype_t` (a C enum).
pub type gaspi_datatype_t = c_int;
/// `gaspi_alloc_t` (a C enum).
pub type gaspi_alloc_t = c_int;
/// `gaspi_state_t` (a C enum).
pub type gaspi_state_t = c_int;
/// `gaspi_statistic_argument_t` (a C enum).
pub type gaspi_statistic_argument_t = c_int;
/// `gaspi_topology_t` (a C enum).
pub type gaspi_topology_t = c_int;

/// A user reduction of `gaspi_allreduce_user`.
pub type gaspi_reduce_operation_t = Option<
    unsafe extern "C" fn(
        operand_one: gaspi_pointer_t,
        operand_two: gaspi_pointer_t,
        result: gaspi_pointer_t,
        state: gaspi_reduce_state_t,
        num: gaspi_number_t,
        element_size: gaspi_size_t,
        timeout_ms: gaspi_timeout_t,
    ) -> gaspi_return_t,
>;

/// Wait as long as it takes.
pub const GASPI_BLOCK: gaspi_timeout_t = 0xffff_ffff_ffff_ffff;
/// Check once.
pub const GASPI_TEST: gaspi_timeout_t = 0;
/// The group of all ranks.
pub const GASPI_GROUP_ALL: gaspi_group_t = 0;

macro_rules! codes {
    ($($name:ident = $v:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "`")]
        pub const $name: gaspi_return_t = $v;
    )*};
}
codes!(
    GASPI_ERROR = -1,
    GASPI_SUCCESS = 0,
    GASPI_TIMEOUT = 1,
    GASPI_ERR_EMFILE = 2,
    GASPI_ERR_ENV = 3,
    GASPI_ERR_SN_PORT = 4,
    GASPI_ERR_CONFIG = 5,
    GASPI_ERR_NOINIT = 6,
    GASPI_ERR_INITED = 7,
    GASPI_ERR_NULLPTR = 8,
    GASPI_ERR_INV_SEGSIZE = 9,
    GASPI_ERR_INV_SEG = 10,
    GASPI_ERR_INV_GROUP = 11,
    GASPI_ERR_INV_RANK = 12,
    GASPI_ERR_INV_QUEUE = 13,
    GASPI_ERR_INV_LOC_OFF = 14,
    GASPI_ERR_INV_REM_OFF = 15,
    GASPI_ERR_INV_COMMSIZE = 16,
    GASPI_ERR_INV_NOTIF_VAL = 17,
    GASPI_ERR_INV_NOTIF_ID = 18,
    GASPI_ERR_INV_NUM = 19,
    GASPI_ERR_INV_SIZE = 20,
    GASPI_ERR_MANY_SEG = 21,
    GASPI_ERR_MANY_GRP = 22,
    GASPI_QUEUE_FULL = 23,
    GASPI_ERR_UNALIGN_OFF = 24,
    GASPI_ERR_ACTIVE_COLL = 25,
    GASPI_ERR_DEVICE = 26,
    GASPI_ERR_SN = 27,
    GASPI_ERR_MEMALLOC = 28,
);

/// `GASPI_OP_MIN`.
pub const GASPI_OP_MIN: gaspi_operation_t = 0;
/// `GASPI_OP_MAX`.
pub const GASPI_OP_MAX: gaspi_operation_t = 1;
/// `GASPI_OP_SUM`.
pub const GASPI_OP_SUM: gaspi_operation_t = 2;
/// `GASPI_TYPE_INT` (`int`).
pub const GASPI_TYPE_INT: gaspi_datatype_t = 0;
/// `GASPI_TYPE_UINT`.
pub const GASPI_TYPE_UINT: gaspi_datatype_t = 1;
/// `GASPI_TYPE_FLOAT`.
pub const GASPI_TYPE_FLOAT: gaspi_datatype_t = 2;
/// `GASPI_TYPE_DOUBLE`.
pub const GASPI_TYPE_DOUBLE: gaspi_datatype_t = 3;
/// `GASPI_TYPE_LONG` (`long`: 8 bytes).
pub const GASPI_TYPE_LONG: gaspi_datatype_t = 4;
/// `GASPI_TYPE_ULONG`.
pub const GASPI_TYPE_ULONG: gaspi_datatype_t = 5;
/// `GASPI_ETHERNET`, the network this library reports.
pub const GASPI_ETHERNET: gaspi_network_t = 2;
/// `GASPI_STATE_HEALTHY`.
pub const GASPI_STATE_HEALTHY: gaspi_state_t = 0;
/// `GASPI_STATE_CORRUPT`.
pub const GASPI_STATE_CORRUPT: gaspi_state_t = 1;
/// `GASPI_STATISTIC_ARGUMENT_NONE`.
pub const GASPI_STATISTIC_ARGUMENT_NONE: gaspi_statistic_argument_t = 0;
/// `GASPI_TOPOLOGY_STATIC`.
pub const GASPI_TOPOLOGY_STATIC: gaspi_topology_t = 1;

/// `gaspi_dev_config_t`'s InfiniBand parameters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct gaspi_dev_ib_params {
    /// device index
    pub netdev_id: c_int,
    /// MTU
    pub mtu: c_uint,
    /// port check flag
    pub port_check: c_uint,
}

/// `gaspi_dev_config_t`'s TCP parameters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct gaspi_dev_tcp_params {
    /// first port
    pub port: c_uint,
}

/// `gaspi_dev_config_t`'s libfabric parameters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct gaspi_dev_ofi_params {
    /// shared memory flag
    pub use_shm: c_int,
    /// provider information flag
    pub provider_info: c_int,
    /// auto-progress flag
    pub progress_auto: c_int,
}

/// `gaspi_dev_config_t`'s parameters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct gaspi_dev_params {
    /// InfiniBand
    pub ib: gaspi_dev_ib_params,
    /// TCP
    pub tcp: gaspi_dev_tcp_params,
    /// libfabric
    pub ofi: gaspi_dev_ofi_params,
}

/// `gaspi_dev_config_t`: kept for its layout, unused here.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct gaspi_dev_config_t {
    /// network
    pub network_type: gaspi_network_t,
    /// parameters
    pub params: gaspi_dev_params,
}

/// `gaspi_config_t`, field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gaspi_config_t {
    /// GPI-2's logger flag (ignored)
    pub logger: c_uint,
    /// GPI-2's internal port (ignored)
    pub sn_port: c_uint,
    /// network information flag (ignored)
    pub net_info: c_uint,
    /// whether the user set the network (ignored)
    pub user_net: c_uint,
    /// GPI-2 internal (ignored)
    pub sn_persistent: c_int,
    /// GPI-2 internal (ignored)
    pub sn_timeout: gaspi_timeout_t,
    /// device parameters (ignored)
    pub dev_config: gaspi_dev_config_t,
    /// network (ignored: transports are chosen per pair)
    pub network: gaspi_network_t,
    /// queue depth
    pub queue_size_max: c_uint,
    /// queues created at init
    pub queue_num: c_uint,
    /// most groups
    pub group_max: gaspi_number_t,
    /// most segments
    pub segment_max: gaspi_number_t,
    /// largest transfer
    pub transfer_size_max: gaspi_size_t,
    /// notifications per segment
    pub notification_num: gaspi_number_t,
    /// passive queue depth (reported)
    pub passive_queue_size_max: gaspi_number_t,
    /// largest passive message (reported)
    pub passive_transfer_size_max: gaspi_number_t,
    /// allreduce_user buffer (reported)
    pub allreduce_buf_size: gaspi_size_t,
    /// most allreduce elements (reported)
    pub allreduce_elem_max: gaspi_number_t,
    /// most list elements
    pub rw_list_elem_max: gaspi_number_t,
    /// topology (reported: static)
    pub build_infrastructure: gaspi_topology_t,
    /// the user's
    pub user_defined: *mut c_void,
}

// SAFETY: `user_defined` is an opaque value the library never dereferences;
// the struct is plain data otherwise, so it may be kept in a global.
unsafe impl Send for gaspi_config_t {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The same numbers as `tests/capi/abi.c` checks on the C side, taken
    /// from GPI-2 1.6's GASPI_types.h on LP64.
    #[test]
    fn widths_and_layout_are_gpi2_1_6s() {
        assert_eq!(size_of::<gaspi_return_t>(), 4);
        assert_eq!(size_of::<gaspi_timeout_t>(), 8);
        assert_eq!(size_of::<gaspi_rank_t>(), 2);
        assert_eq!(size_of::<gaspi_group_t>(), 1);
        assert_eq!(size_of::<gaspi_number_t>(), 4);
        assert_eq!(size_of::<gaspi_queue_id_t>(), 1);
        assert_eq!(size_of::<gaspi_size_t>(), 8);
        assert_eq!(size_of::<gaspi_segment_id_t>(), 1);
        assert_eq!(size_of::<gaspi_offset_t>(), 8);
        assert_eq!(size_of::<gaspi_atomic_value_t>(), 8);
        assert_eq!(size_of::<gaspi_time_t>(), 4);
        assert_eq!(size_of::<gaspi_cycles_t>(), 8);
        assert_eq!(size_of::<gaspi_notification_id_t>(), 4);
        assert_eq!(size_of::<gaspi_notification_t>(), 4);
        assert_eq!(size_of::<gaspi_statistic_counter_t>(), 4);
        assert_eq!(size_of::<gaspi_memory_description_t>(), 4);
        assert_eq!(size_of::<gaspi_dev_config_t>(), 32);
        assert_eq!(size_of::<gaspi_config_t>(), 144);
        assert_eq!(offset_of!(gaspi_config_t, sn_timeout), 24);
        assert_eq!(offset_of!(gaspi_config_t, dev_config), 32);
        assert_eq!(offset_of!(gaspi_config_t, network), 64);
        assert_eq!(offset_of!(gaspi_config_t, queue_size_max), 68);
        assert_eq!(offset_of!(gaspi_config_t, queue_num), 72);
        assert_eq!(offset_of!(gaspi_config_t, group_max), 76);
        assert_eq!(offset_of!(gaspi_config_t, segment_max), 80);
        assert_eq!(offset_of!(gaspi_config_t, transfer_size_max), 88);
        assert_eq!(offset_of!(gaspi_config_t, notification_num), 96);
        assert_eq!(offset_of!(gaspi_config_t, allreduce_buf_size), 112);
        assert_eq!(offset_of!(gaspi_config_t, rw_list_elem_max), 124);
        assert_eq!(offset_of!(gaspi_config_t, build_infrastructure), 128);
        assert_eq!(offset_of!(gaspi_config_t, user_defined), 136);
        assert_eq!(GASPI_BLOCK, u64::MAX);
        assert_eq!(GASPI_TEST, 0);
        assert_eq!((GASPI_ERROR, GASPI_SUCCESS, GASPI_TIMEOUT), (-1, 0, 1));
        assert_eq!((GASPI_ERR_NOINIT, GASPI_ERR_NULLPTR), (6, 8));
        assert_eq!((GASPI_ERR_INV_RANK, GASPI_QUEUE_FULL), (12, 23));
        assert_eq!(GASPI_ERR_MEMALLOC, 28);
    }
}
