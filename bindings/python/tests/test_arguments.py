"""Silent wrong results become exceptions: integers and floats a C type
cannot hold, paths with a NUL byte, arrays of the wrong shape (channels
last), close() racing a call in another thread, an invalid communicator
handle."""
import os
import subprocess
import sys
import textwrap
import threading
import time
from ctypes import c_char_p, c_float, c_int, c_long, c_size_t, c_uint64

import numpy as np
import pytest

import pcnn
import models
from pcnn import _api


# -- integers and floats ------------------------------------------------------

def test_finalize_with_2_pow_32_plus_4_raises_instead_of_planning_for_4():
    net = pcnn.Net(threads=1)
    with net:
        net.set_loss(net.dense(net.input(4, 1, 1), 4))
        with pytest.raises(OverflowError, match=r"pcnn_net_finalize: argument 2 is 4294967300, "
                                                r"outside the range of C int"):
            net.finalize(2 ** 32 + 4)
        with pytest.raises(pcnn.InvalidStateError):  # nothing was planned
            net.train_step(np.zeros((4, 4), np.float32), [0, 1, 2, 3])
        net.finalize(np.int64(4))  # numpy integers in range are fine
        assert net.train_step(np.zeros((4, 4), np.float32), [0, 1, 2, 3]) > 0


def test_conv_with_2_pow_32_plus_4_channels_raises_and_adds_no_layer():
    with pcnn.Net() as net:
        x = net.input(1, 8, 8)
        with pytest.raises(OverflowError, match="pcnn_conv2d: argument 3 is 4294967300"):
            net.conv2d(x, 2 ** 32 + 4, 3)
        # Below the C range too, but refused first by Net.conv2d's own check.
        with pytest.raises(pcnn.InvalidArgumentError,
                           match="Net.conv2d: kernel is -2147483649, must be >= 1"):
            net.conv2d(x, 4, -2 ** 31 - 1)
        assert len(net.layers) == 1
        assert net.conv2d(x, 4, 3).output_shape == (4, 6, 6)


def test_unsigned_and_float_arguments():
    with pcnn.Dataset(np.zeros((3, 2), np.float32), labels=[0, 1, 0]) as data:
        with pytest.raises(OverflowError, match=r"pcnn_dataset_shuffle: argument 2 is -1, "
                                                r"outside the range of C uint64_t"):
            data.shuffle(-1, 0)
        with pytest.raises(OverflowError, match="argument 3 is 18446744073709551616"):
            data.shuffle(0, 2 ** 64)
        data.shuffle(2 ** 64 - 1, 0)  # the largest seed is fine
    with pcnn.Net() as net:
        x = net.input(1, 4, 4)
        with pytest.raises(OverflowError, match=r"pcnn_leaky_relu: argument 3 is 1e\+39, "
                                                r"beyond the float32 range"):
            net.leaky_relu(x, 1e39)
        with pytest.raises(pcnn.InvalidArgumentError):  # NaN and inf reach C, which refuses
            net.dropout(x, float("nan"))


def _dummy(t):
    return {c_int: 0, c_long: 0, c_size_t: 0, c_uint64: 0, c_float: 0.0,
            c_char_p: b"x"}.get(t)


def test_every_scalar_argument_of_every_prototype_is_checked():
    """Each integer argument one past either end of its C type, each float
    beyond float32, each string with a NUL: refused before the call, so the
    other (dummy, NULL) arguments never reach C."""
    lib = _api.current()
    ranges = {c_int: (-2 ** 31, 2 ** 31 - 1), c_long: (-2 ** 63, 2 ** 63 - 1),
              c_size_t: (0, 2 ** 64 - 1), c_uint64: (0, 2 ** 64 - 1)}
    checked = 0
    for name, _, argtypes in _api.PROTOTYPES:
        fn = getattr(lib, name)
        for i, t in enumerate(argtypes):
            if t in ranges:
                bad = [ranges[t][0] - 1, ranges[t][1] + 1]
                err = OverflowError
            elif t is c_float:
                bad, err = [3.5e38, -1e300], OverflowError
            elif t is c_char_p:
                bad, err = [b"a\0b"], ValueError
            else:
                continue
            for value in bad:
                args = [_dummy(a) for a in argtypes]
                args[i] = value
                with pytest.raises(err, match="%s: argument %d" % (name, i + 1)):
                    fn(*args)
                checked += 1
    assert checked >= 150


# -- paths --------------------------------------------------------------------

