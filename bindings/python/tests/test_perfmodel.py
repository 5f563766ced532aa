"""pcnn.PerfModel: calibration of a network, predictions (what-if for 1024
ranks with no communicator), validation against the network's own timings,
the model file, and bad inputs raising the library's errors."""
import math
import os
import re

import pytest

import pcnn
from models import build, make_data


@pytest.fixture(scope="module")
def lenet():
    """LeNet-5 after a few training steps (calibration matches training
    best after some) and a model calibrated on it."""
    net = build("lenet", 32)
    x, labels = make_data("lenet", 3, 32, seed=1)
    for s in range(3):
        net.train_step(x[s], labels[s])
    model = pcnn.PerfModel()
    model.calibrate_compute(net, budget=0.5)
    yield net, model
    model.close()
    net.close()


def test_collective_formulas_through_the_binding():
    with pcnn.PerfModel() as m:
        assert m.collective_time("allreduce", 1, 1e6) == 0.0  # one rank: no traffic
        m.set_param("link_gbits", 1)
        m.set_param(pcnn.PerfParam.ALPHA_S, 0)
        # Ring all-gather: (P - 1) / P of the bytes over the link.
        assert m.collective_time(pcnn.Collective.ALLGATHER, 4, 1e6) == \
            pytest.approx(0.75 * 1e6 * 8e-9, rel=1e-9)
        assert m.get_param("beta_s_per_byte") == pytest.approx(8e-9)
        times = [m.collective_time("allreduce", 8, b) for b in (1e3, 1e5, 1e7)]
        assert times[0] < times[1] < times[2]
        params = m.params()
        assert params["link_gbits"] == 1 and params["strategy"] == -1


def test_predict_what_if_1024_ranks_without_communicator(lenet):
    net, model = lenet
    one = model.predict(net, ranks=1, global_batch=32)
    assert set(one) == {"forward", "backward", "update", "comm", "exposed", "halo",
                        "halo_exposed", "shuffle", "step", "flags"}
    assert one["halo"] == one["halo_exposed"] == one["shuffle"] == 0  # no distribution
    assert one["forward"] > 0 and one["backward"] > 0 and one["update"] > 0
    assert one["comm"] == 0 and one["exposed"] == 0  # one rank: no collectives
    assert one["step"] >= one["forward"] + one["backward"]
    # Per layer: the layers' forward times add up to the network's.
    fwd = sum(model.layer_time(layer, "forward") for layer in net.layers)
    assert fwd == pytest.approx(one["forward"], rel=1e-9)

    slow = model.predict(net, ranks=1024, global_batch=32 * 1024, link_gbits=1)
    fast = model.predict(net, ranks=1024, global_batch=32 * 1024, link_gbits=100)
    assert slow["comm"] > 1.5 * fast["comm"] > 0  # latency (alpha) weighs on both
    assert slow["step"] > fast["step"]
    # Same local batch: the same computation.
    assert fast["forward"] == pytest.approx(one["forward"], rel=1e-9)
    # The keyword was for that prediction only.
    assert model.get_param("link_gbits") == 0
    # Without overlap nothing hides: exposed is all of the communication.
    flat = model.predict(net, ranks=1024, global_batch=32 * 1024, overlap=False, link_gbits=1)
    assert flat["exposed"] == pytest.approx(flat["comm"], rel=1e-6)
    assert model.predict(net, ranks=1024, global_batch=32 * 1024, link_gbits=None,
                         engine=None) == model.predict(net, ranks=1024, global_batch=32 * 1024)
    alltoall = model.predict(net, ranks=64, strategy="alltoall_allgather")
    assert alltoall["comm"] > 0
    assert model.get_param("strategy") == -1


