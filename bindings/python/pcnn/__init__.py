"""pcnn: Python binding of libpcnn (ctypes only, no compiled extension).

    import pcnn
    with pcnn.Comm.world() as comm, pcnn.Net(comm, seed=0) as net:
        x = net.input(1, 28, 28)
        ...
        net.finalize(64)
        net.train_step(images, labels)

The library is found through PCNN_LIBRARY, the build tree next to this
package, the installed prefix or the dynamic loader (see load_library), and
its version is checked on import.  Objects free their C handle on close(),
at the end of a `with` block, on garbage collection and at exit.
"""
import ctypes

from . import _api, _args
from .comm import Comm, MPIMismatchError, mpi_info
from .dataset import Dataset
from .enums import (Collective, Dtype, Exchange, Init, LogLevel, Loss, MemoryPart, Optimizer,
                    Option, PerfFlag, PerfParam, Precision, SchedEvent, SchedLrRule, SchedOption, Status,
                    Time, UpsampleMode)
from .errors import (CorruptError, FileError, InternalError, InvalidArgumentError,
                     InvalidStateError, LibraryError, LibraryNotFoundError, MismatchError,
                     MPIError, NumericError, OutOfMemoryError, PcnnError, RemoteError,
                     ShapeError, TimeoutError, UnsupportedError)
from .fit import (Callback, CSVLogger, EarlyStopping, History, ModelCheckpoint, ProgressBar,
                  ReduceLROnPlateau)
from .net import Evaluation, Layer, Net, StepInfo
from .perfmodel import PerfModel
from .state import StateKeyError
from .torch_io import from_torch_state_dict, to_torch_state_dict
from .scheduler import Scheduler
from .volumes import VolumeDataset, batch_box, open_volumes, write_volume_manifest
from .hdf5 import HDF5Dataset, open_hdf5

__version__ = "0.2.0"  # the binding's own version; the library's: library_version()


def load_library(path=None):
    """Use the libpcnn at `path` (or search again for one).  Call it before
    creating any object; returns the path of the library in use."""
    return _api.load_library(path).path


def library_path():
    """The file of the loaded libpcnn."""
    return _api.current().path


def library_version():
    """The loaded library's version string, "MAJOR.MINOR.PATCH"."""
    return _api.current().version


def checkpoint_cleanup(path):
    """Remove the temporary files that saves to `path` killed midway (kill
    -9, power loss) left next to it, named <path>.pcnn-tmp.<host>.<pid>.<n>,
    of processes of this host that no longer run; returns how many.  Every
    Net.save to `path` does this first; nothing else is ever removed (see
    pcnn_checkpoint_cleanup, experimental section of pcnn.h)."""
    removed = ctypes.c_int()
    _api.current().pcnn_checkpoint_cleanup(_args.path(path, "checkpoint_cleanup"),
                                           ctypes.byref(removed))
    return removed.value


_api.try_load_at_import()

__all__ = [
    "Comm", "Dataset", "Net", "Layer", "Scheduler", "Evaluation", "StepInfo",
    "Exchange", "Init", "Loss", "Optimizer", "Option", "Status", "Time", "Dtype", "LogLevel",
    "MemoryPart", "UpsampleMode", "Precision",
    "SchedOption", "SchedLrRule", "SchedEvent",
    "PerfModel", "PerfParam", "PerfFlag", "Collective",
    "PcnnError", "InvalidArgumentError", "InvalidStateError", "ShapeError",
    "OutOfMemoryError", "MPIError", "RemoteError", "TimeoutError", "UnsupportedError",
    "NumericError", "FileError", "CorruptError", "MismatchError", "InternalError",
    "LibraryError", "LibraryNotFoundError", "MPIMismatchError", "mpi_info",
    "VolumeDataset", "open_volumes", "batch_box", "write_volume_manifest",
    "HDF5Dataset", "open_hdf5",
    "Callback", "EarlyStopping", "ProgressBar", "StateKeyError", "History", "ModelCheckpoint",
    "ReduceLROnPlateau", "CSVLogger",
    "from_torch_state_dict", "to_torch_state_dict",
    "load_library", "library_path", "library_version", "checkpoint_cleanup",
]
