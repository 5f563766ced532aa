"""The batch scheduler and checkpoints from Python: the callback-driven
epoch equals the C epoch bitwise, options and history are readable, and a
checkpoint with the scheduler's state resumes a run exactly."""
import math

import numpy as np
import pytest

import pcnn
import models


def dataset(n=40, seed=3):
    x, labels = models.make_data("mix", 1, n, seed=seed)
    return pcnn.Dataset(x[0], labels[0])


def test_scheduler_epochs_with_a_callback_equal_the_c_epochs():
    steps = []
    with dataset() as data, models.build("mix", 16) as a, models.build("mix", 16) as b:
        sa = pcnn.Scheduler(a, 4, 16, 0.02, interval_epochs=1, lr_rule="root")
        sb = pcnn.Scheduler(b, 4, 16, 0.02, interval_epochs=1, lr_rule=pcnn.SchedLrRule.ROOT)
        assert sa.get_option("lr_rule") == pcnn.SchedLrRule.ROOT
        assert sa.batch == 4 and math.isnan(sa.get_option("initial_loss"))
        batches, events = [], []
        for epoch in range(1, 4):
            data.shuffle(seed=9, epoch=epoch)
            batches.append(sa.batch)
            la = sa.train_epoch(data)
            lb = sb.train_epoch(data, callback=steps.append)
            assert la == lb
            assert np.array_equal(a.get_params(), b.get_params())
            assert sa.learning_rate == sb.learning_rate and sa.batch == sb.batch
            events.append(sa.events)
        assert batches == [4, 8, 16] and sa.batch == 16
        assert sa.learning_rate == pytest.approx(0.02 * math.sqrt(16 / 4))
        assert sa.epoch == sb.epoch == 3 and sa.interval == 1
        assert sa.get_option("initial_loss") == sb.get_option("initial_loss") == steps[0].loss
        assert sa.thetas() == sb.thetas() and len(sa.thetas()) == 3
        assert sa.theta() == sa.theta(3)
        grew = pcnn.SchedEvent.BATCH_GREW
        assert [grew in e for e in events] == [True, True, False]  # 16 is B_m
        assert a.step == b.step == 10 + 5 + 3
    # the callback saw the scheduler's batch sizes
    assert [s.steps for s in steps if s.step == 1] == [10, 5, 3]


def test_scheduler_share_and_errors():
    with models.build("tiny", 8) as net:
        sched = pcnn.Scheduler(net, 2, 8, 0.1)
        assert sched.share(5) == (0, 5)  # one rank computes everything
        with pytest.raises(pcnn.InvalidArgumentError, match="pcnn_scheduler_create"):
            pcnn.Scheduler(net, 4, 2, 0.1)
        with pytest.raises(pcnn.InvalidArgumentError, match="pcnn_scheduler_set_option"):
            sched.set_option("growth_factor", 0.5)
        with pytest.raises(pcnn.InvalidStateError, match="pcnn_scheduler_end_epoch"):
            sched.end_epoch(1.0)
        assert sched.begin_epoch() == (2, pytest.approx(0.1))
        with pytest.raises(pcnn.InvalidStateError, match="pcnn_scheduler_set_option"):
            sched.set_option("growth_factor", 3)
        with pytest.raises(pcnn.InvalidArgumentError, match="epoch"):
            sched.theta(5)
        with pytest.raises(TypeError):
            sched.load_state("not bytes")


def test_checkpoint_with_scheduler_state_resumes_exactly(tmp_path):
    path = tmp_path / "run.pcnn"
    with dataset() as data:
        def epoch(sched, e):
            data.shuffle(seed=2, epoch=e)
            return sched.train_epoch(data)

        with models.build("mix", 16) as full:
            sched = pcnn.Scheduler(full, 4, 16, 0.02, interval_epochs=1)
            for e in (1, 2):
                epoch(sched, e)
            full.save(path, extra=sched.save_state())
            state = sched.save_state()
            losses_full = [epoch(sched, e) for e in (3, 4)]
            params_full = full.get_params()
        with models.build("mix", 16) as resumed:
            sched = pcnn.Scheduler(resumed, 4, 16, 0.02, interval_epochs=1)
            extra = resumed.load(path, extra=True)
            assert extra == state and len(extra) > 120
            sched.load_state(extra)
            assert sched.epoch == 2 and resumed.step == 10 + 5
            losses = [epoch(sched, e) for e in (3, 4)]
            assert losses == losses_full
            assert np.array_equal(resumed.get_params(), params_full)


def test_checkpoint_without_extra_and_errors(tmp_path):
    path = tmp_path / "plain.pcnn"
    x, labels = models.make_data("tiny", 2, 4)
    with models.build("tiny", 4) as net:
        net.train_step(x[0], labels[0])
        net.save(path)
        saved = net.get_params()
        net.train_step(x[1], labels[1])
        assert net.load(path, extra=True) == b""
        assert np.array_equal(net.get_params(), saved) and net.step == 1
        net.load(str(path))
    with models.build("mix", 4) as other:
        with pytest.raises(pcnn.MismatchError, match="pcnn_net_load"):
            other.load(path)
    damaged = tmp_path / "damaged.pcnn"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    damaged.write_bytes(bytes(raw))
    with models.build("tiny", 4) as net:
        with pytest.raises(pcnn.CorruptError, match="pcnn_net_load"):
            net.load(damaged)
        with pytest.raises(pcnn.FileError):
            net.load(tmp_path / "missing.pcnn")
        with pytest.raises(TypeError, match="extra must be bytes"):
            net.save(path, extra="text")
