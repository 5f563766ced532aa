"""The C calls that had no Python method: Comm.barrier and Comm.bcast
(pcnn_comm_barrier, pcnn_comm_bcast), Net.write_trace_merged,
set_log_callback, abort and async_error."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import pcnn
from conftest import HERE, MPIEXEC


def small_net(**options):
    net = pcnn.Net(seed=1, threads=1, **options)
    h = net.input(1, 4, 4)
    net.set_loss(net.dense(h, 2), "softmax_cross_entropy")
    return net


def strided_conv_net():
    """A strided convolution asked to use per-tap GEMMs, which apply to
    stride 1 only: finalize warns through the log callback."""
    net = pcnn.Net(seed=1, threads=1, conv_algorithm=3)
    h = net.conv2d(net.input(1, 8, 8), 2, 3, stride=2, padding=1)
    net.set_loss(net.dense(h, 2), "softmax_cross_entropy")
    return net


def test_log_callback_hears_the_library():
    heard = []
    with strided_conv_net() as net:
        net.set_log_callback(lambda level, message: heard.append((level, message)))
        net.finalize(4)
        net.set_log_callback(None)
        net.set_log_callback(None)  # removing twice is fine
    assert heard and all(isinstance(lv, pcnn.LogLevel) and isinstance(m, str)
                         for lv, m in heard)
    assert pcnn.LogLevel.WARNING in [lv for lv, _ in heard], heard


def test_log_callback_exception_is_kept():
    def broken(level, message):
        raise RuntimeError("boom")
    with strided_conv_net() as net:
        net.set_log_callback(broken)
        net.finalize(4)
        assert isinstance(net.log_callback_error, RuntimeError)


def test_abort_and_async_error_on_one_rank():
    with small_net() as net:
        net.finalize(4)
        assert net.async_error() is pcnn.Status.OK
        net.abort()
        net.abort()  # idempotent
        assert net.async_error() is pcnn.Status.OK  # an explicit abort alone
        with pytest.raises(pcnn.InvalidStateError):
            net.train_step(np.ones((1, 1, 4, 4), np.float32), np.array([0], np.int32))


def test_comm_on_one_rank():
    comm = pcnn.Comm.world()
    try:
        comm.barrier(timeout_ms=1000)
        assert comm.bcast(b"abc") == b"abc"
        a = np.arange(6, dtype=np.int16).reshape(2, 3)
        got = comm.bcast(a)
        assert got.dtype == np.int16 and got.shape == (2, 3) and (got == a).all()
        assert got is not a
        with pytest.raises(TypeError, match="bytes or a numpy array"):
            comm.bcast([1, 2])
        with pytest.raises(pcnn.InvalidArgumentError, match="not a rank"):
            comm.bcast(b"x", root=1)
    finally:
        comm.close()


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which(MPIEXEC) is None, reason="no mpiexec")
def test_barrier_bcast_trace_and_abort_on_two_ranks(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, os.path.join(HERE, "comm_worker.py"),
                        str(tmp_path)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [json.load(open(tmp_path / ("rank%d.json" % k))) for k in (0, 1)]
    for info in runs:
        assert info["saw_marker"] is True
        assert info["bytes"] == "hello from rank 1"
        assert info["array"] == ["<f8", [3, 4], [0.5 * i for i in range(12)]]
        assert info["empty"] is True
        assert info["async_before"] == "OK" and info["async_after_abort"] == "OK"
        assert info["after_abort"] == "InvalidStateError"
    assert runs[0]["str_refused"] == "TypeError"
    assert runs[0]["trace_pids"] == [0, 1]
