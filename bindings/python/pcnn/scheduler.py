"""The adaptive batch-size scheduler (seed 001 chapter 5)."""
import math
from ctypes import byref, c_double, c_int, c_size_t, c_void_p, create_string_buffer

from ._handle import Handle
from .enums import SchedEvent, SchedLrRule, SchedOption, coerce
from .errors import InvalidArgumentError

_FLOAT_OPTIONS = {SchedOption.GROWTH_FACTOR, SchedOption.THETA_THRESHOLD,
                  SchedOption.DECAY_FACTOR, SchedOption.PLATEAU_THRESHOLD,
                  SchedOption.INITIAL_LOSS, SchedOption.LEARNING_RATE, SchedOption.THETA}


class Scheduler(Handle):
    """Grows the batch from start_batch to max_batch while the learning
    rate follows (pcnn_scheduler).  Create it on a finalized network (with
    max_batch at least the largest batch), after setting or loading the
    parameters to start from; options by name as keyword arguments:

        sched = pcnn.Scheduler(net, 32, 256, 0.05, growth_factor=2,
                               lr_rule="root", interval_epochs=2)
        for epoch in range(1, epochs + 1):
            data.shuffle(seed, epoch)
            loss = sched.train_epoch(data)        # B and mu from the schedule

    Collective calls (creation, begin/end/train_epoch, save/load_state) must
    be made by every rank of the network's communicator.  The scheduler
    keeps its network alive, and closing the network closes it first."""

    _kind = "scheduler"
    _destroy = "pcnn_scheduler_destroy"

    def __init__(self, net, start_batch, max_batch, initial_lr, **options):
        out = c_void_p()
        with net._using() as h:
            net._lib.pcnn_scheduler_create(h, start_batch, max_batch, float(initial_lr),
                                           byref(out))
        self._adopt(net._lib, out)
        self.net = net
        net._dependents.add(self)
        if options:
            self.configure(**options)

    def _closed(self):
        self.net = None

    def set_option(self, option, value):
        option = coerce(option, SchedOption, "Scheduler.set_option")
        if option == SchedOption.LR_RULE:
            value = coerce(value, SchedLrRule, "Scheduler lr_rule")
        self._lib.pcnn_scheduler_set_option(self._handle(), option, float(value))

    def get_option(self, option):
        option = coerce(option, SchedOption, "Scheduler.get_option")
        v = c_double()
        self._lib.pcnn_scheduler_get_option(self._handle(), option, byref(v))
        if option in _FLOAT_OPTIONS or not math.isfinite(v.value):
            return v.value
        if option == SchedOption.EVENTS:
            return SchedEvent(int(v.value))
        if option == SchedOption.LR_RULE:
            return SchedLrRule(int(v.value))
        return int(v.value)

    def configure(self, **options):
        for name, value in options.items():
            self.set_option(name, value)

    epoch = property(lambda self: self.get_option(SchedOption.EPOCH),
                     doc="Epochs finished.")
    batch = property(lambda self: self.get_option(SchedOption.BATCH),
                     doc="B of the next epoch.")
    learning_rate = property(lambda self: self.get_option(SchedOption.LEARNING_RATE),
                             doc="mu of the next epoch, warm-up included.")
    interval = property(lambda self: self.get_option(SchedOption.INTERVAL),
                        doc="K, the growth interval in epochs (0 while unknown).")
    decays = property(lambda self: self.get_option(SchedOption.DECAYS),
                      doc="Plateau decays so far.")
    active_ranks = property(lambda self: self.get_option(SchedOption.ACTIVE_RANKS),
                            doc="Ranks computing a batch of B next epoch.")
    events = property(lambda self: self.get_option(SchedOption.EVENTS),
                      doc="SchedEvent flags: what the last finished epoch decided.")

    def theta(self, epoch=None):
        """theta of an epoch (1 .. epoch), the last one by default."""
        if epoch is None:
            return self.get_option(SchedOption.THETA)
        v = c_double()
        self._lib.pcnn_scheduler_theta(self._handle(), epoch, byref(v))
        return v.value

    def thetas(self):
        """theta of every finished epoch, in order."""
        return [self.theta(e) for e in range(1, self.epoch + 1)]

    def begin_epoch(self):
        """(B, learning rate) of the epoch that starts; the rate is also set
        on the network.  Collective."""
        batch, lr = c_int(), c_double()
        self._lib.pcnn_scheduler_begin_epoch(self._handle(), byref(batch), byref(lr))
        return batch.value, lr.value

    def end_epoch(self, loss):
        """Finish the epoch with its mean training loss.  Collective."""
        self._lib.pcnn_scheduler_end_epoch(self._handle(), float(loss))

    def share(self, count):
        """(first, n): the samples of a global batch of `count` this rank
        computes under the degree-of-parallelism rule (n may be 0)."""
        first, n = c_int(), c_int()
        self._lib.pcnn_scheduler_share(self._handle(), count, byref(first), byref(n))
        return first.value, n.value

    def train_epoch(self, data, callback=None):
        """Train one epoch of `data` (in its current order) under the
        schedule; returns its mean training loss.  Collective.

        Without a callback: one C call (pcnn_scheduler_train_epoch).  With
        one, the binding drives the epoch itself (begin_epoch, train steps
        on this rank's share, end_epoch) and calls callback(StepInfo) after
        each step; the results are bitwise the same.  If a step fails there,
        the epoch stays begun: end it with end_epoch or drop the scheduler."""
        h = self._handle()
        if callback is None:
            loss = c_double()
            with data._using() as d:
                self._lib.pcnn_scheduler_train_epoch(h, d, byref(loss))
            return loss.value
        batch, _ = self.begin_epoch()
        mean, first = self.net._epoch_in_steps(data, batch, callback, self.share)
        # As the C epoch: F(w_0) is the first step's (global) loss unless set.
        if self.epoch == 0 and math.isnan(self.get_option(SchedOption.INITIAL_LOSS)):
            self.set_option(SchedOption.INITIAL_LOSS, first)
        self.end_epoch(mean)
        return mean

    def save_state(self):
        """The schedule's state as bytes (equal on all ranks), e.g. for
        Net.save(path, extra=...).  Between epochs.  Collective."""
        h = self._handle()
        n = c_size_t()
        self._lib.pcnn_scheduler_state_bytes(h, byref(n))
        buf = create_string_buffer(n.value)
        self._lib.pcnn_scheduler_save_state(h, buf, n.value)
        return buf.raw

    def load_state(self, state):
        """Restore bytes from save_state on a scheduler created with the same
        arguments.  Collective."""
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError("Scheduler.load_state: expected bytes, got %s"
                            % type(state).__name__)
        state = bytes(state)
        if not state:
            raise InvalidArgumentError("Scheduler.load_state: empty state")
        self._lib.pcnn_scheduler_load_state(self._handle(), state, len(state))

    def __repr__(self):
        if self.closed:
            return "<pcnn.Scheduler closed>"
        return "<pcnn.Scheduler epoch %d, next batch %d, lr %g>" % (
            self.epoch, self.batch, self.learning_rate)