def test_validate_against_the_networks_timings(lenet):
    net, model = lenet
    x, labels = make_data("lenet", 4, 32, seed=2)
    net.reset_timing()
    for s in range(4):
        net.train_step(x[s], labels[s])
    predicted = model.predict(net, ranks=1, global_batch=32)
    v = model.validate(net)
    measured = net.time("step")
    assert v["step_re"] == pytest.approx((predicted["step"] - measured) / measured, rel=1e-6)
    assert set(v["wre"]) == {"forward", "backward", "update"}
    assert all(math.isfinite(w) and w >= 0 for w in v["wre"].values())
    assert "conv2d" in v["table"] and "maxpool2d" in v["table"]


def test_save_load_round_trip(lenet, tmp_path):
    net, model = lenet
    model.set_param("gamma_s_per_byte", 3e-10)
    path = tmp_path / "lenet.pcnnperf"
    model.save(path)
    with pcnn.PerfModel.load(str(path)) as back:
        assert back.report() == model.report()
        assert back.get_param("gamma_s_per_byte") == pytest.approx(3e-10)
        a = model.predict(net, ranks=16, link_gbits=10)
        b = back.predict(net, ranks=16, link_gbits=10)
        assert a == b
        assert back._handle() != model._handle()  # the handle other code passes to C


def test_bad_inputs_raise_the_librarys_errors(lenet, tmp_path):
    net, model = lenet
    with pcnn.PerfModel() as m:
        with pytest.raises(pcnn.InvalidStateError, match="no prediction"):
            m.layer_time(None, "step")
        with pytest.raises(pcnn.InvalidStateError):
            m.predict(net, ranks=4)  # not calibrated on any network
        with pytest.raises(pcnn.InvalidArgumentError, match="NaN"):
            m.set_param("link_gbits", float("nan"))
        with pytest.raises(pcnn.InvalidArgumentError, match="link bandwidth"):
            m.set_param("link_gbits", -1)
        with pytest.raises(pcnn.InvalidArgumentError, match="must be >= 1"):
            m.set_param("memory_contention", 0.5)
        assert m.get_param("memory_contention") == 1.0  # uncalibrated: none
        m.set_param("memory_contention", 1.5)
        assert m.get_param(pcnn.PerfParam.MEMORY_CONTENTION) == 1.5
        assert m.get_param("rank_pace") == 1.0
        with pytest.raises(pcnn.InvalidArgumentError, match="rank pace 0.5"):
            m.set_param("rank_pace", 0.5)
        m.set_param(pcnn.PerfParam.RANK_PACE, 1.25)
        assert m.get_param("rank_pace") == 1.25
        with pytest.raises(pcnn.InvalidArgumentError, match="bytes -8"):
            m.collective_time("allreduce", 4, -8)
        with pytest.raises(pcnn.InvalidArgumentError, match="ranks 0"):
            m.collective_time("allreduce", 0, 8)
        with pytest.raises(pcnn.InvalidArgumentError, match="unknown perfparam"):
            m.set_param("bandwidth", 1)
        with pytest.raises(pcnn.InvalidArgumentError, match="budget"):
            m.calibrate_compute(net, budget=-1)
        with pytest.raises(TypeError):
            m.calibrate_compute("lenet")
    with pytest.raises(pcnn.InvalidArgumentError, match="ranks 0"):
        model.predict(net, ranks=0, global_batch=32)
    with pytest.raises(pcnn.InvalidArgumentError, match="global_batch"):
        model.predict(net, ranks=2, global_batch=0)
    with pytest.raises(pcnn.InvalidArgumentError):
        model.predict(net, ranks=2, strategy="carrier_pigeon")
    with pytest.raises(TypeError, match="unknown keyword"):
        model.predict(net, ranks=2, bandwidth=1)
    # A network other than the calibrated one.
    with build("mix", 8) as other:
        with pytest.raises(pcnn.MismatchError):
            model.predict(other, ranks=2)
    # Files: not a model, another format version.
    junk = tmp_path / "junk"
    junk.write_bytes(b"not a performance model at all, just bytes" * 4)
    with pytest.raises(pcnn.CorruptError):
        pcnn.PerfModel.load(junk)
    path = tmp_path / "m.pcnnperf"
    model.save(path)
    raw = bytearray(path.read_bytes())
    raw[8] = 1  # the format version (u32 after the 8-byte magic): an older one
    path.write_bytes(bytes(raw))
    with pytest.raises(pcnn.UnsupportedError,
                       match="version 1; this library reads versions 2 to 6"):
        pcnn.PerfModel.load(path)
    with pytest.raises(pcnn.FileError):
        pcnn.PerfModel.load(os.path.join(str(tmp_path), "missing", "m.pcnnperf"))