def test_a_path_with_a_nul_byte_raises_and_touches_no_file(tmp_path):
    target = str(tmp_path / "model.ckpt")
    with models.build("tiny", 4) as net:
        for call in (lambda p: net.save(p), lambda p: net.save(p, extra=b"x"),
                     lambda p: net.load(p), lambda p: net.load(p, extra=True),
                     lambda p: net.write_trace(p), pcnn.checkpoint_cleanup,
                     lambda p: pcnn.Dataset.load_idx(p, p)):
            with pytest.raises(ValueError, match="contains a NUL byte"):
                call(target + "\0.bak")
        net.save(target)  # the same path without the NUL: saved, loaded
        net.load(target)
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt"]


def test_checkpoint_cleanup_removes_a_dead_process_temporary(tmp_path):
    target = str(tmp_path / "c.ckpt")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its pid now belongs to no running process
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in os.uname().nodename)[:32]
    stale = "%s.pcnn-tmp.%s.%d.7" % (target, host, child.pid)
    mine = "%s.pcnn-tmp.%s.%d.7" % (target, host, os.getpid())
    for name in (stale, mine):
        with open(name, "wb") as f:
            f.write(b"partial")
    assert pcnn.checkpoint_cleanup(target) == 1
    assert not os.path.exists(stale) and os.path.exists(mine)
    assert pcnn.checkpoint_cleanup(target) == 0
    with pytest.raises(pcnn.InvalidArgumentError):
        pcnn.checkpoint_cleanup(str(tmp_path) + "/")


# -- arrays -------------------------------------------------------------------

def test_channels_last_input_raises_naming_the_expected_shape():
    x, labels = models.make_data("mix", 1, 4, seed=1)
    nhwc = np.ascontiguousarray(x[0].transpose(0, 2, 3, 1))  # (4, 12, 10, 3)
    with models.build("mix", 4) as net:
        before = net.get_params()
        for call in (lambda a: net.train_step(a, labels[0]),
                     lambda a: net.compute_loss(a, labels[0]),
                     lambda a: net.compute_gradients(a, labels[0]), net.predict):
            with pytest.raises(ValueError, match=r"x has shape \(4, 12, 10, 3\): expected "
                                                 r"\(n, C, H, W\) = \(n, 3, 12, 10\).*"
                                                 r"channels-last \(NHWC\)") as e:
                call(nhwc)
            assert isinstance(e.value, pcnn.ShapeError)
        with pytest.raises(pcnn.ShapeError, match=r"\(4, 3, 10, 12\): expected"):
            net.predict(np.zeros((4, 3, 10, 12), np.float32))
        with pytest.raises(pcnn.ShapeError, match=r"\(4, 360, 1\): expected"):
            net.predict(np.zeros((4, 360, 1), np.float32))
        assert np.array_equal(net.get_params(), before) and net.step == 0
        # The documented shapes: NCHW, and one flat sample per row.
        assert net.predict(x[0]).shape == net.predict(x[0].reshape(4, 360)).shape == (4, 5)


def test_non_contiguous_and_other_dtypes_are_copied_in_nchw_order():
    x, labels = models.make_data("mix", 1, 4, seed=2)
    fortran = np.asfortranarray(x[0])
    assert not fortran.flags.c_contiguous
    with models.build("mix", 4) as net:
        ref = net.predict(x[0])
        assert np.array_equal(net.predict(fortran), ref)
        assert np.array_equal(net.predict(x[0].astype(np.float64)), ref)


def test_regression_targets_must_have_the_output_shape():
    net = pcnn.Net(threads=1, seed=0)
    with net:
        y = net.conv2d(net.input(1, 4, 5), 2, 3, padding=1)  # output (2, 4, 5)
        net.set_loss(y, "mse")
        net.finalize(3)
        x = np.ones((3, 1, 4, 5), np.float32)
        with pytest.raises(pcnn.ShapeError, match=r"targets has shape \(3, 4, 5, 2\): expected "
                                                  r"\(n, C, H, W\) = \(n, 2, 4, 5\).*NHWC"):
            net.train_step(x, targets=np.zeros((3, 4, 5, 2), np.float32))
        with pytest.raises(pcnn.ShapeError, match="targets for 2 samples; x holds 3"):
            net.train_step(x, targets=np.zeros((2, 40), np.float32))
        a = net.compute_loss(x, targets=np.full((3, 2, 4, 5), 0.5, np.float32))
        b = net.compute_loss(x, targets=np.full((3, 40), 0.5, np.float32))
        assert a == b > 0


def test_one_output_regression_takes_targets_as_a_vector():
    net = pcnn.Net(threads=1, seed=0)
    with net:
        net.set_loss(net.dense(net.input(1, 2, 3), 1), "mse")
        net.finalize(4)
        x = np.arange(24, dtype=np.float32).reshape(4, 1, 2, 3) / 24
        t = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
        flat = net.compute_loss(x, targets=t)
        assert flat == net.compute_loss(x, targets=t.reshape(4, 1)) > 0
        assert net.compute_gradients(x, targets=t) == flat
        assert net.train_step(x, targets=t) == flat
        with pytest.raises(pcnn.ShapeError, match="targets for 3 samples; x holds 4"):
            net.train_step(x, targets=t[:3])


