"""PyTorch state_dicts in and out: the same weights give the same outputs
(to 1e-5) in libpcnn and torch, in both directions, and mismatches are
refused with messages naming both sides."""
import numpy as np
import pytest

import pcnn

torch = pytest.importorskip("torch")
nn = torch.nn


def pcnn_model(max_batch=8, bias=True):
    net = pcnn.Net(seed=5, learning_rate=0.05, optimizer="momentum", threads=1)
    x = net.input(3, 10, 10)
    x = net.relu(net.batchnorm(net.conv2d(x, 6, 3, padding=1, bias=bias)))
    x = net.maxpool2d(x, 2)
    x = net.relu(net.conv2d(x, 8, 3, stride=1, padding=0))
    x = net.relu(net.dense(x, 16))
    net.set_loss(net.dense(x, 4), "softmax_cross_entropy")
    net.finalize(max_batch)
    return net


def torch_model(bias=True):
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1, bias=bias), nn.BatchNorm2d(6), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3), nn.ReLU(), nn.Flatten(),
        nn.Linear(8 * 3 * 3, 16), nn.ReLU(), nn.Linear(16, 4))


def data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3, 10, 10)).astype(np.float32)
    return x, rng.integers(0, 4, size=n, dtype=np.int32)


def torch_out(model, x):
    model.eval()
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


def test_export_to_torch_same_outputs():
    x, y = data()
    with pcnn_model() as net:
        for _ in range(5):  # moves weights and the running statistics away from their init
            net.train_step(x, labels=y)
        sd = net.state_dict()
        assert np.any(sd["2.batchnorm.running_mean"] != 0)
        model = torch_model()
        result = model.load_state_dict(net.torch_state_dict(model))
        assert not result.missing_keys and not result.unexpected_keys
        np.testing.assert_allclose(torch_out(model, x), net.predict(x), rtol=0, atol=1e-5)
        assert torch.equal(model[1].running_var, torch.from_numpy(sd["2.batchnorm.running_var"]))


def test_import_from_torch_same_outputs():
    torch.manual_seed(0)
    model = torch_model()
    x, _ = data(seed=1)
    model.train()
    with torch.no_grad():
        for _ in range(3):  # running statistics away from 0 / 1
            model(torch.from_numpy(x))
    with pcnn_model() as net:
        before = net.predict(x)
        pcnn.from_torch_state_dict(net, model.state_dict())
        out = net.predict(x)
        assert not np.allclose(out, before)
        np.testing.assert_allclose(out, torch_out(model, x), rtol=0, atol=1e-5)
        got = net.state_dict()
        np.testing.assert_array_equal(got["1.conv2d.weight"], model[0].weight.detach().numpy())
        np.testing.assert_array_equal(got["2.batchnorm.running_mean"],
                                      model[1].running_mean.numpy())


def test_import_training_matches_torch():
    """After import, one SGD step in each gives the same weights."""
    torch.manual_seed(1)
    model = torch_model()
    x, y = data(seed=2)
    net = pcnn.Net(seed=5, learning_rate=0.1, threads=1)
    a = net.input(3, 10, 10)
    a = net.relu(net.batchnorm(net.conv2d(a, 6, 3, padding=1)))
    a = net.maxpool2d(a, 2)
    a = net.relu(net.conv2d(a, 8, 3))
    a = net.relu(net.dense(a, 16))
    net.set_loss(net.dense(a, 4), "softmax_cross_entropy")
    net.finalize(8)
    with net:
        net.load_torch_state_dict(model)
        net.train_step(x, labels=y)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        loss = nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long())
        opt.zero_grad()
        loss.backward()
        opt.step()
        np.testing.assert_allclose(net.predict(x), torch_out(model, x), rtol=0, atol=1e-5)


def test_mismatches_are_refused():
    with pcnn_model() as net:
        before = net.get_params()
        wrong = nn.Sequential(nn.Conv2d(3, 6, 5, padding=2), nn.BatchNorm2d(6),
                              nn.Conv2d(6, 8, 3), nn.Linear(72, 16), nn.Linear(16, 4))
        with pytest.raises(pcnn.ShapeError, match=r"'0.weight' has shape \(6, 3, 5, 5\), "
                                                  r"layer 1 \(conv2d\) expects \(6, 3, 3, 3\)"):
            pcnn.from_torch_state_dict(net, wrong.state_dict())
        short = nn.Sequential(nn.Conv2d(3, 6, 3), nn.Linear(4, 4))
        with pytest.raises(pcnn.InvalidArgumentError, match="2 modules with parameters.*5 "
                                                            "layers with parameters"):
            pcnn.from_torch_state_dict(net, short)
        swapped = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.Linear(6, 6),
                                nn.Conv2d(6, 8, 3), nn.Linear(72, 16), nn.Linear(16, 4))
        with pytest.raises(pcnn.InvalidArgumentError,
                           match="'1' looks like dense .* layer 2 is batchnorm"):
            pcnn.from_torch_state_dict(net, swapped)
        with pytest.raises(TypeError, match="torch.nn.Module or a state_dict"):
            pcnn.to_torch_state_dict(net, 42)
        np.testing.assert_array_equal(net.get_params(), before)  # nothing changed


def test_no_bias_conv():
    model = torch_model(bias=False)
    x, _ = data()
    with pcnn_model(bias=False) as net:
        net.load_torch_state_dict(model)
        np.testing.assert_allclose(net.predict(x), torch_out(model, x), rtol=0, atol=1e-5)
        assert "1.conv2d.bias" not in net.state_dict()


def test_volumes_same_outputs():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(),
                          nn.MaxPool3d(2), nn.Flatten(), nn.Linear(4 * 2 * 2 * 2, 3))
    model.train()
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 2, 4, 4, 4)).astype(np.float32)
    with torch.no_grad():
        model(torch.from_numpy(x))  # running statistics away from 0 / 1
    net = pcnn.Net(seed=1, threads=1)
    a = net.input3d(2, 4, 4, 4)
    a = net.maxpool3d(net.relu(net.batchnorm(net.conv3d(a, 4, 3, padding=1))), 2)
    net.set_loss(net.dense(a, 3), "softmax_cross_entropy")
    net.finalize(4)
    with net:
        assert net.state_dict()["1.conv3d.weight"].shape == (4, 2, 3, 3, 3)
        net.load_torch_state_dict(model)
        np.testing.assert_allclose(net.predict(x), torch_out(model, x), rtol=0, atol=1e-5)
        back = net.torch_state_dict(model)
        for k, v in model.state_dict().items():
            assert torch.equal(back[k], v), k
