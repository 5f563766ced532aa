! The Fortran module on one process (no communicator, no MPI calls): the
! string helpers, enum parameters, a `const char **` output, an error
! message, and a step callback written in Fortran that stops an epoch
! early.  Prints PASS/FAIL per check; exit status 1 on any failure.
module module_test_support
  use, intrinsic :: iso_c_binding
  use pcnn
  implicit none
  integer :: failures = 0
contains
  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (ok) then
      print '("PASS ", a)', what
    else
      print '("FAIL ", a)', what
      failures = failures + 1
    end if
  end subroutine expect

  subroutine ck(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= PCNN_OK) then
      print '("FAIL ", a, ": ", a)', what, pcnn_last_error()
      error stop 2
    end if
  end subroutine ck

  ! Counts its calls (user points to the counter); asks to stop at batch 1.
  function on_step(user, step, batch, batches, loss) bind(c) result(stop)
    type(c_ptr), value :: user
    integer(c_int64_t), value :: step
    integer(c_int), value :: batch, batches
    real(c_double), value :: loss
    integer(c_int) :: stop
    integer, pointer :: calls
    call c_f_pointer(user, calls)
    calls = calls + 1
    stop = 0
    if (batch == 1 .and. batches == 4 .and. step == 1 .and. loss > 0) stop = 1
  end function on_step
end module module_test_support

program test_module
  use module_test_support
  implicit none
  integer, parameter :: N = 16
  type(c_ptr) :: net, l, data, name
  real(c_float) :: x(4, 4, 1, N)
  integer(c_int32_t) :: labels(N)
  integer, target :: calls
  integer(c_int) :: stopped, st, is_integer
  real(c_double) :: mean, lo, hi, steps
  character(kind=c_char) :: summary(4096)
  integer(c_size_t) :: needed
  integer :: i
  character(len=:), allocatable :: message

  call expect(pcnn_status_str(PCNN_ERR_SHAPE) == 'shape mismatch', 'pcnn_status_str as a Fortran string')
  call expect(pcnn_last_error() == '', 'no error yet: pcnn_last_error is empty')
  call expect(pcnn_version_number() == PCNN_HEADER_VERSION_NUMBER, 'the library is the header''s version')
  call expect(len(pcnn_version_string()) >= 5, 'pcnn_version_string: ' // pcnn_version_string())
  call ck(pcnn_net_option_info(PCNN_OPT_LEARNING_RATE, lo, hi, is_integer, name), 'option_info')
  call expect(pcnn_f_string(name) == 'learning_rate' .and. is_integer == 0 .and. lo > 0, &
              'a const char ** output read with pcnn_f_string')

  call ck(pcnn_net_create(net), 'pcnn_net_create')
  call ck(pcnn_net_input(net, 1, 4, 4, l), 'pcnn_net_input')
  call ck(pcnn_flatten(net, l, l), 'pcnn_flatten')
  call ck(pcnn_dense(net, l, 3, 1, l), 'pcnn_dense')
  call ck(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY), 'pcnn_net_set_loss')
  st = pcnn_net_finalize(net, 0)
  message = pcnn_last_error()
  call expect(st == PCNN_ERR_INVALID_ARGUMENT .and. index(message, 'pcnn_net_finalize') == 1, &
              'a failed call: its status and message: ' // message)
  call ck(pcnn_net_finalize(net, 4), 'pcnn_net_finalize')
  call ck(pcnn_net_summary(net, summary, int(size(summary), c_size_t), needed), 'pcnn_net_summary')
  call expect(needed > 0 .and. needed < size(summary), 'pcnn_net_summary into a character buffer')

  do i = 1, N
    x(:, :, 1, i) = real(mod(i * 7, 5), c_float) / 5.0
    labels(i) = mod(i, 3)
  end do
  call ck(pcnn_dataset_create(N, 1, 4, 4, x, labels, target_count=0, out=data), 'pcnn_dataset_create')
  calls = 0
  call ck(pcnn_net_set_step_callback(net, c_funloc(on_step), c_loc(calls)), 'set_step_callback')
  call ck(pcnn_net_train_epoch(net, data, 4, mean), 'pcnn_net_train_epoch')
  call ck(pcnn_net_stopped_early(net, stopped), 'pcnn_net_stopped_early')
  call ck(pcnn_net_get_option(net, PCNN_OPT_STEP, steps), 'pcnn_net_get_option')
  call expect(calls == 2 .and. stopped == 1 .and. nint(steps) == 2 .and. mean > 0, &
              'a Fortran step callback stops the epoch after its second step')
  call ck(pcnn_dataset_destroy(data), 'pcnn_dataset_destroy')
  call ck(pcnn_net_destroy(net), 'pcnn_net_destroy')
  call expect(.not. c_associated(net), 'destroy sets the handle to NULL')
  deallocate(message)  ! the main program's locals live on its stack: LeakSanitizer counts them
  if (failures > 0) error stop 1
end program test_module
