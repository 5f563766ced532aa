"""Networks and their layers."""
import collections
import ctypes
import functools
import math
import weakref
from ctypes import byref, c_double, c_float, c_int, c_size_t, c_uint64, c_void_p

import numpy as np

from . import _log, _options, fit as _fit, state as _state, torch_io as _torch_io
from .plan import plan_distribution as _plan_distribution, plan_report as _plan_report
from .plan import EXCHANGE_AUTO as _EXCHANGE_AUTO, set_perfmodel as _set_perfmodel
from .plan import layer_exchange as _layer_exchange
from ._arrays import F32, I32, addr, count as values_of, floats_in, floats_out, labels_in, samples
from ._args import path as _path
from ._handle import Handle, new_handle
from .comm import Comm
from .dataset import Dataset
from .enums import (Exchange, Init, Loss, MemoryPart, Optimizer, Option, Precision,
                    Status, Time, UpsampleMode, coerce)
from .errors import InvalidArgumentError, InvalidStateError, ShapeError

Evaluation = collections.namedtuple("Evaluation", "loss accuracy")
Evaluation.__doc__ = "Mean loss and accuracy in [0, 1] (NaN for regression) over a dataset."

StepInfo = collections.namedtuple("StepInfo", "step steps samples total loss")
StepInfo.__doc__ = ("Progress of Net.train_epoch: step of steps, samples done of total "
                    "(global counts), and the step's global mean loss.")


# pcnn_step_callback: (user, step, batch, batches, loss) -> nonzero to stop
_StepCallback = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.c_int64, c_int, c_int, c_double)
# pcnn_log_callback: (user, level, message)


def _text(fn, h):
    """A string from an snprintf-style libpcnn function."""
    needed = c_size_t()
    fn(h, None, 0, byref(needed))
    buf = ctypes.create_string_buffer(needed.value + 1)
    fn(h, buf, len(buf), None)
    return buf.value.decode("utf-8", "replace")


class Layer:
    """A node of a network (pcnn_layer).  The network owns it: a Layer
    refers to its network weakly and raises InvalidStateError once the
    network is closed or gone."""

    __slots__ = ("_net", "_h", "index", "kind", "inputs", "config", "__weakref__")

    def __init__(self, net, h, inputs=(), config=None):
        self._net = weakref.ref(net)
        self._h = h
        self.inputs = tuple(inputs)  # the Layers that feed this one
        self.config = dict(config or {})  # the arguments it was added with
        index, kind = c_int(), ctypes.c_char_p()
        net._lib.pcnn_layer_info(h, byref(index), byref(kind))
        self.index, self.kind = index.value, kind.value.decode()

    def _owner(self):
        net = self._net()
        if net is None or net.closed:
            raise InvalidStateError("layer %d (%s): its network is closed" % (self.index,
                                                                              self.kind))
        return net

    @property
    def output_shape(self):
        """(C, H, W) of one sample of this layer's output, or (C, D, H, W)
        for a volume (depth > 1)."""
        net = self._owner()
        c, d, h, w = c_int(), c_int(1), c_int(), c_int()
        if "pcnn_layer_output_shape3d" in net._lib.missing:  # an older libpcnn: 2D only
            net._lib.pcnn_layer_output_shape(self._h, byref(c), byref(h), byref(w))
        else:
            net._lib.pcnn_layer_output_shape3d(self._h, byref(c), byref(d), byref(h), byref(w))
        if d.value == 1:
            return c.value, h.value, w.value
        return c.value, d.value, h.value, w.value

    @property
    def num_params(self):
        net = self._owner()
        n = c_size_t()
        net._lib.pcnn_layer_num_params(self._h, byref(n))
        return n.value

    def get_params(self, out=None):
        """This layer's parameters in PyTorch's order (weight, then bias)."""
        net = self._owner()
        count = self.num_params
        out = floats_out(out, count, "Layer.get_params")
        if count:  # a layer without parameters: nothing to copy
            net._lib.pcnn_layer_get_params(self._h, addr(out), count)
        return out

    def set_params(self, values):
        net = self._owner()
        values = floats_in(values, "Layer.set_params")
        if values.size or self.num_params:
            net._lib.pcnn_layer_set_params(self._h, addr(values), values.size)

    @property
    def num_buffers(self):
        """Floats of non-trainable state (batch norm: running mean and
        variance, 2 x channels); 0 for other layers.  After finalize."""
        net = self._owner()
        n = ctypes.c_size_t()
        net._lib.pcnn_layer_num_buffers(self._h, ctypes.byref(n))
        return n.value

    def get_buffers(self, out=None):
        """This rank's non-trainable state: running mean[C] then variance[C]."""
        net = self._owner()
        count = self.num_buffers
        out = floats_out(out, count, "Layer.get_buffers")
        if count:
            net._lib.pcnn_layer_get_buffers(self._h, addr(out), count)
        return out

    def set_buffers(self, values):
        """Set this rank's non-trainable state (checked: finite, variances >= 0)."""
        net = self._owner()
        values = floats_in(values, "Layer.set_buffers")
        if values.size or self.num_buffers:
            net._lib.pcnn_layer_set_buffers(self._h, addr(values), values.size)

    def set_init(self, init):
        """Weight initialisation of a conv2d or dense layer; before finalize."""
        net = self._owner()
        net._lib.pcnn_layer_set_init(self._h, coerce(init, Init, "Layer.set_init"))

    def set_exchange(self, exchange):
        """How this layer's gradients are combined across ranks; before
        finalize.  Overrides the network's choice."""
        net = self._owner()
        net._lib.pcnn_layer_set_exchange(self._h, coerce(exchange, Exchange,
                                                         "Layer.set_exchange"))

    def set_precision(self, precision):
        """The precision of this conv2d, conv3d, dense or transposed
        convolution layer's products: a pcnn.Precision, or None to follow
        the network's precision option (the default); before finalize.
        E.g. a first or last layer kept in FP32 in a BF16 network."""
        net = self._owner()
        value = -1 if precision is None else coerce(precision, Precision, "Layer.set_precision")
        net._lib.pcnn_layer_set_precision(self._h, value)

    def set_sync(self, sync):
        """A batch norm's statistics across ranks (experimental): True
        synchronises them over the global batch, False keeps them per rank,
        None follows the network's sync_batchnorm option; before finalize."""
        net = self._owner()
        net._lib.pcnn_batchnorm_set_sync(self._h, -1 if sync is None else int(bool(sync)))

    def set_distribution(self, parts):
        """Distribute this layer (and those inheriting from it) over the
        ranks as (P_N, P_D, P_H, P_W) (experimental, spatial parallelism);
        before finalize."""
        net = self._owner()
        net._lib.pcnn_layer_set_distribution(self._h, _parts(parts))

    @property
    def distribution(self):
        """(P_N, P_D, P_H, P_W) this layer runs with (after finalize) or
        was given."""
        net = self._owner()
        out = (c_int * 4)()
        net._lib.pcnn_layer_get_distribution(self._h, out)
        return tuple(out)

    @property
    def local_box(self):
        """((d0, h0, w0), (d, h, w)): this rank's box of one sample of the
        layer's output; after finalize."""
        net = self._owner()
        start, count = (c_int * 3)(), (c_int * 3)()
        net._lib.pcnn_layer_local_box(self._h, start, count)
        return tuple(start), tuple(count)

    def __repr__(self):
        net = self._net()
        if net is None or net.closed:
            return "<pcnn.Layer %d %s (network closed)>" % (self.index, self.kind)
        return "<pcnn.Layer %d %s %s>" % (self.index, self.kind, self.output_shape)