def test_train_step_local_checks_shapes_before_c_reads_them():
    net = pcnn.Net(threads=1, seed=0)
    with net:
        x = net.input(2, 3, 4)
        net.set_loss(net.dense(net.conv2d(x, 2, 3, padding=1), 3))
        with pytest.raises(pcnn.InvalidStateError, match="finalize"):
            net.train_step_local(np.zeros((1, 2, 3, 4), np.float32), labels=[0])
        net.finalize(4)
        assert net.layers[0].local_box == ((0, 0, 0), (1, 3, 4))  # one rank: the whole sample
        before = net.get_params()
        with pytest.raises(pcnn.ShapeError, match=r"x_local has shape \(4, 1\): expected "
                                                  r"\(n, C, H, W\) = \(n, 2, 3, 4\)"):
            net.train_step_local(np.zeros((4, 1), np.float32), labels=[0])
        with pytest.raises(pcnn.ShapeError, match="1 labels for 2 samples"):
            net.train_step_local(np.zeros((2, 2, 3, 4), np.float32), labels=[0])
        with pytest.raises(pcnn.ShapeError, match=r"x_local has shape \(2, 2, 4, 3\)"):
            net.train_step_local(np.zeros((2, 2, 4, 3), np.float32), labels=[0, 1])
        assert np.array_equal(net.get_params(), before) and net.step == 0
        # the right shapes: as train_step on one rank, bit for bit
        xs = np.linspace(-1, 1, 48, dtype=np.float32).reshape(2, 2, 3, 4)
        loss = net.train_step_local(xs, labels=[0, 2])
        with pcnn.Net(threads=1, seed=0) as twin:
            a = twin.input(2, 3, 4)
            twin.set_loss(twin.dense(twin.conv2d(a, 2, 3, padding=1), 3))
            twin.finalize(4)
            assert twin.train_step(xs, [0, 2]) == loss
            assert np.array_equal(twin.get_params(), net.get_params())


def test_train_epoch_callback_exception_stops_the_epoch_and_is_raised():
    x, labels = models.make_data("tiny", 1, 20, seed=3)
    with pcnn.Dataset(x[0], labels[0]) as data, models.build("tiny", 4) as net:
        seen = []

        def stop_at_2(info):
            seen.append(info.step)
            if info.step == 2:
                raise KeyError("enough")
        with pytest.raises(KeyError, match="enough"):
            net.train_epoch(data, 4, callback=stop_at_2)
        assert seen == [1, 2] and net.step == 2  # the third step never ran
        # the callback is removed: the next epoch runs every step
        assert np.isfinite(net.train_epoch(data, 4)) and net.step == 7
        done = []
        net.train_epoch(data, 4, callback=done.append)
        assert [s.samples for s in done] == [4, 8, 12, 16, 20] and net.step == 12


class _UseSpy:
    """The library seen through a network: records, per C function, whether
    the network (and a second object) counted as in use during the call."""

    def __init__(self, lib, net, other=None):
        self._real, self._net, self._other, self.seen = lib, net, other, {}

    def __getattr__(self, name):
        real = getattr(self._real, name)
        if not name.startswith("pcnn_"):
            return real

        def call(*args):
            self.seen[name] = (self._net._uses > 0,
                               self._other is None or self._other._uses > 0)
            return real(*args)
        return call


def test_every_layer_and_plan_method_counts_as_a_use_of_its_network():
    net = pcnn.Net(threads=1, seed=0)
    model = pcnn.PerfModel()
    try:
        x = net.input(2, 6, 6)
        b = net.batchnorm(net.conv2d(x, 2, 3, padding=1))
        net.set_loss(net.dense(b, 3))
        spy = _UseSpy(net._lib, net, model)
        net._lib = spy
        b.set_sync(None)
        b.set_distribution((1, 1, 1, 1))
        assert b.distribution == (1, 1, 1, 1)
        for call in (lambda: net.plan_distribution(model, 4), net.plan_report):
            try:  # an uncalibrated model may be refused: the call was made all the same
                call()
            except pcnn.PcnnError:
                pass
        net._lib = spy._real
        net.finalize(4)
        net._lib = spy
        assert b.num_buffers == 4 and b.local_box == ((0, 0, 0), (1, 6, 6))
        b.set_buffers(b.get_buffers())
        net._lib = spy._real
        names = ("pcnn_batchnorm_set_sync", "pcnn_layer_set_distribution",
                 "pcnn_layer_get_distribution", "pcnn_net_plan_distribution",
                 "pcnn_net_plan_report", "pcnn_layer_num_buffers", "pcnn_layer_local_box",
                 "pcnn_layer_get_buffers", "pcnn_layer_set_buffers")
        assert {n: spy.seen.get(n, (False,))[0] for n in names} == {n: True for n in names}
        assert spy.seen["pcnn_net_plan_distribution"][1]  # the model too
        with pytest.raises(TypeError, match="expected a pcnn.PerfModel"):
            pcnn.plan.plan_distribution(net, object(), 4)
    finally:
        net._lib = getattr(net._lib, "_real", net._lib)
        net.close()
        model.close()


