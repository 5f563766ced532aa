"""Run by test_fit_mpi.py under mpiexec -n 4: Net.fit and Net.train_epoch
with a callback on spatially split networks, against the same calls on one
rank holding whole samples.  Writes rank<k>.json into argv[1]."""
import io
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pcnn  # noqa: E402


def build(comm=None, parts=None, input_parts=None):
    net = pcnn.Net(seed=5, learning_rate=0.05, threads=1)
    x = net.input(2, 8, 8)
    a = net.relu(net.conv2d(x, 4, 3, padding=1))
    a = net.maxpool2d(net.conv2d(a, 4, 3, padding=1), 2)
    net.set_loss(net.dense(a, 3), "softmax_cross_entropy")
    if comm is not None:
        net.set_comm(comm)
    if parts is not None:
        net.set_distribution(parts)
    if input_parts is not None:
        net.layers[0].set_distribution(input_parts)  # the rest inherit it
    return net


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(a).max())


def main(out):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((22, 2, 8, 8)).astype(np.float32)  # batches of 8, 8, 6
    y = rng.integers(0, 3, size=22, dtype=np.int32)
    comm = pcnn.Comm.world()
    info = {"rank": comm.rank}
    with build() as one:
        one.finalize(8)
        h1 = one.fit(x, y, epochs=2, batch=8, verbose=1, stream=io.StringIO())
        p1 = one.get_params()
    with build() as one_epoch, pcnn.Dataset(x, y) as data:
        one_epoch.finalize(8)
        e1 = one_epoch.train_epoch(data, 8)
        q1 = one_epoch.get_params()

    # 2 sample groups of 2 ranks, each split along H; fit's progress bar
    # (verbose=1) drives the epoch step by step
    with build(comm, (2, 1, 2, 1)) as groups:
        info["groups_before"] = list(groups.group_info())
        groups.finalize(8)
        info["groups_after"] = list(groups.group_info())
        h2 = groups.fit(x, y, epochs=2, batch=8, verbose=1, stream=io.StringIO())
        info["groups_rel"] = rel(p1, groups.get_params())
        info["groups_loss_rel"] = rel(np.array(h1["loss"]), np.array(h2["loss"]))
        # this rank's box only: a wrong shape raises here, before the collective
        (_, h0, w0), (_, hh, ww) = groups.layers[0].local_box
        info["box"] = [h0, hh, w0, ww]
        try:
            groups.train_step_local(np.zeros((2, 2, 8, 8), np.float32), labels=[0, 1])
            info["local_error"] = None
        except pcnn.ShapeError as e:
            info["local_error"] = str(e)

    # the input layer's own distribution: 1 group of all 4 ranks
    with build(comm, input_parts=(1, 1, 2, 2)) as whole, pcnn.Dataset(x, y) as data:
        info["input_set_before"] = list(whole.group_info())
        whole.finalize(8)
        info["input_set_after"] = list(whole.group_info())
        seen = []
        e2 = whole.train_epoch(data, 8, callback=seen.append)
        info["epoch_rel"] = rel(q1, whole.get_params())
        info["epoch_loss_rel"] = abs(e1 - e2) / abs(e1)
        info["steps"] = [[s.step, s.steps, s.samples, s.total] for s in seen]
    json.dump(info, open(os.path.join(out, "rank%d.json" % comm.rank), "w"))


if __name__ == "__main__":
    main(sys.argv[1])
