"""Datasets held by libpcnn: IDX files or numpy arrays."""
import ctypes
from ctypes import byref, c_int

import numpy as np

from ._args import path as _path
from ._arrays import I32, addr, count as values_of, floats_in, floats_out, labels_in
from ._handle import Handle, new_handle
from .errors import InvalidArgumentError, ShapeError


class Dataset(Handle):
    """Samples of shape (C, H, W), or volumes of shape (C, D, H, W), with
    int32 class labels or float regression targets, owned by libpcnn
    (pcnn_dataset).

    Dataset(x, labels=None, targets=None)
        copies x, shaped (n, C, D, H, W) (volumes), (n, C, H, W), (n, H, W)
        (one channel) or (n, features); pass labels (n integers) or targets
        (n x k floats).
    Dataset.load_idx(images_path, labels_path, mean=0.0, std=0.0)
        MNIST / Fashion-MNIST IDX files, gzip or not; pixels scaled to
        [0, 1], then (x - mean) / std if std > 0."""

    _kind = "dataset"
    _destroy = "pcnn_dataset_destroy"

    def __init__(self, x, labels=None, targets=None):
        x = floats_in(x, "Dataset x")
        d = 1
        if x.ndim == 5:
            n, c, d, h, w = x.shape
        elif x.ndim == 4:
            n, c, h, w = x.shape
        elif x.ndim == 3:
            (n, h, w), c = x.shape, 1
        elif x.ndim == 2:
            (n, c), h, w = x.shape, 1, 1
        else:
            raise ShapeError("Dataset x has shape %s: expected (n, C, D, H, W), (n, C, H, W), "
                             "(n, H, W) or (n, features)" % (x.shape,))
        if (labels is None) == (targets is None):
            raise InvalidArgumentError("Dataset: pass exactly one of labels and targets")
        lab = tg = None
        count = 0
        if labels is not None:
            lab = labels_in(labels, "Dataset labels")
            if lab.size != n:
                raise ShapeError("Dataset: %d labels for %d samples" % (lab.size, n))
        else:
            tg = floats_in(targets, "Dataset targets")
            if n == 0 or tg.size % n:
                raise ShapeError("Dataset: %d target values do not divide among %d samples"
                                 % (tg.size, n))
            count = tg.size // n
        lib, out = new_handle()
        if x.ndim == 5:
            lib.pcnn_dataset_create3d(n, c, d, h, w, addr(x), addr(lab), addr(tg), count,
                                      ctypes.byref(out))
        else:
            lib.pcnn_dataset_create(n, c, h, w, addr(x), addr(lab), addr(tg), count,
                                    ctypes.byref(out))
        self._adopt(lib, out)
        self._describe(count)

    @classmethod
    def load_idx(cls, images_path, labels_path, mean=0.0, std=0.0):
        self = cls.__new__(cls)
        lib, out = new_handle()
        lib.pcnn_dataset_load_idx(_path(images_path, "Dataset.load_idx"),
                                  _path(labels_path, "Dataset.load_idx"), float(mean),
                                  float(std), ctypes.byref(out))
        self._adopt(lib, out)
        self._describe(0)
        return self

    def _describe(self, target_count):
        """sample_shape: (C, H, W) for images, (C, D, H, W) for volumes."""
        if "pcnn_dataset_info3d" in self._lib.missing:  # an older libpcnn: images only
            v = [ctypes.c_int() for _ in range(4)]
            self._lib.pcnn_dataset_info(self._h, *(ctypes.byref(i) for i in v))
            v.insert(2, ctypes.c_int(1))
        else:
            v = [ctypes.c_int() for _ in range(5)]
            self._lib.pcnn_dataset_info3d(self._h, *(ctypes.byref(i) for i in v))
        self._n = v[0].value
        c, d, h, w = (i.value for i in v[1:])
        self.sample_shape = (c, h, w) if d == 1 else (c, d, h, w)
        self.target_count = target_count  # 0: the dataset holds class labels
        self.has_labels = target_count == 0

    def __len__(self):
        self._handle()
        return self._n

    @property
    def sharded(self):
        """True when this rank's Dataset is its own shard of the global data
        (pcnn_dataset_set_sharded): fit, train_epoch and evaluate then take
        each rank's share of every global batch from its own shard, of any
        length, and evaluate gives the metrics of the union of the shards.
        Every rank must set the same (MismatchError on every rank
        otherwise)."""
        v = c_int()
        self._lib.pcnn_dataset_get_sharded(self._handle(), byref(v))
        return bool(v.value)

    @sharded.setter
    def sharded(self, value):
        self._lib.pcnn_dataset_set_sharded(self._handle(), 1 if value else 0)

    def shuffle(self, seed, epoch):
        """Reorder the samples: a seeded shuffle of the identity that depends
        only on (seed, epoch), so every rank and every resumed run agrees."""
        self._lib.pcnn_dataset_shuffle(self._handle(), int(seed), int(epoch))

    def batch(self, start, count, x=None, labels=None, targets=None):
        """Samples [start, start + count) of the current order, as
        (x, labels) or (x, targets).  Arrays given are filled in place (they
        must be float32 / int32, C-contiguous, of the right size)."""
        h = self._handle()
        if count < 1:
            raise InvalidArgumentError("Dataset.batch: count %d < 1" % count)
        x = floats_out(x, count * values_of(self.sample_shape), "Dataset.batch x",
                       (count,) + self.sample_shape)
        if self.has_labels:
            if labels is None:
                labels = np.empty(count, I32)
            elif not (isinstance(labels, np.ndarray) and labels.dtype == I32 and
                      labels.flags.c_contiguous and labels.flags.writeable and
                      labels.size == count):
                raise TypeError("Dataset.batch labels: out must be a writable C-contiguous "
                                "int32 array of %d values" % count)
            y = labels
            self._lib.pcnn_dataset_batch(h, start, count, addr(x), addr(y), None)
        else:
            y = floats_out(targets, count * self.target_count, "Dataset.batch targets",
                           (count, self.target_count))
            self._lib.pcnn_dataset_batch(h, start, count, addr(x), None, addr(y))
        return x, y

    def batches(self, size, drop_last=False):
        """Iterate over (x, y) batches of `size` samples in the current order
        (see shuffle), the last one partial unless drop_last: fresh arrays
        each time, x shaped (n,) + sample_shape, y int32 labels (n,) or
        float32 targets (n, k).

            for x, y in data.batches(64):
                loss = net.train_step(x, labels=y)"""
        if int(size) < 1:
            raise InvalidArgumentError("Dataset.batches: size %r < 1" % (size,))
        return _Batches(self, int(size), bool(drop_last))

    def __iter__(self):
        """One sample at a time, as (x, y) with x shaped sample_shape and y
        a label (int) or targets (float32 array of target_count)."""
        for x, y in self.batches(256):
            for i in range(x.shape[0]):
                yield x[i], (int(y[i]) if self.has_labels else y[i])

    def __getitem__(self, i):
        """Sample i of the current order as (x, y); negative i counts from
        the end."""
        n = len(self)
        if not isinstance(i, (int, np.integer)):
            raise TypeError("Dataset indices are integers, got %s" % type(i).__name__)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("Dataset index %d out of range for %d samples" % (i, n))
        x, y = self.batch(int(i), 1)
        return x[0], (int(y[0]) if self.has_labels else y[0])

    def __repr__(self):
        if self.closed:
            return "<pcnn.Dataset closed>"
        return "<pcnn.Dataset %d samples of %s, %s>" % (
            self._n, self.sample_shape,
            "labels" if self.has_labels else "%d targets" % self.target_count)



class _Batches:
    """The iterable Dataset.batches returns: len() is the number of batches,
    and each iteration starts again from the first sample."""

    def __init__(self, data, size, drop_last):
        self.data, self.size, self.drop_last = data, size, drop_last

    def __len__(self):
        n = len(self.data)
        return n // self.size if self.drop_last else -(-n // self.size)

    def __iter__(self):
        n = len(self.data)
        for start in range(0, n, self.size):
            count = min(self.size, n - start)
            if count < self.size and self.drop_last:
                return
            yield self.data.batch(start, count)
