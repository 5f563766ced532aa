"""Net.fit: epochs of training with validation, callbacks and a progress
bar, the loop every Keras or PyTorch-Lightning user expects.

With a communicator every rank passes the same full arrays (or Dataset);
each epoch is pcnn_net_train_epoch, each rank training on its share of every
global batch (under a spatial distribution, each rank on its box of its
sample group's share), so losses and metrics are global and equal on all
ranks, and only rank 0 prints; the progress bar and on_batch_end follow the
steps through the library's step callback.
"""
import math
import os
import sys
import time

from .dataset import Dataset
from .enums import Loss


class Callback:
    """Base of fit's callbacks; override what you need.  on_epoch_end may
    return True to stop training after this epoch."""

    def on_train_begin(self, net):
        pass

    def on_epoch_begin(self, epoch, net):
        pass

    def on_batch_end(self, info, net):
        """info: a StepInfo (step, steps, samples, total, loss).  Runs inside
        the epoch's C call (Net.train_epoch): it may read the network but
        must not train, save, load, reconfigure or close it."""

    def on_epoch_end(self, epoch, logs, net):
        return False

    def on_train_end(self, history, net):
        pass


class EarlyStopping(Callback):
    """Stop when `monitor` (a key of the epoch's logs, e.g. "val_loss") has
    not improved by more than min_delta for `patience` epochs."""

    def __init__(self, monitor="val_loss", patience=2, min_delta=0.0, mode="min"):
        if mode not in ("min", "max"):
            raise ValueError("EarlyStopping: mode must be 'min' or 'max', got %r" % (mode,))
        self.monitor, self.patience, self.min_delta, self.mode = monitor, patience, min_delta, mode
        self.best, self.wait, self.stopped_epoch = None, 0, None

    def on_epoch_end(self, epoch, logs, net):
        if self.monitor not in logs:
            raise KeyError("EarlyStopping: %r is not among the epoch's logs (%s)"
                           % (self.monitor, ", ".join(logs)))
        v = logs[self.monitor]
        better = (self.best is None or (v < self.best - self.min_delta if self.mode == "min"
                                         else v > self.best + self.min_delta))
        if better:
            self.best, self.wait = v, 0
            return False
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            return True
        return False


class _Lambda(Callback):
    """A plain function f(epoch, logs) as an on_epoch_end callback."""

    def __init__(self, fn):
        self.fn = fn

    def on_epoch_end(self, epoch, logs, net):
        return bool(self.fn(epoch, logs))


class ProgressBar:
    """One epoch's progress: redrawn in place on a terminal (at most ~10
    times a second), plain lines at each quarter otherwise (logs, pipes,
    mpiexec)."""

    WIDTH = 30

    def __init__(self, epoch, epochs, stream=None, tty=None):
        self.stream = stream if stream is not None else sys.stdout
        # Open MPI gives every rank a pseudo-terminal even when the output
        # goes to a pipe: under it only an explicit tty=True draws the bar.
        self.tty = tty if tty is not None else bool(getattr(self.stream, "isatty", None)
                                                    and self.stream.isatty()
                                                    and "OMPI_COMM_WORLD_SIZE" not in os.environ)
        self.label = "epoch %d/%d" % (epoch, epochs)
        self.start = time.perf_counter()
        self.last_draw = 0.0
        self.quarter = 0

    def update(self, info):
        now = time.perf_counter()
        if self.tty:
            if info.step < info.steps and now - self.last_draw < 0.1:
                return
            self.last_draw = now
            done = int(self.WIDTH * info.step / info.steps)
            bar = "=" * done + (">" if done < self.WIDTH else "") + " " * (self.WIDTH - done - 1)
            self.stream.write("\r%s [%s] %d/%d loss %.4f %.1fs" % (
                self.label, bar[:self.WIDTH], info.step, info.steps, info.loss,
                now - self.start))
            self.stream.flush()
        else:
            q = 4 * info.step // info.steps
            if q > self.quarter and info.step < info.steps:
                self.quarter = q
                self.stream.write("%s %3d%% step %d/%d loss %.4f %.1fs\n" % (
                    self.label, 25 * q, info.step, info.steps, info.loss, now - self.start))
                self.stream.flush()

    def finish(self, logs):
        parts = ["%s %s" % (k, _fmt(v)) for k, v in logs.items()]
        self.stream.write(("\r" if self.tty else "") + "%s: %s%s\n" % (
            self.label, ", ".join(parts), " " * 10 if self.tty else ""))
        self.stream.flush()