def test_regressors_cost_a_network_never_timed():
    """Fitted regressors (every layer kind, pooling included) predict LeNet
    without any compute calibration."""
    with pcnn.PerfModel() as m, build("lenet", 32) as net:
        m.fit_regressors(threads=1, budget=3.0, seed=1)  # 1 s fits nothing under load
        report = m.report()
        assert "pool2d_fwd" in report and "conv2d_fwd" in report
        t = m.predict(net, ranks=8, global_batch=256, compute_source="regressors")
        assert t["forward"] > 0 and t["backward"] > 0
        assert all(m.layer_time(layer, "forward") > 0 for layer in net.layers
                   if layer.kind in ("conv2d", "maxpool2d", "dense"))
        with pytest.raises(pcnn.InvalidStateError):
            m.predict(net, ranks=8, compute_source="timings")  # none taken


def test_closed_model_raises():
    m = pcnn.PerfModel()
    m.close()
    m.close()  # idempotent
    with pytest.raises(pcnn.InvalidStateError, match="closed"):
        m.report()
    with pytest.raises(pcnn.InvalidStateError, match="closed"):
        m._handle()


def test_confidence_flags_say_what_the_figures_rest_on(lenet):
    net, calibrated = lenet
    with pcnn.PerfModel() as fresh:
        flags, text = fresh.confidence(2)
        assert flags == ["LINK_DEFAULTS", "COMPUTE_ESTIMATED"]
        assert "calibrate_comm" in text and "calibrate_compute" in text
        assert fresh.confidence(1)[0] == ["COMPUTE_ESTIMATED"]
        fresh.set_param("link_gbits", 10)
        assert fresh.confidence(2)[0] == ["COMPUTE_ESTIMATED"]  # a link set by hand
        with pytest.raises(pcnn.InvalidArgumentError, match="ranks"):
            fresh.confidence(-1)
    # The calibrated compute table: no compute estimate; the link never
    # calibrated, so predictions on several ranks carry LINK_DEFAULTS.
    out = calibrated.predict(net, ranks=4)
    assert "COMPUTE_ESTIMATED" not in out["flags"] and "LINK_DEFAULTS" in out["flags"]
    assert "LINK_DEFAULTS" not in calibrated.predict(net, ranks=1)["flags"]
    assert "LINK_DEFAULTS" not in calibrated.predict(net, ranks=4, link_gbits=1)["flags"]


def test_calibration_progress_through_the_log_callback(lenet):
    net, _ = lenet
    heard = []
    with pcnn.PerfModel() as m:
        m.set_log_callback(lambda level, message: heard.append((level, message)))
        m.calibrate_compute(net, budget=0.2)
        assert [level for level, _ in heard] == [pcnn.LogLevel.INFO] * 5, heard
        assert re.match(r"calibrate_compute: \d+ layers at batches \d+ and \d+, budget 0.2 s$",
                        heard[0][1]), heard
        assert heard[-1][1].startswith("calibrate_compute: done in"), heard
        # An exception cannot cross C: kept, and the calibration goes on.
        m.set_log_callback(lambda level, message: 1 / 0)
        m.calibrate_compute(net, budget=0.2)
        assert isinstance(m.log_callback_error, ZeroDivisionError)
        m.set_log_callback(None)
        heard.clear()
        m.calibrate_compute(net, budget=0.2)
        assert heard == []
