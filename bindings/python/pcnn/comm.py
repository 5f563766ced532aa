"""Communicators: libpcnn's duplicate of an MPI communicator."""
import ctypes

from ._handle import Handle, new_handle


class Comm(Handle):
    """A libpcnn communicator (pcnn_comm): a duplicate of the host's MPI
    communicator, so the library's traffic never mixes with the host's.

    Comm(mpi4py_comm)     any object with .py2f() (an mpi4py communicator;
                          mpi4py must be built against the same MPI as
                          libpcnn, i.e. MPICH), or a Fortran handle (int):
                          passed to pcnn_comm_create_fortran, whose
                          refusal of an invalid handle raises
                          InvalidArgumentError (OverflowError beyond C int).
    Comm.world()          MPI_COMM_WORLD; initialises MPI if nobody has.

    Creation and close() are collective over the communicator.  A network
    using the communicator keeps it alive; close() raises InvalidStateError
    while such a network is open."""

    _kind = "comm"
    _destroy = "pcnn_comm_destroy"

    def __init__(self, comm):
        if hasattr(comm, "py2f"):
            fint = comm.py2f()
        elif isinstance(comm, int) and not isinstance(comm, bool):
            fint = comm
        else:
            raise TypeError("Comm(comm): expected an mpi4py communicator (anything with "
                            ".py2f()) or a Fortran communicator handle, got %r" % (comm,))
        lib, out = new_handle()
        lib.pcnn_comm_create_fortran(fint, ctypes.byref(out))
        self._adopt(lib, out)
        self._info()

    @classmethod
    def world(cls):
        """A communicator over MPI_COMM_WORLD.  If MPI is not initialised yet,
        libpcnn initialises it (MPI_THREAD_MULTIPLE requested); the binding
        then keeps MPI up until the interpreter exits, as mpi4py does, so
        that closing one communicator never finalises MPI under another."""
        _MPIKeeper.ensure()
        self = cls.__new__(cls)
        lib, out = new_handle()
        lib.pcnn_comm_create_world(ctypes.byref(out))
        self._adopt(lib, out)
        self._info()
        return self

    def _info(self):
        rank, size, level = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        self._lib.pcnn_comm_info(self._h, ctypes.byref(rank), ctypes.byref(size),
                                 ctypes.byref(level))
        self.rank, self.size, self.thread_level = rank.value, size.value, level.value

    def share(self, count):
        """(first, n): this rank's part [first, first + n) of `count`
        samples, as libpcnn splits a global batch (the first count % size
        ranks get one more)."""
        return share(count, self.rank, self.size)

    def __repr__(self):
        state = "closed" if self.closed else "rank %d of %d" % (self.rank, self.size)
        return "<pcnn.Comm %s>" % state


def share(count, rank, size):
    base, extra = divmod(count, size)
    return rank * base + min(rank, extra), base + (1 if rank < extra else 0)


class _MPIKeeper(Comm):
    """The first world communicator of the process.  If libpcnn initialised
    MPI, this handle owns MPI_Finalize; it is closed last, at exit."""

    _kind = "mpi"
    _keeper = None

    @classmethod
    def ensure(cls):
        if cls._keeper is None:
            keeper = cls.__new__(cls)
            lib, out = new_handle()
            lib.pcnn_comm_create_world(ctypes.byref(out))
            keeper._adopt(lib, out)
            keeper._info()
            cls._keeper = keeper  # strong reference: lives until exit

