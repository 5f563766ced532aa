"""Keras habits: fit's names and meanings (batch_size, validation_data,
validation_split, initial_epoch), callbacks with Keras signatures and
self.model beside the earlier ones, ModelCheckpoint, ReduceLROnPlateau,
CSVLogger, the channels-last hint of fit and evaluate, and a script
written from the docs on 1 and 2 ranks."""
import csv
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import pcnn
from conftest import HERE, MPIEXEC
from test_fit import build, data


def test_keras_names_train_as_the_earlier_ones():
    x, y = data(64)
    xv, yv = data(32, seed=1)
    with build() as a, build() as b:
        ha = a.fit(x, y, batch_size=16, epochs=2, validation_data=(xv, yv), verbose=0)
        hb = b.fit(x, y, epochs=2, batch=16, validation=(xv, yv), verbose=0)
        assert ha["loss"] == hb["loss"] and ha["val_loss"] == hb["val_loss"]
        assert ha.history is ha and ha.epoch == [0, 1]
        np.testing.assert_array_equal(a.get_params(), b.get_params())
    with build() as net, pytest.raises(TypeError, match="same thing"):
        net.fit(x, y, batch=8, batch_size=16)


def test_initial_epoch_as_keras():
    x, y = data(32)
    out = io.StringIO()
    with build() as net:
        h = net.fit(x, y, epochs=12, initial_epoch=11, batch_size=16, verbose=2, stream=out)
    assert h["epoch"] == [11]
    assert out.getvalue().startswith("epoch 12/12: loss ")
    assert len(out.getvalue().splitlines()) == 1
    # resuming equals training straight through (shuffles are per epoch)
    with build() as a, build() as b:
        a.fit(x, y, epochs=3, batch_size=16, verbose=0)
        b.fit(x, y, epochs=1, batch_size=16, verbose=0)
        b.fit(x, y, epochs=3, initial_epoch=1, batch_size=16, verbose=0)
        np.testing.assert_array_equal(a.get_params(), b.get_params())
    with build() as net, pytest.raises(ValueError, match="initial_epoch"):
        net.fit(x, y, epochs=2, initial_epoch=2)


def test_validation_split_holds_out_the_last_samples():
    x, y = data(50)
    with build() as a, build() as b:
        ha = a.fit(x, y, epochs=2, batch_size=10, validation_split=0.2, verbose=0)
        hb = b.fit(x[:40], y[:40], epochs=2, batch_size=10, validation_data=(x[40:], y[40:]),
                   verbose=0)
        assert ha["loss"] == hb["loss"] and ha["val_accuracy"] == hb["val_accuracy"]
    with build() as net, pytest.raises(TypeError, match="not both"):
        net.fit(x, y, validation_split=0.2, validation_data=(x, y))
    with build() as net, pytest.raises(TypeError, match="needs arrays"):
        net.fit(pcnn.Dataset(x, labels=y), validation_split=0.2)


def test_keras_callbacks_see_the_model_and_keras_arguments():
    x, y = data(40)
    calls = []

    class Keras(pcnn.Callback):
        def on_train_begin(self, logs=None):
            calls.append(("begin", self.model is net, self.params["steps"]))

        def on_epoch_begin(self, epoch, logs=None):
            calls.append(("epoch", epoch))

        def on_batch_end(self, batch, logs=None):
            calls.append(("batch", batch, logs["size"], round(logs["loss"], 6) > 0))

        def on_epoch_end(self, epoch, logs=None):
            calls.append(("end", epoch, sorted(logs)))
            if epoch == 1:
                self.model.stop_training = True

        def on_train_end(self, logs=None):
            calls.append(("train_end", sorted(logs)))

    with build() as net:
        h = net.fit(x, y, epochs=5, batch_size=16, verbose=0, callbacks=[Keras()])
    assert h["epoch"] == [0, 1]
    keys = ["loss", "lr", "seconds"]
    assert calls == [("begin", True, 3), ("epoch", 0), ("batch", 0, 16, True),
                     ("batch", 1, 16, True), ("batch", 2, 8, True), ("end", 0, keys),
                     ("epoch", 1), ("batch", 0, 16, True), ("batch", 1, 16, True),
                     ("batch", 2, 8, True), ("end", 1, keys), ("train_end", keys)]


def test_earlier_callback_signatures_still_work():
    x, y = data(32)
    seen = []

    class Old(pcnn.Callback):
        def on_batch_end(self, info, net):
            seen.append(("step", info.step, net is the_net))

        def on_epoch_end(self, epoch, logs, net):
            seen.append(("epoch", epoch, net is the_net))

        def on_train_end(self, history, net):
            seen.append(("end", len(history["loss"])))

    with build() as the_net:
        the_net.fit(x, y, epochs=1, batch_size=16, verbose=0, callbacks=[Old()])
    assert seen == [("step", 1, True), ("step", 2, True), ("epoch", 0, True), ("end", 1)]


