"""Handles are freed exactly once, deterministically (close, with) or on
garbage collection and at exit, and nothing leaks over many cycles."""
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pcnn
from pcnn import _api, _handle
from conftest import HERE


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


X = np.random.default_rng(0).normal(size=(4, 1, 8, 8)).astype(np.float32)
LABELS = np.array([0, 1, 2, 1], np.int32)


def cycle(i):
    """Every kind of handle, created and freed every way, with errors."""
    with pcnn.Net(seed=i % 7, threads=1) as net:
        y = net.conv2d(net.input(1, 8, 8), 4, 3, padding=1)
        y = net.dense(net.maxpool2d(net.relu(net.batchnorm(y)), 2), 3)
        net.set_loss(y)
        net.set_optimizer("adam")
        net.finalize(4)
        net.train_step(X, LABELS)
        net.predict(X[:2])
        net.get_params()
        net.summary()
        with pytest.raises(pcnn.NumericError):
            net.train_step(X * np.nan, LABELS)
        sched = pcnn.Scheduler(net, 2, 4, 0.1)
        if i % 2:
            sched.close()  # else closed by the network's close
    data = pcnn.Dataset(X, LABELS)
    data.batch(1, 2)
    del data  # garbage collection
    unfinished = pcnn.Net()
    with pytest.raises(pcnn.ShapeError):
        unfinished.conv2d(unfinished.input(1, 2, 2), 4, 5)
    del unfinished
    with pytest.raises(pcnn.FileError):
        pcnn.Dataset.load_idx("/nonexistent/images", "/nonexistent/labels")


def test_no_leak_over_2000_create_destroy_cycles():
    for i in range(300):  # warm up allocator pools, numpy, pytest internals
        cycle(i)
    gc.collect()
    before = rss_bytes()
    for i in range(2000):
        cycle(i)
    gc.collect()
    grown = rss_bytes() - before
    # One leaked network per cycle would be ~2000 x 30 KB = 60 MB; one
    # leaked 4 KiB page per cycle 8 MB.
    assert grown < 2 * 1024 * 1024, "RSS grew by %d KiB over 2000 cycles" % (grown // 1024)
    assert all(len(s) == 0 for s in _handle._live.values() if s is not _handle._live["mpi"])


def count_calls(monkeypatch, name):
    lib = _api.current()
    real = getattr(lib, name)
    calls = []

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(lib, name, spy)
    return calls


def test_handles_are_freed_once_by_close_with_and_gc(monkeypatch):
    destroyed = count_calls(monkeypatch, "pcnn_net_destroy")
    net = pcnn.Net()
    net.close()
    net.close()
    assert len(destroyed) == 1
    with pcnn.Net() as net:
        net.input(1, 2, 2)
    assert len(destroyed) == 2 and net.closed
    net = pcnn.Net()
    layer = net.input(1, 2, 2)
    del net  # the layer holds its network weakly: this frees it
    assert len(destroyed) == 3
    with pytest.raises(pcnn.InvalidStateError):
        layer.output_shape
    # a reference cycle through user code is collected too
    net = pcnn.Net()
    net.me = net
    del net
    gc.collect()
    assert len(destroyed) == 4


def test_an_exception_inside_with_still_frees(monkeypatch):
    destroyed = count_calls(monkeypatch, "pcnn_dataset_destroy")
    with pytest.raises(ZeroDivisionError):
        with pcnn.Dataset(np.zeros((2, 3)), labels=[0, 1]):
            1 / 0
    assert len(destroyed) == 1


def test_closing_a_network_closes_its_scheduler_first(monkeypatch):
    order = []
    for name in ("pcnn_scheduler_destroy", "pcnn_net_destroy"):
        real = getattr(_api.current(), name)
        monkeypatch.setattr(_api.current(), name,
                            lambda *a, _n=name, _r=real: (order.append(_n), _r(*a))[1])
    net = pcnn.Net()
    net.set_loss(net.dense(net.input(2, 1, 1), 2))
    net.finalize(4)
    sched = pcnn.Scheduler(net, 1, 4, 0.1)
    net.close()
    assert order == ["pcnn_scheduler_destroy", "pcnn_net_destroy"]
    assert sched.closed
    with pytest.raises(pcnn.InvalidStateError, match="this Scheduler is closed"):
        sched.batch


def test_objects_left_open_are_freed_at_exit_without_noise(tmp_path):
    script = tmp_path / "left_open.py"
    script.write_text(textwrap.dedent("""
        import atexit, sys
        sys.path[:0] = [%r]
        # registered before pcnn's hook, so it runs after it
        atexit.register(lambda: print("closed", [o.closed for o in keep]))
        import numpy as np, pcnn
        net = pcnn.Net()
        net.set_loss(net.dense(net.input(3, 1, 1), 2))
        net.finalize(2)
        sched = pcnn.Scheduler(net, 1, 2, 0.1)
        data = pcnn.Dataset(np.zeros((2, 3)), labels=[0, 1])
        net.self_cycle = net
        keep = [net, sched, data]
        print("ok")
    """ % os.path.dirname(HERE)))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "ok\nclosed [True, True, True]\n", "")
