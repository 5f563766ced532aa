"""Results through the binding equal the C API's, bitwise, on the same
network, seed and data; and the Python conveniences (datasets, epochs with
a callback, parameters in and out) agree with the C calls they wrap."""
import os
import subprocess

import numpy as np
import pytest

import pcnn
import models

FASHION = "/usr/share/datasets/fashion-mnist"


def run_c(c_reference, tmp_path, model, x, labels, launcher=()):
    steps, n = labels.shape
    xf, lf, out = tmp_path / "x.bin", tmp_path / "labels.bin", tmp_path / "c_out.bin"
    x.tofile(xf)
    labels.tofile(lf)
    args = list(launcher) + [c_reference, "train", model, str(steps), str(n), str(xf),
                             str(lf), str(out)] + (["world"] if launcher else [])
    subprocess.run(args, check=True, timeout=240)
    return models.read_sections(out)


@pytest.mark.parametrize("model,steps,n", [("mix", 4, 8), ("lenet", 3, 16), ("tiny", 5, 3)])
def test_same_parameters_losses_predictions_and_gradients_as_c(c_reference, tmp_path, model,
                                                               steps, n):
    x, labels = models.make_data(model, steps, n, seed=11)
    c = run_c(c_reference, tmp_path, model, x, labels)
    py = models.run_python(model, x, labels)
    names = ["parameters", "losses", "predictions", "gradient loss", "gradients"]
    for name, a, b in zip(names, c, py):
        assert a.shape == b.shape, name
        assert np.array_equal(a, b), "%s differ: max |diff| %g" % (name, np.abs(a - b).max())
    # The run really trained: the loss moved and the parameters are finite.
    assert c[1][0] != c[1][-1] and np.isfinite(c[0]).all()


def test_float64_and_int64_inputs_are_converted_to_the_same_result(tmp_path):
    x, labels = models.make_data("mix", 2, 8, seed=5)
    ref = models.run_python("mix", x, labels)
    conv = models.run_python("mix", x.astype(np.float64), labels.astype(np.int64))
    for a, b in zip(ref, conv):
        assert np.array_equal(a, b)


def test_non_contiguous_input_is_copied_not_misread():
    x, labels = models.make_data("tiny", 1, 6, seed=2)
    wide = np.zeros((6, 8), np.float32)
    wide[:, ::2] = x[0].reshape(6, 4)
    view = wide[:, ::2]  # every other column: not C-contiguous
    assert not view.flags.c_contiguous
    with models.build("tiny", 6) as a, models.build("tiny", 6) as b:
        assert a.train_step(x[0], labels[0]) == b.train_step(view, labels[0])
        assert np.array_equal(a.get_params(), b.get_params())


def classification_dataset(n=37, seed=3):
    x, labels = models.make_data("mix", 1, n, seed=seed)
    return x[0], labels[0]


def test_train_epoch_with_a_callback_equals_the_c_epoch():
    x, labels = classification_dataset()
    seen = []
    with pcnn.Dataset(x, labels) as data, models.build("mix", 8) as a, \
            models.build("mix", 8) as b:
        data.shuffle(seed=4, epoch=1)
        loss_c = a.train_epoch(data, 8)
        loss_py = b.train_epoch(data, 8, callback=seen.append)
        assert loss_c == loss_py
        assert np.array_equal(a.get_params(), b.get_params())
        assert a.step == b.step == 5
    assert [s.step for s in seen] == [1, 2, 3, 4, 5]
    assert [s.samples for s in seen] == [8, 16, 24, 32, 37]
    assert all(s.steps == 5 and s.total == 37 and np.isfinite(s.loss) for s in seen)
    # sample-weighted mean of the step losses, as the C epoch defines it
    assert loss_py == pytest.approx(sum(s.loss * (s.samples - p) for s, p in
                                        zip(seen, [0, 8, 16, 24, 32])) / 37, rel=1e-12)


def test_dataset_round_trip_and_shuffle():
    x, labels = classification_dataset(n=10)
    with pcnn.Dataset(x, labels) as data:
        assert len(data) == 10 and data.sample_shape == (3, 12, 10) and data.has_labels
        bx, by = data.batch(0, 10)
        assert np.array_equal(bx, x) and np.array_equal(by, labels)
        data.shuffle(seed=1, epoch=2)
        sx, sy = data.batch(0, 10)
        order = [int(np.flatnonzero((x == s).all(axis=(1, 2, 3)))[0]) for s in sx]
        assert sorted(order) == list(range(10)) and order != list(range(10))
        assert np.array_equal(sy, labels[order])
        # the order depends on (seed, epoch) only
        data.shuffle(seed=1, epoch=3)
        data.shuffle(seed=1, epoch=2)
        assert np.array_equal(data.batch(0, 10)[0], sx)
        # filling caller-provided arrays in place
        ox, oy = np.empty((3, 3, 12, 10), np.float32), np.empty(3, np.int32)
        rx, ry = data.batch(2, 3, ox, oy)
        assert rx is ox and ry is oy and np.array_equal(ox, sx[2:5])


