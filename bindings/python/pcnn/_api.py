"""The C prototypes of include/pcnn.h, declared once, and the loaded library.

Every public function of the header has one line in PROTOTYPES: its name,
return type and argument types.  Adding a function to the binding is adding
its line.  Conventions (checked against the header by the tests):
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

from . import _args, _loader
from .errors import LibraryError, LibraryNotFoundError, UnsupportedError, error_for_status

EXPECTED_MAJOR = 0  # the PCNN_VERSION_MAJOR this package speaks

STATUS = object()  # marker: returns pcnn_status, checked
H = c_void_p  # a handle, or an element buffer
HH = POINTER(c_void_p)  # pcnn_x **: created handle out, or destroy(&h)
I, L, F, D, Z, U64, E = c_int, c_long, c_float, c_double, c_size_t, c_uint64, c_int
pI, pZ, pD, pU64 = POINTER(c_int), POINTER(c_size_t), POINTER(c_double), POINTER(c_uint64)
STR, pSTR = c_char_p, POINTER(c_char_p)
MPI_COMM = MPI_FINT = c_int  # MPICH: both are int

PROTOTYPES = [
    # 1. version and 2. error model
    ("pcnn_version_number", c_uint, ()),
    ("pcnn_version_string", STR, ()),
    ("pcnn_status_str", STR, (E,)),
    ("pcnn_last_error", STR, ()),
    # 3. networks
    ("pcnn_net_create", STATUS, (HH,)),
    ("pcnn_net_destroy", STATUS, (HH,)),
    ("pcnn_net_input", STATUS, (H, I, I, I, HH)),
    ("pcnn_conv2d", STATUS, (H, H, I, I, I, I, I, HH)),
    ("pcnn_maxpool2d", STATUS, (H, H, I, I, I, HH)),
    ("pcnn_avgpool2d", STATUS, (H, H, I, I, I, HH)),
    ("pcnn_global_avgpool", STATUS, (H, H, HH)),
    ("pcnn_dense", STATUS, (H, H, I, I, HH)),
    ("pcnn_flatten", STATUS, (H, H, HH)),
    ("pcnn_relu", STATUS, (H, H, HH)),
    ("pcnn_leaky_relu", STATUS, (H, H, F, HH)),
    ("pcnn_batchnorm", STATUS, (H, H, F, F, HH)),
    ("pcnn_batchnorm_set_sync", STATUS, (H, I)),  # section 9
    ("pcnn_dropout", STATUS, (H, H, F, HH)),
    ("pcnn_add", STATUS, (H, H, H, HH)),
    ("pcnn_add_scaled", STATUS, (H, H, H, F, HH)),
    ("pcnn_pixel_shuffle", STATUS, (H, H, I, HH)),
    ("pcnn_layer_set_init", STATUS, (H, E)),
    ("pcnn_layer_output_shape", STATUS, (H, pI, pI, pI)),
    ("pcnn_layer_info", STATUS, (H, pI, pSTR)),
    ("pcnn_layer_num_params", STATUS, (H, pZ)),
    ("pcnn_net_set_loss", STATUS, (H, H, E)),
    ("pcnn_net_set_optimizer", STATUS, (H, E)),
    ("pcnn_net_set_option", STATUS, (H, E, D)),
    ("pcnn_net_get_option", STATUS, (H, E, pD)),
    ("pcnn_net_option_info", STATUS, (E, pD, pD, pI, pSTR)),
    ("pcnn_net_finalize", STATUS, (H, I)),
    ("pcnn_net_train_step", STATUS, (H, I, H, H, H, H)),
    ("pcnn_net_compute_gradients", STATUS, (H, I, H, H, H, H)),
    ("pcnn_net_compute_loss", STATUS, (H, I, H, H, H, H)),
    ("pcnn_net_predict", STATUS, (H, I, H, H, Z)),
    ("pcnn_net_evaluate", STATUS, (H, H, pD, pD)),
    ("pcnn_net_train_epoch", STATUS, (H, H, I, pD)),
    ("pcnn_net_num_params", STATUS, (H, pZ)),
    ("pcnn_net_output_size", STATUS, (H, pZ)),
    ("pcnn_net_memory_bytes", STATUS, (H, pZ)),
    ("pcnn_net_memory_part", STATUS, (H, E, pZ)),
    ("pcnn_net_get_params", STATUS, (H, H, Z)),
    ("pcnn_net_set_params", STATUS, (H, H, Z)),
    ("pcnn_net_get_grads", STATUS, (H, H, Z)),
    ("pcnn_layer_get_params", STATUS, (H, H, Z)),
    ("pcnn_layer_set_params", STATUS, (H, H, Z)),
    ("pcnn_layer_num_buffers", STATUS, (H, pZ)),  # section 9
    ("pcnn_layer_get_buffers", STATUS, (H, H, Z)),
    ("pcnn_layer_set_buffers", STATUS, (H, H, Z)),
    ("pcnn_net_get_input_grad", STATUS, (H, H, Z)),
    ("pcnn_net_summary", STATUS, (H, H, Z, pZ)),
    # 4. datasets
    ("pcnn_dataset_load_idx", STATUS, (STR, STR, F, F, HH)),
    ("pcnn_dataset_create", STATUS, (I, I, I, I, H, H, H, I, HH)),
    ("pcnn_dataset_destroy", STATUS, (HH,)),
    ("pcnn_dataset_info", STATUS, (H, pI, pI, pI, pI)),
    ("pcnn_dataset_shuffle", STATUS, (H, U64, U64)),
    ("pcnn_dataset_batch", STATUS, (H, I, I, H, H, H)),
    # 5. parallel
    ("pcnn_comm_create", STATUS, (MPI_COMM, HH)),
    ("pcnn_comm_create_fortran", STATUS, (MPI_FINT, HH)),
    ("pcnn_comm_create_world", STATUS, (HH,)),
    ("pcnn_comm_destroy", STATUS, (HH,)),
    ("pcnn_comm_info", STATUS, (H, pI, pI, pI)),
    ("pcnn_net_set_comm", STATUS, (H, H)),
    ("pcnn_net_set_exchange", STATUS, (H, E)),
    ("pcnn_layer_set_exchange", STATUS, (H, E)),
    ("pcnn_net_exchange_bytes", STATUS, (H, pU64)),
    ("pcnn_net_abort", STATUS, (H,)),
    ("pcnn_net_async_error", STATUS, (H, pI)),
    # 6. timing breakdown
    ("pcnn_net_time", STATUS, (H, I, E, pD)),
    ("pcnn_net_overlap_ratio", STATUS, (H, pD)),
    ("pcnn_net_reset_timing", STATUS, (H,)),
    ("pcnn_net_timing_report", STATUS, (H, H, Z, pZ)),
    ("pcnn_net_write_trace", STATUS, (H, STR)),
    # 7. checkpoints
    ("pcnn_net_save", STATUS, (H, STR)),
    ("pcnn_net_load", STATUS, (H, STR)),
    ("pcnn_net_save_extra", STATUS, (H, STR, H, Z)),
    ("pcnn_net_load_extra", STATUS, (H, STR, H, Z, pZ)),
    # 8. adaptive batch scheduler
    ("pcnn_scheduler_create", STATUS, (H, I, I, D, HH)),
    ("pcnn_scheduler_destroy", STATUS, (HH,)),
    ("pcnn_scheduler_set_option", STATUS, (H, E, D)),
    ("pcnn_scheduler_get_option", STATUS, (H, E, pD)),
    ("pcnn_scheduler_begin_epoch", STATUS, (H, pI, pD)),
    ("pcnn_scheduler_end_epoch", STATUS, (H, D)),
    ("pcnn_scheduler_train_epoch", STATUS, (H, H, pD)),
    ("pcnn_scheduler_share", STATUS, (H, I, pI, pI)),
    ("pcnn_scheduler_theta", STATUS, (H, L, pD)),
    ("pcnn_scheduler_state_bytes", STATUS, (H, pZ)),
    ("pcnn_scheduler_save_state", STATUS, (H, H, Z)),
    ("pcnn_scheduler_load_state", STATUS, (H, H, Z)),
    # 9. experimental
    ("pcnn_checkpoint_cleanup", STATUS, (STR, pI)),
    # 9. experimental: callbacks (C function pointers, c_void_p) and merged traces
    ("pcnn_net_set_step_callback", STATUS, (H, H, H)),
    ("pcnn_net_stopped_early", STATUS, (H, pI)),
    ("pcnn_net_set_log_callback", STATUS, (H, H, H)),
    ("pcnn_net_write_trace_merged", STATUS, (H, STR)),
    # 9. experimental: 3D networks
    ("pcnn_net_input3d", STATUS, (H, I, I, I, I, HH)),
    ("pcnn_conv3d", STATUS, (H, H, I, I, I, I, I, HH)),
    ("pcnn_maxpool3d", STATUS, (H, H, I, I, I, HH)),
    ("pcnn_avgpool3d", STATUS, (H, H, I, I, I, HH)),
    ("pcnn_layer_output_shape3d", STATUS, (H, pI, pI, pI, pI)),
    ("pcnn_dataset_create3d", STATUS, (I, I, I, I, I, H, H, H, I, HH)),
    # 9. experimental: spatial and hybrid parallelism
    ("pcnn_net_set_distribution", STATUS, (H, pI)),
    ("pcnn_layer_set_distribution", STATUS, (H, pI)),
    ("pcnn_layer_get_distribution", STATUS, (H, pI)),
    ("pcnn_layer_local_box", STATUS, (H, pI, pI)),
    ("pcnn_net_group_info", STATUS, (H, pI, pI, pI, pI)),
    ("pcnn_net_train_step_local", STATUS, (H, I, H, H, H, H)),
    ("pcnn_net_predict_parallel", STATUS, (H, I, H, H, Z)),
    ("pcnn_dataset_info3d", STATUS, (H, pI, pI, pI, pI, pI)),
    # 9. experimental: the performance model
    ("pcnn_perfmodel_create", STATUS, (HH,)),
    ("pcnn_perfmodel_destroy", STATUS, (HH,)),
    ("pcnn_perfmodel_calibrate_comm", STATUS, (H, H, D)),
    ("pcnn_perfmodel_calibrate_compute", STATUS, (H, H, D)),
    ("pcnn_perfmodel_calibrate_pace", STATUS, (H, H)),
    ("pcnn_perfmodel_fit_regressors", STATUS, (H, I, D, U64)),
    ("pcnn_perfmodel_set_param", STATUS, (H, E, D)),
    ("pcnn_perfmodel_get_param", STATUS, (H, E, pD)),
    ("pcnn_perfmodel_collective_time", STATUS, (H, E, I, D, pD)),
    ("pcnn_perfmodel_predict", STATUS, (H, H, I, I, I, pD)),
    ("pcnn_perfmodel_layer_time", STATUS, (H, I, E, pD)),
    ("pcnn_perfmodel_validate", STATUS, (H, H, pD, pD, H, Z, pZ)),
    ("pcnn_perfmodel_report", STATUS, (H, H, Z, pZ)),
    ("pcnn_perfmodel_save", STATUS, (H, STR)),
    ("pcnn_perfmodel_load", STATUS, (STR, HH)),
    ("pcnn_perfmodel_share", STATUS, (H, H, I)),
    ("pcnn_mpi_info", STATUS, (pI, pSTR, H, Z)),
    ("pcnn_dataset_open_volumes", STATUS, (STR, I, I, I, I, E, I, HH)),
    ("pcnn_dataset_batch_box", STATUS, (H, I, I, pI, pI, H, H, H)),
    ("pcnn_dataset_set_prefetch", STATUS, (H, I)),
    # 9. experimental: the automatic parallel strategy
    ("pcnn_net_plan_distribution", STATUS, (H, H, I, pD)),
    ("pcnn_net_plan_report", STATUS, (H, H, Z, pZ)),
    ("pcnn_net_set_perfmodel", STATUS, (H, H)),
    ("pcnn_layer_get_exchange", STATUS, (H, pI)),
]


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