def _fmt(v):
    if isinstance(v, float):
        return "%.4f" % v if abs(v) < 1e4 else "%.4g" % v
    return str(v)


def _classifies(net):
    return net._loss == Loss.SOFTMAX_CROSS_ENTROPY


def as_dataset(net, x, y, what):
    """(Dataset, made_here): x itself if it is a Dataset, else one built
    from the arrays x and y (labels or targets, as the loss wants)."""
    if isinstance(x, Dataset):
        if y is not None:
            raise TypeError("%s: pass y only with arrays, not with a Dataset" % what)
        return x, False
    if y is None:
        raise TypeError("%s: arrays need y (labels or targets)" % what)
    if net._loss is None:
        from .errors import InvalidStateError
        raise InvalidStateError("%s: set the loss and finalize the network first" % what)
    if _classifies(net):
        return Dataset(x, labels=y), True
    return Dataset(x, targets=y), True


def evaluate(net, x, y=None):
    data, made = as_dataset(net, x, y, "Net.evaluate")
    try:
        return net._evaluate_dataset(data)
    finally:
        if made:
            data.close()


def fit(net, x, y=None, epochs=1, batch=None, validation=None, callbacks=(), verbose=1,
        shuffle=True, seed=None, initial_epoch=0, stream=None):
    if net._max_batch is None:
        from .errors import InvalidStateError
        raise InvalidStateError("Net.fit: finalize the network first")
    if batch is None:
        batch = net._max_batch
    if epochs < 1 or batch is None or batch < 1:
        raise ValueError("Net.fit: epochs (%r) and batch (%r) must be >= 1" % (epochs, batch))
    callbacks = [c if isinstance(c, Callback) else _Lambda(c) for c in (callbacks or ())]
    if verbose not in (0, 1, 2):
        raise ValueError("Net.fit: verbose must be 0 (silent), 1 (progress bar) or 2 (one "
                         "line per epoch), got %r" % (verbose,))
    rank = net.comm.rank if net.comm is not None else 0
    show = verbose if rank == 0 else 0
    data, made = as_dataset(net, x, y, "Net.fit")
    val, val_made = None, False
    try:
        if validation is not None:
            if isinstance(validation, Dataset):
                val = validation
            elif isinstance(validation, (tuple, list)) and len(validation) == 2:
                val, val_made = as_dataset(net, validation[0], validation[1],
                                           "Net.fit validation")
            else:
                raise TypeError("Net.fit: validation must be (x, y) or a pcnn.Dataset")
        if seed is None:
            seed = int(net.get_option("seed"))
        history = {"epoch": [], "loss": []}
        # Either way one pcnn_net_train_epoch call, which splits each batch
        # over the ranks (or the sample groups of a spatial distribution).
        per_step = verbose == 1 or any(type(c).on_batch_end is not Callback.on_batch_end
                                    for c in callbacks)
        for c in callbacks:
            c.on_train_begin(net)
        for epoch in range(initial_epoch, initial_epoch + epochs):
            for c in callbacks:
                c.on_epoch_begin(epoch, net)
            if shuffle:
                data.shuffle(seed, epoch)
            bar = ProgressBar(epoch + 1, initial_epoch + epochs, stream) if show else None
            t0 = time.perf_counter()
            if per_step:
                def step(info):
                    if bar is not None and show == 1:
                        bar.update(info)
                    for c in callbacks:
                        c.on_batch_end(info, net)
                loss = net.train_epoch(data, batch, callback=step)
            else:
                loss = net.train_epoch(data, batch)
            logs = {"loss": loss}
            if val is not None:
                ev = net._evaluate_dataset(val)
                logs["val_loss"] = ev.loss
                if not math.isnan(ev.accuracy):
                    logs["val_accuracy"] = ev.accuracy
            logs["seconds"] = time.perf_counter() - t0
            history["epoch"].append(epoch)
            for k, v in logs.items():
                history.setdefault(k, []).append(v)
            if bar is not None:
                bar.finish(logs)
            stop = False
            for c in callbacks:
                stop = bool(c.on_epoch_end(epoch, logs, net)) or stop
            if stop:
                break
        for c in callbacks:
            c.on_train_end(history, net)
        return history
    finally:
        if made:
            data.close()
        if val_made:
            val.close()
