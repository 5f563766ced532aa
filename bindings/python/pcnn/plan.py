"""The automatic parallel strategy (pcnn.h section 9): choose every layer's
distribution by the cheapest path over a performance model, and its report.

Functions of a Net and a PerfModel (any Handle of a pcnn_perfmodel);
Net.plan_distribution and Net.plan_report call them.  Both objects count
as in use while C reads them, so that another thread cannot close them
under the call.  Options: Option.PLAN_MAX_SPATIAL, PLAN_SPATIAL_DIMS (mask: 1 depth,
2 height, 4 width), PLAN_MIXED, MEMORY_LIMIT_MIB, set on the net before."""
import ctypes
from ctypes import byref, c_double, c_int, c_size_t

from .enums import Exchange

# pcnn.h section 9: the network's exchange "auto" (Net.set_exchange("auto")).
EXCHANGE_AUTO = 3


def plan_distribution(net, model, global_batch):
    """Plan and apply each layer's distribution for `global_batch` samples
    per step (before finalize; collective over the net's communicator).
    Returns the predicted step seconds.  MismatchError when another rank's
    model, layers, batch or planning options differ."""
    if not callable(getattr(model, "_using", None)):
        raise TypeError("plan_distribution: expected a pcnn.PerfModel, got %r" % (model,))
    predicted = c_double()
    with net._using() as h, model._using() as m:
        net._lib.pcnn_net_plan_distribution(h, m, global_batch, byref(predicted))
    return predicted.value


def plan_report(net):
    """The last plan as text: per layer its candidates and costs, the chosen
    one marked '*', the shuffles and the predicted step."""
    fn = net._lib.pcnn_net_plan_report
    needed = c_size_t()
    with net._using() as h:
        fn(h, None, 0, byref(needed))
        buf = ctypes.create_string_buffer(needed.value + 1)
        fn(h, buf, len(buf), None)
    return buf.value.decode("utf-8", "replace")


def set_perfmodel(net, model):
    """Attach a performance model (None detaches it): PCNN_EXCHANGE_AUTO
    chooses each layer's gradient exchange with it at finalize, and the
    adaptive batch scheduler re-plans with it when the batch changes (the
    plan report then shows the re-plan).  The net keeps a reference to the
    model.  Every rank must attach the same model."""
    if model is not None and not callable(getattr(model, "_using", None)):
        raise TypeError("set_perfmodel: expected a pcnn.PerfModel or None, got %r" % (model,))
    with net._using() as h:
        if model is None:
            net._lib.pcnn_net_set_perfmodel(h, None)
        else:
            with model._using() as m:
                net._lib.pcnn_net_set_perfmodel(h, m)
    net._perfmodel = model


def layer_exchange(layer):
    """The gradient exchange this parameterised layer takes (after finalize):
    a pcnn.Exchange."""
    net = layer._owner()
    out = c_int()
    net._lib.pcnn_layer_get_exchange(layer._h, byref(out))
    return Exchange(out.value)
