! gaspi.f90: the Fortran modules of libGPI2 (gaspi-rs): gaspi_types (kinds
! and constants), gaspi_ext (GASPI_Ext.h) and gaspi (GASPI.h, and the other
! two), iso_c_binding interfaces as GPI-2 1.6's modules name them. Written by
! gen_gaspi_f90.py (its comment says how C maps to Fortran); do not edit by
! hand. Not bound: gaspi_config_get/set.
module gaspi_types
  use, intrinsic :: iso_c_binding
  implicit none

  integer, parameter :: gaspi_int = c_int
  integer, parameter :: gaspi_uint = c_int
  integer, parameter :: gaspi_char = c_char
  integer, parameter :: gaspi_uchar = c_signed_char
  integer, parameter :: gaspi_short = c_short
  integer, parameter :: gaspi_ushort = c_short
  integer, parameter :: gaspi_long = c_long
  integer, parameter :: gaspi_ulong = c_long
  integer, parameter :: gaspi_float = c_float
  integer, parameter :: gaspi_double = c_double
  integer, parameter :: gaspi_return_t = c_int
  integer, parameter :: gaspi_timeout_t = c_long
  integer, parameter :: gaspi_rank_t = c_short
  integer, parameter :: gaspi_group_t = c_signed_char
  integer, parameter :: gaspi_number_t = c_int
  integer, parameter :: gaspi_queue_id_t = c_signed_char
  integer, parameter :: gaspi_size_t = c_long
  integer, parameter :: gaspi_alloc_t = c_long
  integer, parameter :: gaspi_segment_id_t = c_signed_char
  integer, parameter :: gaspi_offset_t = c_long
  integer, parameter :: gaspi_atomic_value_t = c_long
  integer, parameter :: gaspi_time_t = c_float
  integer, parameter :: gaspi_notification_id_t = c_int
  integer, parameter :: gaspi_notification_t = c_int
  integer, parameter :: gaspi_statistic_counter_t = c_int
  integer, parameter :: gaspi_cycles_t = c_long
  integer, parameter :: gaspi_memory_description_t = c_int
  integer, parameter :: gaspi_operation_t = c_int
  integer, parameter :: gaspi_datatype_t = c_int
  integer, parameter :: gaspi_network_t = c_int
  integer, parameter :: gaspi_statistic_argument_t = c_int
  integer, parameter :: gaspi_state_t = c_int
  integer(c_int), parameter :: GASPI_ERROR = -1
  integer(c_int), parameter :: GASPI_SUCCESS = 0
  integer(c_int), parameter :: GASPI_TIMEOUT = 1
  integer(c_int), parameter :: GASPI_ERR_EMFILE = 2
  integer(c_int), parameter :: GASPI_ERR_ENV = 3
  integer(c_int), parameter :: GASPI_ERR_SN_PORT = 4
  integer(c_int), parameter :: GASPI_ERR_CONFIG = 5
  integer(c_int), parameter :: GASPI_ERR_NOINIT = 6
  integer(c_int), parameter :: GASPI_ERR_INITED = 7
  integer(c_int), parameter :: GASPI_ERR_NULLPTR = 8
  integer(c_int), parameter :: GASPI_ERR_INV_SEGSIZE = 9
  integer(c_int), parameter :: GASPI_ERR_INV_SEG = 10
  integer(c_int), parameter :: GASPI_ERR_INV_GROUP = 11
  integer(c_int), parameter :: GASPI_ERR_INV_RANK = 12
  integer(c_int), parameter :: GASPI_ERR_INV_QUEUE = 13
  integer(c_int), parameter :: GASPI_ERR_INV_LOC_OFF = 14
  integer(c_int), parameter :: GASPI_ERR_INV_REM_OFF = 15
  integer(c_int), parameter :: GASPI_ERR_INV_COMMSIZE = 16
  integer(c_int), parameter :: GASPI_ERR_INV_NOTIF_VAL = 17
  integer(c_int), parameter :: GASPI_ERR_INV_NOTIF_ID = 18
  integer(c_int), parameter :: GASPI_ERR_INV_NUM = 19
  integer(c_int), parameter :: GASPI_ERR_INV_SIZE = 20
  integer(c_int), parameter :: GASPI_ERR_MANY_SEG = 21
  integer(c_int), parameter :: GASPI_ERR_MANY_GRP = 22
  integer(c_int), parameter :: GASPI_QUEUE_FULL = 23
  integer(c_int), parameter :: GASPI_ERR_UNALIGN_OFF = 24
  integer(c_int), parameter :: GASPI_ERR_ACTIVE_COLL = 25
  integer(c_int), parameter :: GASPI_ERR_DEVICE = 26
  integer(c_int), parameter :: GASPI_ERR_SN = 27
  integer(c_int), parameter :: GASPI_ERR_MEMALLOC = 28
  integer(c_int), parameter :: GASPI_OP_MIN = 0
  integer(c_int), parameter :: GASPI_OP_MAX = 1
  integer(c_int), parameter :: GASPI_OP_SUM = 2
  integer(c_int), parameter :: GASPI_TYPE_INT = 0
  integer(c_int), parameter :: GASPI_TYPE_UINT = 1
  integer(c_int), parameter :: GASPI_TYPE_FLOAT = 2
  integer(c_int), parameter :: GASPI_TYPE_DOUBLE = 3
  integer(c_int), parameter :: GASPI_TYPE_LONG = 4
  integer(c_int), parameter :: GASPI_TYPE_ULONG = 5
  integer(c_int), parameter :: GASPI_IB = 0
  integer(c_int), parameter :: GASPI_ROCE = 1
  integer(c_int), parameter :: GASPI_ETHERNET = 2
  integer(c_int), parameter :: GASPI_GEMINI = 3
  integer(c_int), parameter :: GASPI_ARIES = 4
  integer(c_int), parameter :: GASPI_OFI = 5
  integer(gaspi_alloc_t), parameter :: GASPI_MEM_UNINITIALIZED = 0
  integer(gaspi_alloc_t), parameter :: GASPI_MEM_INITIALIZED = 1
  integer(c_int), parameter :: GASPI_STATE_HEALTHY = 0
  integer(c_int), parameter :: GASPI_STATE_CORRUPT = 1
  integer(c_int), parameter :: GASPI_STATISTIC_ARGUMENT_NONE = 0
  integer(c_int), parameter :: GASPI_STATISTIC_ARGUMENT_RANK = 1
  integer(c_int), parameter :: GASPI_TOPOLOGY_NONE = 0
  integer(c_int), parameter :: GASPI_TOPOLOGY_STATIC = 1
  integer(c_int), parameter :: GASPI_TOPOLOGY_DYNAMIC = 2
  integer(gaspi_alloc_t), parameter :: GASPI_ALLOC_DEFAULT = GASPI_MEM_UNINITIALIZED
  integer(gaspi_group_t), parameter :: GASPI_GROUP_ALL = 0
  ! GASPI_BLOCK is the C value 0xffffffffffffffff.
  integer(gaspi_timeout_t), parameter :: GASPI_BLOCK = -1_c_long
  integer(gaspi_timeout_t), parameter :: GASPI_TEST = 0_c_long
