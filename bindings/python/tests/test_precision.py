"""bf16 products from Python: Option.PRECISION and Layer.set_precision
(None follows the network), the summary naming the precision per layer,
gradients within bf16 rounding of fp32's, and the setter's refusals."""
import numpy as np
import pytest

import pcnn


def _net(precision, first=None):
    net = pcnn.Net()
    x = net.input(2, 6, 6)
    c = net.conv2d(x, 4, 3, padding=1)
    if first is not None:
        c.set_precision(first)
    y = net.dense(net.relu(c), 3)
    net.set_loss(y, pcnn.Loss.SOFTMAX_CROSS_ENTROPY)
    net.set_option(pcnn.Option.SEED, 3)
    net.set_option(pcnn.Option.PRECISION, precision)
    net.finalize(4)
    return net


def test_bf16_gradients_track_fp32_and_the_summary_says_so():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 2, 6, 6)).astype(np.float32)
    labels = np.array([0, 1, 2, 1], dtype=np.int32)
    f, h = _net(pcnn.Precision.FP32), _net(pcnn.Precision.BF16)
    f.compute_gradients(x, labels)
    h.compute_gradients(x, labels)
    gf, gh = f.get_grads(), h.get_grads()
    rel = np.linalg.norm(gh - gf) / np.linalg.norm(gf)
    assert 2.0 ** -13 < rel < 2.0 ** -6
    assert "bf16 (" in h.summary()
    assert "bf16 (" not in f.summary()


def test_a_layer_kept_fp32_in_a_bf16_network():
    s = _net(pcnn.Precision.BF16, first=pcnn.Precision.FP32).summary()
    assert "fp32" in s and "bf16 (" in s  # the conv fp32, the dense bf16


def test_set_precision_refusals():
    net = pcnn.Net()
    x = net.input(1, 4, 4)
    c = net.conv2d(x, 2, 3)
    r = net.relu(c)
    with pytest.raises(pcnn.InvalidArgumentError):
        r.set_precision(pcnn.Precision.BF16)
    with pytest.raises((pcnn.InvalidArgumentError, ValueError)):
        c.set_precision(5)
    c.set_precision(None)
    c.set_precision("bf16")
