"""Ownership of a C handle by a Python object.

A Handle frees its C object exactly once: on close(), at the end of a
`with` block, when it is garbage-collected, or at interpreter exit
(an atexit hook closes what is still open, schedulers, then networks, then
datasets, then communicators, while the library and MPI are still usable).  __del__ never
raises and does nothing once the interpreter is tearing modules down.
"""
import atexit
import ctypes
import weakref

from . import _api
from .errors import InvalidStateError

# Close order at exit: a scheduler uses a network, a network datasets and a
# communicator; "mpi" is the world communicator that may own MPI_Finalize
# (see comm.py).
_ORDER = ("scheduler", "net", "dataset", "comm", "mpi")
_live = {kind: weakref.WeakSet() for kind in _ORDER}


class Handle:
    _kind = None  # "net", "dataset" or "comm"
    _destroy = None  # name of the pcnn_*_destroy function
    _h = None  # the C pointer as an int; None once closed
    _lib = None

    def _adopt(self, lib, out):
        """Take ownership of the handle a create call wrote into `out`."""
        self._lib = lib
        self._h = out.value
        _live[self._kind].add(self)

    def _handle(self):
        h = self._h
        if h is None:
            raise InvalidStateError("this %s is closed" % type(self).__name__)
        return h

    @property
    def closed(self):
        return self._h is None

    def close(self):
        """Free the C object now.  Idempotent.  Raises (and stays open) if the
        library refuses, e.g. a communicator still used by a network."""
        h = self._h
        if h is None:
            return
        ptr = ctypes.c_void_p(h)
        getattr(self._lib, self._destroy)(ctypes.byref(ptr))
        self._h = None
        _live[self._kind].discard(self)
        self._closed()

    def _closed(self):
        """Hook for subclasses: drop references once the handle is freed."""

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if self._h is None:
            return
        try:
            self.close()
        except Exception:  # at shutdown, or a refused destroy: nothing to do
            pass


@atexit.register
def _close_all():
    for kind in _ORDER:
        for obj in list(_live[kind]):
            try:
                obj.close()
            except Exception:
                pass


def new_handle():
    """A (Library, c_void_p out-parameter) pair for a create call."""
    return _api.lib(), ctypes.c_void_p()
