"""The binding across 2 MPI ranks (mpiexec -n 2 /usr/bin/python3), with MPI
initialised by the library through pcnn.Comm.world(): equal to the C API's
world run, ranks identical, errors agreed, everything freed at exit."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import models
from conftest import HERE, MPIEXEC
from test_reference import run_c

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(shutil.which(MPIEXEC) is None, reason="no mpiexec")]

ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    out = tmp_path_factory.mktemp("mpi")
    # 2 steps of 7 samples: shares of 4 and 3
    x, labels = models.make_data("mix", 2, 7, seed=21)
    np.save(out / "x.npy", x)
    np.save(out / "labels.npy", labels)
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, os.path.join(HERE, "mpi_worker.py"),
                        str(out), str(out / "x.npy"), str(out / "labels.npy")],
                       capture_output=True, text=True, timeout=240, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == ""  # nothing printed at exit: every handle freed cleanly
    ranks = [(dict(np.load(out / ("rank%d.npz" % k))),
              json.load(open(out / ("rank%d.json" % k)))) for k in (0, 1)]
    return out, x, labels, ranks


def test_two_ranks_equal_the_c_api_world_run(worker, c_reference, tmp_path):
    out, x, labels, ranks = worker
    c = run_c(c_reference, tmp_path, "mix", x, labels, launcher=(MPIEXEC, "-n", "2"))
    arrays, info = ranks[0]
    assert info["size"] == 2
    for name, ref in zip(["params", "losses", "pred", "gloss", "grads"], c):
        assert np.array_equal(arrays["ref_" + name], ref), name
    # parameters are identical on both ranks and losses global (predictions
    # differ: batch-norm running statistics are per rank)
    for name in ("ref_params", "ref_losses"):
        assert np.array_equal(ranks[0][0][name], ranks[1][0][name]), name


def test_epochs_and_scheduler_over_ranks(worker):
    for arrays, info in worker[3]:
        assert info["epoch_c"] == info["epoch_py"]
        assert info["epoch_steps"] == [8, 14]
        assert np.array_equal(arrays["epoch_c"], arrays["epoch_py"])
        assert info["sched_losses"][0][0] == info["sched_losses"][0][1]
        assert info["sched_losses"][1][0] == info["sched_losses"][1][1]
        assert info["sched_batch"] == [8, 8]
        assert np.array_equal(arrays["sched_a"], arrays["sched_b"])
        assert info["ckpt_restored"]
    (a0, i0), (a1, i1) = worker[3]
    assert np.array_equal(a0["epoch_c"], a1["epoch_c"])
    assert i0["eval"] == i1["eval"] and 0 <= i0["eval"][1] <= 1


def test_timing_breakdown_over_ranks(worker):
    for _, info in worker[3]:
        t = info["timing"]
        assert t["comm"] > 0 and t["step"] > 0 and 0 <= t["exposed"] <= t["step"]
        assert info["overlap"] is not None and 0 <= info["overlap"] <= 100
        assert info["exchange_bytes"] > 0 and info["report_has_comm"]


def test_errors_reach_every_rank(worker):
    (_, i0), (_, i1) = worker[3]
    assert i1["error"][0] == "InvalidArgumentError" and "label 9" in i1["error"][1]
    assert i0["error"][0] == "RemoteError" and i0["error"][1].startswith("pcnn_net_train_step")
    for _, info in worker[3]:
        assert "still use this communicator" in info["close_in_use"]


def test_spatial_split_over_two_ranks(worker):
    _, _, _, ranks = worker
    for r, (_, info) in enumerate(ranks):
        assert info["spatial_rel"] < 1e-5  # equals one rank on the whole batch
        assert info["spatial_local_equal"]  # the box-only step, bit for bit
        assert info["spatial_box"] == [[0, 6], [6, 5]][r]  # 11 rows over 2 ranks
        assert info["spatial_parts"] == [[1, 1, 2, 1], [2, 1, 1, 1]]  # conv split, dense not
        assert info["spatial_group"] == [0, 1, r, 2]
        assert info["spatial_halo"]
        # compute_gradients, compute_loss and evaluate equal one rank's
        assert info["spatial_others_rel"] < 1e-5


def test_perfmodel_shared_from_one_rank(worker):
    assert [info["shared_gbits"] for _, info in worker[3]] == [3.0, 3.0]
    paces = [info["pace"] for _, info in worker[3]]
    assert min(paces) == 1.0 and max(paces) >= 1.0  # the slowest rank's is 1


def test_mpi4py_style_communicator(worker):
    for rank, (_, info) in enumerate(worker[3]):
        assert info["mpi4py_like"] == [rank, 2]


EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "examples",
                       "fashion_mnist.py")
FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.exists(FASHION + "/train-images-idx3-ubyte.gz"),
                    reason="Fashion-MNIST not installed")
def test_fashion_mnist_example_on_two_ranks(tmp_path):
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    plot = ["--plot", str(tmp_path / "curves.png")] if has_matplotlib else []
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, EXAMPLE, "--epochs", "2",
                        "--train-limit", "1024", "--batch", "64", "--csv", str(tmp_path / "c.csv")]
                       + plot, capture_output=True, text=True, timeout=240, env=ENV)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    out = r.stdout
    assert "2 rank(s)" in out and "parameters: 61706" in out  # the summary first
    # plain progress lines (stdout is not a tty), one per tenth, rank 0 only
    assert len(re.findall(r"^epoch 1/2 +\d+%  \d+/1024 samples  loss", out, re.M)) == 9
    assert "\r" not in out
    assert "epoch 2/2  train loss" in out and "test accuracy" in out
    assert "timing per step over 32 steps" in out and "overlap ratio" in out  # the breakdown
    rows = open(tmp_path / "c.csv").read().splitlines()
    assert rows[0].startswith("epoch,train_loss,test_loss,test_accuracy") and len(rows) == 3
    if plot:
        assert open(tmp_path / "curves.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
