"""numpy arrays in and out of C, copying only when the data must change.

Inputs: a float32 (or int32 for labels) C-contiguous ndarray goes to C by
address, no copy.  Any other real numeric array or sequence -- another
dtype, or a non-contiguous view such as x[:, ::2] -- is copied once into a
C-contiguous float32 (int32) array (np.ascontiguousarray), never read in
place; complex, object, string or boolean data, and floats given as
labels, are refused with a TypeError that says what was expected.  Batches
of samples must have the documented shape (see samples()): the values of
a channels-last array would be read in the wrong order, so it is refused.  Outputs the caller provides (out=) must already be float32,
C-contiguous and writable: converting them would silently drop the result.
"""
import ctypes

import numpy as np

from .errors import ShapeError

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
_I32_MIN, _I32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max
_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def addr(a):
    """The address of a C-contiguous array's data, None if it is empty.
    (ctypes' from_buffer is ~3x faster than ndarray.ctypes.data.)"""
    if a is None or a.size == 0:
        return None
    try:
        return _addressof(_from_buffer(a))
    except TypeError:  # read-only buffer
        return a.ctypes.data


def floats_in(a, what):
    if type(a) is np.ndarray and a.dtype is F32 and a.flags.c_contiguous:
        return a
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    if arr.dtype.kind not in "fiu":
        raise TypeError("%s: expected real numbers (float32, C-contiguous, to avoid a copy), "
                        "got an array of %s" % (what, arr.dtype))
    return np.ascontiguousarray(arr, dtype=F32)


def labels_in(a, what="labels"):
    if type(a) is np.ndarray and a.dtype is I32 and a.flags.c_contiguous:
        return a
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise TypeError("%s: expected integer class indices (int32, C-contiguous, to avoid a "
                        "copy), got an array of %s" % (what, arr.dtype))
    if arr.size and arr.dtype.itemsize >= 4 and (arr.min() < _I32_MIN or arr.max() > _I32_MAX):
        raise ShapeError("%s: values outside the int32 range" % what)
    return np.ascontiguousarray(arr, dtype=I32)


def floats_out(out, count, what, shape=None):
    """A float32 array of `count` values to write into: `out` checked, or a
    new one of `shape`."""
    if out is None:
        return np.empty(shape if shape is not None else (count,), dtype=F32)
    if not isinstance(out, np.ndarray):
        raise TypeError("%s: out must be a numpy array, got %s" % (what, type(out).__name__))
    if out.dtype != F32 or not out.flags.c_contiguous or not out.flags.writeable:
        raise TypeError("%s: out must be a writable C-contiguous float32 array (got %s, %s%s)"
                        % (what, out.dtype, "C-contiguous" if out.flags.c_contiguous
                           else "not C-contiguous", "" if out.flags.writeable else ", read-only"))
    if out.size != count:
        raise ShapeError("%s: out holds %d values, %d needed" % (what, out.size, count))
    return out


def count(shape):
    """The number of values of an array of this shape."""
    n = 1
    for d in shape:
        n *= d
    return n


def samples(x, sample_shape, what="x"):
    """(array, n) for a batch of samples of sample_shape, (C, H, W) or
    (C, D, H, W), in NCHW / NCDHW order: x shaped (n,) + sample_shape,
    (n, C*H*W...) (flat samples), without the channel axis when C is 1,
    or (n,) when a sample is one value (e.g. one regression target).
    Any other shape raises ShapeError (a ValueError) naming the expected
    one -- in particular a channels-last array, which holds the right number
    of values in the wrong order."""
    x = floats_in(x, what)
    shape = tuple(sample_shape)
    per = count(shape)
    if x.ndim == 1 + len(shape) and x.shape[1:] == shape:
        return x, x.shape[0]
    if x.ndim == 2 and x.shape[1] == per:
        return x, x.shape[0]
    if shape[0] == 1 and x.ndim == len(shape) and x.shape[1:] == shape[1:]:
        return x, x.shape[0]
    if per == 1 and x.ndim == 1:
        return x, x.shape[0]
    hint = ""
    if x.ndim == 1 + len(shape) and x.shape[1:] == shape[1:] + shape[:1]:
        order = (0, len(shape)) + tuple(range(1, len(shape)))
        hint = ("; this looks channels-last (%s): pass x.transpose%s (copied once) or build "
                "the array in %s order" % ("NHWC" if len(shape) == 3 else "NDHWC", order,
                                           "NCHW" if len(shape) == 3 else "NCDHW"))
    dims = ", ".join(str(d) for d in shape)
    names = "C, H, W" if len(shape) == 3 else "C, D, H, W"
    raise ShapeError("%s has shape %s: expected (n, %s) = (n, %s), or (n, %d) with one flat "
                     "sample per row%s%s"
                     % (what, x.shape, names, dims, per,
                        ", or (n, %s)" % ", ".join(str(d) for d in shape[1:])
                        if shape[0] == 1 else "", hint))
