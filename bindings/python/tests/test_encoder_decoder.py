"""The encoder-decoder layers of pcnn.h 9.5 through the binding: outputs
equal PyTorch's on odd sizes, strides and output paddings, the arguments
are checked before ctypes (a wrong type names the parameter), and a
transposed convolution's parameters go to and from a torch state dict."""
import numpy as np
import pytest

import pcnn

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _net_with(build, in_shape, n=2, seed=3):
    net = pcnn.Net()
    x = net.input3d(*in_shape) if len(in_shape) == 4 else net.input(*in_shape)
    out = build(net, x)
    net.set_loss(out, pcnn.Loss.MSE)
    net.finalize(n)
    rng = np.random.default_rng(seed)
    p = rng.uniform(-0.5, 0.5, net.num_params).astype(np.float32)
    if p.size:
        net.set_params(p)
    xs = rng.uniform(-1, 1, (n,) + tuple(in_shape)).astype(np.float32)
    return net, p, xs, net.predict(xs)


@pytest.mark.parametrize("k,s,p,op,bias", [(3, 2, 1, 1, True), (4, 3, 1, 2, False),
                                           (2, 2, 0, 0, True), (5, 1, 2, 0, True)])
def test_conv_transpose2d_equals_torch(k, s, p, op, bias):
    net, params, xs, y = _net_with(
        lambda n, x: n.conv_transpose2d(x, 3, k, stride=s, padding=p, output_padding=op,
                                        bias=bias), (2, 5, 4))
    w = torch.from_numpy(params[:2 * 3 * k * k].reshape(2, 3, k, k)).double()
    b = torch.from_numpy(params[2 * 3 * k * k:]).double() if bias else None
    ref = F.conv_transpose2d(torch.from_numpy(xs).double(), w, b, s, p, op).numpy()
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_conv_transpose3d_equals_torch():
    net, params, xs, y = _net_with(
        lambda n, x: n.conv_transpose3d(x, 2, 3, stride=2, padding=1, output_padding=1),
        (2, 3, 2, 3))
    w = torch.from_numpy(params[:2 * 2 * 27].reshape(2, 2, 3, 3, 3)).double()
    b = torch.from_numpy(params[2 * 2 * 27:]).double()
    ref = F.conv_transpose3d(torch.from_numpy(xs).double(), w, b, 2, 1, 1).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,factor", [("nearest", 2), ("linear", 2), ("linear", 3),
                                         (pcnn.UpsampleMode.NEAREST, 3)])
def test_upsample_equals_torch(mode, factor):
    for shape in ((2, 5, 3), (1, 3, 2, 3)):
        vol = len(shape) == 4
        add = (lambda n, x: n.upsample3d(x, factor, mode)) if vol else \
            (lambda n, x: n.upsample2d(x, factor, mode=mode))
        _, _, xs, y = _net_with(add, shape)
        linear = str(mode) == "linear"
        tmode = ("trilinear" if vol else "bilinear") if linear else "nearest"
        kw = dict(align_corners=False) if linear else {}
        ref = F.interpolate(torch.from_numpy(xs).double(), scale_factor=factor, mode=tmode,
                            **kw).numpy()
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_sigmoid_tanh_and_bce_loss():
    _, _, xs, y = _net_with(lambda n, x: n.tanh(n.sigmoid(x)), (2, 3, 3))
    np.testing.assert_allclose(y, np.tanh(1 / (1 + np.exp(-xs))), rtol=1e-6)
    net = pcnn.Net()
    x = net.input(1, 2, 3)
    net.set_loss(net.conv2d(x, 1, 1), "bce_with_logits")
    net.finalize(2)
    rng = np.random.default_rng(0)
    xs = rng.uniform(-3, 3, (2, 1, 2, 3)).astype(np.float32)
    t = rng.uniform(0, 1, (2, 1, 2, 3)).astype(np.float32)
    logits = net.predict(xs)
    ref = F.binary_cross_entropy_with_logits(torch.from_numpy(logits).double(),
                                             torch.from_numpy(t).double()).item()
    assert abs(net.compute_loss(xs, targets=t) - ref) <= 1e-5 * abs(ref)


def test_arguments_checked_before_ctypes():
    net = pcnn.Net()
    x = net.input(2, 5, 5)
    with pytest.raises(TypeError, match="Net.conv_transpose2d: kernel must be an integer"):
        net.conv_transpose2d(x, 3, "3")
    with pytest.raises(TypeError, match="output_padding must be an integer"):
        net.conv_transpose2d(x, 3, 3, stride=2, output_padding=1.0)
    with pytest.raises(pcnn.InvalidArgumentError, match="stride is 0, must be >= 1"):
        net.conv_transpose3d(x, 3, 3, stride=0)
    with pytest.raises(TypeError, match="Net.upsample2d: factor must be an integer"):
        net.upsample2d(x, 1.5)
    with pytest.raises(pcnn.InvalidArgumentError, match="unknown upsamplemode 'cubic'"):
        net.upsample2d(x, 2, "cubic")
    with pytest.raises(pcnn.InvalidArgumentError, match="output_padding 2 must be >= 0 and "
                       "smaller than the stride 2"):
        net.conv_transpose2d(x, 3, 3, stride=2, output_padding=2)
    with pytest.raises(pcnn.ShapeError, match="use pcnn_upsample3d"):
        v = pcnn.Net()
        v.upsample2d(v.input3d(1, 3, 3, 3), 2)


def test_conv_transpose_state_dict_round_trip():
    net, params, _, _ = _net_with(
        lambda n, x: n.conv_transpose2d(x, 3, 3, stride=2, padding=1, output_padding=1),
        (2, 5, 4))
    sd = net.state_dict()
    key = [k for k in sd if k.endswith("conv_transpose2d.weight")][0]
    assert sd[key].shape == (2, 3, 3, 3)
    m = torch.nn.ConvTranspose2d(2, 3, 3, 2, 1, output_padding=1)
    m.load_state_dict({k.split(".")[-1]: torch.from_numpy(v) for k, v in sd.items()})
    net2, _, _, _ = _net_with(
        lambda n, x: n.conv_transpose2d(x, 3, 3, stride=2, padding=1, output_padding=1),
        (2, 5, 4), seed=9)
    pcnn.from_torch_state_dict(net2, m.state_dict())
    assert np.array_equal(net2.get_params(), params)


def test_concat_equals_torch_cat_and_checks_its_inputs():
    def build(n, x):
        a = n.conv2d(x, 3, 3, padding=1)
        return n.concat(a, x, a)
    net, params, xs, y = _net_with(build, (2, 5, 3))
    w = torch.from_numpy(params[:54].reshape(3, 2, 3, 3)).double()
    b = torch.from_numpy(params[54:57]).double()
    xt = torch.from_numpy(xs).double()
    a = F.conv2d(xt, w, b, padding=1)
    np.testing.assert_allclose(y, torch.cat([a, xt, a], dim=1).numpy(), rtol=1e-5, atol=1e-6)
    other = pcnn.Net()
    x = other.input(1, 4, 4)
    with pytest.raises(TypeError, match="Net.concat: input 1 must be a pcnn.Layer"):
        other.concat([x, "x"])
    with pytest.raises(pcnn.InvalidArgumentError, match="0 inputs"):
        other.concat()
    with pytest.raises(pcnn.ShapeError, match="only channels may differ"):
        other.concat(x, other.maxpool2d(x, 2))
