"""The performance model (pcnn_perfmodel, experimental section 9 of pcnn.h).

    with pcnn.PerfModel() as model:
        model.calibrate_compute(net, budget=2.0)       # this machine's layers
        model.calibrate_comm(comm, budget=2.0)         # its links (collective)
        t = model.predict(net, ranks=1024, global_batch=8192, link_gbits=10)
        t["step"], t["exposed"]                        # seconds per step
        model.save("machine.pcnnperf")

A prediction needs no communicator: any number of ranks can be asked
about (what-if).  The C handle is `model._handle()` for code that calls
the library directly (the planner does).
"""
import ctypes
import math
from ctypes import byref, c_double, c_size_t, c_void_p

from . import _log
from ._args import path as _path
from ._handle import Handle, new_handle
from .comm import Comm
from .enums import Collective, Exchange, PerfFlag, PerfParam, Time, coerce
from .errors import InvalidArgumentError

# pcnn_log_callback: (user, level, message)

# The categories of a prediction, as pcnn_net_time names them.
CATEGORIES = (Time.FORWARD, Time.BACKWARD, Time.UPDATE, Time.COMM, Time.EXPOSED, Time.HALO,
              Time.HALO_EXPOSED, Time.SHUFFLE)
# Knobs predict() takes for one prediction only: their get_param returns
# exactly what was set, so the previous value can be put back.
_TEMPORARY = {"strategy": PerfParam.STRATEGY, "link_gbits": PerfParam.LINK_GBITS,
              "engine": PerfParam.ENGINE, "compute_source": PerfParam.COMPUTE_SOURCE,
              "nonblocking_progress": PerfParam.NONBLOCKING_PROGRESS}
_ENGINES = {"net": 0, "network": 0, "thread": 1, "nonblocking": 2}
_SOURCES = {"best": 0, "timings": 1, "regressors": 2}


def _text(fn, *args):
    """A string from an snprintf-style libpcnn function."""
    needed = c_size_t()
    fn(*args, None, 0, byref(needed))
    buf = ctypes.create_string_buffer(needed.value + 1)
    fn(*args, buf, len(buf), None)
    return buf.value.decode("utf-8", "replace")


def _net_of(net, what):
    from .net import Net  # net.py imports much; this module stays light
    if not isinstance(net, Net):
        raise TypeError("%s: expected a pcnn.Net, got %r" % (what, net))
    return net


def _budget(budget, what):
    budget = float(budget)
    if not (budget > 0 and math.isfinite(budget)):
        raise InvalidArgumentError("%s: budget %r s must be positive and finite" % (what, budget))
    return budget


def _knob_value(name, value):
    """The double a predict() keyword stands for."""
    if name == "strategy":
        return -1.0 if value is None else float(coerce(value, Exchange, "PerfModel.predict"))
    if name == "engine" and isinstance(value, str):
        if value not in _ENGINES:
            raise InvalidArgumentError("PerfModel.predict: engine %r (one of: %s)"
                                       % (value, ", ".join(_ENGINES)))
        return float(_ENGINES[value])
    if name == "compute_source" and isinstance(value, str):
        if value not in _SOURCES:
            raise InvalidArgumentError("PerfModel.predict: compute_source %r (one of: %s)"
                                       % (value, ", ".join(_SOURCES)))
        return float(_SOURCES[value])
    return float(value)