def test_regression_dataset_and_targets():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 2, 3, 3)).astype(np.float32)
    t = rng.normal(size=(12, 2, 3, 3)).astype(np.float32)
    with pcnn.Net(seed=2) as net:
        y = net.conv2d(net.input(2, 3, 3), 2, 3, padding=1)
        net.set_loss(y, "mse")
        net.finalize(4)
        with pcnn.Dataset(x, targets=t.reshape(12, -1)) as data:
            assert not data.has_labels and data.target_count == 18
            before = net.evaluate(data)
            assert np.isnan(before.accuracy)
            for _ in range(20):
                net.train_epoch(data, 4)
            after = net.evaluate(data)
            assert after.loss < before.loss
            # evaluate's loss is the MSE of predict's output
            pred = net.predict(x)
            assert pred.shape == (12, 2, 3, 3)
            assert after.loss == pytest.approx(float(np.mean((pred - t) ** 2)), rel=1e-5)
            seen = []
            net.train_epoch(data, 4, callback=seen.append)
            assert [s.samples for s in seen] == [4, 8, 12]


def test_evaluate_matches_predict():
    x, labels = classification_dataset(n=21)
    with pcnn.Dataset(x, labels) as data, models.build("mix", 8) as net:
        net.train_epoch(data, 8)
        ev = net.evaluate(data)
        logits = net.predict(x).astype(np.float64)
        assert logits.shape == (21, 5)
        logp = logits - logits.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        assert ev.loss == pytest.approx(-logp[np.arange(21), labels].mean(), rel=1e-5)
        assert ev.accuracy == pytest.approx((logits.argmax(1) == labels).mean())


def test_parameters_in_and_out():
    with models.build("mix", 8) as net:
        x, labels = models.make_data("mix", 1, 4)
        loss = net.compute_gradients(x[0], labels[0])
        g = net.input_grad()
        assert g.shape == (4, 3, 12, 10) and np.abs(g).sum() > 0
        assert np.abs(net.get_grads()).sum() > 0
        assert net.step == 0 and net.compute_loss(x[0], labels[0]) == loss
        p = net.get_params()
        assert p.dtype == np.float32 and p.shape == (net.num_params,)
        per_layer = [l.get_params() for l in net.layers]
        assert sum(l.num_params for l in net.layers) == net.num_params
        assert np.array_equal(np.concatenate(per_layer), p)
        dense = net.layers[-1]
        assert dense.kind == "dense" and dense.output_shape == (5, 1, 1)
        assert dense.num_params == (4 * 6 * 5) * 5 + 5  # (C, H, W) = (4, 6, 5) in
        new = np.arange(net.num_params, dtype=np.float32) / net.num_params
        net.set_params(new)
        assert np.array_equal(net.get_params(), new)
        dense.set_params(np.zeros(dense.num_params))
        assert not net.get_params()[-dense.num_params:].any()
        out = np.empty(net.num_params, np.float32)
        assert net.get_params(out) is out


def test_options_and_step_counter():
    with models.build("tiny", 4) as net:
        assert net.get_option("learning_rate") == 0.01
        assert net.get_option(pcnn.Option.SEED) == 1
        assert isinstance(net.get_option("threads"), int)
        x, labels = models.make_data("tiny", 3, 4)
        for s in range(3):
            net.train_step(x[s], labels[s])
        assert net.step == 3
        net.configure(learning_rate=0.5, warmup_steps=10)
        assert net.get_option("effective_learning_rate") == pytest.approx(0.5 * 4 / 10)
        net.step = 100
        assert net.step == 100


def test_timing_breakdown_is_reachable():
    x, labels = models.make_data("lenet", 3, 16)
    with models.build("lenet", 16) as net:
        for s in range(3):
            net.train_step(x[s], labels[s])
        t = net.timing()
        assert set(t) == {"forward", "backward", "update", "comm", "exposed", "step", "halo",
                          "halo_exposed", "shuffle"}
        assert t["forward"] > 0 and t["backward"] > 0 and t["step"] >= t["forward"]
        assert t["comm"] == 0 and np.isnan(net.overlap_ratio())
        assert t["halo"] == 0 and t["shuffle"] == 0  # no spatial split
        conv = net.layers[1]
        assert net.time("forward", conv) > 0 and net.time("forward", conv.index) > 0
        assert "step" not in net.timing(conv)
        report = net.timing_report()
        assert "timing per step over 3 steps" in report and "conv2d" in report
        net.reset_timing()
        assert net.time("step") == 0
        assert "conv2d" in net.summary() and "parameters: 61706" in net.summary()


def test_trace_file(tmp_path):
    with pcnn.Net(seed=0, trace_events=64) as net:
        net.set_loss(net.dense(net.input(4, 1, 1), 3))
        net.finalize(2)
        net.train_step(np.ones((2, 4), np.float32), [0, 2])
        path = tmp_path / "trace.json"
        net.write_trace(path)
        assert '"traceEvents"' in path.read_text()


@pytest.mark.skipif(not os.path.exists(FASHION + "/t10k-labels-idx1-ubyte.gz"),
                    reason="Fashion-MNIST not installed")
def test_load_idx_fashion_mnist():
    with pcnn.Dataset.load_idx(FASHION + "/t10k-images-idx3-ubyte.gz",
                               FASHION + "/t10k-labels-idx1-ubyte.gz", 0.2860, 0.3530) as d:
        assert len(d) == 10000 and d.sample_shape == (1, 28, 28) and d.has_labels
        x, y = d.batch(0, 100)
        assert y.min() >= 0 and y.max() == 9
        assert x.min() == pytest.approx(-0.2860 / 0.3530, rel=1e-5)
