"""HDF5 datasets (pcnn.h section 9.6): samples stay in HDF5 files (one file
of many samples, or one file per sample) and are read batch by batch, each
rank of a spatial network only its box, converted to float32 as read.

    ds = pcnn.open_hdf5("universes/*.h5", channels_last=True)   # "full", "unitPar"
    ds.set_transform(log1p=True)          # CosmoFlow's log(1 + counts)
    ds.set_prefetch(2)
    net.train_epoch(ds, 8)

Needs a libpcnn built with HDF5 (pcnn.UnsupportedError otherwise)."""
import ctypes
import math
import os

from ._args import path as _path
from ._handle import new_handle
from .errors import InvalidArgumentError
from .volumes import VolumeDataset

VOLUMES, CHANNELS_LAST, FLOAT_TARGETS = 1, 2, 4  # PCNN_HDF5_* flags


class HDF5Dataset(VolumeDataset):
    """A Dataset read from HDF5 files (pcnn_dataset_open_hdf5); make one with
    open_hdf5().  Everything a VolumeDataset does works (shuffle, batch,
    batch_box, set_prefetch, Net.train_epoch, Net.evaluate, Net.fit), plus
    set_transform and io_bytes."""

    def __init__(self, *args, **kwargs):
        raise TypeError("use pcnn.open_hdf5(paths, ...)")

    def set_transform(self, channel=-1, log1p=False, scale=1.0, shift=0.0):
        """As read, channel `channel` (-1: all) becomes
        scale * (log1p(x) if log1p else x) + shift, in float32."""
        ch = int(channel)
        if not -1 <= ch < self.sample_shape[0]:
            raise InvalidArgumentError("set_transform: channel %d outside [-1, %d)"
                                       % (ch, self.sample_shape[0]))
        s, t = float(scale), float(shift)
        if not (math.isfinite(s) and math.isfinite(t)):
            raise InvalidArgumentError("set_transform: scale %r and shift %r must be finite"
                                       % (scale, shift))
        self._lib.pcnn_dataset_set_transform(self._handle(), ch, 1 if log1p else 0, s, t)

    def io_bytes(self):
        """(sample bytes, other bytes) this rank read from the files so far."""
        data, meta = ctypes.c_uint64(), ctypes.c_uint64()
        self._lib.pcnn_dataset_io_bytes(self._handle(), ctypes.byref(data), ctypes.byref(meta))
        return data.value, meta.value


def _paths(paths):
    if isinstance(paths, (str, bytes, os.PathLike)):
        return _path(paths, "open_hdf5")
    items = [os.fsdecode(_path(p, "open_hdf5")) for p in paths]
    if not items:
        raise InvalidArgumentError("open_hdf5: the list of files is empty")
    for p in items:
        if "\n" in p:
            raise InvalidArgumentError("open_hdf5: the path %r contains a newline" % p)
    return os.fsencode("\n".join(items) + "\n")


def _name(value, what):
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise InvalidArgumentError("open_hdf5: %s must be a non-empty dataset name, got %r"
                                   % (what, value))
    return value.encode()


def open_hdf5(paths, inputs="full", targets="unitPar", volumes=True, channels_last=False,
              float_targets=False):
    """Open HDF5 files: `paths` is a path, a glob pattern, or a list of
    paths.  `inputs` holds the samples, (N, C, D, H, W) or one (C, D, H, W)
    per file (volumes=False: 2D images, (N, C, H, W)); channels_last for
    (.., D, H, W, C) on disk.  `targets` holds integer class labels or float
    targets (float_targets: integers read as float targets)."""
    flags = (VOLUMES if volumes else 0) | (CHANNELS_LAST if channels_last else 0) | \
        (FLOAT_TARGETS if float_targets else 0)
    self = HDF5Dataset.__new__(HDF5Dataset)
    lib, out = new_handle()
    lib.pcnn_dataset_open_hdf5(_paths(paths), _name(inputs, "inputs"),
                               _name(targets, "targets"), flags, ctypes.byref(out))
    self._adopt(lib, out)
    k = ctypes.c_int()
    lib.pcnn_dataset_target_info(out, ctypes.byref(k), None)
    self._describe(k.value)
    return self
