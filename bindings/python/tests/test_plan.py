"""The automatic parallel strategy from Python (pcnn/plan.py): a model
calibrated on a finalized twin plans the network (one process: {1,1,1,1}),
the report lists it, and the errors arrive as exceptions."""
import numpy as np
import pytest

import pcnn
from pcnn import plan


def build():
    net = pcnn.Net()
    x = net.input(2, 12, 12)
    y = net.relu(net.conv2d(x, 4, 3, padding=1))
    out = net.dense(net.flatten(y), 3)
    net.set_loss(out, pcnn.Loss.MSE)
    return net


def test_plan_and_report_on_one_process():
    twin = build()
    twin.finalize(4)
    rng = np.random.default_rng(0)
    twin.train_step(rng.standard_normal((4, 2, 12, 12), dtype=np.float32),
                    targets=rng.standard_normal((4, 3), dtype=np.float32))
    model = pcnn.PerfModel()
    try:
        twin._lib.pcnn_perfmodel_calibrate_compute(model._handle(), twin._handle(), 0.2)
        net = build()
        with pytest.raises(pcnn.InvalidStateError):
            plan.plan_report(net)
        predicted = plan.plan_distribution(net, model, 4)
        assert predicted > 0
        text = plan.plan_report(net)
        assert "* {1, 1, 1, 1}" in text and "chosen path:" in text
        with pytest.raises(pcnn.InvalidArgumentError):
            plan.plan_distribution(net, model, 0)
        net.finalize(4)
        with pytest.raises(pcnn.InvalidStateError):
            plan.plan_distribution(net, model, 4)
        net.close()
    finally:
        model.close()
        twin.close()


def test_exchange_auto_and_an_attached_model_on_one_process():
    """Net.set_exchange("auto") with a model attached: on one process the
    default's heuristics; Layer.exchange reads what finalize decided."""
    net = build()
    model = pcnn.PerfModel()
    try:
        net.set_exchange("auto")
        net.set_perfmodel(model)
        conv, relu = net.layers[1], net.layers[2]
        with pytest.raises(pcnn.InvalidStateError):
            conv.exchange
        net.finalize(4)
        assert conv.exchange == pcnn.Exchange.ALLTOALL_ALLGATHER
        with pytest.raises(pcnn.InvalidArgumentError):
            relu.exchange
        with pytest.raises(pcnn.InvalidArgumentError):
            net.set_exchange("sideways")
        net.set_perfmodel(None)
        net.close()
    finally:
        model.close()
