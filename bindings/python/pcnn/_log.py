"""The C log callback (pcnn_log_callback) behind Net.set_log_callback and
PerfModel.set_log_callback: one trampoline for both owners."""
import ctypes
from ctypes import c_void_p

from .enums import LogLevel

LogCallback = ctypes.CFUNCTYPE(None, c_void_p, ctypes.c_int, ctypes.c_char_p)


def install(owner, setter, handle, callback):
    """Set `callback(level, message)` through the C `setter` on `handle`
    (None removes it).  An exception cannot travel through C: the first
    one is kept as owner.log_callback_error.  The C function pointer is
    kept alive on owner._log_callback."""
    if callback is None:
        setter(handle, None, None)
        owner._log_callback = None
        return

    def trampoline(_user, level, message):
        try:
            callback(LogLevel(level), message.decode("utf-8", "replace"))
        except BaseException as e:  # noqa: BLE001 - C cannot carry it
            if owner.log_callback_error is None:
                owner.log_callback_error = e
    c_log = LogCallback(trampoline)
    owner.log_callback_error = None
    setter(handle, c_log, None)
    owner._log_callback = c_log
