"""3D networks through the binding: (n, C, D, H, W) arrays in and out,
conv3d against a numpy convolution, the 3D pools, shapes, datasets of
volumes with regression targets, and the refusals of 2D calls."""
import numpy as np
import pytest

import pcnn


def conv3d_reference(x, w, b, stride, pad):
    """torch.nn.functional.conv3d in float64 numpy: x (n, C, D, H, W),
    w (Cout, C, k, k, k)."""
    k = w.shape[-1]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + ((pad, pad),) * 3)
    out = [(xp.shape[i] - k) // stride + 1 for i in (2, 3, 4)]
    y = np.zeros((x.shape[0], w.shape[0]) + tuple(out))
    for a in range(k):
        for p in range(k):
            for q in range(k):
                win = xp[:, :, a:a + stride * out[0]:stride, p:p + stride * out[1]:stride,
                         q:q + stride * out[2]:stride]
                y += np.einsum("ncdhw,oc->nodhw", win, w[:, :, a, p, q].astype(np.float64))
    return y + b.reshape(1, -1, 1, 1, 1)


def test_conv3d_matches_numpy_and_shapes_carry_depth():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 5, 6, 4)).astype(np.float32)
    with pcnn.Net(seed=1, threads=1) as net:
        inp = net.input3d(3, 5, 6, 4)
        conv = net.conv3d(inp, 4, 3, stride=2, padding=1)
        net.set_loss(conv, "mse")
        net.finalize(2)
        assert inp.output_shape == (3, 5, 6, 4)
        assert conv.output_shape == (4, 3, 3, 2)
        w = rng.normal(size=(4, 3, 3, 3, 3)).astype(np.float32) * 0.2
        b = rng.normal(size=4).astype(np.float32)
        conv.set_params(np.concatenate([w.ravel(), b]))
        y = net.predict(x)
        assert y.shape == (2, 4, 3, 3, 2)
        np.testing.assert_allclose(y, conv3d_reference(x, w, b, 2, 1), rtol=1e-5, atol=1e-5)
        net.compute_gradients(x, targets=np.zeros_like(y))
        assert net.input_grad().shape == x.shape


def test_pools_and_depth_aware_layers():
    x = np.arange(2 * 1 * 4 * 4 * 4, dtype=np.float32).reshape(2, 1, 4, 4, 4)
    with pcnn.Net(threads=1) as net:
        inp = net.input3d(1, 4, 4, 4)
        mx = net.maxpool3d(inp, 2)
        av = net.avgpool3d(inp, 2)
        s = net.add(mx, av)
        net.set_loss(s, "mse")
        net.finalize(2)
        assert mx.output_shape == av.output_shape == s.output_shape == (1, 2, 2, 2)
        y = net.predict(x)
        v = x.reshape(2, 1, 2, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 6, 3, 5, 7)
        v = v.reshape(2, 1, 2, 2, 2, 8)
        np.testing.assert_allclose(y, v.max(-1) + v.mean(-1), rtol=1e-6)
    with pcnn.Net(threads=1) as net:
        inp = net.input3d(4, 3, 2, 2)
        assert net.global_avgpool(inp).output_shape == (4, 1, 1)
        assert net.flatten(inp).output_shape == (48, 1, 1)
        with pytest.raises(pcnn.ShapeError, match="use pcnn_conv3d"):
            net.conv2d(inp, 2, 1)
        with pytest.raises(pcnn.UnsupportedError, match="2D only"):
            net.pixel_shuffle(inp, 2)


def test_dataset_of_volumes_trains_a_regression():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(32, 2, 4, 4, 4)).astype(np.float32)
    # Two targets the network can learn: each channel's mean.
    t = x.mean(axis=(2, 3, 4)).astype(np.float32)
    data = pcnn.Dataset(x, targets=t)
    assert len(data) == 32 and data.sample_shape == (2, 4, 4, 4) and data.target_count == 2
    bx, bt = data.batch(3, 2)
    assert bx.shape == (2, 2, 4, 4, 4) and bt.shape == (2, 2)
    np.testing.assert_array_equal(bx, x[3:5])
    with pcnn.Net(seed=2, threads=1, learning_rate=0.01) as net:
        y = net.conv3d(net.input3d(2, 4, 4, 4), 4, 3, padding=1)
        y = net.dense(net.leaky_relu(net.avgpool3d(y, 2)), 2)
        net.set_loss(y, "mse")
        net.set_optimizer("adam")
        net.finalize(8)
        first = net.evaluate(data).loss
        for _ in range(30):
            net.train_epoch(data, 8)
        last = net.evaluate(data).loss
        assert last < 0.2 * first, (first, last)
