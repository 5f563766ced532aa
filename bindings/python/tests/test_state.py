"""Net.state_dict / load_state_dict: names, shapes, values, running
statistics, and the errors of a strict load."""
import numpy as np
import pytest

import pcnn


def build(seed=3):
    net = pcnn.Net(seed=seed, learning_rate=0.05, threads=1)
    x = net.input(2, 6, 6)
    c = net.conv2d(x, 4, 3, padding=1)
    b = net.batchnorm(c)
    r = net.relu(b)
    d = net.dense(net.flatten(r), 3, bias=False)
    net.set_loss(d, "softmax_cross_entropy")
    net.finalize(8)
    return net


def batch(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(8, 2, 6, 6)).astype(np.float32),
            rng.integers(0, 3, size=8, dtype=np.int32))


def test_names_shapes_and_values():
    with build() as net:
        sd = net.state_dict()
        assert list(sd) == ["1.conv2d.weight", "1.conv2d.bias", "2.batchnorm.weight",
                            "2.batchnorm.bias", "2.batchnorm.running_mean",
                            "2.batchnorm.running_var", "5.dense.weight"]
        assert sd["1.conv2d.weight"].shape == (4, 2, 3, 3)
        assert sd["5.dense.weight"].shape == (3, 4 * 6 * 6)
        # the trainable parts, in order, are get_params; fresh statistics 0 and 1
        flat = np.concatenate([v.ravel() for k, v in sd.items() if "running" not in k])
        np.testing.assert_array_equal(flat, net.get_params())
        np.testing.assert_array_equal(sd["2.batchnorm.running_mean"], np.zeros(4, np.float32))
        np.testing.assert_array_equal(sd["2.batchnorm.running_var"], np.ones(4, np.float32))
        np.testing.assert_array_equal(sd["2.batchnorm.weight"], np.ones(4, np.float32))
        assert list(net.state_dict(buffers=False)) == [k for k in sd if "running" not in k]


def test_running_statistics_follow_training_and_load():
    x, y = batch()
    with build() as net:
        net.train_step(x, labels=y)
        # PyTorch's update from mean 0, var 1 with momentum 0.1: 0.1 * the
        # batch's statistics of the conv output (unbiased variance)
        sd = net.state_dict()
        assert np.all(sd["2.batchnorm.running_mean"] != 0)
        trained = net.predict(x)
        step = net.step
    with build() as other:
        assert not np.allclose(other.predict(x), trained)
        other.load_state_dict(sd)
        np.testing.assert_array_equal(other.predict(x), trained)
        assert other.step == 0  # only named arrays move, not the step counter
        assert step == 1
        for k, v in other.state_dict().items():
            np.testing.assert_array_equal(v, sd[k])


def test_only_running_statistics_change_inference():
    x, _ = batch(1)
    with build() as net:
        before = net.predict(x)
        net.load_state_dict({"2.batchnorm.running_mean": np.full(4, 0.5),
                             "2.batchnorm.running_var": np.full(4, 4.0)}, strict=False)
        after = net.predict(x)
        assert not np.allclose(before, after)
        sd = net.state_dict()
        np.testing.assert_array_equal(sd["2.batchnorm.running_var"], np.full(4, 4, np.float32))


def test_strict_errors_and_nothing_changes():
    with build() as net:
        sd = net.state_dict()
        params = net.get_params()
        bad = dict(sd, **{"9.conv2d.weight": np.zeros(3)})
        with pytest.raises(pcnn.StateKeyError, match=r"unknown keys '9.conv2d.weight'"):
            net.load_state_dict(bad)
        with pytest.raises(KeyError, match=r"missing keys '1.conv2d.bias'"):
            net.load_state_dict({k: v for k, v in sd.items() if k != "1.conv2d.bias"})
        wrong = dict(sd, **{"5.dense.weight": np.zeros((3, 10))})
        with pytest.raises(pcnn.ShapeError, match=r"'5.dense.weight' has shape \(3, 10\), the "
                                                  r"network's is \(3, 144\)"):
            net.load_state_dict(wrong)
        nan = dict(sd, **{"1.conv2d.bias": np.array([0, np.nan, 0, 0])})
        with pytest.raises(ValueError, match="non-finite"):
            net.load_state_dict(nan)
        neg = dict(sd, **{"2.batchnorm.running_var": -np.ones(4)})
        with pytest.raises(ValueError, match="negative variances"):
            net.load_state_dict(neg)
        np.testing.assert_array_equal(net.get_params(), params)
        missing, unexpected = net.load_state_dict(
            {"9.x.y": 1, "1.conv2d.bias": np.ones(4)}, strict=False)
        assert unexpected == ["9.x.y"] and "1.conv2d.weight" in missing
        np.testing.assert_array_equal(net.state_dict()["1.conv2d.bias"], np.ones(4))


def test_before_finalize():
    with pcnn.Net() as net:
        net.dense(net.input(1, 2, 2), 2)
        with pytest.raises(pcnn.InvalidStateError, match="finalize"):
            net.state_dict()