def _int_arg(value, name, what, lo=None):
    """value as an int, or TypeError / InvalidArgumentError naming the
    parameter (before ctypes, whose own message names an argument number)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("%s: %s must be an integer, got %r" % (what, name, value))
    value = int(value.__index__())
    if lo is not None and value < lo:
        raise InvalidArgumentError("%s: %s is %d, must be >= %d" % (what, name, value, lo))
    return value


def _float_arg(value, name, what):
    """value as a float, or TypeError naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError("%s: %s must be a number, got %r" % (what, name, value))
    return float(value)


def _window_arg(value, name, what, dims, lo):
    """An int, or a tuple of `dims` ints for (D,) H, W.  libpcnn's windows
    are square (cubic): a tuple of different values is refused naming the
    parameter, never silently squared."""
    if isinstance(value, (tuple, list)):
        if len(value) != dims:
            raise InvalidArgumentError("%s: %s %r has %d values; expected %d (one per spatial "
                                       "axis) or one int" % (what, name, tuple(value),
                                                             len(value), dims))
        values = [_int_arg(v, name, what, lo) for v in value]
        if len(set(values)) != 1:
            raise InvalidArgumentError(
                "%s: %s %r differs per axis; libpcnn's windows are square (cubic in 3D), so "
                "pass equal values or one int" % (what, name, tuple(values)))
        return values[0]
    return _int_arg(value, name, what, lo)


