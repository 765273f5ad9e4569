! The Fortran module `gaspi` (runtime/capi/fortran/gaspi.f90) against
! libGPI2: a write_notify ring with checked data, allreduce, a list write,
! an atomic, a group query and the error code of bad input. Prints
! "rank R: fortran checked"; stops with code 1 and the reason otherwise.
program ring
  use, intrinsic :: iso_c_binding
  use gaspi
  use gaspi_ext ! also reached through gaspi: naming both must compile
  implicit none
  integer(c_short) :: rank, num, right, left, ranks(64)
  integer(c_int) :: round, id, v
  integer(c_long), pointer :: words(:)
  type(c_ptr) :: p
  real(c_double), target :: send(3), recv(3)
  integer(c_long) :: old
  integer(gaspi_segment_id_t), target :: seg_local(2), seg_remote(2)
  integer(gaspi_offset_t), target :: off_local(2), off_remote(2)
  integer(gaspi_size_t), target :: sizes(2)
  integer(gaspi_size_t) :: peer_size
  integer(c_int) :: members
  integer(c_int), parameter :: words_n = 64

  call check(gaspi_proc_init(GASPI_BLOCK), "proc_init")
  call check(gaspi_proc_rank(rank), "proc_rank")
  call check(gaspi_proc_num(num), "proc_num")
  right = int(mod(int(rank) + 1, int(num)), c_short)
  left = int(mod(int(rank) + int(num) - 1, int(num)), c_short)
  call check(gaspi_segment_create(0_c_signed_char, int(8 * words_n, c_long), GASPI_GROUP_ALL, &
       GASPI_BLOCK, GASPI_MEM_INITIALIZED), "segment_create")
  call check(gaspi_segment_ptr(0_c_signed_char, p), "segment_ptr")
  call c_f_pointer(p, words, [words_n])

  ! A write_notify ring: each rank sends 1000*rank + round to its right.
  do round = 1, 5
     words(1) = 1000 * rank + round
     call check(gaspi_write_notify(0_c_signed_char, 0_c_long, right, 0_c_signed_char, &
          int(8 * round, c_long), 8_c_long, 0, round, 0_c_signed_char, GASPI_BLOCK), &
          "write_notify")
     call check(gaspi_notify_waitsome(0_c_signed_char, 0, 1, id, 10000_c_long), "waitsome")
     call check(gaspi_notify_reset(0_c_signed_char, id, v), "notify_reset")
     call expect(id == 0 .and. v == round, "notification value")
     call expect(words(round + 1) == 1000 * left + round, "ring data")
     call check(gaspi_wait(0_c_signed_char, GASPI_BLOCK), "wait")
     call check(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK), "barrier")
  end do

  ! A list write of two elements into the right neighbour, then a notify.
  words(20) = 7 * rank + 1
  words(21) = 7 * rank + 2
  seg_local = 0
  seg_remote = 0
  off_local = [int(8 * 19, c_long), int(8 * 20, c_long)]
  off_remote = [int(8 * 30, c_long), int(8 * 31, c_long)]
  sizes = 8
  call check(gaspi_write_list_notify(2, c_loc(seg_local), c_loc(off_local), right, &
       c_loc(seg_remote), c_loc(off_remote), c_loc(sizes), 0_c_signed_char, 1, 9, &
       0_c_signed_char, GASPI_BLOCK), "write_list_notify")
  call check(gaspi_notify_waitsome(0_c_signed_char, 1, 1, id, 10000_c_long), "waitsome list")
  call check(gaspi_notify_reset(0_c_signed_char, 1, v), "reset list")
  call expect(v == 9, "list notification")
  call expect(words(31) == 7 * left + 1 .and. words(32) == 7 * left + 2, "list data")
  call check(gaspi_wait(0_c_signed_char, GASPI_BLOCK), "wait list")
  call check(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK), "barrier")

  ! Allreduce of doubles.
  send = [real(rank, c_double), 1.0_c_double, -real(rank, c_double)]
  call check(gaspi_allreduce(c_loc(send), c_loc(recv), 3, GASPI_OP_SUM, GASPI_TYPE_DOUBLE, &
       GASPI_GROUP_ALL, GASPI_BLOCK), "allreduce")
  call expect(recv(1) == real(num * (num - 1) / 2, c_double) .and. recv(2) == real(num, c_double) &
       .and. recv(3) == -recv(1), "allreduce sum")

  ! Every rank adds its rank + 1 to word 40 of rank 0.
  call check(gaspi_atomic_fetch_add(0_c_signed_char, int(8 * 39, c_long), 0_c_short, &
       int(rank + 1, c_long), old, GASPI_BLOCK), "fetch_add")
  call check(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK), "barrier")
  if (rank == 0) call expect(words(40) == num * (num + 1) / 2, "atomic sum")

  ! The group of all ranks.
  call check(gaspi_group_size(GASPI_GROUP_ALL, members), "group_size")
  call expect(members == num, "group size")
  call check(gaspi_group_ranks(GASPI_GROUP_ALL, ranks), "group_ranks")
  call expect(ranks(num) == num - 1, "group ranks")

  ! A peer's segment size (GASPI_Ext.h), and a line through gaspi_printf.
  call check(gaspi_segment_size(0_gaspi_segment_id_t, right, peer_size), "segment_size")
  call expect(peer_size == 8 * words_n, "the right neighbour's segment size")
  call gaspi_printf("fortran printf"//c_new_line//c_null_char)

  ! Bad input gets GPI-2's codes.
  call expect(gaspi_segment_bind(5_c_signed_char, c_null_ptr, 64_c_long, 0) == GASPI_ERR_NULLPTR, &
       "bind of a null pointer")
  call expect(gaspi_write(9_c_signed_char, 0_c_long, right, 0_c_signed_char, 0_c_long, 8_c_long, &
       0_c_signed_char, GASPI_BLOCK) == GASPI_ERR_INV_SEG, "write from an unknown segment")

  call check(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK), "barrier")
  call check(gaspi_segment_delete(0_c_signed_char), "segment_delete")
  print '(a,i0,a)', "rank ", rank, ": fortran checked"
  call check(gaspi_proc_term(GASPI_BLOCK), "proc_term")

contains

  subroutine check(code, what)
    integer(c_int), intent(in) :: code
    character(*), intent(in) :: what
    if (code /= GASPI_SUCCESS) then
       write (0, '(a,a,i0)') what, " returned ", code
       stop 1
    end if
  end subroutine check

  subroutine expect(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
       write (0, '(a,a)') "check failed: ", what
       stop 1
    end if
  end subroutine expect

end program ring
