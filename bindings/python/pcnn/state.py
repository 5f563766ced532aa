"""Named, shaped parameters: Net.state_dict / Net.load_state_dict.

Names are "<layer index>.<kind>.<part>", e.g. "1.conv2d.weight",
"2.batchnorm.running_mean": the index of pcnn_layer_info (the input is 0),
the layer's kind, and PyTorch's name of the part.  Trainable parts come
from pcnn_net_get_params (each layer in PyTorch's order, weight then bias);
batch-norm running statistics ("running_mean", "running_var", unbiased as
in PyTorch) from pcnn_layer_get_buffers, this rank's own.
"""
import collections

import numpy as np

from ._arrays import F32, count
from .errors import InternalError, InvalidStateError, ShapeError

class StateKeyError(KeyError):
    """Unknown or missing names in load_state_dict (a KeyError whose
    message reads as text)."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


# The kinds with trainable parameters, and those with running statistics.
PARAMETERISED = ("conv2d", "conv3d", "dense", "batchnorm", "conv_transpose2d",
                 "conv_transpose3d")


def trainable_parts(layer):
    """[(part, shape)] of a layer's trainable parameters, in the library's
    (PyTorch's) order; [] for a layer without any."""
    cfg, kind = layer.config, layer.kind
    if kind in ("conv2d", "conv3d"):
        out, k = cfg["out_channels"], cfg["kernel"]
        cin = layer.inputs[0].output_shape[0]
        parts = [("weight", (out, cin) + (k,) * (2 if kind == "conv2d" else 3))]
        if cfg["bias"]:
            parts.append(("bias", (out,)))
    elif kind in ("conv_transpose2d", "conv_transpose3d"):
        out, k = cfg["out_channels"], cfg["kernel"]
        cin = layer.inputs[0].output_shape[0]
        parts = [("weight", (cin, out) + (k,) * (2 if kind == "conv_transpose2d" else 3))]
        if cfg["bias"]:
            parts.append(("bias", (out,)))
    elif kind == "dense":
        out = cfg["out_features"]
        parts = [("weight", (out, count(layer.inputs[0].output_shape)))]
        if cfg["bias"]:
            parts.append(("bias", (out,)))
    elif kind == "batchnorm":
        c = layer.output_shape[0]
        parts = [("weight", (c,)), ("bias", (c,))]
    else:
        parts = []
    total = sum(count(s) for _, s in parts)
    if total != layer.num_params:
        raise InternalError("layer %d (%s): %d parameters expected from its shape, the "
                            "library holds %d" % (layer.index, kind, total, layer.num_params))
    return parts


def buffer_parts(layer):
    """[(part, shape)] of a layer's running statistics."""
    if layer.kind != "batchnorm":
        return []
    c = layer.output_shape[0]
    return [("running_mean", (c,)), ("running_var", (c,))]


def entries(net, buffers=True):
    """[(name, layer, part, shape, trainable)] in order: each layer's
    trainable parts, then its running statistics."""
    out = []
    for layer in net.layers:
        for part, shape in trainable_parts(layer):
            out.append(("%d.%s.%s" % (layer.index, layer.kind, part), layer, part, shape, True))
        if buffers:
            for part, shape in buffer_parts(layer):
                out.append(("%d.%s.%s" % (layer.index, layer.kind, part), layer, part, shape,
                            False))
    return out


def _finalized(net, what):
    if net._max_batch is None:
        raise InvalidStateError("%s: finalize the network first" % what)


def _bn_layers(net):
    return [l for l in net.layers if l.kind == "batchnorm"]


def read_buffers(net, what):
    """This rank's running statistics, one flat float32 array (each batch
    norm's mean[C] then var[C])."""
    parts = [l.get_buffers() for l in _bn_layers(net)]
    return np.concatenate(parts) if parts else np.empty(0, F32)


def write_buffers(net, values, what):
    """Set this rank's running statistics to `values` (flat, as
    read_buffers); the C call checks every value first."""
    pos = 0
    for layer in _bn_layers(net):
        n = layer.num_buffers
        layer.set_buffers(values[pos:pos + n])
        pos += n
    if pos != values.size:
        raise InternalError("%s: %d running statistics for %d values" % (what, pos, values.size))


def state_dict(net, buffers=True):
    """An OrderedDict name -> float32 array (copies, shaped as PyTorch's)."""
    _finalized(net, "Net.state_dict")
    items = entries(net, buffers and bool(_bn_layers(net)))
    flat = net.get_params()
    stats = read_buffers(net, "Net.state_dict") if any(not e[4] for e in items) else None
    out = collections.OrderedDict()
    pos = bpos = 0
    for name, _layer, _part, shape, trainable in items:
        n = count(shape)
        if trainable:
            out[name] = flat[pos:pos + n].reshape(shape).copy()
            pos += n
        else:
            out[name] = stats[bpos:bpos + n].reshape(shape).copy()
            bpos += n
    return out


def load_state_dict(net, state, strict=True):
    """Copy the arrays of `state` (a mapping name -> array-like) into the
    network.  Every name must be one of state_dict()'s and every shape
    match; with strict, every trainable part must be present too (running
    statistics may be left out: they keep their values).  Nothing changes
    when a check fails.  Returns (missing, unexpected) name lists (both
    empty unless strict=False)."""
    _finalized(net, "Net.load_state_dict")
    items = entries(net, True)
    known = {e[0]: e for e in items}
    unexpected = [k for k in state if k not in known]
    missing = [e[0] for e in items if e[0] not in state and (e[4] or not strict)]
    if strict and (unexpected or missing):
        msg = ["Net.load_state_dict:"]
        if unexpected:
            msg.append("unknown keys %s (this network's: %s)"
                       % (", ".join(map(repr, unexpected[:8])), ", ".join(known)))
        if missing:
            msg.append("missing keys %s" % ", ".join(map(repr, missing[:8])))
        raise StateKeyError(" ".join(msg))
    arrays = {}
    for name, value in state.items():
        if name not in known:
            continue
        shape = known[name][3]
        a = np.asarray(value, dtype=F32)
        if a.shape != shape:
            raise ShapeError("Net.load_state_dict: %r has shape %s, the network's is %s"
                             % (name, tuple(a.shape), shape))
        if not np.all(np.isfinite(a)):
            raise ValueError("Net.load_state_dict: %r holds non-finite values" % name)
        if known[name][2] == "running_var" and np.any(a < 0):
            raise ValueError("Net.load_state_dict: %r holds negative variances" % name)
        arrays[name] = a
    flat = net.get_params()
    pos = 0
    stats_given = [e for e in items if not e[4] and e[0] in arrays]
    stats = None
    if stats_given:
        stats = np.empty(sum(count(e[3]) for e in items if not e[4]), F32)
        if any(not e[4] and e[0] not in arrays for e in items):  # keep the others
            stats[:] = read_buffers(net, "Net.load_state_dict")
    bpos = 0
    for name, _layer, _part, shape, trainable in items:
        n = count(shape)
        if trainable:
            if name in arrays:
                flat[pos:pos + n] = arrays[name].ravel()
            pos += n
        else:
            if name in arrays:
                stats[bpos:bpos + n] = arrays[name].ravel()
            bpos += n
    net.set_params(flat)
    if stats is not None:
        write_buffers(net, stats, "Net.load_state_dict")
    return ([] if strict else missing), ([] if strict else unexpected)