# -- close() against a call in another thread ---------------------------------

def _long_epoch_setup(n=6000):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 1, 28, 28)).astype(np.float32)
    return pcnn.Dataset(x, labels=rng.integers(0, 10, n).astype(np.int32))


def _in_background(fn):
    """Run fn in a thread; returns (thread, outcome list, started event)."""
    outcome, started = [], threading.Event()

    def run():
        started.set()
        try:
            outcome.append(fn())
        except Exception as e:  # noqa: BLE001 - reported to the test
            outcome.append(e)
    t = threading.Thread(target=run)
    t.start()
    started.wait()
    return t, outcome


def _wait_until_busy(obj, timeout=10.0):
    end = time.monotonic() + timeout
    while not obj._uses and time.monotonic() < end:
        time.sleep(0.001)
    assert obj._uses, "the background call never started"


def test_close_during_another_threads_call_raises_instead_of_freeing():
    data = _long_epoch_setup()
    net = models.build("lenet", 64)
    t, outcome = _in_background(lambda: net.train_epoch(data, 64))
    _wait_until_busy(net)
    with pytest.raises(pcnn.InvalidStateError, match=r"Net.close\(\): a call on this Net is "
                                                     r"still running"):
        net.close()
    with pytest.raises(pcnn.InvalidStateError, match=r"Dataset.close\(\): a call on this "
                                                     r"Dataset is still running"):
        data.close()  # the epoch reads it
    t.join()
    assert isinstance(outcome[0], float) and outcome[0] > 0  # the epoch finished normally
    net.close()
    data.close()
    with pytest.raises(pcnn.InvalidStateError, match="this Net is closed"):
        net.train_step(np.zeros((1, 1, 28, 28), np.float32), [0])


def test_close_racing_train_steps_never_crashes():
    x, labels = models.make_data("lenet", 1, 8, seed=0)
    for _ in range(3):
        net = models.build("lenet", 8)
        layer = net.layers[1]

        def loop():
            steps = 0
            try:
                while True:
                    net.train_step(x[0], labels[0])
                    layer.get_params()
                    steps += 1
                    time.sleep(0.0002)  # the host's own work between calls
            except pcnn.InvalidStateError as e:
                return steps, str(e)
        t, outcome = _in_background(loop)
        while True:
            try:
                net.close()
                break
            except pcnn.InvalidStateError:  # a step is running: try again
                time.sleep(0.0005)
        t.join()
        steps, why = outcome[0]
        assert "closed" in why and net.closed


def test_closing_a_network_while_its_scheduler_trains_raises():
    data = _long_epoch_setup(3000)
    net = models.build("lenet", 64)
    sched = pcnn.Scheduler(net, 32, 64, 0.05)
    t, outcome = _in_background(lambda: sched.train_epoch(data))
    _wait_until_busy(sched)
    with pytest.raises(pcnn.InvalidStateError, match="Scheduler.close"):
        net.close()
    t.join()
    assert isinstance(outcome[0], float)
    net.close()
    assert sched.closed and net.closed
    data.close()


# -- an invalid Fortran communicator handle -----------------------------------

def test_an_invalid_fortran_handle_raises_instead_of_ending_the_process():
    """pcnn.Comm(12345) goes to pcnn_comm_create_fortran, whose error must
    reach Python as an exception; out of the C int range it never gets
    there.  Run in a child: MPICH's fatal handler would end this one."""
    code = textwrap.dedent("""
        import pcnn
        world = pcnn.Comm.world()
        # 0x44000007 and 0x84000023 ended the process inside MPICH (an
        # assertion) before the library checked the handle's bits.
        for handle in (2 ** 40, 12345, 0x44000007, 0x45000000, 0x84000023 - 2 ** 32):
            try:
                pcnn.Comm(handle)
            except (OverflowError, pcnn.InvalidArgumentError) as e:
                print("refused", handle, type(e).__name__, e)
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(pcnn.__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert "refused 1099511627776 OverflowError" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 0, r.stderr
    for handle in (12345, 0x44000007, 0x45000000, 0x84000023 - 2 ** 32):
        assert f"refused {handle} InvalidArgumentError" in r.stdout, r.stdout + r.stderr
