! A Fortran stencil code that trains a libpcnn network on its own fields.
!
! The heat equation u_t = alpha * (u_xx + u_yy) on a periodic NX x NY grid,
! split in rows over the ranks of MPI_COMM_WORLD (halo rows exchanged with
! MPI_Sendrecv), with a few hot spots kept warm.  As it runs, each rank cuts
! PATCHES 10 x 10 patches out of its own rows and trains, together with the
! other ranks, a small convolutional network to predict the next step's
! change on the 8 x 8 interior: data parallelism where every rank brings
! its own samples (pcnn_net_train_step), the network never leaving the
! simulation.  The update is a 3 x 3 stencil, so the loss must fall by
! orders of magnitude; the program fails (exit 1) if it falls less than
! 100 times.
!
!   mpiexec.mpich -n 2 ./stencil_train [steps]
!
! Built with the library's Fortran module (bindings/fortran/pcnn.f90,
! generated from pcnn.h).  libpcnn's diagnostics reach the program through
! a log callback written in Fortran.
module stencil_support
  use, intrinsic :: iso_c_binding
  use mpi
  use pcnn
  implicit none
contains
  ! Stop the job with libpcnn's message when a call failed.
  subroutine check(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    integer :: ierr
    if (status /= PCNN_OK) then
      write (0, '(a, ": ", a, " (", a, ")")') what, pcnn_last_error(), pcnn_status_str(status)
      call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
    end if
  end subroutine check

  ! libpcnn never prints: its rare diagnostics come here.
  subroutine on_log(user, level, message) bind(c)
    type(c_ptr), value :: user      ! this rank (pcnn_net_set_log_callback's user)
    integer(c_int), value :: level
    type(c_ptr), value :: message
    integer, pointer :: rank
    call c_f_pointer(user, rank)
    if (level == PCNN_LOG_WARNING) then
      write (0, '("rank ", i0, ": libpcnn warning: ", a)') rank, pcnn_f_string(message)
    else if (rank == 0) then
      write (*, '("libpcnn: ", a)') pcnn_f_string(message)
    end if
  end subroutine on_log
end module stencil_support

program stencil_train
  use stencil_support
  implicit none
  integer, parameter :: NX = 64, NY = 64, PATCH = 10, INNER = PATCH - 2, PATCHES = 8
  real, parameter :: ALPHA = 0.2
  real(c_float), allocatable :: u(:, :), un(:, :)
  real(c_float) :: x(PATCH, PATCH, 1, PATCHES), dy(INNER, INNER, 1, PATCHES)
  real(c_float) :: loss, first_loss, last_loss
  integer, target :: rank
  integer :: ranks, ierr, rows, up, down, step, steps, k, i, j, p
  integer :: status(MPI_STATUS_SIZE)
  integer(kind=8) :: seed  ! 64 bits: the generator multiplies by 1103515245
  character(len=32) :: arg
  type(c_ptr) :: comm, net, l
  integer(c_int) :: st
  real(c_double) :: done

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, ranks, ierr)
  steps = 300
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    if (arg == '--help' .or. arg == '-h') then
      if (rank == 0) print '(a)', 'usage: mpiexec.mpich -n P stencil_train [steps (300)]'
      call MPI_Finalize(ierr)
      stop
    end if
    read (arg, *) steps
  end if
  if (mod(NY, ranks) /= 0 .or. NY / ranks < PATCH) then
    if (rank == 0) write (0, '(a)') 'the rows must split evenly into slabs of at least 10'
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  rows = NY / ranks
  up = mod(rank + 1, ranks)
  down = mod(rank - 1 + ranks, ranks)
  ! Rows 0 and rows + 1 are the halos.
  allocate (u(NX, 0:rows + 1), un(NX, 0:rows + 1))
  do j = 1, rows
    do i = 1, NX
      u(i, j) = 0.5 * (1.0 + sin(6.2831853 * i / NX) * cos(6.2831853 * (j + rank * rows) / NY))
    end do
  end do

  ! The network: 1 x 10 x 10 -> conv 3x3 (4) -> conv 1x1 (1) = 1 x 8 x 8,
  ! the change of u over one step; MSE, Adam.
  call check(pcnn_comm_create_fortran(MPI_COMM_WORLD, comm), 'pcnn_comm_create_fortran')
  call check(pcnn_net_create(net), 'pcnn_net_create')
  call check(pcnn_net_set_log_callback(net, c_funloc(on_log), c_loc(rank)), 'set_log_callback')
  call check(pcnn_net_input(net, 1, PATCH, PATCH, l), 'pcnn_net_input')
  call check(pcnn_conv2d(net, l, 4, 3, 1, 0, 1, l), 'pcnn_conv2d')
  call check(pcnn_conv2d(net, l, 1, 1, 1, 0, 1, l), 'pcnn_conv2d')
  call check(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE), 'pcnn_net_set_loss')
  call check(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM), 'pcnn_net_set_optimizer')
  call check(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.01_c_double), 'set_option')
  call check(pcnn_net_set_comm(net, comm), 'pcnn_net_set_comm')
  call check(pcnn_net_finalize(net, PATCHES * ranks), 'pcnn_net_finalize')
  if (rank == 0) print '("libpcnn ", a, ", ", i0, " ranks, ", i0, " x ", i0, " grid, ", i0, &
      & " steps")', pcnn_version_string(), ranks, NX, NY, steps

  seed = 12345 + 977 * rank
  first_loss = 0
  last_loss = 0
  do step = 1, steps
    ! Halos: my last row goes up, my first row down (periodic).
    call MPI_Sendrecv(u(:, rows), NX, MPI_REAL, up, 1, u(:, 0), NX, MPI_REAL, down, 1, &
                      MPI_COMM_WORLD, status, ierr)
    call MPI_Sendrecv(u(:, 1), NX, MPI_REAL, down, 2, u(:, rows + 1), NX, MPI_REAL, up, 2, &
                      MPI_COMM_WORLD, status, ierr)
    do j = 1, rows
      do i = 1, NX
        un(i, j) = u(i, j) + ALPHA * (u(1 + mod(i, NX), j) + u(1 + mod(i - 2 + NX, NX), j) &
                                      + u(i, j + 1) + u(i, j - 1) - 4.0 * u(i, j))
      end do
    end do
    ! Samples from this rank's rows (halos included): u now, and the change.
    do p = 1, PATCHES
      seed = mod(seed * 1103515245_8 + 12345_8, 2147483647_8)
      i = int(mod(seed, int(NX - PATCH + 1, 8)))
      j = int(mod(seed / NX, int(rows - PATCH + 1, 8)))
      x(:, :, 1, p) = u(i + 1:i + PATCH, j:j + PATCH - 1)
      dy(:, :, 1, p) = un(i + 2:i + PATCH - 1, j + 1:j + PATCH - 2) &
                       - u(i + 2:i + PATCH - 1, j + 1:j + PATCH - 2)
    end do
    dy = dy * 10.0  ! changes are small: scale them to order 0.1
    st = pcnn_net_train_step(net, PATCHES, x, targets=dy, loss=loss)
    call check(st, 'pcnn_net_train_step')
    if (step == 1) first_loss = loss
    last_loss = loss
    u(:, 1:rows) = un(:, 1:rows)
    ! Hot spots kept warm, so that the fields keep changing.
    if (rank == 0) u(NX / 4, rows / 2) = 1.0
    if (rank == ranks - 1) u(3 * NX / 4, rows / 2) = 1.0
  end do

  call check(pcnn_net_get_option(net, PCNN_OPT_STEP, done), 'pcnn_net_get_option')
  if (rank == 0) print '("trained ", i0, " steps: loss ", es10.3, " -> ", es10.3)', &
      nint(done), first_loss, last_loss
  k = 0
  if (.not. (last_loss < first_loss / 100.0) .or. nint(done) /= steps) k = 1
  if (rank == 0 .and. k /= 0) write (0, '(a)') 'FAIL: the loss did not fall 100 times'
  call check(pcnn_net_destroy(net), 'pcnn_net_destroy')
  call check(pcnn_comm_destroy(comm), 'pcnn_comm_destroy')
  deallocate (u, un)
  call MPI_Finalize(ierr)
  if (k /= 0) error stop 1
end program stencil_train
