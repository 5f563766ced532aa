"""Run by test_mpi.py as `mpiexec -n 2 /usr/bin/python3 mpi_worker.py OUT X.npy
LABELS.npy`: exercises the binding over MPI (the library initialises MPI
through pcnn.Comm.world()) and writes this rank's results to
OUT/rank<r>.npz and OUT/rank<r>.json for the test to compare."""
import json
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402

import pcnn  # noqa: E402
import models  # noqa: E402

# MPI_Comm_c2f(MPI_COMM_WORLD): a constant in MPICH, index 0 in Open MPI.
WORLD_FINT = {"MPICH": 0x44000000, "Open MPI": 0}


class FakeMpi4pyComm:
    """Stands in for an mpi4py communicator: only .py2f() is used."""

    def py2f(self):
        return WORLD_FINT[pcnn.comm.mpi_info()["family"]]


def main(out, xfile, lfile):
    x, labels = np.load(xfile), np.load(lfile)
    arrays, info = {}, {}
    comm = pcnn.Comm.world()
    info["rank"], info["size"] = comm.rank, comm.size
    info["thread_level"] = comm.thread_level

    # 1. the steps of c_reference's world mode, through the binding
    for name, a in zip(["params", "losses", "pred", "gloss", "grads"],
                       models.run_python("mix", x, labels, comm)):
        arrays["ref_" + name] = a

    # 2. an epoch: one C call, or Python steps with a callback
    with pcnn.Dataset(x.reshape(-1, 3, 12, 10), labels.ravel()) as data:
        data.shuffle(seed=5, epoch=1)
        with models.build("mix", 8, comm) as a, models.build("mix", 8, comm) as b:
            seen = []
            info["epoch_c"] = a.train_epoch(data, 8)
            info["epoch_py"] = b.train_epoch(data, 8, callback=seen.append)
            info["epoch_steps"] = [s.samples for s in seen]
            arrays["epoch_c"], arrays["epoch_py"] = a.get_params(), b.get_params()
            info["eval"] = list(a.evaluate(data))
            t = a.timing()
            info["timing"] = t
            info["overlap"] = a.overlap_ratio()
            info["exchange_bytes"] = a.exchange_bytes()
            info["report_has_comm"] = "comm" in a.timing_report()

            # 3. the batch scheduler, C epochs against callback-driven ones
            sa = pcnn.Scheduler(a, 2, 8, 0.02, interval_epochs=1)
            sb = pcnn.Scheduler(b, 2, 8, 0.02, interval_epochs=1)
            sched_losses = []
            for e in (2, 3):
                data.shuffle(seed=5, epoch=e)
                sched_losses.append((sa.train_epoch(data),
                                     sb.train_epoch(data, callback=lambda s: None)))
            info["sched_losses"] = sched_losses
            info["sched_batch"] = [sa.batch, sb.batch]
            arrays["sched_a"], arrays["sched_b"] = a.get_params(), b.get_params()

            # 4. checkpoint save and load across the ranks
            ckpt = os.path.join(out, "ckpt.pcnn")
            a.save(ckpt, extra=sa.save_state())
            before = a.get_params()
            a.train_epoch(data, 8)
            extra = a.load(ckpt, extra=True)
            sa.load_state(extra)
            info["ckpt_restored"] = bool(np.array_equal(a.get_params(), before))

    # 5. an error on one rank reaches the other
    with models.build("tiny", 4, comm) as net:
        bad = np.array([0, 1], np.int32) + (9 if comm.rank == 1 else 0)
        try:
            net.train_step(np.zeros((2, 4), np.float32), bad)
            info["error"] = None
        except pcnn.PcnnError as e:
            info["error"] = [type(e).__name__, e.message]
        # 6. a communicator cannot close under a network
        try:
            comm.close()
            info["close_in_use"] = None
        except pcnn.InvalidStateError as e:
            info["close_in_use"] = e.message

    # 6b. spatial parallelism: one sample group split along H over both
    # ranks against a private one-rank network, and the box-only step
    def spatial_net(c=None, parts=None):
        net = pcnn.Net()
        x = net.input(2, 11, 9)
        a = net.relu(net.conv2d(x, 4, 3, padding=1))
        a = net.maxpool2d(net.conv2d(a, 4, 5, stride=2, padding=2), 3, 2, 1)
        y = net.dense(a, 3)
        net.set_loss(y, "mse")
        net.configure(learning_rate=0.05, seed=11, threads=1)
        if c is not None:
            net.set_comm(c)
            net.set_distribution(parts)
        net.finalize(3)
        return net

    rng = np.random.default_rng(4)
    xs, ts = rng.standard_normal((3, 2, 11, 9), np.float32), rng.standard_normal((3, 3), np.float32)
    with spatial_net() as one, spatial_net(comm, (1, 1, 2, 1)) as sp, \
            spatial_net(comm, (1, 1, 2, 1)) as boxed:
        conv = sp.layers[1]
        (d0, h0, w0), (dd, hh, ww) = sp.layers[0].local_box
        for _ in range(2):
            one.train_step(xs, targets=ts)
            sp.train_step(xs, targets=ts)
            boxed.train_step_local(np.ascontiguousarray(xs[:, :, h0:h0 + hh, w0:w0 + ww]),
                                   targets=ts)
        p1, p2 = one.get_params(), sp.get_params()
        info["spatial_rel"] = float(np.abs(p1 - p2).max() / np.abs(p1).max())
        info["spatial_local_equal"] = bool(np.array_equal(p2, boxed.get_params()))
        info["spatial_box"] = [h0, hh]
        info["spatial_parts"] = [list(conv.distribution), list(sp.layers[-1].distribution)]
        info["spatial_group"] = list(sp.group_info())
        info["spatial_halo"] = sp.time("halo") > 0 and sp.time("shuffle") > 0
        # the other collective calls under the distribution equal one rank's
        l1, l2 = one.compute_gradients(xs, targets=ts), sp.compute_gradients(xs, targets=ts)
        g1, g2 = one.get_grads(), sp.get_grads()
        e1, e2 = one.evaluate(xs, ts).loss, sp.evaluate(xs, ts).loss
        info["spatial_others_rel"] = max(abs(l1 - l2) / abs(l1),
                                         float(np.abs(g1 - g2).max() / np.abs(g1).max()),
                                         abs(one.compute_loss(xs, targets=ts) -
                                             sp.compute_loss(xs, targets=ts)) / abs(l1),
                                         abs(e1 - e2) / abs(e1))

    # 7. the mpi4py path: anything with .py2f()
    with pcnn.Comm(FakeMpi4pyComm()) as dup:
        info["mpi4py_like"] = [dup.rank, dup.size]

    # 8. a performance model shared from rank 1: its knob on both ranks
    with pcnn.PerfModel() as m:
        m.set_param("link_gbits", 3 if comm.rank == 1 else 7)
        m.share(comm, root=1)
        info["shared_gbits"] = m.get_param("link_gbits")
        # the ranks' pace: every rank's compute calibration compared
        with models.build("tiny", 4, comm) as net:
            m.calibrate_compute(net, budget=0.2)
            m.calibrate_pace(comm)
            info["pace"] = m.get_param("rank_pace")

    # 9. left open on purpose: freed at exit (network, then communicators,
    # then MPI_Finalize by the communicator that initialised MPI)
    global leftover
    leftover = models.build("tiny", 4, comm)
    leftover.train_step(np.zeros((1, 4), np.float32), [comm.rank])

    np.savez(os.path.join(out, "rank%d.npz" % comm.rank), **arrays)
    with open(os.path.join(out, "rank%d.json" % comm.rank), "w") as f:
        json.dump(info, f)  # NaN is written as NaN, which json.load reads


if __name__ == "__main__":
    main(*sys.argv[1:4])
