"""Ownership of a C handle by a Python object.

A Handle frees its C object exactly once: on close(), at the end of a
`with` block, when it is garbage-collected, or at interpreter exit
(an atexit hook closes what is still open, schedulers, then networks, then
datasets, then communicators, while the library and MPI are still usable).  __del__ never
raises and does nothing once the interpreter is tearing modules down.

Calls and close() across threads: every public method and property of a
Handle subclass counts itself as a use of the object while it runs
(`_enter` / `_leave`; objects it hands to C as well, through `_using`).
close() while another thread is inside such a call raises
InvalidStateError instead of freeing memory that call is using; a call
that starts after close() raises InvalidStateError ("closed").
"""
import atexit
import ctypes
import functools
import threading
import weakref

from . import _api
from .errors import InvalidStateError

# Close order at exit: a performance model holds no other object; a scheduler
# uses a network, a network datasets and a communicator; "mpi" is the world
# communicator that may own MPI_Finalize (see comm.py).
_ORDER = ("perfmodel", "scheduler", "net", "dataset", "comm", "mpi")
_live = {kind: weakref.WeakSet() for kind in _ORDER}
# Guards _h and _uses of every handle: held only for a few bytecodes, and
# never while allocating anything the garbage collector tracks (a collection
# there could run a __del__ -> close() that takes it again on this thread).
_state = threading.Lock()
# Public names that are not calls into C (usable on a closed object too).
_UNGUARDED = {"close", "closed"}


def _guarded(fn):
    """fn(self, ...) counted as a use of self while it runs."""
    # _enter and _leave inlined: this runs on every call (e.g. each step).
    @functools.wraps(fn)
    def use(self, *args, **kwargs):
        with _state:
            open_ = self._h is not None
            if open_:
                self._uses += 1
        if not open_:
            raise InvalidStateError("this %s is closed" % type(self).__name__)
        try:
            return fn(self, *args, **kwargs)
        finally:
            with _state:
                self._uses -= 1
    return use


class _Use:
    """`with obj._using():` counts a use of obj (e.g. a dataset a network
    method hands to C) for the duration of the block."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __enter__(self):
        return self.obj._enter()

    def __exit__(self, *exc):
        self.obj._leave()
        return False


class Handle:
    _kind = None  # "net", "dataset" or "comm"
    _destroy = None  # name of the pcnn_*_destroy function
    _h = None  # the C pointer as an int; None once closed
    _lib = None
    _uses = 0  # calls running on this object now, in any thread

    def __init_subclass__(cls, **kwargs):
        """Count every public method and property (and __len__) as a use."""
        super().__init_subclass__(**kwargs)
        for name, attr in list(vars(cls).items()):
            if (name.startswith("_") and name != "__len__") or name in _UNGUARDED:
                continue
            if isinstance(attr, property):
                setattr(cls, name, property(attr.fget and _guarded(attr.fget),
                                            attr.fset and _guarded(attr.fset), attr.fdel,
                                            attr.__doc__))
            elif callable(attr) and not isinstance(attr, (classmethod, staticmethod, type)):
                setattr(cls, name, _guarded(attr))

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

    def _enter(self):
        """Start a use: the handle, which stays valid until _leave."""
        with _state:
            h = self._h
            if h is not None:
                self._uses += 1
        if h is None:
            raise InvalidStateError("this %s is closed" % type(self).__name__)
        return h

    def _leave(self):
        with _state:
            self._uses -= 1

    def _using(self):
        return _Use(self)

    def _busy_error(self):
        return InvalidStateError(
            "%s.close(): a call on this %s is still running (in another thread); close it "
            "after that call returns" % (type(self).__name__, type(self).__name__))

    def _check_idle(self):
        """Raise if another call on this open object is running."""
        with _state:
            busy = self._h is not None and self._uses > 0
        if busy:
            raise self._busy_error()

    @property
    def closed(self):
        return self._h is None

    def close(self):
        """Free the C object now.  Idempotent.  Raises (and stays open) if the
        library refuses, e.g. a communicator still used by a network, or if
        another thread is inside a call on this object."""
        with _state:
            h, busy = self._h, self._uses > 0
            if h is not None and not busy:
                self._h = None  # calls starting from now raise "closed"
        if h is None:
            return
        if busy:
            raise self._busy_error()
        ptr = ctypes.c_void_p(h)
        try:
            getattr(self._lib, self._destroy)(ctypes.byref(ptr))
        except BaseException:
            with _state:
                self._h = h
            raise
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