end module gaspi_types

module gaspi_ext
  use gaspi_types
  implicit none

  interface
    function gaspi_initialized( &
        initialized) &
        result(res) bind(C, name="gaspi_initialized")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: initialized
      integer(gaspi_return_t) :: res
    end function gaspi_initialized

    function gaspi_proc_local_rank( &
        local_rank) &
        result(res) bind(C, name="gaspi_proc_local_rank")
      import
      implicit none
      integer(gaspi_rank_t), intent(inout) :: local_rank
      integer(gaspi_return_t) :: res
    end function gaspi_proc_local_rank

    function gaspi_proc_local_num( &
        local_num) &
        result(res) bind(C, name="gaspi_proc_local_num")
      import
      implicit none
      integer(gaspi_rank_t), intent(inout) :: local_num
      integer(gaspi_return_t) :: res
    end function gaspi_proc_local_num

    function gaspi_cpu_frequency( &
        cpu_mhz) &
        result(res) bind(C, name="gaspi_cpu_frequency")
      import
      implicit none
      real(gaspi_float), intent(inout) :: cpu_mhz
      integer(gaspi_return_t) :: res
    end function gaspi_cpu_frequency

    subroutine gaspi_printf( &
        fmt) &
        bind(C, name="gaspi_printf")
      import
      implicit none
      character(kind=c_char), dimension(*), intent(in) :: fmt
    end subroutine gaspi_printf

    subroutine gaspi_printf_to( &
        rank, fmt) &
        bind(C, name="gaspi_printf_to")
      import
      implicit none
      integer(gaspi_rank_t), value :: rank
      character(kind=c_char), dimension(*), intent(in) :: fmt
    end subroutine gaspi_printf_to

    subroutine gaspi_print_affinity_mask( &
        ) &
        bind(C, name="gaspi_print_affinity_mask")
      import
      implicit none
    end subroutine gaspi_print_affinity_mask

    function gaspi_numa_socket( &
        socket) &
        result(res) bind(C, name="gaspi_numa_socket")
      import
      implicit none
      integer(gaspi_uchar), intent(inout) :: socket
      integer(gaspi_return_t) :: res
    end function gaspi_numa_socket

    function gaspi_set_socket_affinity( &
        socket) &
        result(res) bind(C, name="gaspi_set_socket_affinity")
      import
      implicit none
      integer(gaspi_uchar), value :: socket
      integer(gaspi_return_t) :: res
    end function gaspi_set_socket_affinity

    function gaspi_error_str( &
        error_code) &
        result(res) bind(C, name="gaspi_error_str")
      import
      implicit none
      integer(gaspi_return_t), value :: error_code
      type(c_ptr) :: res
    end function gaspi_error_str

    function gaspi_proc_ping( &
        rank, tout) &
        result(res) bind(C, name="gaspi_proc_ping")
      import
      implicit none
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_timeout_t), value :: tout
      integer(gaspi_return_t) :: res
    end function gaspi_proc_ping

    function gaspi_segment_avail_local( &
        avail_seg_id) &
        result(res) bind(C, name="gaspi_segment_avail_local")
      import
      implicit none
      integer(gaspi_segment_id_t), intent(inout) :: avail_seg_id
      integer(gaspi_return_t) :: res
    end function gaspi_segment_avail_local

    function gaspi_segment_size( &
        segment_id, rank, size) &
        result(res) bind(C, name="gaspi_segment_size")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_size_t), intent(inout) :: size
      integer(gaspi_return_t) :: res
    end function gaspi_segment_size

    function gaspi_rw_list_elem_max( &
        elem_max) &
        result(res) bind(C, name="gaspi_rw_list_elem_max")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: elem_max
      integer(gaspi_return_t) :: res
    end function gaspi_rw_list_elem_max

    subroutine gaspi_delay( &
        ) &
        bind(C, name="gaspi_delay")
      import
      implicit none
    end subroutine gaspi_delay

    function gaspi_segment_alloc_gpu( &
        segment_id, size, device) &
        result(res) bind(C, name="gaspi_segment_alloc_gpu")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_size_t), value :: size
      integer(gaspi_uint), value :: device
      integer(gaspi_return_t) :: res
    end function gaspi_segment_alloc_gpu

    function gaspi_segment_create_gpu( &
        segment_id, size, group, timeout_ms, &
        device) &
        result(res) bind(C, name="gaspi_segment_create_gpu")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_size_t), value :: size
      integer(gaspi_group_t), value :: group
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_uint), value :: device
      integer(gaspi_return_t) :: res
    end function gaspi_segment_create_gpu

    function gaspi_device_context( &
        device, arg, arg_size) &
        result(res) bind(C, name="gaspi_device_context")
      import
      implicit none
      integer(gaspi_uint), value :: device
      type(c_ptr), value :: arg
      integer(gaspi_size_t), value :: arg_size
      integer(gaspi_return_t) :: res
    end function gaspi_device_context

  end interface
