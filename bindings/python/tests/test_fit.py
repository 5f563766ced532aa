"""Net.fit, Net.evaluate on arrays, the progress output, callbacks and the
iterable Dataset."""
import io

import numpy as np
import pytest

import pcnn


def build(loss="softmax_cross_entropy", seed=4):
    net = pcnn.Net(seed=seed, learning_rate=0.05, optimizer="momentum", threads=1)
    x = net.input(1, 6, 6)
    x = net.relu(net.conv2d(x, 3, 3, padding=1))
    net.set_loss(net.dense(x, 3 if loss == "softmax_cross_entropy" else 2), loss)
    net.finalize(16)
    return net


def data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1, 6, 6)).astype(np.float32)
    y = (x[:, 0, :3].sum(axis=(1, 2)) > 0).astype(np.int32) + (x[:, 0, 0, 0] > 1)
    return x, y.astype(np.int32)


class Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_fit_equals_the_manual_loop():
    x, y = data()
    xv, yv = data(40, seed=1)
    with build() as a, build() as b:
        h = a.fit(x, y, epochs=3, batch=16, validation=(xv, yv), verbose=0)
        assert h["epoch"] == [0, 1, 2]
        assert set(h) == {"epoch", "loss", "val_loss", "val_accuracy", "lr", "seconds"}
        train, val = pcnn.Dataset(x, labels=y), pcnn.Dataset(xv, labels=yv)
        for epoch in range(3):
            train.shuffle(4, epoch)  # fit's default seed: the network's
            assert b.train_epoch(train, 16) == h["loss"][epoch]
            ev = b.evaluate(val)
            assert (ev.loss, ev.accuracy) == (h["val_loss"][epoch], h["val_accuracy"][epoch])
        np.testing.assert_array_equal(a.get_params(), b.get_params())
        assert h["val_accuracy"][-1] > 0.6  # it learns


def test_evaluate_arrays_equals_dataset():
    x, y = data(50)
    with build() as net:
        assert net.evaluate(x, y) == net.evaluate(pcnn.Dataset(x, labels=y))
        with pytest.raises(TypeError, match="need y"):
            net.evaluate(x)
        with pytest.raises(TypeError, match="only with arrays"):
            net.evaluate(pcnn.Dataset(x, labels=y), y)


def test_regression_fit_and_evaluate():
    x, _ = data(64)
    t = np.stack([x.mean(axis=(1, 2, 3)), x.std(axis=(1, 2, 3))], axis=1).astype(np.float32)
    with build("mse") as net:
        h = net.fit(x, t, epochs=4, batch=16, validation=(x, t), verbose=0)
        assert "val_accuracy" not in h
        ev = net.evaluate(x, t)
        assert np.isnan(ev.accuracy) and ev.loss == pytest.approx(h["val_loss"][-1], rel=1e-12)
        assert h["loss"][-1] < h["loss"][0]


def test_progress_plain_lines_when_not_a_tty():
    x, y = data(64)
    out = Stream(False)
    with build() as net:
        net.fit(x, y, epochs=2, batch=8, verbose=1, stream=out)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0].startswith("epoch 1/2  25% step 2/8 loss ")
    assert [l.split()[2] for l in lines[:3]] == ["25%", "50%", "75%"]
    assert lines[3].startswith("epoch 1/2: loss ") and "seconds" in lines[3]
    assert len(lines) == 8


def test_progress_bar_redrawn_on_a_tty():
    x, y = data(64)
    out = Stream(True)
    with build() as net:
        net.fit(x, y, epochs=1, batch=8, verbose=1, stream=out)
    text = out.getvalue()
    assert text.count("\n") == 1 and text.startswith("\repoch 1/1 [")
    assert "8/8 loss" in text and "] " in text


def test_verbose_levels():
    x, y = data(32)
    for verbose, lines in ((0, 0), (2, 2)):
        out = Stream(False)
        with build() as net:
            net.fit(x, y, epochs=2, batch=8, verbose=verbose, stream=out)
        assert len(out.getvalue().splitlines()) == lines
    with build() as net, pytest.raises(ValueError, match="verbose"):
        net.fit(x, y, verbose=3)


def test_callbacks_and_early_stopping():
    x, y = data(48)
    calls = []

    class Record(pcnn.Callback):
        def on_train_begin(self, net):
            calls.append("begin")

        def on_epoch_begin(self, epoch, net):
            calls.append(("epoch", epoch))

        def on_batch_end(self, info, net):
            calls.append(("step", info.step, info.steps, info.samples, info.total))

        def on_train_end(self, history, net):
            calls.append(("end", len(history["loss"])))

    with build() as net:
        h = net.fit(x, y, epochs=5, batch=16, verbose=0,
                    callbacks=[Record(), lambda epoch, logs: epoch == 1])
    assert h["epoch"] == [0, 1]
    assert calls[:5] == ["begin", ("epoch", 0), ("step", 1, 3, 16, 48), ("step", 2, 3, 32, 48),
                         ("step", 3, 3, 48, 48)]
    assert calls[-1] == ("end", 2)

    stop = pcnn.EarlyStopping(monitor="loss", patience=1, min_delta=1e9)
    with build() as net:
        h = net.fit(x, y, epochs=5, batch=16, verbose=0, callbacks=[stop])
    assert len(h["loss"]) == 2 and stop.stopped_epoch == 1
    with build() as net, pytest.raises(KeyError, match="'val_loss' is not among"):
        net.fit(x, y, epochs=1, verbose=0, callbacks=[pcnn.EarlyStopping()])


def test_dataset_iteration():
    x, y = data(10)
    d = pcnn.Dataset(x, labels=y)
    b = d.batches(4)
    assert len(b) == 3 and len(d.batches(4, drop_last=True)) == 2
    got = list(b)
    assert [bx.shape for bx, _ in got] == [(4, 1, 6, 6), (4, 1, 6, 6), (2, 1, 6, 6)]
    np.testing.assert_array_equal(np.concatenate([bx for bx, _ in got]), x)
    np.testing.assert_array_equal(np.concatenate([by for _, by in got]), y)
    assert len(list(b)) == 3  # iterable again
    samples = list(d)
    assert len(samples) == 10 and samples[3][1] == y[3]
    np.testing.assert_array_equal(samples[9][0], x[9])
    np.testing.assert_array_equal(d[-1][0], x[-1])
    with pytest.raises(IndexError):
        d[10]
    d.shuffle(1, 0)
    xs, ys = next(iter(d.batches(10)))
    order = [int(np.flatnonzero((x == xs[i]).all(axis=(1, 2, 3)))[0]) for i in range(10)]
    assert sorted(order) == list(range(10)) and order != list(range(10))
    np.testing.assert_array_equal(ys, y[order])
    t = pcnn.Dataset(x, targets=np.arange(20, dtype=np.float32).reshape(10, 2))
    tx, ty = t[2]
    assert ty.shape == (2,) and list(ty) == [4, 5]
    np.testing.assert_array_equal(tx, x[2])
