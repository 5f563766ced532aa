"""The automatic parallel strategy (pcnn.h section 9): choose every layer's
distribution by the cheapest path over a performance model, and its report.

Functions of a Net and a PerfModel (anything with a `_handle()` giving the
pcnn_perfmodel pointer); Net.plan_distribution and Net.plan_report call
them.  Options: Option.PLAN_MAX_SPATIAL, PLAN_SPATIAL_DIMS (mask: 1 depth,
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
    predicted = c_double()
    net._lib.pcnn_net_plan_distribution(net._handle(), model._handle(),
                                        global_batch, byref(predicted))
    return predicted.value


def plan_report(net):
    """The last plan as text: per layer its candidates and costs, the chosen
    one marked '*', the shuffles and the predicted step."""
    fn = net._lib.pcnn_net_plan_report
    needed = c_size_t()
    fn(net._handle(), None, 0, byref(needed))
    buf = ctypes.create_string_buffer(needed.value + 1)
    fn(net._handle(), buf, len(buf), None)
    return buf.value.decode("utf-8", "replace")


def set_perfmodel(net, model):
    """Attach a performance model (None detaches it): PCNN_EXCHANGE_AUTO
    chooses each layer's gradient exchange with it at finalize, and the
    adaptive batch scheduler re-plans with it when the batch changes (the
    plan report then shows the re-plan).  The net keeps a reference to the
    model.  Every rank must attach the same model."""
    net._lib.pcnn_net_set_perfmodel(net._handle(), model._handle() if model else None)
    net._perfmodel = model


def layer_exchange(layer):
    """The gradient exchange this parameterised layer takes (after finalize):
    a pcnn.Exchange."""
    net = layer._owner()
    out = c_int()
    net._lib.pcnn_layer_get_exchange(layer._h, byref(out))
    return Exchange(out.value)
