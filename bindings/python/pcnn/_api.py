"""The C prototypes of include/pcnn.h, declared once, and the loaded library.

Every public function of the header has one row in PROTOTYPES: its name,
return type and argument types, resolved from the table
scripts/gen_ctypes.py generates from the header into _prototypes.py (the
fortran_module test checks it is current): a function added to the header
reaches the binding by running that script.  Conventions (checked against
the header by the tests too):
  - handles (pcnn_net *, pcnn_layer *, ...) are c_void_p, and the
    `pcnn_x **` out/destroy arguments are POINTER(c_void_p);
  - element buffers (float *, int32_t *, char *, void *) are c_void_p, so
    numpy arrays and bytes pass by address without a copy;
  - scalar out-parameters of other types (int *, size_t *, double *,
    uint64_t *) are typed pointers; enums and MPICH's MPI_Comm / MPI_Fint
    are c_int (an enum out-parameter, POINTER(c_int));
  - functions returning pcnn_status are declared with STATUS: a non-zero
    status raises the matching pcnn exception carrying pcnn_last_error();
  - every integer, float and string argument is checked against its C
    type before ctypes converts it (pcnn/_args.py): OverflowError rather
    than truncation, ValueError for a NUL byte in a path.
A function the loaded library lacks (an older build) is replaced by one that
raises UnsupportedError when called, so the rest keeps working.
"""
import os
import threading
from ctypes import (POINTER, c_char_p, c_double, c_float, c_int, c_long, c_size_t, c_uint,
                    c_uint64, c_void_p)

from . import _args, _loader, _prototypes
from .errors import LibraryError, LibraryNotFoundError, UnsupportedError, error_for_status

EXPECTED_MAJOR = 0  # the PCNN_VERSION_MAJOR this package speaks

STATUS = object()  # marker: returns pcnn_status, checked
H = c_void_p  # a handle, or an element buffer
HH = POINTER(c_void_p)  # pcnn_x **: created handle out, or destroy(&h)
I, L, F, D, Z, U64, E = c_int, c_long, c_float, c_double, c_size_t, c_uint64, c_int
pI, pZ, pD, pU64 = POINTER(c_int), POINTER(c_size_t), POINTER(c_double), POINTER(c_uint64)
STR, pSTR = c_char_p, POINTER(c_char_p)
MPI_COMM = MPI_FINT = c_int  # MPICH: both are int

UINT = c_uint
# The codes of the generated table (_prototypes.py, from the header).
_CODES = {"STATUS": STATUS, "H": H, "HH": HH, "I": I, "L": L, "UINT": UINT, "F": F, "D": D,
          "Z": Z, "U64": U64, "E": E, "pI": pI, "pZ": pZ, "pD": pD, "pU64": pU64, "STR": STR,
          "pSTR": pSTR, "MPI_COMM": MPI_COMM, "MPI_FINT": MPI_FINT}
PROTOTYPES = [(name, _CODES[ret], tuple(_CODES[a] for a in args))
              for name, ret, args in _prototypes.TABLE]


class Library:
    """One loaded libpcnn: its functions as attributes (`lib.pcnn_net_create`),
    its path and version.  Objects keep a reference to the Library that made
    their handles, so they never call into another copy."""

    def __init__(self, cdll, path):
        self.path = path
        self.cdll = cdll
        self.missing = []
        last_error = None
        for name, restype, argtypes in PROTOTYPES:
            try:
                fn = getattr(cdll, name)
            except AttributeError:
                self.missing.append(name)
                setattr(self, name, _missing(name, path))
                continue
            fn.argtypes = argtypes
            if restype is STATUS:
                fn.restype = c_int
                fn.errcheck = _checker(self)
            else:
                fn.restype = restype
            setattr(self, name, _args.checked(fn, name, argtypes))
            if name == "pcnn_last_error":
                last_error = fn
        if last_error is None:
            raise LibraryError("%s is not libpcnn (no pcnn_last_error)" % path)
        self.version_number = self.pcnn_version_number()
        self.version = self.pcnn_version_string().decode()

    def last_error(self):
        return self.pcnn_last_error().decode("utf-8", "replace")

    def status_name(self, status):
        return self.pcnn_status_str(status).decode()


def _checker(lib):
    # errcheck runs on the calling thread right after the call, so the
    # per-thread last-error message is the one of this call.
    def check(status, func, args):
        if status:
            raise error_for_status(status, lib.last_error() or func.__name__,
                                   lib.status_name(status))
        return status
    return check


def _missing(name, path):
    def unavailable(*args):
        raise UnsupportedError("%s is not in the loaded libpcnn (%s): it is older than this "
                               "binding" % (name, path))
    unavailable.__name__ = name
    return unavailable


_lock = threading.Lock()
_lib = None
_used = False  # a handle was created with _lib: it can no longer be replaced


def load_library(path=None):
    """Load libpcnn (see pcnn._loader for where it looks) and check its
    version.  With a path: use exactly that file.  Allowed until the first
    handle is created; afterwards only the library already in use is
    accepted.  Returns the Library."""
    global _lib
    with _lock:
        if _lib is not None:
            if path is None:
                return _lib
            if os.path.exists(path) and os.path.realpath(path) == _lib.path:
                return _lib
            if _used:
                raise LibraryError(
                    "libpcnn is already in use from %s; load_library(%r) must come before "
                    "the first network, dataset or communicator (or set PCNN_LIBRARY)"
                    % (_lib.path, path))
        cdll, resolved = _loader.load(path, EXPECTED_MAJOR)
        lib = Library(cdll, resolved)
        major = lib.version_number // 10000
        if major != EXPECTED_MAJOR:
            raise LibraryError(
                "%s is libpcnn %s (major %d) but this binding speaks major %d"
                % (resolved, lib.version, major, EXPECTED_MAJOR))
        _lib = lib
        return lib


def current():
    """The loaded library (loading it if needed), without committing to it."""
    return _lib if _lib is not None else load_library()


def lib():
    """The library for a new handle (loading it on first use); from now on
    it cannot be replaced."""
    global _used
    L = _lib if _lib is not None else load_library()
    _used = True
    return L


def try_load_at_import():
    """Load now if the library can be found; a missing library is reported
    at first use instead, so that load_library(path) still works.  A found
    library with the wrong version fails the import."""
    try:
        load_library()
    except LibraryNotFoundError:
        pass
