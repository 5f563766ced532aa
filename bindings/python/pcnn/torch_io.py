"""PyTorch state_dicts in and out of a Net whose layers match a torch model.

Layers are matched by order: the k-th torch module with parameters (the
k-th distinct key prefix holding "weight", "bias" or "running_mean") goes
with the k-th libpcnn layer with parameters (conv2d, conv3d, dense,
batchnorm).  Kinds and every shape are checked before anything is copied,
and an error names both sides.  PyTorch's "num_batches_tracked" is not
imported (libpcnn has no such counter); on export it keeps the template's
value.  torch itself is needed only for to_torch_state_dict.
"""
import collections

import numpy as np

from . import state as _state
from .errors import InvalidArgumentError, ShapeError

_NDIM_KIND = {4: "conv2d", 5: "conv3d", 2: "dense", 1: "batchnorm"}
_PARTS = ("weight", "bias", "running_mean", "running_var")


def _numpy(value):
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def _as_state_dict(obj, what):
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        return obj.state_dict()
    if isinstance(obj, collections.abc.Mapping):
        return obj
    raise TypeError("%s: expected a torch.nn.Module or a state_dict mapping, got %s"
                    % (what, type(obj).__name__))


def _groups(sd):
    """OrderedDict prefix -> {part: key} of the modules with parameters."""
    groups = collections.OrderedDict()
    for key in sd:
        prefix, _, part = key.rpartition(".")
        groups.setdefault(prefix, {})[part] = key
    return collections.OrderedDict((p, g) for p, g in groups.items()
                                   if any(k in g for k in ("weight", "bias", "running_mean")))


def _torch_kind(sd, group):
    if "running_mean" in group:
        return "batchnorm"
    w = group.get("weight")
    return _NDIM_KIND.get(np.ndim(_numpy(sd[w])) if w else 0, "?")


def _pairs(net, sd, what):
    """[(torch prefix, group, libpcnn layer)] after checking the count and
    kinds."""
    _state._finalized(net, what)
    groups = _groups(sd)
    layers = [l for l in net.layers if l.kind in _state.PARAMETERISED]
    if len(groups) != len(layers):
        raise InvalidArgumentError(
            "%s: the torch state_dict has %d modules with parameters (%s), the network %d "
            "layers with parameters (%s)" % (
                what, len(groups), ", ".join(repr(p) for p in groups) or "none", len(layers),
                ", ".join("%d.%s" % (l.index, l.kind) for l in layers) or "none"))
    pairs = []
    for (prefix, group), layer in zip(groups.items(), layers):
        tkind = _torch_kind(sd, group)
        # A transposed convolution's weight has a convolution's rank.
        if tkind != layer.kind.replace("conv_transpose", "conv"):
            raise InvalidArgumentError(
                "%s: torch module %r looks like %s (parts %s) but the matching layer %d is %s"
                % (what, prefix, tkind, sorted(group), layer.index, layer.kind))
        pairs.append((prefix, group, layer))
    return pairs


def from_torch_state_dict(net, state_dict, strict=True):
    """Load a PyTorch state_dict (or a torch.nn.Module's) into `net`: every
    parameter and running statistic, shapes checked first."""
    what = "from_torch_state_dict"
    sd = _as_state_dict(state_dict, what)
    mine = {}
    for prefix, group, layer in _pairs(net, sd, what):
        expected = dict(_state.trainable_parts(layer) + _state.buffer_parts(layer))
        for part, key in group.items():
            if part == "num_batches_tracked":
                continue
            if part not in expected:
                raise InvalidArgumentError("%s: torch key %r has no counterpart in layer %d "
                                           "(%s: %s)" % (what, key, layer.index, layer.kind,
                                                         ", ".join(expected)))
            a = _numpy(sd[key])
            if tuple(a.shape) != expected[part]:
                raise ShapeError("%s: torch %r has shape %s, layer %d (%s) expects %s"
                                 % (what, key, tuple(a.shape), layer.index, layer.kind,
                                    expected[part]))
            mine["%d.%s.%s" % (layer.index, layer.kind, part)] = a
        if strict:
            for part in expected:
                if part not in group:
                    raise InvalidArgumentError(
                        "%s: torch module %r lacks %r, which layer %d (%s) has"
                        % (what, prefix, part, layer.index, layer.kind))
    _state.load_state_dict(net, mine, strict=strict)


def to_torch_state_dict(net, template):
    """The network's state as a PyTorch state_dict with the keys, order and
    dtypes of `template` (a torch.nn.Module or its state_dict), ready for
    model.load_state_dict."""
    import torch

    what = "to_torch_state_dict"
    sd = _as_state_dict(template, what)
    pairs = _pairs(net, sd, what)
    need_buffers = any("running_mean" in g for _, g, _ in pairs)
    mine = _state.state_dict(net, buffers=need_buffers)
    values = {}
    for prefix, group, layer in pairs:
        expected = dict(_state.trainable_parts(layer) + _state.buffer_parts(layer))
        for part, key in group.items():
            if part == "num_batches_tracked":
                continue
            if part not in expected:
                raise InvalidArgumentError("%s: torch key %r has no counterpart in layer %d "
                                           "(%s)" % (what, key, layer.index, layer.kind))
            a = mine["%d.%s.%s" % (layer.index, layer.kind, part)]
            t = sd[key]
            if tuple(t.shape) != a.shape:
                raise ShapeError("%s: torch %r has shape %s, layer %d (%s) holds %s"
                                 % (what, key, tuple(t.shape), layer.index, layer.kind,
                                    a.shape))
            values[key] = torch.from_numpy(a.copy()).to(dtype=t.dtype)
    out = collections.OrderedDict()
    for key, t in sd.items():
        out[key] = values[key] if key in values else t.detach().clone()
    return out
