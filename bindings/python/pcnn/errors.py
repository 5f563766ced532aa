"""Exceptions: one class per pcnn_status, each carrying the library's message.

Every class derives from PcnnError (status, status_name, message) and from
the closest built-in exception, so `except ValueError` also catches a bad
shape and `except MemoryError` an allocation failure.  The binding's own
argument checks raise the same classes (or TypeError for a wrong Python
type) before anything reaches C.
"""
import builtins


class LibraryError(ImportError):
    """libpcnn could not be used: wrong version, not libpcnn, or switched
    after handles were created."""


class LibraryNotFoundError(LibraryError):
    """No libpcnn could be loaded; the message lists where we looked."""


class PcnnError(Exception):
    """A libpcnn call failed.  `status` is the pcnn_status value,
    `status_name` its name ("invalid argument"), `message` the library's
    detailed message (pcnn_last_error)."""

    status = None
    status_name = "error"

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if status_name is not None:
            self.status_name = status_name

    def __str__(self):
        return "%s [%s]" % (self.message, self.status_name)


def _kind(name, status, status_name, base, doc):
    cls = type(name, (PcnnError, base), {"status": status, "status_name": status_name,
                                          "__doc__": doc, "__module__": __name__})
    # OSError and friends have their own __init__/__str__: use ours.
    cls.__init__ = PcnnError.__init__
    cls.__str__ = PcnnError.__str__
    return cls


InvalidArgumentError = _kind("InvalidArgumentError", 1, "invalid argument", ValueError,
                             "An argument is out of range, NULL or of the wrong kind.")
InvalidStateError = _kind("InvalidStateError", 2, "invalid order of calls", RuntimeError,
                          "A call came in the wrong order (e.g. train before finalize).")
ShapeError = _kind("ShapeError", 3, "shape mismatch", ValueError,
                   "Shapes or sizes that do not fit together.")
OutOfMemoryError = _kind("OutOfMemoryError", 4, "out of memory", MemoryError,
                         "An allocation failed inside libpcnn; nothing leaked.")
MPIError = _kind("MPIError", 5, "MPI failure", RuntimeError, "An MPI call failed.")
RemoteError = _kind("RemoteError", 6, "error on another rank", RuntimeError,
                    "Another rank of the communicator reported an error.")
TimeoutError = _kind("TimeoutError", 7, "timeout", builtins.TimeoutError,
                     "A collective did not complete within PCNN_OPT_TIMEOUT_MS.")
UnsupportedError = _kind("UnsupportedError", 8, "unsupported", RuntimeError,
                         "A valid request this build (or this library version) cannot serve.")
NumericError = _kind("NumericError", 9, "NaN or Inf", ArithmeticError,
                     "NaN or Inf in inputs, loss or gradients.")
FileError = _kind("FileError", 10, "I/O error", OSError,
                  "A file could not be opened, read or written.")
CorruptError = _kind("CorruptError", 11, "corrupt or malformed data", ValueError,
                     "A file is truncated, malformed or fails its checksum.")
MismatchError = _kind("MismatchError", 12, "mismatch", RuntimeError,
                      "Ranks (or a file and a network) disagree.")
InternalError = _kind("InternalError", 13, "internal error", RuntimeError,
                      "A bug in libpcnn: please report it.")

BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, InvalidStateError, ShapeError, OutOfMemoryError, MPIError,
    RemoteError, TimeoutError, UnsupportedError, NumericError, FileError, CorruptError,
    MismatchError, InternalError)}


def error_for_status(status, message, status_name=None):
    """The exception for a status returned by libpcnn (PcnnError itself for a
    status newer than this binding)."""
    cls = BY_STATUS.get(status, PcnnError)
    return cls(message, status, status_name)
