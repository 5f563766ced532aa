"""Net.fit and load_state_dict across 2 ranks: global losses equal on both
ranks, only rank 0 prints, running statistics set on every rank."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import pcnn
from conftest import HERE, MPIEXEC

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(shutil.which(MPIEXEC) is None, reason="no mpiexec")]


def test_fit_and_state_dict_on_two_ranks(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable,
                        os.path.join(HERE, "fit_mpi_worker.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    # one progress output (rank 0's): 3 quarter lines and a summary per epoch
    assert r.stdout.count("epoch 1/2: loss") == 1 and r.stdout.count("epoch 2/2: loss") == 1
    assert len(r.stdout.splitlines()) == 8, r.stdout
    ranks = [(dict(np.load(tmp_path / ("rank%d.npz" % k))),
              json.load(open(tmp_path / ("rank%d.json" % k)))) for k in (0, 1)]
    (a0, i0), (a1, i1) = ranks
    assert i0["history"]["loss"] == i1["history"]["loss"]
    assert i0["history"]["val_accuracy"] == i1["history"]["val_accuracy"]
    assert "2.batchnorm.running_var" in i0["state_dict_keys"]
    assert i0["state_dict_keys"] == i1["state_dict_keys"]
    np.testing.assert_array_equal(a0["params"], a1["params"])
    # the same parameters and statistics on both ranks: the same inference,
    # and the same as one process holding them
    np.testing.assert_array_equal(a0["pred"], a1["pred"])
    net = pcnn.Net(seed=2, threads=1)
    x = net.input(1, 6, 6)
    x = net.relu(net.batchnorm(net.conv2d(x, 3, 3, padding=1)))
    net.set_loss(net.dense(x, 3), "softmax_cross_entropy")
    net.finalize(16)
    with net:
        net.load_state_dict({k.replace("_", ".", 2): v
                             for k, v in a0.items() if k not in ("params", "pred", "x")})
        sd = net.state_dict()
        np.testing.assert_array_equal(sd["2.batchnorm.running_var"], [2.0, 0.5, 1.5])
        np.testing.assert_array_equal(net.predict(a0["x"]), a0["pred"])


def test_fit_and_epoch_callback_on_spatial_networks_equal_one_rank(tmp_path):
    """Each rank of a sample group trains on its box of the group's
    samples, so fit (its progress bar steps through the epoch) and
    train_epoch with a callback give one rank's parameters; group_info
    follows the input layer's own distribution."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([MPIEXEC, "-n", "4", sys.executable,
                        os.path.join(HERE, "spatial_fit_worker.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    for k in range(4):
        info = json.load(open(tmp_path / ("rank%d.json" % k)))
        assert info["groups_before"] == info["groups_after"] == [k // 2, 2, k % 2, 2]
        assert info["groups_rel"] < 1e-5 and info["groups_loss_rel"] < 1e-5, info
        assert info["box"] == [4 * (k % 2), 4, 0, 8]
        assert "x_local has shape (2, 2, 8, 8): expected (n, C, H, W) = (n, 2, 4, 8)" in \
            info["local_error"]
        assert info["input_set_before"] == info["input_set_after"] == [0, 1, k, 4]
        assert info["epoch_rel"] < 1e-5 and info["epoch_loss_rel"] < 1e-5, info
        assert info["steps"] == [[1, 3, 8, 22], [2, 3, 16, 22], [3, 3, 22, 22]]