class PerfModel(Handle):
    """A performance model: link parameters (alpha, beta, gamma per
    collective and the measured curves), the compute table of one network
    (each layer timed at its local shapes) and, optionally, the per-kernel
    regressors that estimate shapes never timed.  Local to the process;
    only calibrate_comm, calibrate_pace and share are collective.
    PerfModel.load(path) reads a saved model."""

    _kind = "perfmodel"
    _destroy = "pcnn_perfmodel_destroy"

    def __init__(self):
        lib, out = new_handle()
        lib.pcnn_perfmodel_create(byref(out))
        self._adopt(lib, out)

    @classmethod
    def load(cls, path):
        """A model read from a file written by save().  CorruptError for a
        file that is not a model, truncated or fails its checksum;
        UnsupportedError for a format version this library does not read."""
        self = cls.__new__(cls)
        lib, out = new_handle()
        lib.pcnn_perfmodel_load(_path(path, "PerfModel.load"), byref(out))
        self._adopt(lib, out)
        return self

    def save(self, path):
        """Write atomically (versioned, checksummed)."""
        self._lib.pcnn_perfmodel_save(self._handle(), _path(path, "PerfModel.save"))

    def share(self, comm, root=0):
        """Make every rank's model rank `root`'s (links, knobs, compute
        table, regressors), as saving on root and loading everywhere would:
        planning and exchange="auto" need the same model on every rank.
        Collective over `comm` (a pcnn.Comm), the same root everywhere."""
        if not isinstance(comm, Comm):
            raise TypeError("PerfModel.share: expected a pcnn.Comm, got %r" % (comm,))
        if isinstance(root, bool) or not isinstance(root, int):
            raise TypeError("PerfModel.share: root must be an int, got %r" % (root,))
        with comm._using() as c:
            self._lib.pcnn_perfmodel_share(self._handle(), c, root)

    # ---- calibration ----
    log_callback_error = None  # the first exception a log callback raised
    _log_callback = None

    def set_log_callback(self, callback):
        """Hear the calibrations' progress: callback(level, message), level
        a pcnn.LogLevel (INFO: one line per phase of calibrate_comm,
        calibrate_compute and calibrate_pace; see
        pcnn_perfmodel_set_log_callback), message a str.  None removes it.
        The library prints nothing itself: e.g. set_log_callback(lambda
        level, m: print(m, flush=True)) on rank 0.  An exception the
        callback raises cannot travel through C: the first one is kept as
        self.log_callback_error and the calibration goes on."""
        _log.install(self, self._lib.pcnn_perfmodel_set_log_callback, self._handle(), callback)

    def calibrate_comm(self, comm, budget=2.0):
        """Measure the links of `comm` (a pcnn.Comm) within about `budget`
        seconds: ping-pong and sweeps of all-reduce, all-to-all and
        all-gather, alpha/beta fitted per collective.  Collective: every
        rank of comm calls it and holds the same result."""
        if not isinstance(comm, Comm):
            raise TypeError("PerfModel.calibrate_comm: expected a pcnn.Comm, got %r" % (comm,))
        budget = _budget(budget, "PerfModel.calibrate_comm")
        with comm._using() as c:
            self._lib.pcnn_perfmodel_calibrate_comm(self._handle(), c, budget)

    def calibrate_compute(self, net, budget=2.0):
        """Time each layer of the finalized `net` at its local shapes
        (forward, backward, update) within about `budget` seconds; replaces
        the compute table.  Calibrating after a few training steps matches
        training best.  Local."""
        net = _net_of(net, "PerfModel.calibrate_compute")
        budget = _budget(budget, "PerfModel.calibrate_compute")
        with net._using() as h:
            self._lib.pcnn_perfmodel_calibrate_compute(self._handle(), h, budget)

    def calibrate_pace(self, comm):
        """Compare every rank's compute calibration (of the same network):
        the slowest rank's step over this one's becomes PerfParam.RANK_PACE,
        at which predictions of several ranks run.  Collective over `comm`
        (a pcnn.Comm)."""
        if not isinstance(comm, Comm):
            raise TypeError("PerfModel.calibrate_pace: expected a pcnn.Comm, got %r" % (comm,))
        with comm._using() as c:
            self._lib.pcnn_perfmodel_calibrate_pace(self._handle(), c)

    def fit_regressors(self, threads=1, budget=30.0, seed=0):
        """Fit the per-kernel regressors (small MLPs on log-normalised
        shapes) for `threads` compute threads within about `budget`
        seconds.  Their held-out error is in report()."""
        budget = _budget(budget, "PerfModel.fit_regressors")
        self._lib.pcnn_perfmodel_fit_regressors(self._handle(), threads, budget, seed)

    # ---- knobs ----
    def set_param(self, param, value):
        """Set a knob: a pcnn.PerfParam, its name ("link_gbits") or value."""
        self._lib.pcnn_perfmodel_set_param(self._handle(),
                                           coerce(param, PerfParam, "PerfModel.set_param"),
                                           float(value))

    def get_param(self, param):
        """A knob's value (alpha and beta read the ones in use)."""
        v = c_double()
        self._lib.pcnn_perfmodel_get_param(self._handle(),
                                           coerce(param, PerfParam, "PerfModel.get_param"),
                                           byref(v))
        return v.value

    def params(self):
        """{"alpha_s": ..., "link_gbits": ..., ...}: every knob."""
        return {p.name.lower(): self.get_param(p) for p in PerfParam}

    # ---- predictions ----
    def collective_time(self, collective, ranks, nbytes):
        """Modelled seconds of one collective (a pcnn.Collective or its
        name: sendrecv, allreduce, alltoall, allgather) of `nbytes` bytes on
        `ranks` ranks."""
        v = c_double()
        self._lib.pcnn_perfmodel_collective_time(
            self._handle(), coerce(collective, Collective, "PerfModel.collective_time"),
            ranks, float(nbytes), byref(v))
        return v.value

    def predict(self, net, ranks=1, global_batch=None, overlap=True, **knobs):
        """Predict one steady training step of the finalized `net` for
        `global_batch` samples (default: the network's max batch times
        `ranks`) over `ranks` ranks, which need not exist.  Keywords for
        this prediction only: strategy (a pcnn.Exchange or its name, None:
        the network's), link_gbits (0: calibrated), engine ("net", "thread",
        "nonblocking"), compute_source ("best", "timings", "regressors"),
        nonblocking_progress; None leaves a knob as set_param set it.  Returns
        {"forward", "backward", "update", "comm", "exposed", "halo",
        "halo_exposed", "shuffle", "step"} in seconds (the last three 0
        without a spatial distribution), and "flags": the names of the
        confidence flags that apply on `ranks` ranks (empty: nothing to
        warn of; confidence() explains them); per layer: layer_time()."""
        net = _net_of(net, "PerfModel.predict")
        unknown = sorted(set(knobs) - set(_TEMPORARY))
        if unknown:
            raise TypeError("PerfModel.predict: unknown keyword %s (known: %s)"
                            % (", ".join(unknown), ", ".join(sorted(_TEMPORARY))))
        if global_batch is None:
            max_batch = getattr(net, "_max_batch", None)
            if max_batch is None:
                raise InvalidArgumentError("PerfModel.predict: the network is not finalized "
                                           "(no max batch to default global_batch to)")
            global_batch = max_batch * ranks
        h = self._handle()
        saved = {}
        try:
            for name, value in knobs.items():
                if value is None and name != "strategy":
                    continue  # as the model is set
                param = _TEMPORARY[name]
                saved[param] = self.get_param(param)
                self._lib.pcnn_perfmodel_set_param(h, param, _knob_value(name, value))
            step = c_double()
            with net._using() as n:
                self._lib.pcnn_perfmodel_predict(h, n, global_batch, ranks, 1 if overlap else 0,
                                                 byref(step))
            flags = self.confidence(ranks)[0]  # with this prediction's knobs
        finally:
            for param, value in saved.items():
                self._lib.pcnn_perfmodel_set_param(h, param, value)
        out = {t.name.lower(): self.layer_time(None, t) for t in CATEGORIES}
        out["step"] = step.value
        out["flags"] = flags
        return out

    def confidence(self, ranks=0):
        """(flags, text): the names of the confidence flags (pcnn.PerfFlag,
        without its FLAG_ prefix)
        that apply to a prediction on `ranks` ranks (1: no link flag; 0:
        every flag), and one line per flag saying what it rests on and what
        to do."""
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 0:
            raise InvalidArgumentError("PerfModel.confidence: ranks must be an int >= 0, "
                                       "not %r" % (ranks,))
        flags = ctypes.c_int()
        h = c_void_p(self._handle())
        self._lib.pcnn_perfmodel_confidence(h, ranks, byref(flags), None, 0, None)
        text = _text(self._lib.pcnn_perfmodel_confidence, h, ranks, None)
        return [f.name[len("FLAG_"):] for f in PerfFlag if flags.value & f], text

    def layer_time(self, layer=None, what=Time.STEP):
        """Seconds of `what` (a pcnn.Time or its name; forward .. step) in
        the last prediction, for one layer (a pcnn.Layer or its index) or
        all (None)."""
        index = -1 if layer is None else getattr(layer, "index", layer)
        v = c_double()
        self._lib.pcnn_perfmodel_layer_time(self._handle(), index,
                                            coerce(what, Time, "PerfModel.layer_time"), byref(v))
        return v.value

    def layer_times(self, layer):
        """{"forward", "backward", "update", "comm", "exposed", "halo",
        "halo_exposed", "shuffle"} of one layer in the last prediction."""
        return {t.name.lower(): self.layer_time(layer, t) for t in CATEGORIES}

    def validate(self, net):
        """Compare the last prediction with `net`'s measured timings (per
        step since its last reset_timing): {"step_re": (predicted -
        measured) / measured step, "wre": {"forward", "backward",
        "update"} (seed 004's WRE^T over the layers), "table": the per-layer
        predicted and measured times side by side}."""
        net = _net_of(net, "PerfModel.validate")
        re_, wre = c_double(), (c_double * 3)()
        needed = c_size_t()
        h = self._handle()
        with net._using() as n:
            self._lib.pcnn_perfmodel_validate(h, n, byref(re_), wre, None, 0, byref(needed))
            buf = ctypes.create_string_buffer(needed.value + 1)
            self._lib.pcnn_perfmodel_validate(h, n, None, None, buf, len(buf), None)
        return {"step_re": re_.value,
                "wre": {"forward": wre[0], "backward": wre[1], "update": wre[2]},
                "table": buf.value.decode("utf-8", "replace")}

    def report(self):
        """The link fits and curves, the compute table (with the
        regressors' estimates beside it) and the knobs, as text."""
        return _text(self._lib.pcnn_perfmodel_report, c_void_p(self._handle()))

    def __repr__(self):
        return "<pcnn.PerfModel %s>" % ("closed" if self.closed else "open")
