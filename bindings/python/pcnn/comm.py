"""Communicators: libpcnn's duplicate of an MPI communicator."""
import ctypes
import sys

from . import _api
from ._handle import Handle, new_handle
from .errors import LibraryError, UnsupportedError


class MPIMismatchError(LibraryError):
    """mpi4py and libpcnn use different MPI implementations (say Open MPI and
    MPICH): one process cannot hold both, and the first MPI call would
    crash.  Raised before any communicator is handed over."""


# pcnn_mpi_info's family values (PCNN_MPI_FAMILY_* of pcnn_config.h).
_FAMILIES = {1: "MPICH", 2: "Open MPI"}


def mpi_family_of(text):
    """The MPI family ("MPICH" or "Open MPI") an MPI_Get_library_version
    string names, or None.  MPICH's derivatives share its ABI: Intel MPI,
    Cray MPICH, MVAPICH count as MPICH."""
    if "Open MPI" in text:
        return "Open MPI"
    upper = text.upper()
    if any(k in upper for k in ("MPICH", "MVAPICH", "INTEL(R) MPI")):
        return "MPICH"
    return None


def mpi_info():
    """{"family", "built_with", "library"}: the MPI family libpcnn was built
    for, the mpi.h version it was compiled with ("MPICH 4.0.2") and the
    MPI_Get_library_version text of the MPI library this process runs."""
    lib = _api.current()
    family, built = ctypes.c_int(), ctypes.c_char_p()
    text = ctypes.create_string_buffer(8192)
    lib.pcnn_mpi_info(ctypes.byref(family), ctypes.byref(built), text, len(text))
    return {"family": _FAMILIES.get(family.value, "unknown (%d)" % family.value),
            "built_with": built.value.decode(),
            "library": text.value.decode("utf-8", "replace").strip()}


def check_mpi4py():
    """Raise MPIMismatchError if mpi4py is imported and runs another MPI
    family than the one libpcnn was built for.  Checks nothing when mpi4py
    is not imported, or when either side does not say (an older libpcnn,
    an MPI whose version string names no known family)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return
    try:
        theirs_text = mpi.Get_library_version()
    except Exception:  # an mpi4py too old or too broken to say
        return
    lib = _api.current()
    family, built = ctypes.c_int(), ctypes.c_char_p()
    try:
        lib.pcnn_mpi_info(ctypes.byref(family), ctypes.byref(built), None, 0)
    except UnsupportedError:
        return
    ours = _FAMILIES.get(family.value)
    theirs = mpi_family_of(theirs_text)
    if ours is None or theirs is None or ours == theirs:
        return
    raise MPIMismatchError(
        "mpi4py runs %s (%s) but libpcnn (%s) was built against %s: one process cannot use "
        "both MPIs.  Use an mpi4py built on %s (e.g. MPICC=%s pip install --no-binary "
        "mpi4py mpi4py), or a libpcnn built with -Dmpi=%s, or no mpi4py at all "
        "(pcnn.Comm.world())."
        % (theirs, theirs_text.splitlines()[0].strip() if theirs_text else "?", lib.path,
           built.value.decode(), ours,
           "mpicc.mpich" if ours == "MPICH" else "mpicc.openmpi",
           "openmpi" if theirs == "Open MPI" else "mpich"))


class Comm(Handle):
    """A libpcnn communicator (pcnn_comm): a duplicate of the host's MPI
    communicator, so the library's traffic never mixes with the host's.

    Comm(mpi4py_comm)     any object with .py2f() (an mpi4py communicator;
                          mpi4py must run the same MPI family as libpcnn:
                          MPIMismatchError otherwise, see mpi_info()), or a
                          Fortran handle (int): passed to
                          pcnn_comm_create_fortran, whose
                          refusal of an invalid handle raises
                          InvalidArgumentError (OverflowError beyond C int).
    Comm.world()          MPI_COMM_WORLD; initialises MPI if nobody has.

    Creation and close() are collective over the communicator.  A network
    using the communicator keeps it alive; close() raises InvalidStateError
    while such a network is open."""

    _kind = "comm"
    _destroy = "pcnn_comm_destroy"

    def __init__(self, comm):
        check_mpi4py()
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
        check_mpi4py()
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

    def barrier(self, timeout_ms=0):
        """Return once every rank has called it (pcnn_comm_barrier), e.g. to
        wait for files rank 0 writes, without mpi4py.  timeout_ms > 0:
        TimeoutError after that long, and the communicator refuses every
        later collective.  Collective."""
        self._lib.pcnn_comm_barrier(self._handle(), int(timeout_ms))

    def bcast(self, obj, root=0, timeout_ms=0):
        """Rank root's bytes or numpy array, returned on every rank
        (pcnn_comm_bcast), without mpi4py.  The other ranks pass anything
        (None): what they receive (length, dtype, shape) comes from root.
        Arrays arrive C-contiguous, as new arrays (on root too: a copy).
        Collective."""
        h = self._handle()
        header = ctypes.create_string_buffer(_BCAST_HEADER)
        if self.rank == root:
            payload, meta = _bcast_payload(obj)
            if len(meta) > _BCAST_HEADER - 9:
                raise ValueError("Comm.bcast: the array's dtype and shape need %d bytes of "
                                 "description, more than %d" % (len(meta), _BCAST_HEADER - 9))
            header.raw = (len(payload).to_bytes(8, "little") + bytes([len(meta)]) + meta
                          ).ljust(_BCAST_HEADER, b"\0")
        self._lib.pcnn_comm_bcast(h, header, _BCAST_HEADER, root, int(timeout_ms))
        raw = header.raw
        size, meta_len = int.from_bytes(raw[:8], "little"), raw[8]
        meta = raw[9:9 + meta_len]
        buf = ctypes.create_string_buffer(max(size, 1))
        if self.rank == root:
            ctypes.memmove(buf, payload, size)
        self._lib.pcnn_comm_bcast(h, buf if size else None, size, root, int(timeout_ms))
        data = buf.raw[:size]
        if not meta:
            return data
        import numpy as np
        dtype, shape = meta.decode().split("|")
        return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(
            tuple(int(d) for d in shape.split(",") if d)).copy()

    def share(self, count):
        """(first, n): this rank's part [first, first + n) of `count`
        samples, as libpcnn splits a global batch (the first count % size
        ranks get one more)."""
        return share(count, self.rank, self.size)

    def __repr__(self):
        state = "closed" if self.closed else "rank %d of %d" % (self.rank, self.size)
        return "<pcnn.Comm %s>" % state


# Comm.bcast first sends a fixed header: the payload's size (8 bytes), then
# the array's "dtype|shape" (empty for bytes) after its length byte.
_BCAST_HEADER = 256


def _bcast_payload(obj):
    """(bytes, description) of what root broadcasts."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj), b""
    try:
        import numpy as np
    except ImportError:  # numpy is a requirement; this only words the error
        np = None
    if np is not None and isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError("Comm.bcast: an array of Python objects cannot be sent as bytes")
        a = np.ascontiguousarray(obj)
        return a.tobytes(), ("%s|%s" % (a.dtype.str, ",".join(str(d) for d in a.shape))
                             ).encode()
    raise TypeError("Comm.bcast: root sends bytes or a numpy array, got %s" % type(obj).__name__)


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