def _padding_arg(value, kernel, stride, what, dims):
    """padding as one int: an int, a tuple of equal ints, "valid" (0) or
    "same" (output size = input size: stride 1 and an odd kernel k, padded
    (k - 1) / 2 on every side, as PyTorch's padding="same").  An even
    kernel would need one more row after than before, which symmetric
    padding cannot express: refused, saying what to pass instead."""
    if isinstance(value, str):
        if value == "valid":
            return 0
        if value != "same":
            raise InvalidArgumentError("%s: padding %r: expected an int, a tuple, \"same\" or "
                                       "\"valid\"" % (what, value))
        if stride != 1:
            raise InvalidArgumentError("%s: padding=\"same\" needs stride 1 (as in PyTorch), "
                                       "got stride %d" % (what, stride))
        if kernel % 2 == 0:
            raise InvalidArgumentError(
                "%s: padding=\"same\" with the even kernel %d needs %d padded rows before and "
                "%d after, and libpcnn pads every side equally; use an odd kernel, or padding=%d "
                "(output one smaller)" % (what, kernel, (kernel - 1) // 2, kernel // 2,
                                          (kernel - 1) // 2))
        return (kernel - 1) // 2
    return _window_arg(value, "padding", what, dims, 0)


def _parts(parts):
    """Four positive ints as a C int[4]."""
    parts = tuple(int(p) for p in parts)
    if len(parts) != 4:
        raise InvalidArgumentError("parts: expected 4 values (N, D, H, W), got %d" % len(parts))
    return (c_int * 4)(*parts)


def _net_use(fn):
    """A Layer method counted as a use of its network (so that closing the
    network waits for no call and frees nothing a call still reads)."""
    @functools.wraps(fn)
    def use(self, *args, **kwargs):
        net = self._owner()
        net._enter()
        try:
            return fn(self, *args, **kwargs)
        finally:
            net._leave()
    return use


for _name in ("get_params", "set_params", "get_buffers", "set_buffers", "set_init",
              "set_exchange", "set_sync", "set_distribution"):
    setattr(Layer, _name, _net_use(getattr(Layer, _name)))
for _name in ("output_shape", "num_params", "num_buffers", "distribution", "local_box"):
    setattr(Layer, _name, property(_net_use(getattr(Layer, _name).fget),
                                   doc=getattr(Layer, _name).__doc__))


class Net(Handle):
    """A network (pcnn_net): add layers, set the loss, finalize, train.

        with pcnn.Net(seed=0, learning_rate=0.05) as net:
            x = net.input(1, 28, 28)
            x = net.relu(net.conv2d(x, 6, 5, padding=2))
            ...
            net.set_loss(net.dense(x, 10), "softmax_cross_entropy")
            net.finalize(max_batch=64)
            loss = net.train_step(images, labels)

    Layer-adding methods take the layer that feeds them first and return the
    new Layer.  Arrays: float32 C-contiguous inputs pass without a copy.
    Every libpcnn error raises the matching pcnn exception."""

    _kind = "net"
    _destroy = "pcnn_net_destroy"
    _dependents = ()  # until __init__ makes the set

    log_callback_error = None  # the first exception a log callback raised
    _log_callback = None
    stop_training = False  # a callback's request to fit to stop (Keras)

    def __init__(self, comm=None, optimizer=None, **options):
        lib, out = new_handle()
        lib.pcnn_net_create(byref(out))
        self._adopt(lib, out)
        self.layers = []  # the Layer objects, in order of addition
        self.comm = None
        self._input_shape = None
        self._output = None
        self._loss = None
        self._max_batch = None
        self._num_params = None
        self._output_size = None
        self._output_shape = None
        self._local_shape = None  # this rank's box of an input sample (train_step_local)
        self._last_n = None
        self._staging = None
        # the per-step loss output, made once (calls on a network are serialised)
        self._step_loss = c_float()
        self._step_loss_ref = byref(self._step_loss)
        self._dependents = weakref.WeakSet()  # schedulers: closed before the network
        if comm is not None:
            self.set_comm(comm)
        if optimizer is not None:
            self.set_optimizer(optimizer)
        if options:
            self.configure(**options)

    def close(self):
        """Free the network now (its schedulers first).  Idempotent.  Raises
        InvalidStateError while another thread is inside a call on it or on
        one of its layers or schedulers."""
        self._check_idle()
        for dependent in list(self._dependents):
            dependent.close()
        super().close()

    def _closed(self):
        self.layers = []
        self.comm = None
        self._staging = None

    # -- building --------------------------------------------------------

    def _in(self, layer, what="in"):
        if not isinstance(layer, Layer):
            raise TypeError("%s must be a pcnn.Layer of this network, got %r" % (what, layer))
        if layer._net() is not self:
            raise InvalidArgumentError("%s: layer %d (%s) belongs to another network"
                                       % (what, layer.index, layer.kind))
        return layer._h

    def _add(self, fn, *args, inputs=(), config=None):
        out = c_void_p()
        getattr(self._lib, fn)(self._handle(), *args, byref(out))
        layer = Layer(self, out.value, inputs, config)
        self.layers.append(layer)
        return layer

    def input(self, channels, height, width):
        """Declare one input sample as (channels, height, width); first.
        Arrays of samples are then (n, C, H, W)."""
        what = "Net.input"
        channels = _int_arg(channels, "channels", what, 1)
        height = _int_arg(height, "height", what, 1)
        width = _int_arg(width, "width", what, 1)
        layer = self._add("pcnn_net_input", channels, height, width)
        self._input_shape = (channels, height, width)
        return layer

    def input3d(self, channels, depth, height, width):
        """Declare one input sample as a volume (channels, depth, height,
        width); first.  Arrays of samples are then (n, C, D, H, W)."""
        what = "Net.input3d"
        args = [_int_arg(v, name, what, 1) for v, name in
                ((channels, "channels"), (depth, "depth"), (height, "height"), (width, "width"))]
        layer = self._add("pcnn_net_input3d", *args)
        self._input_shape = layer.output_shape
        return layer

    def _conv(self, fn, what, dims, src, out_channels, kernel, stride, padding, bias):
        out_channels = _int_arg(out_channels, "out_channels", what, 1)
        kernel = _window_arg(kernel, "kernel", what, dims, 1)
        stride = _window_arg(stride, "stride", what, dims, 1)
        padding = _padding_arg(padding, kernel, stride, what, dims)
        return self._add(fn, self._in(src), out_channels, kernel, stride, padding,
                         int(bool(bias)), inputs=(src,),
                         config=dict(out_channels=out_channels, kernel=kernel, bias=bool(bias)))

    def conv3d(self, src, out_channels, kernel, stride=1, padding=0, bias=True):
        """3D convolution as torch.nn.Conv3d: out_channels filters of
        kernel^3 with the given stride and zero padding on every side.
        kernel, stride and padding are ints or (d, h, w) tuples of equal
        values (libpcnn's kernels are cubic); padding may be "valid" (0) or
        "same" (stride 1 and an odd kernel: (kernel - 1) / 2, the output
        keeps the input's size; even kernels are refused, as the padding
        would differ before and after).  bias adds a per-channel bias."""
        return self._conv("pcnn_conv3d", "Net.conv3d", 3, src, out_channels, kernel, stride,
                          padding, bias)

    def _pool(self, fn, what, dims, src, kernel, stride, padding):
        kernel = _window_arg(kernel, "kernel", what, dims, 1)
        stride = kernel if stride is None else _window_arg(stride, "stride", what, dims, 1)
        padding = _window_arg(padding, "padding", what, dims, 0)
        return self._add(fn, self._in(src), kernel, stride, padding)

    def maxpool3d(self, src, kernel, stride=None, padding=0):
        """3D max pooling over kernel^3 windows (padding counts as -inf);
        stride defaults to kernel, as in PyTorch.  Ints or (d, h, w)
        tuples of equal values."""
        return self._pool("pcnn_maxpool3d", "Net.maxpool3d", 3, src, kernel, stride, padding)

    def avgpool3d(self, src, kernel, stride=None, padding=0):
        """3D average pooling (padded zeros count in the average, as
        PyTorch's count_include_pad=True); stride defaults to kernel."""
        return self._pool("pcnn_avgpool3d", "Net.avgpool3d", 3, src, kernel, stride, padding)

    def conv2d(self, src, out_channels, kernel, stride=1, padding=0, bias=True):
        """2D convolution as torch.nn.Conv2d: out_channels filters of
        kernel x kernel with the given stride and zero padding on every
        side; output (out_channels, (H + 2p - k) / s + 1, same along W).
        kernel, stride and padding are ints or (h, w) tuples of equal
        values (libpcnn's kernels are square: (3, 5) is refused naming the
        parameter).  padding="same" keeps the input's size: stride 1 and an
        odd kernel, padded (kernel - 1) / 2 on every side, as PyTorch; an
        even kernel is refused (it would need one more row after than
        before), saying what to pass instead.  padding="valid" is 0.  bias
        adds a per-channel bias."""
        return self._conv("pcnn_conv2d", "Net.conv2d", 2, src, out_channels, kernel, stride,
                          padding, bias)

    def maxpool2d(self, src, kernel, stride=None, padding=0):
        """Max pooling over kernel x kernel windows (padding counts as
        -inf); stride defaults to kernel, as in PyTorch.  Ints or (h, w)
        tuples of equal values."""
        return self._pool("pcnn_maxpool2d", "Net.maxpool2d", 2, src, kernel, stride, padding)

    def avgpool2d(self, src, kernel, stride=None, padding=0):
        """Average pooling (padded zeros count in the average, as PyTorch's
        count_include_pad=True); stride defaults to kernel."""
        return self._pool("pcnn_avgpool2d", "Net.avgpool2d", 2, src, kernel, stride, padding)

    def global_avgpool(self, src):
        """Global average pooling: (C, H, W) or (C, D, H, W) -> (C, 1, 1)."""
        return self._add("pcnn_global_avgpool", self._in(src))

    def dense(self, src, out_features, bias=True):
        """Fully connected layer y = W x + b over the flattened input
        (PyTorch's flatten order); output (out_features, 1, 1)."""
        out_features = _int_arg(out_features, "out_features", "Net.dense", 1)
        return self._add("pcnn_dense", self._in(src), out_features, int(bool(bias)),
                         inputs=(src,), config=dict(out_features=out_features, bias=bool(bias)))

    def flatten(self, src):
        """(C, H, W) -> (C*H*W, 1, 1); dense layers flatten by themselves."""
        return self._add("pcnn_flatten", self._in(src))

    def relu(self, src):
        """max(x, 0), element-wise (gradient 0 at 0)."""
        return self._add("pcnn_relu", self._in(src))

    def leaky_relu(self, src, slope=0.01):
        """x for x > 0, slope * x otherwise (slope finite, >= 0)."""
        slope = _float_arg(slope, "slope", "Net.leaky_relu")
        return self._add("pcnn_leaky_relu", self._in(src), slope)

    def batchnorm(self, src, eps=1e-5, momentum=0.1, sync=None):
        """Batch normalisation per channel over (N, (D,) H, W), as
        torch.nn.BatchNorm2d/3d (eps, momentum as PyTorch's).  sync: see
        Layer.set_sync (None: the network's sync_batchnorm)."""
        eps = _float_arg(eps, "eps", "Net.batchnorm")
        momentum = _float_arg(momentum, "momentum", "Net.batchnorm")
        layer = self._add("pcnn_batchnorm", self._in(src), eps, momentum, inputs=(src,),
                          config=dict(eps=eps, momentum=momentum))
        if sync is not None:
            layer.set_sync(sync)
        return layer

    def dropout(self, src, p=0.5):
        """Inverted dropout with drop probability p in [0, 1) (identity at
        inference; masks reproducible from the seed and step)."""
        p = _float_arg(p, "p", "Net.dropout")
        return self._add("pcnn_dropout", self._in(src), p)

    def add(self, a, b, scale=None):
        """a + b, or a + scale * b (residual scaling), of equal shapes."""
        if scale is None:
            return self._add("pcnn_add", self._in(a, "a"), self._in(b, "b"))
        scale = _float_arg(scale, "scale", "Net.add")
        return self._add("pcnn_add_scaled", self._in(a, "a"), self._in(b, "b"), scale)

    def pixel_shuffle(self, src, upscale):
        """(C*r*r, H, W) -> (C, H*r, W*r), as torch.nn.PixelShuffle(r)."""
        upscale = _int_arg(upscale, "upscale", "Net.pixel_shuffle", 1)
        return self._add("pcnn_pixel_shuffle", self._in(src), upscale)

    def sigmoid(self, src):
        """The logistic sigmoid 1 / (1 + exp(-x)), element-wise, as
        torch.sigmoid (images and volumes).  For a segmentation, train the
        logits with Loss.BCE_WITH_LOGITS instead."""
        return self._add("pcnn_sigmoid", self._in(src))

    def tanh(self, src):
        """The hyperbolic tangent, element-wise, as torch.tanh."""
        return self._add("pcnn_tanh", self._in(src))

    def concat(self, *inputs):
        """Concatenate layers by channels, as torch.cat(dim=1): concat(a, b,
        c) or concat([a, b, c]), 1 to 64 layers of equal (D, H, W), any of
        them repeated; output channels are the sum, the first input's first."""
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        if not 1 <= len(inputs) <= 64:
            raise InvalidArgumentError("Net.concat: %d inputs, 1 to 64 are taken" % len(inputs))
        handles = [self._in(layer, "Net.concat: input %d" % j) for j, layer in enumerate(inputs)]
        array = (c_void_p * len(handles))(*handles)
        return self._add("pcnn_concat", array, len(handles), inputs=tuple(inputs))

    def _upsample(self, fn, src, factor, mode):
        what = "Net." + fn[5:]
        factor = _int_arg(factor, "factor", what, 1)
        mode = coerce(mode, UpsampleMode, what)
        return self._add(fn, self._in(src), factor, int(mode), inputs=(src,),
                         config=dict(factor=factor, mode=getattr(mode, "name", mode)))

    def upsample2d(self, src, factor=2, mode="nearest"):
        """Upsample images by an integer factor along H and W, as
        torch.nn.Upsample(scale_factor=factor, mode=...).  mode: "nearest"
        or "linear" (bilinear, align_corners=False), or an UpsampleMode."""
        return self._upsample("pcnn_upsample2d", src, factor, mode)

    def upsample3d(self, src, factor=2, mode="nearest"):
        """Upsample volumes by an integer factor along D, H and W; mode
        "nearest" or "linear" (trilinear, align_corners=False)."""
        return self._upsample("pcnn_upsample3d", src, factor, mode)

    def _conv_transpose(self, fn, src, out_channels, kernel, stride, padding, output_padding,
                        bias):
        what = "Net." + fn[5:]
        out_channels = _int_arg(out_channels, "out_channels", what, 1)
        kernel = _int_arg(kernel, "kernel", what, 1)
        stride = _int_arg(stride, "stride", what, 1)
        padding = _int_arg(padding, "padding", what, 0)
        output_padding = _int_arg(output_padding, "output_padding", what, 0)
        return self._add(fn, self._in(src), out_channels, kernel, stride, padding,
                         output_padding, int(bool(bias)), inputs=(src,),
                         config=dict(out_channels=out_channels, kernel=kernel, stride=stride,
                                     padding=padding, output_padding=output_padding,
                                     bias=bool(bias)))

    def conv_transpose2d(self, src, out_channels, kernel, stride=1, padding=0,
                         output_padding=0, bias=True):
        """Transposed convolution as torch.nn.ConvTranspose2d: output
        (H-1)*stride - 2*padding + kernel + output_padding per axis, with
        0 <= output_padding < stride.  Weights [Cin][Cout][k][k], bias."""
        return self._conv_transpose("pcnn_conv_transpose2d", src, out_channels, kernel, stride,
                                    padding, output_padding, bias)

    def conv_transpose3d(self, src, out_channels, kernel, stride=1, padding=0,
                         output_padding=0, bias=True):
        """Transposed convolution of volumes as torch.nn.ConvTranspose3d
        (cubic kernel; sizes as conv_transpose2d along D, H and W)."""
        return self._conv_transpose("pcnn_conv_transpose3d", src, out_channels, kernel, stride,
                                    padding, output_padding, bias)

    def set_loss(self, output, loss=Loss.SOFTMAX_CROSS_ENTROPY):
        loss = coerce(loss, Loss, "Net.set_loss")
        self._lib.pcnn_net_set_loss(self._handle(), self._in(output, "output"), loss)
        self._output, self._loss = output, loss

    def set_optimizer(self, optimizer):
        self._lib.pcnn_net_set_optimizer(self._handle(),
                                         coerce(optimizer, Optimizer, "Net.set_optimizer"))

    def set_option(self, option, value):
        self._lib.pcnn_net_set_option(self._handle(),
                                      _options.resolve(self._lib, option, "Net.set_option"),
                                      float(value))

    def get_option(self, option):
        """An option's value: int for integral options, float otherwise."""
        option = _options.resolve(self._lib, option, "Net.get_option")
        v = c_double()
        self._lib.pcnn_net_get_option(self._handle(), option, byref(v))
        return int(v.value) if _options.is_integer(self._lib, option) else v.value

    def configure(self, **options):
        """Set several options by name: configure(learning_rate=0.05, seed=1)."""
        for name, value in options.items():
            self.set_option(name, value)

    @property
    def step(self):
        """Completed training steps (settable, to resume)."""
        return self.get_option(Option.STEP)

    @step.setter
    def step(self, value):
        self.set_option(Option.STEP, value)

    def set_comm(self, comm):
        """Train over the ranks of `comm` (a pcnn.Comm, or an mpi4py
        communicator, wrapped here).  Before finalize.  The network keeps the
        communicator alive."""
        if not isinstance(comm, Comm):
            comm = Comm(comm)
        with comm._using() as c:
            self._lib.pcnn_net_set_comm(self._handle(), c)
        self.comm = comm

    def set_exchange(self, exchange):
        """Every layer's gradient exchange: a pcnn.Exchange, or "auto"
        (experimental: chosen at finalize by the model of set_perfmodel, or
        by the heuristics without one)."""
        auto = isinstance(exchange, str) and exchange.strip().lower() == "auto"
        self._lib.pcnn_net_set_exchange(
            self._handle(), _EXCHANGE_AUTO if auto else coerce(exchange, Exchange,
                                                               "Net.set_exchange"))

    def finalize(self, max_batch):
        """Plan and allocate everything for batches of up to max_batch
        samples (the global batch with a communicator; collective then)."""
        h = self._handle()
        self._lib.pcnn_net_finalize(h, max_batch)
        self._max_batch = max_batch
        self._local_shape = None
        n = c_size_t()
        self._lib.pcnn_net_num_params(h, byref(n))
        self._num_params = n.value
        self._lib.pcnn_net_output_size(h, byref(n))
        self._output_size = n.value
        self._output_shape = self._output.output_shape

    # -- training and inference -----------------------------------------

    def _batch(self, x, labels, targets):
        """(n, x, labels, targets) checked and converted; the common case
        (float32 (n, C, H, W) and int32 labels, C-contiguous) is tested
        first, since it runs once per step."""
        if (type(x) is np.ndarray and x.dtype is F32 and x.shape[1:] == self._input_shape
                and x.flags.c_contiguous):
            n = x.shape[0]
        elif self._input_shape is None:
            raise InvalidStateError("the network has no input layer yet")
        else:
            x, n = samples(x, self._input_shape)
        lab, tg = self._labels_targets(n, labels, targets)
        return n, x, lab, tg

    def _labels_targets(self, n, labels, targets):
        """labels and targets of n samples, checked and converted."""
        lab = tg = None
        if labels is not None:
            lab = labels if (type(labels) is np.ndarray and labels.dtype is I32 and
                             labels.flags.c_contiguous) else labels_in(labels)
            if lab.size != n:
                raise ShapeError("%d labels for %d samples" % (lab.size, n))
        if targets is not None:
            if self._output_shape is not None:
                tg, tn = samples(targets, self._output_shape, "targets")
                if tn != n:
                    raise ShapeError("targets for %d samples; x holds %d" % (tn, n))
            else:  # not finalized: the library says so
                tg = floats_in(targets, "targets")
        return lab, tg

    def train_step(self, x, labels=None, targets=None):
        """One step (forward, loss, backward, update) on a batch; returns the
        mean loss before the update (the global mean with a communicator,
        where each rank passes its own samples and the call is collective)."""
        n, x, lab, tg = self._batch(x, labels, targets)
        self._lib.pcnn_net_train_step(self._h, n, addr(x), addr(lab), addr(tg),
                                      self._step_loss_ref)  # _h: open for this call
        self._last_n = n
        return self._step_loss.value

    def set_distribution(self, parts):
        """Split samples over the communicator as (P_N, P_D, P_H, P_W)
        (experimental, spatial and hybrid parallelism); before finalize."""
        self._lib.pcnn_net_set_distribution(self._handle(), _parts(parts))

    def group_info(self):
        """(group, groups, rank_in_group, group_size) of this rank."""
        v = [c_int() for _ in range(4)]
        self._lib.pcnn_net_group_info(self._handle(), *[byref(x) for x in v])
        return tuple(x.value for x in v)

    def train_step_local(self, x_local, labels=None, targets=None):
        """A step where this rank passes only its box of its group's samples:
        x_local shaped (n, C) + the input's local_box count (float32); labels
        or targets those of the group's n samples.  Collective.  Shapes are
        checked here (C reads as many values as they promise), so a
        ShapeError comes before the collective, on the rank that erred."""
        h = self._handle()
        if self._max_batch is None:
            raise InvalidStateError("Net.train_step_local: finalize the network first")
        x, n = samples(x_local, self._local_input_shape(), "x_local")
        lab, tg = self._labels_targets(n, labels, targets)
        self._lib.pcnn_net_train_step_local(h, n, addr(x), addr(lab), addr(tg),
                                            self._step_loss_ref)
        self._last_n = n
        return self._step_loss.value

    def _local_input_shape(self):
        """One sample of this rank's box of the input: (C, h, w), or
        (C, d, h, w) for a volume (fixed at finalize)."""
        if self._local_shape is None:
            _, count = self.layers[0].local_box
            c = self._input_shape[0]
            self._local_shape = ((c,) + count[1:] if len(self._input_shape) == 3
                                 else (c,) + count)
        return self._local_shape

    def compute_gradients(self, x, labels=None, targets=None):
        """Forward and backward without an update; returns the loss.  Read
        the results with get_grads() and input_grad()."""
        n, x, lab, tg = self._batch(x, labels, targets)
        loss = c_float()
        self._lib.pcnn_net_compute_gradients(self._handle(), n, addr(x), addr(lab), addr(tg),
                                             byref(loss))
        self._last_n = n
        return loss.value

    def compute_loss(self, x, labels=None, targets=None):
        """The training-mode loss of a batch, changing nothing."""
        n, x, lab, tg = self._batch(x, labels, targets)
        loss = c_float()
        self._lib.pcnn_net_compute_loss(self._handle(), n, addr(x), addr(lab), addr(tg),
                                        byref(loss))
        return loss.value

    def predict(self, x, out=None):
        """Outputs (logits for cross entropy) of n samples in inference mode:
        shaped (n, C) for flat outputs, (n, C, H, W) otherwise, or written
        into `out` (float32, C-contiguous, n x output_size values)."""
        h = self._handle()
        if self._output_size is None:
            raise InvalidStateError("Net.predict: finalize the network first")
        x, n = samples(x, self._input_shape)
        c = self._output_shape[0]
        shape = (n, c) if values_of(self._output_shape) == c else (n,) + self._output_shape
        count = n * self._output_size
        out = floats_out(out, count, "Net.predict", shape)
        self._lib.pcnn_net_predict(h, n, addr(x), addr(out), count)
        return out

    def predict_parallel(self, x, out=None):
        """predict under the distribution (experimental): every rank of a
        sample group passes the group's samples (any number, run in chunks
        of max_batch; none, an empty array, on a group with nothing to
        predict) and receives their outputs.  Collective; predict itself on
        a network without a spatial split."""
        h = self._handle()
        if self._output_size is None:
            raise InvalidStateError("Net.predict_parallel: finalize the network first")
        x, n = samples(x, self._input_shape)
        c = self._output_shape[0]
        shape = (n, c) if values_of(self._output_shape) == c else (n,) + self._output_shape
        count = n * self._output_size
        out = floats_out(out, count, "Net.predict_parallel", shape)
        self._lib.pcnn_net_predict_parallel(h, n, addr(x), addr(out), count)
        return out

    def evaluate(self, x, y=None, sharded=None):
        """Evaluation(loss, accuracy) over a whole Dataset, or over arrays x
        (samples) and y (labels, or targets for a regression loss), in
        inference mode (collective with a communicator, every rank passing
        the same data; equal on all ranks).  sharded=True: each rank passes
        its own shard, of any length, and the metrics are those of the union
        of the shards, equal on every rank (Dataset.sharded; None: the
        Dataset's own mode)."""
        return _fit.evaluate(self, x, y, sharded)

    def fit(self, x, y=None, batch_size=None, epochs=1, verbose=1, callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, initial_epoch=0,
            seed=None, stream=None, batch=None, validation=None, sharded=None):
        """Train on arrays x, y (labels or targets) or a Dataset x, as Keras's
        Model.fit; returns a History, a dict {"epoch": [...], "loss": [...],
        "val_loss", "val_accuracy", "lr", "seconds"} of one value per epoch
        (also as .history).

        batch_size: the GLOBAL batch (with a communicator each rank trains
        on its share of it; default: the max_batch of finalize, which it may
        not exceed).  epochs: the index of the last epoch, as Keras:
        epochs 0 .. epochs - 1 run from initial_epoch (fit(epochs=12,
        initial_epoch=11) trains one epoch, printed "epoch 12/12").
        validation_data: (x_val, y_val) or a Dataset, evaluated after each
        epoch; validation_split: the last fraction of the arrays x, y held
        out instead (before shuffling).  callbacks: pcnn.Callback objects
        with Keras's methods and self.model (see Callback, which also says
        how callbacks written for earlier releases are called; pcnn.
        EarlyStopping, ModelCheckpoint, ReduceLROnPlateau, CSVLogger), or
        plain functions f(epoch, logs) -> True stops.  verbose: 0 silent, 1
        a progress bar (redrawn on a terminal, a line per quarter epoch
        otherwise), 2 one line per epoch; only rank 0 prints, to `stream`
        (sys.stdout).  shuffle: Dataset.shuffle(seed, epoch) before each
        epoch (seed: the network's seed option by default), so every rank
        and every resumed run agrees.  batch and validation: the earlier
        names of batch_size and validation_data.  With a communicator,
        collective: every rank passes the same full data, or with
        sharded=True its own shard of any length, the DDP way (see
        Dataset.sharded): each rank takes its share of every global batch
        from its shard until the longest is done, each step weighted by the
        samples it holds; validation is sharded too.  sharded=None leaves
        a Dataset's own mode."""
        return _fit.fit(self, x, y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                        callbacks=callbacks, validation_split=validation_split,
                        validation_data=validation_data, shuffle=shuffle,
                        initial_epoch=initial_epoch, seed=seed, stream=stream, batch=batch,
                        validation=validation, sharded=sharded)

    def _evaluate_dataset(self, data):
        if not isinstance(data, Dataset):
            raise TypeError("Net.evaluate: expected a pcnn.Dataset or arrays, got %r" % (data,))
        self._check_samples(data, "Net.evaluate", hint_only=True)
        loss, acc = c_double(), c_double()
        with data._using() as d:
            self._lib.pcnn_net_evaluate(self._handle(), d, byref(loss), byref(acc))
        return Evaluation(loss.value, acc.value)

    def train_epoch(self, data, batch, callback=None):
        """One epoch over `data` in its current order (see Dataset.shuffle),
        global batches of `batch` samples, the last one partial; returns the
        sample-weighted mean training loss.

        One C call (pcnn_net_train_epoch), which splits each batch as every
        other training call does (over the sample groups of a spatial
        distribution).  callback(StepInfo), if given, runs after each step
        (e.g. to draw a progress bar) inside that call, as the library's
        step callback: it must not train, save, load, reconfigure or close
        this network.  An exception it raises stops the epoch (every rank
        skips the next step) and is raised here."""
        if not isinstance(data, Dataset):
            raise TypeError("Net.train_epoch: expected a pcnn.Dataset, got %r" % (data,))
        if callback is None:
            self._check_samples(data, "Net.train_epoch", hint_only=True)
            loss = c_double()
            with data._using() as d:
                self._lib.pcnn_net_train_epoch(self._handle(), d, batch, byref(loss))
            return loss.value
        self._check_epoch(data, batch)
        total = len(data)
        raised = []

        def step(_user, _step, b, batches, loss):
            try:
                callback(StepInfo(b + 1, batches, min((b + 1) * batch, total), total, loss))
                return 0
            except BaseException as e:  # noqa: BLE001 - raised after the C call returns
                raised.append(e)
                return 1  # a vote to stop: no rank trains the next step
        c_step = _StepCallback(step)  # alive until the C call returns
        h = self._handle()
        loss = c_double()
        self._lib.pcnn_net_set_step_callback(h, c_step, None)
        try:
            with data._using() as d:
                self._lib.pcnn_net_train_epoch(h, d, batch, byref(loss))
        finally:
            self._lib.pcnn_net_set_step_callback(h, None, None)
        if raised:
            raise raised[0]
        return loss.value

    def _check_samples(self, data, what, hint_only=False):
        """ShapeError unless the dataset's samples are the network input's,
        with the transpose hint train_step and predict give for a
        channels-last array (hint_only: raise only then, and leave other
        mismatches to the C call's own message)."""
        got, want = tuple(data.sample_shape), self._input_shape
        if got == want:
            return
        hint = ""
        if hint_only and not (want is not None and len(got) == len(want)
                              and got == want[1:] + want[:1]):
            return
        if want is not None and len(got) == len(want) and got == want[1:] + want[:1]:
            order = (0, len(want)) + tuple(range(1, len(want)))
            hint = ("; this looks channels-last (%s): pass x.transpose%s (copied once) or "
                    "build the array in %s order" % ("NHWC" if len(want) == 3 else "NDHWC",
                                                     order,
                                                     "NCHW" if len(want) == 3 else "NCDHW"))
        raise ShapeError("%s: dataset samples are %s but the network input is %s%s"
                         % (what, got, want, hint))

    def _check_epoch(self, data, batch, what="Net.train_epoch"):
        """The epoch's arguments, checked with the binding's messages."""
        if self._max_batch is None:
            raise InvalidStateError("%s: finalize the network first" % what)
        if not 1 <= batch <= self._max_batch:
            raise InvalidArgumentError("%s: batch %d must be in [1, %d] (the max_batch of "
                                       "finalize)" % (what, batch, self._max_batch))
        self._check_samples(data, what)
        classify = self._loss == Loss.SOFTMAX_CROSS_ENTROPY
        if classify != data.has_labels or (not classify and
                                           data.target_count != self._output_size):
            raise ShapeError("%s: the loss needs %s; the dataset holds %s"
                             % (what, "labels" if classify else "%d targets" % self._output_size,
                                "labels" if data.has_labels
                                else "%d targets" % data.target_count))
        return classify

    def _epoch_in_steps(self, data, batch, callback, share_of):
        """The epoch loop of pcnn_scheduler_train_epoch, step by step: each
        global batch split by share_of(count) -> (first, n), the scheduler's
        split (over the sample groups of a spatial distribution, every rank
        of a group passing the group's samples).  Returns (mean loss, first
        step's loss)."""
        self._handle()
        if not isinstance(data, Dataset):
            raise TypeError("train_epoch: expected a pcnn.Dataset, got %r" % (data,))
        if data.sharded:  # as pcnn_scheduler_train_epoch says, on every rank alike
            from .errors import UnsupportedError
            raise UnsupportedError("Scheduler.train_epoch: sharded data with the scheduler's "
                                   "min_local: every rank trains its own shard")
        classify = self._check_epoch(data, batch)
        x, y = self._staging_for(batch, classify)  # no share exceeds the batch
        n = len(data)
        steps = -(-n // batch)
        loss_sum, first_loss = 0.0, math.nan
        for k in range(steps):
            start = k * batch
            count = min(batch, n - start)
            first, mine = share_of(count)
            if mine and classify:
                data.batch(start + first, mine, x[:mine], labels=y[:mine])
            elif mine:
                data.batch(start + first, mine, x[:mine], targets=y[:mine])
            if classify:
                loss = self.train_step(x[:mine], labels=y[:mine])
            else:
                loss = self.train_step(x[:mine], targets=y[:mine])
            if k == 0:
                first_loss = loss
            loss_sum += loss * count
            callback(StepInfo(k + 1, steps, start + count, n, loss))
        return loss_sum / n, first_loss

    def _staging_for(self, rows, classify):
        s = self._staging
        if s is None or s[0].shape[0] < rows or (s[1].dtype == I32) != classify:
            x = np.empty((rows,) + self._input_shape, F32)
            y = np.empty(rows, I32) if classify else np.empty((rows, self._output_size), F32)
            self._staging = s = (x, y)
        return s

    # -- parameters ------------------------------------------------------

    @property
    def num_params(self):
        return self._counted("pcnn_net_num_params")

    @property
    def output_size(self):
        return self._counted("pcnn_net_output_size")

    @property
    def memory_bytes(self):
        return self._counted("pcnn_net_memory_bytes")

    @property
    def memory_parts(self):
        """The bytes of memory_bytes by part (pcnn_net_memory_part), as a dict
        keyed by MemoryPart names in lower case: parameters (and gradients),
        optimizer (state, this rank's slices), activations (and their
        gradients), workspace, communication."""
        parts = {}
        for part in MemoryPart:
            n = c_size_t()
            self._lib.pcnn_net_memory_part(self._handle(), int(part), byref(n))
            parts[part.name.lower()] = n.value
        return parts

    def _counted(self, fn):
        n = c_size_t()
        getattr(self._lib, fn)(self._handle(), byref(n))
        return n.value

    def get_params(self, out=None):
        """All trainable parameters, layer by layer, PyTorch's order each."""
        count = self.num_params
        out = floats_out(out, count, "Net.get_params")
        self._lib.pcnn_net_get_params(self._h, addr(out), count)
        return out

    def set_params(self, values):
        values = floats_in(values, "Net.set_params")
        self._lib.pcnn_net_set_params(self._handle(), addr(values), values.size)

    def state_dict(self, buffers=True):
        """OrderedDict of named, shaped float32 arrays (copies): for each
        layer with parameters "<index>.<kind>.weight" / ".bias" in
        PyTorch's shapes, and for batch norms ".running_mean" and
        ".running_var" (this rank's; unless buffers=False).  After finalize."""
        return _state.state_dict(self, buffers)

    def load_state_dict(self, state, strict=True):
        """Copy named arrays (as state_dict gives) into the network.  Every
        shape is checked first and nothing changes on error.  strict:
        unknown names and missing trainable parts raise
        pcnn.StateKeyError (a KeyError); running statistics may be left
        out.  Returns (missing, unexpected) names (empty when strict).
        Local: running statistics are set on this rank only."""
        return _state.load_state_dict(self, state, strict)

    def load_torch_state_dict(self, state_dict, strict=True):
        """pcnn.from_torch_state_dict(self, state_dict, strict)."""
        return _torch_io.from_torch_state_dict(self, state_dict, strict)

    def torch_state_dict(self, template):
        """pcnn.to_torch_state_dict(self, template)."""
        return _torch_io.to_torch_state_dict(self, template)

    def get_grads(self, out=None):
        """The gradients of the last backward pass, laid out as get_params."""
        count = self.num_params
        out = floats_out(out, count, "Net.get_grads")
        self._lib.pcnn_net_get_grads(self._h, addr(out), count)
        return out

    def input_grad(self, out=None):
        """d loss / d x of the last compute_gradients or train_step, shaped
        like its x as (n, C, H, W)."""
        h = self._handle()
        if self._last_n is None:
            raise InvalidStateError("Net.input_grad: no compute_gradients or train_step yet")
        n = self._last_n
        count = n * values_of(self._input_shape)
        out = floats_out(out, count, "Net.input_grad", (n,) + self._input_shape)
        self._lib.pcnn_net_get_input_grad(h, addr(out), count)
        return out

    # -- checkpoints ------------------------------------------------------

    def save(self, path, extra=None):
        """Save the training state (parameters, optimizer state, statistics,
        step, options) to `path`, atomically; `extra` bytes of the host's
        (e.g. Scheduler.save_state()) go into the same file.  After
        finalize; collective with a communicator (rank 0 writes)."""
        h = self._handle()
        if extra is None:
            self._lib.pcnn_net_save(h, _path(path, "Net.save"))
            return
        if not isinstance(extra, (bytes, bytearray, memoryview)):
            raise TypeError("Net.save: extra must be bytes, got %s" % type(extra).__name__)
        extra = bytes(extra)
        self._lib.pcnn_net_save_extra(h, _path(path, "Net.save"), extra or None, len(extra))

    def load(self, path, extra=False):
        """Restore a state saved by save() into this network, built the same
        way (the file is checked completely first; on error nothing
        changes).  With extra=True, returns the extra bytes stored with it
        (b"" if none).  Collective with a communicator."""
        h = self._handle()
        path = _path(path, "Net.load")
        if not extra:
            self._lib.pcnn_net_load(h, path)
            return None
        size = c_size_t()
        try:
            self._lib.pcnn_net_load_extra(h, path, None, 0, byref(size))
            return b""
        except ShapeError:
            if size.value == 0:
                raise
        # The extra bytes did not fit in 0 bytes: read again with room.
        buf = ctypes.create_string_buffer(size.value)
        self._lib.pcnn_net_load_extra(h, path, buf, size.value, byref(size))
        return buf.raw[:size.value]

    # -- automatic parallel strategy --------------------------------------

    def plan_distribution(self, model, global_batch):
        """Plan and apply each layer's distribution for `global_batch`
        samples per step with the performance model `model` (a
        pcnn.PerfModel); before finalize, collective.  Returns the
        predicted step seconds (see pcnn/plan.py)."""
        return _plan_distribution(self, model, global_batch)

    def plan_report(self):
        """The last plan as text (see pcnn/plan.py)."""
        return _plan_report(self)

    def set_perfmodel(self, model):
        """Attach a performance model (None detaches it) for the automatic
        exchange and the scheduler's re-plan (see pcnn/plan.py)."""
        return _set_perfmodel(self, model)

    # -- reports ----------------------------------------------------------

    def summary(self):
        """One line per layer and totals, as printed by the C examples."""
        return _text(self._lib.pcnn_net_summary, self._handle())

    def exchange_bytes(self):
        """Bytes this rank sends per step in the gradient exchange (model)."""
        v = c_uint64()
        self._lib.pcnn_net_exchange_bytes(self._handle(), byref(v))
        return v.value

    def time(self, what=Time.STEP, layer=None):
        """Seconds per training step spent in `what` (a pcnn.Time or its
        name: forward, backward, update, comm, exposed, step, halo,
        halo_exposed, shuffle) by the whole
        network or by one layer (a Layer or its index)."""
        index = -1 if layer is None else (layer.index if isinstance(layer, Layer) else layer)
        v = c_double()
        self._lib.pcnn_net_time(self._handle(), index, coerce(what, Time, "Net.time"),
                                byref(v))
        return v.value

    def timing(self, layer=None):
        """{"forward": s, "backward": s, ...}: seconds per step of each part,
        for the network or one layer ("step" only for the network)."""
        parts = [t for t in Time if layer is None or t != Time.STEP]
        return {t.name.lower(): self.time(t, layer) for t in parts}

    def overlap_ratio(self):
        """Percentage of communication hidden behind computation (NaN before
        any communication, e.g. on one rank)."""
        v = c_double()
        self._lib.pcnn_net_overlap_ratio(self._handle(), byref(v))
        return v.value

    def reset_timing(self):
        self._lib.pcnn_net_reset_timing(self._handle())

    def timing_report(self):
        """The per-layer timing table (ms per step) with totals and R."""
        return _text(self._lib.pcnn_net_timing_report, self._handle())

    def write_trace(self, path):
        """Write this rank's recent spans as Chrome-trace JSON (needs the
        trace_events option before finalize)."""
        self._lib.pcnn_net_write_trace(self._handle(), _path(path, "Net.write_trace"))

    def write_trace_merged(self, path):
        """Write every rank's recent spans into one Chrome-trace JSON file at
        `path` (rank 0 writes, atomically; times on rank 0's clock), as
        pcnn_net_write_trace_merged.  Collective with a communicator; needs
        the trace_events option before finalize."""
        self._lib.pcnn_net_write_trace_merged(self._handle(),
                                              _path(path, "Net.write_trace_merged"))

    def set_log_callback(self, callback):
        """Hear the library's messages: callback(level, message), level a
        pcnn.LogLevel, message a str (see pcnn_net_set_log_callback for
        what is said; set it before finalize to hear finalize's).  None
        removes it.  It runs on the thread that makes the call that logs;
        an exception it raises cannot travel through C: the first one is
        kept as self.log_callback_error and the messages go on."""
        _log.install(self, self._lib.pcnn_net_set_log_callback, self._handle(), callback)

    def abort(self):
        """Abandon this network's collectives in flight and stop its
        progress engine (pcnn_net_abort): local, never blocks, idempotent.
        Afterwards every call but close() and async_error() raises
        InvalidStateError; the other ranks are not told."""
        self._lib.pcnn_net_abort(self._handle())

    def async_error(self):
        """Status.OK, or the status (Status.ERR_TIMEOUT, Status.ERR_MPI) of
        the first collective of this network that failed or timed out, here
        or on another rank (pcnn_net_async_error): local, never blocks."""
        st = c_int()
        self._lib.pcnn_net_async_error(self._handle(), byref(st))
        return Status(st.value)

    def __repr__(self):
        if self.closed:
            return "<pcnn.Net closed>"
        state = ("finalized, %d parameters" % self._num_params if self._max_batch
                 else "%d layers, not finalized" % len(self.layers))
        return "<pcnn.Net %s>" % state


Layer.exchange = property(_net_use(_layer_exchange), doc=_layer_exchange.__doc__)
