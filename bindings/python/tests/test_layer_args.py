"""Layer adders check their arguments before ctypes: a wrong type raises
TypeError naming the parameter (not ctypes' "argument 6"), padding="same"
and tuple kernels / strides work where libpcnn's square windows can say
them (and the same outputs as PyTorch), and are refused naming the
parameter where they cannot.  Every layer adder has a docstring."""
import inspect

import numpy as np
import pytest

import pcnn


def _net(shape=(2, 7, 9)):
    net = pcnn.Net()
    x = net.input3d(*shape) if len(shape) == 4 else net.input(*shape)
    return net, x


@pytest.mark.parametrize("kernel", [1, 3, 5, (3, 3), [5, 5]])
def test_same_padding_keeps_the_size(kernel):
    net, x = _net()
    y = net.conv2d(x, 4, kernel, padding="same")
    assert y.output_shape == (4, 7, 9)


def test_same_padding_3d_and_valid():
    net, x = _net((1, 5, 6, 7))
    assert net.conv3d(x, 2, (3, 3, 3), padding="same").output_shape == (2, 5, 6, 7)
    net, x = _net()
    assert net.conv2d(x, 2, 3, padding="valid").output_shape == (2, 5, 7)


def test_tuple_stride_and_padding_equal_the_int():
    net, x = _net()
    a = net.conv2d(x, 3, (3, 3), stride=(2, 2), padding=(1, 1))
    b = net.conv2d(x, 3, 3, stride=2, padding=1)
    assert a.output_shape == b.output_shape == (3, 4, 5)
    assert net.maxpool2d(x, (2, 2)).output_shape == (2, 3, 4)


@pytest.mark.parametrize("kwargs,words", [
    (dict(kernel=(3, 5)), ["kernel", "(3, 5)", "square"]),
    (dict(kernel=3, stride=(1, 2)), ["stride", "(1, 2)"]),
    (dict(kernel=3, padding=(0, 1)), ["padding", "(0, 1)"]),
    (dict(kernel=(3, 3, 3)), ["kernel", "3 values", "expected 2"]),
    (dict(kernel=4, padding="same"), ["even kernel 4", "padding=1"]),
    (dict(kernel=3, stride=2, padding="same"), ["stride 1", "stride 2"]),
    (dict(kernel=3, padding="full"), ["'full'", "same"]),
])
def test_unsupported_windows_name_the_parameter(kwargs, words):
    net, x = _net()
    kernel = kwargs.pop("kernel")
    with pytest.raises(pcnn.InvalidArgumentError) as e:
        net.conv2d(x, 4, kernel, **kwargs)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert len(net.layers) == 1  # nothing added


@pytest.mark.parametrize("call,name", [
    (lambda n, x: n.conv2d(x, 4, 3.0), "kernel"),
    (lambda n, x: n.conv2d(x, "4", 3), "out_channels"),
    (lambda n, x: n.conv2d(x, 4, 3, stride=None), "stride"),
    (lambda n, x: n.conv2d(x, 4, 3, padding=1.5), "padding"),
    (lambda n, x: n.conv2d(x, 4, (3, "3")), "kernel"),
    (lambda n, x: n.maxpool2d(x, 2, stride="2"), "stride"),
    (lambda n, x: n.avgpool2d(x, True), "kernel"),
    (lambda n, x: n.dense(x, 10.0), "out_features"),
    (lambda n, x: n.leaky_relu(x, "0.1"), "slope"),
    (lambda n, x: n.batchnorm(x, eps=None), "eps"),
    (lambda n, x: n.batchnorm(x, momentum="x"), "momentum"),
    (lambda n, x: n.dropout(x, [0.5]), "p"),
    (lambda n, x: n.add(x, x, scale="2"), "scale"),
    (lambda n, x: n.pixel_shuffle(x, 2.0), "upscale"),
    (lambda n, x: n.upsample2d(x, 2.5), "factor"),
    (lambda n, x: n.conv_transpose2d(x, 3, 2, stride=1.0), "stride"),
])
def test_wrong_types_name_the_parameter(call, name):
    net, x = _net()
    with pytest.raises(TypeError) as e:
        call(net, x)
    assert name in str(e.value), str(e.value)
    assert "argument" not in str(e.value).split(":")[0]  # ours, not ctypes'
    assert len(net.layers) == 1


def test_input_arguments_checked():
    net = pcnn.Net()
    with pytest.raises(TypeError, match="height"):
        net.input(1, 4.0, 4)
    with pytest.raises(pcnn.InvalidArgumentError, match="channels is 0"):
        net.input(0, 4, 4)
    with pytest.raises(TypeError, match="depth"):
        net.input3d(1, "2", 4, 4)


def test_numpy_integers_and_floats_accepted():
    net, x = _net()
    y = net.conv2d(x, np.int64(3), np.int32(3), padding="same")
    y = net.leaky_relu(y, np.float32(0.2))
    assert y.output_shape == (3, 7, 9)


def test_same_padding_equals_torch():
    torch = pytest.importorskip("torch")
    net, x = _net((2, 6, 5))
    y = net.conv2d(x, 3, (5, 5), padding="same")
    net.set_loss(y, pcnn.Loss.MSE)
    net.finalize(2)
    rng = np.random.default_rng(1)
    p = rng.uniform(-0.5, 0.5, net.num_params).astype(np.float32)
    net.set_params(p)
    xs = rng.uniform(-1, 1, (2, 2, 6, 5)).astype(np.float32)
    w = torch.from_numpy(p[:3 * 2 * 25].reshape(3, 2, 5, 5)).double()
    b = torch.from_numpy(p[3 * 2 * 25:]).double()
    ref = torch.nn.functional.conv2d(torch.from_numpy(xs).double(), w, b,
                                     padding="same").numpy()
    np.testing.assert_allclose(net.predict(xs), ref, rtol=1e-5, atol=1e-5)


ADDERS = ["input", "input3d", "conv2d", "conv3d", "maxpool2d", "maxpool3d", "avgpool2d",
          "avgpool3d", "global_avgpool", "dense", "flatten", "relu", "leaky_relu", "batchnorm",
          "dropout", "add", "pixel_shuffle", "sigmoid", "tanh", "concat", "upsample2d",
          "upsample3d", "conv_transpose2d", "conv_transpose3d"]


@pytest.mark.parametrize("name", ADDERS)
def test_every_adder_has_a_docstring(name):
    doc = inspect.getdoc(getattr(pcnn.Net, name))
    assert doc and len(doc) > 20, name