def test_model_checkpoint_saves_with_the_library(tmp_path):
    x, y = data(48)
    xv, yv = data(24, seed=1)
    every = pcnn.ModelCheckpoint(str(tmp_path / "e{epoch:02d}.pcnn"))
    best = pcnn.ModelCheckpoint(str(tmp_path / "best.pcnn"), monitor="val_loss",
                                save_best_only=True)
    with build() as net:
        h = net.fit(x, y, epochs=3, batch_size=16, validation_data=(xv, yv), verbose=0,
                    callbacks=[every, best])
        final = net.get_params()
    assert every.saved == [str(tmp_path / ("e%02d.pcnn" % e)) for e in (1, 2, 3)]
    assert len(best.saved) == 1 + sum(h["val_loss"][i] < min(h["val_loss"][:i])
                                      for i in (1, 2))
    with build() as other:
        other.load(every.saved[-1])
        np.testing.assert_array_equal(other.get_params(), final)
    assert not [p for p in os.listdir(tmp_path) if "tmp" in p]


def test_reduce_lr_on_plateau():
    x, y = data(32)
    cb = pcnn.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=1e9,
                                min_lr=0.02)
    with build() as net:
        h = net.fit(x, y, epochs=4, batch_size=16, verbose=0, callbacks=[cb])
        assert net.get_option("learning_rate") == pytest.approx(0.02)
    # the lr each epoch trained with: epoch 0 sets the best, epoch 1 does not
    # improve on it (patience 1): halved, then floored at min_lr
    assert h["lr"] == pytest.approx([0.05, 0.05, 0.025, 0.02])
    with pytest.raises(ValueError, match="factor"):
        pcnn.ReduceLROnPlateau(factor=1.5)


def test_csv_logger_rows_and_append(tmp_path):
    x, y = data(32)
    path = tmp_path / "log.csv"
    with build() as net:
        h = net.fit(x, y, epochs=2, batch_size=16, validation_data=(x, y), verbose=0,
                    callbacks=[pcnn.CSVLogger(str(path))])
        net.fit(x, y, epochs=3, initial_epoch=2, batch_size=16, validation_data=(x, y),
                verbose=0, callbacks=[pcnn.CSVLogger(str(path), append=True)])
    rows = list(csv.DictReader(open(path)))
    assert [r["epoch"] for r in rows] == ["0", "1", "2"]
    assert [float(r["loss"]) for r in rows[:2]] == h["loss"]
    assert set(rows[0]) == {"epoch", "loss", "val_loss", "val_accuracy", "lr", "seconds"}
    assert os.listdir(tmp_path) == ["log.csv"]  # no temporary left


def test_fit_and_evaluate_give_the_channels_last_hint():
    x, y = data(16)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    net = pcnn.Net(seed=1, threads=1)
    h = net.input(3, 6, 6)
    net.set_loss(net.dense(net.relu(net.conv2d(h, 2, 3, padding=1)), 3),
                 "softmax_cross_entropy")
    net.finalize(8)
    with net:
        x3 = np.ascontiguousarray(np.repeat(x, 3, axis=1).transpose(0, 2, 3, 1))
        for call in (lambda: net.fit(x3, y, verbose=0), lambda: net.evaluate(x3, y)):
            with pytest.raises(pcnn.ShapeError, match=r"channels-last.*transpose\(0, 3, 1, 2\)"):
                call()
    assert nhwc.shape == (16, 6, 6, 1)


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which(MPIEXEC) is None, reason="no mpiexec")
@pytest.mark.parametrize("ranks", [1, 2])
def test_keras_style_script_runs_unchanged(tmp_path, ranks):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [os.path.dirname(HERE),
                                                        os.environ.get("PYTHONPATH")])))
    script = os.path.join(HERE, "keras_style_script.py")
    cmd = [sys.executable, script, str(tmp_path)]
    if ranks > 1:
        cmd = [MPIEXEC, "-n", str(ranks)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert [l.split(":")[0] for l in lines] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"], r.stdout
    runs = [json.load(open(tmp_path / ("rank%d.json" % k))) for k in range(ranks)]
    for run in runs:
        assert run["batches"] == 3 * 4  # 64 samples in global batches of 16, 3 epochs
    h = runs[0]["history"]
    assert [s[2] for s in runs[0]["seen"]] == h["val_loss"]
    assert all(s[1] == runs[0]["seen"][0][1] > 0 for s in runs[0]["seen"])
    assert runs[0]["saved"] and all(os.path.exists(p) for p in runs[0]["saved"])
    assert len(list(open(tmp_path / "log.csv"))) == 4
    for run in runs[1:]:
        assert run["history"] == h and run["params"] == runs[0]["params"]
    assert h["val_loss"][-1] < h["val_loss"][0]
