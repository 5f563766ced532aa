! A Fortran host of an installed libpcnn: `use pcnn` from the installed
! compiled module (pkg-config --cflags pcnn-fortran), linked with
! libpcnn_fortran -- it never compiles pcnn.f90.  One process, no MPI
! call: a network trained for a few steps; the loss must fall.
program host_fortran
  use, intrinsic :: iso_c_binding
  use pcnn
  implicit none
  type(c_ptr) :: net, l
  real(c_float) :: x(4, 4, 1, 8), first, loss
  integer(c_int32_t) :: labels(8)
  integer :: i
  do i = 1, 8
    x(:, :, 1, i) = real(mod(i, 2), c_float)
    labels(i) = mod(i, 2)
  end do
  call ck(pcnn_net_create(net))
  call ck(pcnn_net_input(net, 1, 4, 4, l))
  call ck(pcnn_dense(net, l, 2, 1, l))
  call ck(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY))
  call ck(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.1d0))
  call ck(pcnn_net_finalize(net, 8))
  do i = 1, 20
    call ck(pcnn_net_train_step(net, 8, x, labels, loss=loss))
    if (i == 1) first = loss
  end do
  call ck(pcnn_net_destroy(net))
  if (.not. (loss < first)) then
    print '("FAIL the loss did not fall: ", f8.4, " -> ", f8.4)', first, loss
    error stop 1
  end if
  print '("fortran host ok (", a, "), loss ", f6.4, " -> ", f6.4)', pcnn_version_string(), first, loss
contains
  subroutine ck(status)
    integer(c_int), intent(in) :: status
    if (status /= PCNN_OK) then
      print '("FAIL ", a)', pcnn_last_error()
      error stop 2
    end if
  end subroutine ck
end program host_fortran
