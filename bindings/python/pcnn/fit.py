"""Net.fit: epochs of training with validation, callbacks and a progress
bar, the loop every Keras or PyTorch-Lightning user expects.

With a communicator every rank passes the same full arrays (or Dataset);
each epoch is pcnn_net_train_epoch, each rank training on its share of every
global batch (under a spatial distribution, each rank on its box of its
sample group's share), so losses and metrics are global and equal on all
ranks, and only rank 0 prints; the progress bar and on_batch_end follow the
steps through the library's step callback.

Callbacks follow Keras: on_epoch_end(self, epoch, logs=None) and the others
below, the network as self.model.  The signatures of earlier releases
(on_epoch_end(epoch, logs, net), on_batch_end(info, net), ...) keep
working: see Callback.
"""
import contextlib
import inspect
import math
import os
import sys
import tempfile
import time

from .dataset import Dataset
from .enums import Loss


class Callback:
    """Base of fit's callbacks, as Keras's: override what you need.  fit sets
    self.model (the Net) and self.params ({"epochs", "steps", "batch_size",
    "verbose"}) before on_train_begin.

        on_train_begin(self, logs=None)
        on_epoch_begin(self, epoch, logs=None)      epoch counts from 0
        on_batch_end(self, batch, logs=None)        also on_train_batch_end;
            batch counts from 0 within the epoch; logs {"loss" (the step's
            mean loss), "size" (the global batch), "step", "steps",
            "samples" (done this epoch), "total"}.  Runs inside the epoch's
            C call (Net.train_epoch): it may read the network but must not
            train, save, load, reconfigure or close it.
        on_epoch_end(self, epoch, logs=None)        logs: "loss", "val_loss",
            "val_accuracy" (cross entropy), "lr", "seconds".  Return True
            or set self.model.stop_training = True to stop after it.
        on_train_end(self, logs=None)               logs: the last epoch's

    Earlier releases passed the network as a last argument:
    on_train_begin(net), on_epoch_begin(epoch, net), on_batch_end(info,
    net) (info a StepInfo), on_epoch_end(epoch, logs, net),
    on_train_end(history, net).  A method written so is still called so:
    fit recognises it by a last parameter named `net`, or by the extra
    parameter (on_epoch_end with three, on_train_end with two)."""

    model = None
    params = None

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_batch_end(self, batch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)


# Positional parameters (after self) of the Keras signature and of the
# earlier one, which also passed the network.
_OLD_ARITY = {"on_train_begin": 1, "on_epoch_begin": 2, "on_batch_end": 2,
              "on_epoch_end": 3, "on_train_end": 2}
_KERAS_ARITY = {"on_train_begin": 1, "on_epoch_begin": 2, "on_batch_end": 2,
                "on_epoch_end": 2, "on_train_end": 1}


