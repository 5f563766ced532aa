"""File-backed volume datasets (pcnn.h section 9): samples stay in raw or
.npy files listed by a manifest and are read batch by batch, a box of each
if wanted, optionally ahead of time on a helper thread.

    ds = pcnn.open_volumes("train/manifest.txt", (4, 32, 32, 32), targets=4)
    ds.set_prefetch(2)
    x, t = ds.batch_box(0, 8, box_start=(0, 0, 0), box_count=(16, 32, 32))
    net.train_epoch(ds, 8)

write_volume_manifest() writes the manifest for a list of (path, targets)."""
import ctypes
import os
import tempfile

import numpy as np

from . import _api
from ._args import path as _path
from ._arrays import addr, floats_out
from ._handle import new_handle
from .dataset import Dataset
from .errors import InvalidArgumentError, ShapeError

F32, F64 = 0, 1  # pcnn_dtype
_DTYPES = {"float32": F32, "f4": F32, "<f4": F32, "float64": F64, "f8": F64, "<f8": F64}

_H, _I = ctypes.c_void_p, ctypes.c_int
_PI = ctypes.POINTER(ctypes.c_int)
# The prototypes of these calls (as pcnn/_api.py would list them), bound
# here when the library's table does not have them yet.
_PROTOTYPES = [
    ("pcnn_dataset_open_volumes", (ctypes.c_char_p, _I, _I, _I, _I, _I, _I,
                                   ctypes.POINTER(ctypes.c_void_p))),
    ("pcnn_dataset_batch_box", (_H, _I, _I, _PI, _PI, _H, _H, _H)),
    ("pcnn_dataset_set_prefetch", (_H, _I)),
]


def _fn(lib, name):
    """lib's checked function `name`, declared here if its table lacks it."""
    fn = getattr(lib, name, None)
    if fn is not None and name not in lib.missing:
        return fn
    cache = lib.__dict__.setdefault("_volume_fns", {})
    if name not in cache:
        argtypes = dict(_PROTOTYPES)[name]
        try:
            raw = getattr(lib.cdll, name)
        except AttributeError:
            from .errors import UnsupportedError
            raise UnsupportedError("%s is not in the loaded libpcnn (%s): it is older than "
                                   "this binding" % (name, lib.path))
        raw.argtypes = argtypes
        raw.restype = ctypes.c_int
        raw.errcheck = _api._checker(lib)
        cache[name] = raw
    return cache[name]


def _box(values, name, shape):
    if values is None:
        return None
    v = tuple(int(a) for a in values)
    if len(v) != 3:
        raise InvalidArgumentError("VolumeDataset.batch_box: %s needs 3 values (D, H, W), got %d"
                                   % (name, len(v)))
    return (ctypes.c_int * 3)(*v)


class VolumeDataset(Dataset):
    """A Dataset whose volumes are read from files (pcnn_dataset_open_volumes).
    Use open_volumes() to make one; everything a Dataset does works
    (shuffle, batch, Net.train_epoch, Net.evaluate), plus batch_box and
    set_prefetch."""

    def __init__(self, *args, **kwargs):
        raise TypeError("use pcnn.open_volumes(manifest, shape, targets, dtype)")

    def batch_box(self, start, count, box_start=None, box_count=None, x=None, targets=None):
        """Samples [start, start + count) of the current order restricted to
        the box (box_start, box_count: (D, H, W) each; None: the whole
        sample), as (x of shape (count, C, bd, bh, bw), targets)."""
        return batch_box(self, start, count, box_start, box_count, x, targets)

    def set_prefetch(self, batches):
        """Read up to `batches` batches ahead on a helper thread (0: off)."""
        _fn(self._lib, "pcnn_dataset_set_prefetch")(self._handle(), int(batches))


def open_volumes(manifest, shape, targets, dtype="float32"):
    """Open the manifest (lines "<path> <t_1> ... <t_targets>"; relative
    paths are relative to the manifest) of volumes of shape (C, D, H, W)
    stored as raw little-endian C-order arrays of dtype or .npy files.  Only
    headers are read now."""
    if len(shape) != 4:
        raise ShapeError("open_volumes: shape %s is not (C, D, H, W)" % (tuple(shape),))
    key = np.dtype(dtype).str if not isinstance(dtype, str) else dtype
    if key not in _DTYPES:
        raise InvalidArgumentError("open_volumes: dtype %r is not float32 or float64" % (dtype,))
    self = VolumeDataset.__new__(VolumeDataset)
    lib, out = new_handle()
    c, d, h, w = (int(a) for a in shape)
    _fn(lib, "pcnn_dataset_open_volumes")(_path(manifest, "open_volumes"), c, d, h, w,
                                          _DTYPES[key], int(targets), ctypes.byref(out))
    self._adopt(lib, out)
    self._describe(int(targets))
    return self


def batch_box(dataset, start, count, box_start=None, box_count=None, x=None, targets=None):
    """pcnn_dataset_batch_box on any 3D Dataset with targets (in-memory
    datasets are sliced)."""
    h = dataset._handle()
    if count < 1:
        raise InvalidArgumentError("batch_box: count %d < 1" % count)
    if (box_start is None) != (box_count is None):
        raise InvalidArgumentError("batch_box: pass both box_start and box_count, or neither")
    shape = dataset.sample_shape
    if len(shape) == 3:
        shape = (shape[0], 1) + tuple(shape[1:])
    bc = tuple(box_count) if box_count is not None else tuple(shape[1:])
    out_shape = (count, shape[0]) + tuple(int(a) for a in bc)
    x = floats_out(x, int(np.prod(out_shape)), "batch_box x", out_shape)
    y = None
    if not dataset.has_labels:
        y = floats_out(targets, count * dataset.target_count, "batch_box targets",
                       (count, dataset.target_count))
    _fn(dataset._lib, "pcnn_dataset_batch_box")(
        h, int(start), int(count), _box(box_start, "box_start", shape),
        _box(box_count, "box_count", shape), addr(x), None, addr(y))
    return x, y


def write_volume_manifest(path, entries):
    """Write a manifest: entries is a list of (file path, targets); paths
    inside the manifest's directory are written relative to it.  Every
    entry is checked before anything is written, and the manifest is
    replaced whole (a temporary file renamed over it): a refused entry
    leaves an existing manifest as it was."""
    base = os.path.dirname(os.path.abspath(path))
    lines = []
    for file, t in entries:
        p = os.path.abspath(file)
        if os.path.commonpath([base, p]) == base:
            p = os.path.relpath(p, base)
        if any(ch.isspace() for ch in p):
            raise InvalidArgumentError("write_volume_manifest: %r contains a space" % p)
        if p.startswith("#"):  # the format's comment: the sample would vanish
            raise InvalidArgumentError("write_volume_manifest: %r starts with '#', which the "
                                       "manifest reads as a comment" % p)
        lines.append(p + " " + " ".join(repr(float(v)) for v in np.ravel(t)) + "\n")
    fd, tmp = tempfile.mkstemp(prefix=".manifest.", dir=base)
    try:
        with os.fdopen(fd, "w") as f:
            f.writelines(lines)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open(path, "w") would create it
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