end module gaspi_ext

module gaspi
  use gaspi_types
  use gaspi_ext
  implicit none

  interface
    function gaspi_version( &
        version) &
        result(res) bind(C, name="gaspi_version")
      import
      implicit none
      real(gaspi_float), intent(inout) :: version
      integer(gaspi_return_t) :: res
    end function gaspi_version

    function gaspi_proc_init( &
        timeout_ms) &
        result(res) bind(C, name="gaspi_proc_init")
      import
      implicit none
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_proc_init

    function gaspi_proc_term( &
        timeout_ms) &
        result(res) bind(C, name="gaspi_proc_term")
      import
      implicit none
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_proc_term

    function gaspi_proc_rank( &
        rank) &
        result(res) bind(C, name="gaspi_proc_rank")
      import
      implicit none
      integer(gaspi_rank_t), intent(inout) :: rank
      integer(gaspi_return_t) :: res
    end function gaspi_proc_rank

    function gaspi_proc_num( &
        proc_num) &
        result(res) bind(C, name="gaspi_proc_num")
      import
      implicit none
      integer(gaspi_rank_t), intent(inout) :: proc_num
      integer(gaspi_return_t) :: res
    end function gaspi_proc_num

    function gaspi_proc_kill( &
        rank, timeout_ms) &
        result(res) bind(C, name="gaspi_proc_kill")
      import
      implicit none
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_proc_kill

    function gaspi_connect( &
        rank, timeout_ms) &
        result(res) bind(C, name="gaspi_connect")
      import
      implicit none
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_connect

    function gaspi_disconnect( &
        rank, timeout_ms) &
        result(res) bind(C, name="gaspi_disconnect")
      import
      implicit none
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_disconnect

    function gaspi_group_create( &
        group) &
        result(res) bind(C, name="gaspi_group_create")
      import
      implicit none
      integer(gaspi_group_t), intent(inout) :: group
      integer(gaspi_return_t) :: res
    end function gaspi_group_create

    function gaspi_group_delete( &
        group) &
        result(res) bind(C, name="gaspi_group_delete")
      import
      implicit none
      integer(gaspi_group_t), value :: group
      integer(gaspi_return_t) :: res
    end function gaspi_group_delete

    function gaspi_group_add( &
        group, rank) &
        result(res) bind(C, name="gaspi_group_add")
      import
      implicit none
      integer(gaspi_group_t), value :: group
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_return_t) :: res
    end function gaspi_group_add

    function gaspi_group_commit( &
        group, timeout_ms) &
        result(res) bind(C, name="gaspi_group_commit")
      import
      implicit none
      integer(gaspi_group_t), value :: group
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_group_commit

    function gaspi_group_num( &
        group_num) &
        result(res) bind(C, name="gaspi_group_num")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: group_num
      integer(gaspi_return_t) :: res
    end function gaspi_group_num

    function gaspi_group_size( &
        group, group_size) &
        result(res) bind(C, name="gaspi_group_size")
      import
      implicit none
      integer(gaspi_group_t), value :: group
      integer(gaspi_number_t), intent(inout) :: group_size
      integer(gaspi_return_t) :: res
    end function gaspi_group_size

    function gaspi_group_ranks( &
        group, group_ranks) &
        result(res) bind(C, name="gaspi_group_ranks")
      import
      implicit none
      integer(gaspi_group_t), value :: group
      integer(gaspi_rank_t), dimension(*) :: group_ranks
      integer(gaspi_return_t) :: res
    end function gaspi_group_ranks

    function gaspi_group_max( &
        group_max) &
        result(res) bind(C, name="gaspi_group_max")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: group_max
      integer(gaspi_return_t) :: res
    end function gaspi_group_max

    function gaspi_segment_alloc( &
        segment_id, size, alloc_policy) &
        result(res) bind(C, name="gaspi_segment_alloc")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_size_t), value :: size
      integer(gaspi_alloc_t), value :: alloc_policy
      integer(gaspi_return_t) :: res
    end function gaspi_segment_alloc

    function gaspi_segment_delete( &
        segment_id) &
        result(res) bind(C, name="gaspi_segment_delete")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_return_t) :: res
    end function gaspi_segment_delete

    function gaspi_segment_register( &
        segment_id, rank, timeout_ms) &
        result(res) bind(C, name="gaspi_segment_register")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_segment_register

    function gaspi_segment_create( &
        segment_id, size, group, timeout_ms, &
        alloc_policy) &
        result(res) bind(C, name="gaspi_segment_create")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_size_t), value :: size
      integer(gaspi_group_t), value :: group
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_alloc_t), value :: alloc_policy
      integer(gaspi_return_t) :: res
    end function gaspi_segment_create

    function gaspi_segment_bind( &
        segment_id, pointer, size, memory_description) &
        result(res) bind(C, name="gaspi_segment_bind")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      type(c_ptr), value :: pointer
      integer(gaspi_size_t), value :: size
      integer(gaspi_memory_description_t), value :: memory_description
      integer(gaspi_return_t) :: res
    end function gaspi_segment_bind

    function gaspi_segment_use( &
        segment_id, pointer, size, group, &
        timeout, memory_description) &
        result(res) bind(C, name="gaspi_segment_use")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      type(c_ptr), value :: pointer
      integer(gaspi_size_t), value :: size
      integer(gaspi_group_t), value :: group
      integer(gaspi_timeout_t), value :: timeout
      integer(gaspi_memory_description_t), value :: memory_description
      integer(gaspi_return_t) :: res
    end function gaspi_segment_use

    function gaspi_segment_num( &
        segment_num) &
        result(res) bind(C, name="gaspi_segment_num")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: segment_num
      integer(gaspi_return_t) :: res
    end function gaspi_segment_num

    function gaspi_segment_list( &
        num, segment_id_list) &
        result(res) bind(C, name="gaspi_segment_list")
      import
      implicit none
      integer(gaspi_number_t), value :: num
      integer(gaspi_segment_id_t), dimension(*) :: segment_id_list
      integer(gaspi_return_t) :: res
    end function gaspi_segment_list

    function gaspi_segment_ptr( &
        segment_id, ptr) &
        result(res) bind(C, name="gaspi_segment_ptr")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      type(c_ptr), intent(out) :: ptr
      integer(gaspi_return_t) :: res
    end function gaspi_segment_ptr

    function gaspi_segment_max( &
        segment_max) &
        result(res) bind(C, name="gaspi_segment_max")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: segment_max
      integer(gaspi_return_t) :: res
    end function gaspi_segment_max

    function gaspi_write( &
        segment_id_local, offset_local, rank, segment_id_remote, &
        offset_remote, size, queue, timeout_ms) &
        result(res) bind(C, name="gaspi_write")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_local
      integer(gaspi_offset_t), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_segment_id_t), value :: segment_id_remote
      integer(gaspi_offset_t), value :: offset_remote
      integer(gaspi_size_t), value :: size
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_write

    function gaspi_read( &
        segment_id_local, offset_local, rank, segment_id_remote, &
        offset_remote, size, queue, timeout_ms) &
        result(res) bind(C, name="gaspi_read")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_local
      integer(gaspi_offset_t), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_segment_id_t), value :: segment_id_remote
      integer(gaspi_offset_t), value :: offset_remote
      integer(gaspi_size_t), value :: size
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_read

    function gaspi_write_list( &
        num, segment_id_local, offset_local, rank, &
        segment_id_remote, offset_remote, size, queue, &
        timeout_ms) &
        result(res) bind(C, name="gaspi_write_list")
      import
      implicit none
      integer(gaspi_number_t), value :: num
      type(c_ptr), value :: segment_id_local
      type(c_ptr), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      type(c_ptr), value :: segment_id_remote
      type(c_ptr), value :: offset_remote
      type(c_ptr), value :: size
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_write_list

    function gaspi_read_list( &
        num, segment_id_local, offset_local, rank, &
        segment_id_remote, offset_remote, size, queue, &
        timeout_ms) &
        result(res) bind(C, name="gaspi_read_list")
      import
      implicit none
      integer(gaspi_number_t), value :: num
      type(c_ptr), value :: segment_id_local
      type(c_ptr), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      type(c_ptr), value :: segment_id_remote
      type(c_ptr), value :: offset_remote
      type(c_ptr), value :: size
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_read_list

    function gaspi_wait( &
        queue, timeout_ms) &
        result(res) bind(C, name="gaspi_wait")
      import
      implicit none
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_wait

    function gaspi_barrier( &
        group, timeout_ms) &
        result(res) bind(C, name="gaspi_barrier")
      import
      implicit none
      integer(gaspi_group_t), value :: group
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_barrier

    function gaspi_allreduce( &
        buffer_send, buffer_receive, num, operation, &
        datatype, group, timeout_ms) &
        result(res) bind(C, name="gaspi_allreduce")
      import
      implicit none
      type(c_ptr), value :: buffer_send
      type(c_ptr), value :: buffer_receive
      integer(gaspi_number_t), value :: num
      integer(gaspi_operation_t), value :: operation
      integer(gaspi_datatype_t), value :: datatype
      integer(gaspi_group_t), value :: group
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_allreduce

    function gaspi_allreduce_user( &
        buffer_send, buffer_receive, num, element_size, &
        reduce_operation, reduce_state, group, timeout_ms) &
        result(res) bind(C, name="gaspi_allreduce_user")
      import
      implicit none
      type(c_ptr), value :: buffer_send
      type(c_ptr), value :: buffer_receive
      integer(gaspi_number_t), value :: num
      integer(gaspi_size_t), value :: element_size
      type(c_funptr), value :: reduce_operation
      type(c_ptr), value :: reduce_state
      integer(gaspi_group_t), value :: group
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_allreduce_user

    function gaspi_atomic_fetch_add( &
        segment_id, offset, rank, val_add, &
        val_old, timeout_ms) &
        result(res) bind(C, name="gaspi_atomic_fetch_add")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_offset_t), value :: offset
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_atomic_value_t), value :: val_add
      integer(gaspi_atomic_value_t), intent(inout) :: val_old
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_atomic_fetch_add

    function gaspi_atomic_compare_swap( &
        segment_id, offset, rank, comparator, &
        val_new, val_old, timeout_ms) &
        result(res) bind(C, name="gaspi_atomic_compare_swap")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id
      integer(gaspi_offset_t), value :: offset
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_atomic_value_t), value :: comparator
      integer(gaspi_atomic_value_t), value :: val_new
      integer(gaspi_atomic_value_t), intent(inout) :: val_old
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_atomic_compare_swap

    function gaspi_passive_send( &
        segment_id_local, offset_local, rank, size, &
        timeout_ms) &
        result(res) bind(C, name="gaspi_passive_send")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_local
      integer(gaspi_offset_t), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_size_t), value :: size
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_passive_send

    function gaspi_passive_receive( &
        segment_id_local, offset_local, rem_rank, size, &
        timeout_ms) &
        result(res) bind(C, name="gaspi_passive_receive")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_local
      integer(gaspi_offset_t), value :: offset_local
      integer(gaspi_rank_t), intent(inout) :: rem_rank
      integer(gaspi_size_t), value :: size
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_passive_receive

    function gaspi_notify( &
        segment_id_remote, rank, notification_id, notification_value, &
        queue, timeout_ms) &
        result(res) bind(C, name="gaspi_notify")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_remote
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_notification_id_t), value :: notification_id
      integer(gaspi_notification_t), value :: notification_value
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_notify

    function gaspi_notify_waitsome( &
        segment_id_local, notification_begin, num, first_id, &
        timeout_ms) &
        result(res) bind(C, name="gaspi_notify_waitsome")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_local
      integer(gaspi_notification_id_t), value :: notification_begin
      integer(gaspi_number_t), value :: num
      integer(gaspi_notification_id_t), intent(inout) :: first_id
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_notify_waitsome

    function gaspi_notify_reset( &
        segment_id_local, notification_id, old_notification_val) &
        result(res) bind(C, name="gaspi_notify_reset")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_local
      integer(gaspi_notification_id_t), value :: notification_id
      integer(gaspi_notification_t), intent(inout) :: old_notification_val
      integer(gaspi_return_t) :: res
    end function gaspi_notify_reset

    function gaspi_write_notify( &
        segment_id_local, offset_local, rank, segment_id_remote, &
        offset_remote, size, notification_id, notification_value, &
        queue, timeout_ms) &
        result(res) bind(C, name="gaspi_write_notify")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_local
      integer(gaspi_offset_t), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_segment_id_t), value :: segment_id_remote
      integer(gaspi_offset_t), value :: offset_remote
      integer(gaspi_size_t), value :: size
      integer(gaspi_notification_id_t), value :: notification_id
      integer(gaspi_notification_t), value :: notification_value
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_write_notify

    function gaspi_write_list_notify( &
        num, segment_id_local, offset_local, rank, &
        segment_id_remote, offset_remote, size, segment_id_notification, &
        notification_id, notification_value, queue, timeout_ms) &
        result(res) bind(C, name="gaspi_write_list_notify")
      import
      implicit none
      integer(gaspi_number_t), value :: num
      type(c_ptr), value :: segment_id_local
      type(c_ptr), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      type(c_ptr), value :: segment_id_remote
      type(c_ptr), value :: offset_remote
      type(c_ptr), value :: size
      integer(gaspi_segment_id_t), value :: segment_id_notification
      integer(gaspi_notification_id_t), value :: notification_id
      integer(gaspi_notification_t), value :: notification_value
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_write_list_notify

    function gaspi_read_notify( &
        segment_id_local, offset_local, rank, segment_id_remote, &
        offset_remote, size, notification_id, queue, &
        timeout_ms) &
        result(res) bind(C, name="gaspi_read_notify")
      import
      implicit none
      integer(gaspi_segment_id_t), value :: segment_id_local
      integer(gaspi_offset_t), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      integer(gaspi_segment_id_t), value :: segment_id_remote
      integer(gaspi_offset_t), value :: offset_remote
      integer(gaspi_size_t), value :: size
      integer(gaspi_notification_id_t), value :: notification_id
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_read_notify

    function gaspi_read_list_notify( &
        num, segment_id_local, offset_local, rank, &
        segment_id_remote, offset_remote, size, segment_id_notification, &
        notification_id, queue, timeout_ms) &
        result(res) bind(C, name="gaspi_read_list_notify")
      import
      implicit none
      integer(gaspi_number_t), value :: num
      type(c_ptr), value :: segment_id_local
      type(c_ptr), value :: offset_local
      integer(gaspi_rank_t), value :: rank
      type(c_ptr), value :: segment_id_remote
      type(c_ptr), value :: offset_remote
      type(c_ptr), value :: size
      integer(gaspi_segment_id_t), value :: segment_id_notification
      integer(gaspi_notification_id_t), value :: notification_id
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_read_list_notify

    function gaspi_queue_purge( &
        queue, timeout_ms) &
        result(res) bind(C, name="gaspi_queue_purge")
      import
      implicit none
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_queue_purge

    function gaspi_queue_size( &
        queue, queue_size) &
        result(res) bind(C, name="gaspi_queue_size")
      import
      implicit none
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_number_t), intent(inout) :: queue_size
      integer(gaspi_return_t) :: res
    end function gaspi_queue_size

    function gaspi_queue_num( &
        queue_num) &
        result(res) bind(C, name="gaspi_queue_num")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: queue_num
      integer(gaspi_return_t) :: res
    end function gaspi_queue_num

    function gaspi_queue_size_max( &
        queue_size_max) &
        result(res) bind(C, name="gaspi_queue_size_max")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: queue_size_max
      integer(gaspi_return_t) :: res
    end function gaspi_queue_size_max

    function gaspi_queue_create( &
        queue, timeout_ms) &
        result(res) bind(C, name="gaspi_queue_create")
      import
      implicit none
      integer(gaspi_queue_id_t), intent(inout) :: queue
      integer(gaspi_timeout_t), value :: timeout_ms
      integer(gaspi_return_t) :: res
    end function gaspi_queue_create

    function gaspi_queue_delete( &
        queue) &
        result(res) bind(C, name="gaspi_queue_delete")
      import
      implicit none
      integer(gaspi_queue_id_t), value :: queue
      integer(gaspi_return_t) :: res
    end function gaspi_queue_delete

    function gaspi_transfer_size_min( &
        transfer_size_min) &
        result(res) bind(C, name="gaspi_transfer_size_min")
      import
      implicit none
      integer(gaspi_size_t), intent(inout) :: transfer_size_min
      integer(gaspi_return_t) :: res
    end function gaspi_transfer_size_min

    function gaspi_transfer_size_max( &
        transfer_size_max) &
        result(res) bind(C, name="gaspi_transfer_size_max")
      import
      implicit none
      integer(gaspi_size_t), intent(inout) :: transfer_size_max
      integer(gaspi_return_t) :: res
    end function gaspi_transfer_size_max

    function gaspi_notification_num( &
        notification_num) &
        result(res) bind(C, name="gaspi_notification_num")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: notification_num
      integer(gaspi_return_t) :: res
    end function gaspi_notification_num

    function gaspi_passive_transfer_size_min( &
        passive_transfer_size_min) &
        result(res) bind(C, name="gaspi_passive_transfer_size_min")
      import
      implicit none
      integer(gaspi_size_t), intent(inout) :: passive_transfer_size_min
      integer(gaspi_return_t) :: res
    end function gaspi_passive_transfer_size_min

    function gaspi_passive_transfer_size_max( &
        passive_transfer_size_max) &
        result(res) bind(C, name="gaspi_passive_transfer_size_max")
      import
      implicit none
      integer(gaspi_size_t), intent(inout) :: passive_transfer_size_max
      integer(gaspi_return_t) :: res
    end function gaspi_passive_transfer_size_max

    function gaspi_atomic_max( &
        max_value) &
        result(res) bind(C, name="gaspi_atomic_max")
      import
      implicit none
      integer(gaspi_atomic_value_t), intent(inout) :: max_value
      integer(gaspi_return_t) :: res
    end function gaspi_atomic_max

    function gaspi_allreduce_buf_size( &
        buf_size) &
        result(res) bind(C, name="gaspi_allreduce_buf_size")
      import
      implicit none
      integer(gaspi_size_t), intent(inout) :: buf_size
      integer(gaspi_return_t) :: res
    end function gaspi_allreduce_buf_size

    function gaspi_allreduce_elem_max( &
        elem_max) &
        result(res) bind(C, name="gaspi_allreduce_elem_max")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: elem_max
      integer(gaspi_return_t) :: res
    end function gaspi_allreduce_elem_max

    function gaspi_queue_max( &
        queue_max) &
        result(res) bind(C, name="gaspi_queue_max")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: queue_max
      integer(gaspi_return_t) :: res
    end function gaspi_queue_max

    function gaspi_network_type( &
        network_type) &
        result(res) bind(C, name="gaspi_network_type")
      import
      implicit none
      integer(gaspi_network_t), intent(inout) :: network_type
      integer(gaspi_return_t) :: res
    end function gaspi_network_type

    function gaspi_build_infrastructure( &
        build) &
        result(res) bind(C, name="gaspi_build_infrastructure")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: build
      integer(gaspi_return_t) :: res
    end function gaspi_build_infrastructure

    function gaspi_time_ticks( &
        ticks) &
        result(res) bind(C, name="gaspi_time_ticks")
      import
      implicit none
      integer(gaspi_cycles_t), intent(inout) :: ticks
      integer(gaspi_return_t) :: res
    end function gaspi_time_ticks

    function gaspi_time_get( &
        wtime) &
        result(res) bind(C, name="gaspi_time_get")
      import
      implicit none
      real(gaspi_time_t), intent(inout) :: wtime
      integer(gaspi_return_t) :: res
    end function gaspi_time_get

    function gaspi_print_error( &
        error_code, error_message) &
        result(res) bind(C, name="gaspi_print_error")
      import
      implicit none
      integer(gaspi_return_t), value :: error_code
      type(c_ptr), intent(out) :: error_message
      integer(gaspi_return_t) :: res
    end function gaspi_print_error

    function gaspi_state_vec_get( &
        state_vector) &
        result(res) bind(C, name="gaspi_state_vec_get")
      import
      implicit none
      integer(gaspi_state_t), dimension(*), intent(out) :: state_vector
      integer(gaspi_return_t) :: res
    end function gaspi_state_vec_get

    function gaspi_statistic_verbosity_level( &
        verbosity_level) &
        result(res) bind(C, name="gaspi_statistic_verbosity_level")
      import
      implicit none
      integer(gaspi_number_t), value :: verbosity_level
      integer(gaspi_return_t) :: res
    end function gaspi_statistic_verbosity_level

    function gaspi_statistic_counter_max( &
        counter_max) &
        result(res) bind(C, name="gaspi_statistic_counter_max")
      import
      implicit none
      integer(gaspi_number_t), intent(inout) :: counter_max
      integer(gaspi_return_t) :: res
    end function gaspi_statistic_counter_max

    function gaspi_statistic_counter_info( &
        counter, counter_argument, counter_name, counter_description, &
        verbosity_level) &
        result(res) bind(C, name="gaspi_statistic_counter_info")
      import
      implicit none
      integer(gaspi_statistic_counter_t), value :: counter
      integer(gaspi_statistic_argument_t), intent(inout) :: counter_argument
      type(c_ptr), intent(out) :: counter_name
      type(c_ptr), intent(out) :: counter_description
      integer(gaspi_number_t), intent(inout) :: verbosity_level
      integer(gaspi_return_t) :: res
    end function gaspi_statistic_counter_info

    function gaspi_statistic_counter_get( &
        counter, argument, value) &
        result(res) bind(C, name="gaspi_statistic_counter_get")
      import
      implicit none
      integer(gaspi_statistic_counter_t), value :: counter
      integer(gaspi_number_t), value :: argument
      integer(c_long), intent(inout) :: value
      integer(gaspi_return_t) :: res
    end function gaspi_statistic_counter_get

    function gaspi_statistic_counter_reset( &
        counter) &
        result(res) bind(C, name="gaspi_statistic_counter_reset")
      import
      implicit none
      integer(gaspi_statistic_counter_t), value :: counter
      integer(gaspi_return_t) :: res
    end function gaspi_statistic_counter_reset

  end interface
end module gaspi