def _old_style(method, name):
    """Whether a bound callback method has the earlier signature."""
    try:
        params = [p for p in inspect.signature(method).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    if not params:
        return False
    if params[-1].name == "net" and len(params) == _OLD_ARITY[name]:
        return True
    required = [p for p in params if p.default is p.empty]
    return len(required) == _OLD_ARITY[name] > _KERAS_ARITY[name]


class _Caller:
    """Calls one callback's methods with the signature it was written for."""

    def __init__(self, cb, net, params):
        self.cb = cb
        if hasattr(cb, "set_model"):
            cb.set_model(net)
        else:
            cb.model = net
        if hasattr(cb, "set_params"):
            cb.set_params(params)
        self.net = net
        self.batch = params["batch_size"]
        self.old = {name: _old_style(getattr(cb, name), name)
                    for name in _OLD_ARITY if hasattr(cb, name)}
        # Keras 2 calls on_train_batch_end; on_batch_end is its older alias.
        mro_batch = [k for k in type(cb).__mro__ if "on_train_batch_end" in k.__dict__]
        self.train_batch = bool(mro_batch) and mro_batch[0] is not Callback
        self.per_step = self.train_batch or (
            type(cb).on_batch_end is not Callback.on_batch_end if isinstance(cb, Callback)
            else hasattr(cb, "on_batch_end"))

    def train_begin(self):
        if "on_train_begin" in self.old:
            self.cb.on_train_begin(self.net) if self.old["on_train_begin"] \
                else self.cb.on_train_begin({})

    def epoch_begin(self, epoch):
        if "on_epoch_begin" in self.old:
            self.cb.on_epoch_begin(epoch, self.net) if self.old["on_epoch_begin"] \
                else self.cb.on_epoch_begin(epoch, {})

    def batch_end(self, info):
        if self.train_batch:
            self.cb.on_train_batch_end(info.step - 1, _batch_logs(info, self.batch))
        elif "on_batch_end" in self.old:
            if self.old["on_batch_end"]:
                self.cb.on_batch_end(info, self.net)
            else:
                self.cb.on_batch_end(info.step - 1, _batch_logs(info, self.batch))

    def epoch_end(self, epoch, logs):
        if "on_epoch_end" not in self.old:
            return False
        if self.old["on_epoch_end"]:
            return bool(self.cb.on_epoch_end(epoch, logs, self.net))
        return bool(self.cb.on_epoch_end(epoch, logs))

    def train_end(self, history, logs):
        if "on_train_end" in self.old:
            self.cb.on_train_end(history, self.net) if self.old["on_train_end"] \
                else self.cb.on_train_end(logs)


def _batch_logs(info, batch):
    size = info.samples - (info.step - 1) * batch  # the last batch may be partial
    return {"loss": info.loss, "size": size, "step": info.step, "steps": info.steps,
            "samples": info.samples, "total": info.total}


class History(dict):
    """fit's result: {"epoch": [...], "loss": [...], "val_loss", ...}, one
    value per epoch; also as .history and .epoch, as Keras's History."""

    @property
    def history(self):
        return self

    @property
    def epoch(self):
        return self["epoch"]


def _improved(v, best, mode, min_delta):
    if best is None:
        return True
    return v < best - min_delta if mode == "min" else v > best + min_delta


def _monitored(logs, monitor, who):
    if monitor not in logs:
        raise KeyError("%s: %r is not among the epoch's logs (%s)"
                       % (who, monitor, ", ".join(logs)))
    return logs[monitor]


def _check_mode(mode, who):
    if mode not in ("min", "max"):
        raise ValueError("%s: mode must be 'min' or 'max', got %r" % (who, mode))


class EarlyStopping(Callback):
    """Stop when `monitor` (a key of the epoch's logs, e.g. "val_loss") has
    not improved by more than min_delta for `patience` epochs."""

    def __init__(self, monitor="val_loss", patience=2, min_delta=0.0, mode="min"):
        _check_mode(mode, "EarlyStopping")
        self.monitor, self.patience, self.min_delta, self.mode = monitor, patience, min_delta, mode
        self.best, self.wait, self.stopped_epoch = None, 0, None

    def on_epoch_end(self, epoch, logs=None):
        v = _monitored(logs, self.monitor, "EarlyStopping")
        if _improved(v, self.best, self.mode, self.min_delta):
            self.best, self.wait = v, 0
            return False
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            return True
        return False


class ModelCheckpoint(Callback):
    """Save the network after each epoch with Net.save (the library's
    checkpoint: atomic, verified on load, collective with a communicator,
    rank 0 writing).  filepath may name the epoch (counted from 1, as Keras
    prints it) and the logs: "ckpt-{epoch:02d}-{val_loss:.3f}.pcnn".
    save_best_only: only when `monitor` improved on the best so far."""

    def __init__(self, filepath, monitor="val_loss", save_best_only=False, mode="min",
                 verbose=0):
        _check_mode(mode, "ModelCheckpoint")
        self.filepath, self.monitor, self.save_best_only = os.fspath(filepath), monitor, \
            save_best_only
        self.mode, self.verbose, self.best = mode, verbose, None
        self.saved = []  # the paths written, in order

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.save_best_only:
            v = _monitored(logs, self.monitor, "ModelCheckpoint")
            if not _improved(v, self.best, self.mode, 0.0):
                return False
            self.best = v
        path = self.filepath.format(epoch=epoch + 1, **logs)
        self.model.save(path)
        self.saved.append(path)
        if self.verbose and _rank(self.model) == 0:
            print("epoch %d: saved %s" % (epoch + 1, path))
        return False


class ReduceLROnPlateau(Callback):
    """Multiply the learning rate (the learning_rate option) by `factor`
    when `monitor` has not improved by more than min_delta for `patience`
    epochs, then wait `cooldown` epochs; never below min_lr."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, min_delta=1e-4, cooldown=0,
                 min_lr=0.0, mode="min", verbose=0):
        _check_mode(mode, "ReduceLROnPlateau")
        if not 0.0 < factor < 1.0:
            raise ValueError("ReduceLROnPlateau: factor must be in (0, 1), got %r" % (factor,))
        self.monitor, self.factor, self.patience, self.min_delta = monitor, factor, patience, \
            min_delta
        self.cooldown, self.min_lr, self.mode, self.verbose = cooldown, min_lr, mode, verbose
        self.best, self.wait, self.cooling = None, 0, 0

    def on_epoch_end(self, epoch, logs=None):
        v = _monitored(logs, self.monitor, "ReduceLROnPlateau")
        if self.cooling > 0:
            self.cooling -= 1
            self.wait = 0
        if _improved(v, self.best, self.mode, self.min_delta):
            self.best, self.wait = v, 0
            return False
        self.wait += 1
        if self.wait >= self.patience and self.cooling == 0:
            lr = float(self.model.get_option("learning_rate"))
            new = max(lr * self.factor, self.min_lr)
            if new < lr:
                self.model.set_option("learning_rate", new)
                if self.verbose and _rank(self.model) == 0:
                    print("epoch %d: learning rate %g -> %g" % (epoch + 1, lr, new))
            self.cooling, self.wait = self.cooldown, 0
        return False


class CSVLogger(Callback):
    """One row per epoch of the logs ("epoch" counted from 0, as Keras)
    in a CSV file, written by rank 0 only and replaced atomically after
    every epoch (a reader never sees half a row).  append: keep the rows of
    an earlier run (resuming with initial_epoch)."""

    def __init__(self, filename, separator=",", append=False):
        self.filename, self.separator, self.append = os.fspath(filename), separator, append
        self.rows, self.keys = [], None

    def on_train_begin(self, logs=None):
        self.rows, self.keys = [], None
        if self.append and _rank(self.model) == 0 and os.path.exists(self.filename):
            with open(self.filename) as f:
                lines = f.read().splitlines()
            if lines:
                self.keys = lines[0].split(self.separator)[1:]
                self.rows = lines[1:]

    def on_epoch_end(self, epoch, logs=None):
        if _rank(self.model) != 0:
            return False
        logs = logs or {}
        if self.keys is None:
            self.keys = list(logs)
        self.rows.append(self.separator.join(
            [str(epoch)] + [repr(logs[k]) if isinstance(logs.get(k), float)
                            else str(logs.get(k, "")) for k in self.keys]))
        text = "\n".join([self.separator.join(["epoch"] + self.keys)] + self.rows) + "\n"
        write_atomically(self.filename, text.encode())
        return False


def write_atomically(path, data):
    """Write bytes to path through a temporary file in the same directory,
    flushed to disk and renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _rank(net):
    return net.comm.rank if net.comm is not None else 0


class _Lambda(Callback):
    """A plain function f(epoch, logs) as an on_epoch_end callback."""

    def __init__(self, fn):
        self.fn = fn

    def on_epoch_end(self, epoch, logs=None):
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


@contextlib.contextmanager
def sharding(data, sharded):
    """Data in the sharded mode asked for (None: as it is) for one call,
    restored after."""
    if data is None or sharded is None:
        yield
        return
    before = data.sharded
    data.sharded = bool(sharded)
    try:
        yield
    finally:
        data.sharded = before


def evaluate(net, x, y=None, sharded=None):
    data, made = as_dataset(net, x, y, "Net.evaluate")
    try:
        with sharding(data, sharded):
            return net._evaluate_dataset(data)
    finally:
        if made:
            data.close()


def split_validation(net, x, y, validation_split):
    """(x, y, validation): Keras's validation_split, the last fraction of
    the samples (taken before any shuffling) held out."""
    if not 0.0 < validation_split < 1.0:
        raise ValueError("Net.fit: validation_split must be in [0, 1), got %r"
                         % (validation_split,))
    if isinstance(x, Dataset):
        raise TypeError("Net.fit: validation_split needs arrays; with a Dataset pass "
                        "validation_data")
    n = len(x)
    held = int(n * validation_split)
    if held < 1 or held >= n:
        raise ValueError("Net.fit: validation_split %r of %d samples holds out %d: none would "
                         "be left on one side" % (validation_split, n, held))
    return x[:n - held], y[:n - held], (x[n - held:], y[n - held:])


def fit(net, x, y=None, batch_size=None, epochs=1, verbose=1, callbacks=None,
        validation_split=0.0, validation_data=None, shuffle=True, initial_epoch=0, seed=None,
        stream=None, batch=None, validation=None, sharded=None):
    if net._max_batch is None:
        from .errors import InvalidStateError
        raise InvalidStateError("Net.fit: finalize the network first")
    if batch is not None and batch_size is not None and batch != batch_size:
        raise TypeError("Net.fit: batch (%r) and batch_size (%r) name the same thing"
                        % (batch, batch_size))
    if validation is not None and validation_data is not None:
        raise TypeError("Net.fit: validation and validation_data name the same thing")
    batch = batch_size if batch_size is not None else batch
    validation = validation_data if validation_data is not None else validation
    if batch is None:
        batch = net._max_batch
    if epochs < 1 or batch < 1:
        raise ValueError("Net.fit: epochs (%r) and batch_size (%r) must be >= 1"
                         % (epochs, batch))
    if not 0 <= initial_epoch < epochs:
        raise ValueError("Net.fit: initial_epoch %r must be in [0, epochs = %r): epochs is the "
                         "index of the last epoch, as in Keras" % (initial_epoch, epochs))
    if verbose not in (0, 1, 2):
        raise ValueError("Net.fit: verbose must be 0 (silent), 1 (progress bar) or 2 (one "
                         "line per epoch), got %r" % (verbose,))
    if validation_split:
        if validation is not None:
            raise TypeError("Net.fit: pass validation_split or validation_data, not both")
        x, y, validation = split_validation(net, x, y, validation_split)
    rank = _rank(net)
    show = verbose if rank == 0 else 0
    data, made = as_dataset(net, x, y, "Net.fit")
    val, val_made = None, False
    try:
        if validation is not None:
            if isinstance(validation, Dataset):
                val = validation
            elif isinstance(validation, (tuple, list)) and len(validation) == 2:
                val, val_made = as_dataset(net, validation[0], validation[1],
                                           "Net.fit validation_data")
            else:
                raise TypeError("Net.fit: validation_data must be (x, y) or a pcnn.Dataset")
        if seed is None:
            seed = int(net.get_option("seed"))
        params = {"epochs": epochs, "steps": -(-len(data) // batch), "batch_size": batch,
                  "verbose": verbose}
        callers = [_Caller(c if not callable(c) or hasattr(c, "on_epoch_end") else _Lambda(c),
                           net, params) for c in (callbacks or ())]
        history = History(epoch=[], loss=[])
        # Either way one pcnn_net_train_epoch call, which splits each batch
        # over the ranks (or the sample groups of a spatial distribution).
        per_step = verbose == 1 or any(c.per_step for c in callers)
        net.stop_training = False
        for c in callers:
            c.train_begin()
        logs = {}
        modes = contextlib.ExitStack()
        modes.enter_context(sharding(data, sharded))
        modes.enter_context(sharding(val, sharded))
        with modes:
            return _epochs(net, data, val, batch, epochs, initial_epoch, shuffle, seed, show,
                           stream, per_step, callers, history, logs)
    finally:
        if made:
            data.close()
        if val_made:
            val.close()


def _epochs(net, data, val, batch, epochs, initial_epoch, shuffle, seed, show, stream,
            per_step, callers, history, logs):
    """fit's loop over the epochs."""
    for epoch in range(initial_epoch, epochs):
        for c in callers:
            c.epoch_begin(epoch)
        if shuffle:
            data.shuffle(seed, epoch)
        bar = ProgressBar(epoch + 1, epochs, stream) if show else None
        t0 = time.perf_counter()
        lr = float(net.get_option("learning_rate"))
        if per_step:
            def step(info):
                if bar is not None and show == 1:
                    bar.update(info)
                for c in callers:
                    c.batch_end(info)
            loss = net.train_epoch(data, batch, callback=step)
        else:
            loss = net.train_epoch(data, batch)
        logs = {"loss": loss}
        if val is not None:
            ev = net._evaluate_dataset(val)
            logs["val_loss"] = ev.loss
            if not math.isnan(ev.accuracy):
                logs["val_accuracy"] = ev.accuracy
        logs["lr"] = lr
        logs["seconds"] = time.perf_counter() - t0
        history["epoch"].append(epoch)
        for k, v in logs.items():
            history.setdefault(k, []).append(v)
        if bar is not None:
            bar.finish(logs)
        stop = False
        for c in callers:
            stop = c.epoch_end(epoch, logs) or stop
        if stop or getattr(net, "stop_training", False):
            break
    for c in callers:
        c.train_end(history, logs)
    return history
