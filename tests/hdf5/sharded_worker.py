"""Run by test_h5py.py under mpiexec: Net.fit and Net.evaluate with
sharded=True on uneven per-rank shards (arrays and an h5py-written HDF5
shard) equal the unsharded run on the same global data (1e-6), and ranks
that disagree on the mode raise MismatchError on every rank.  Writes "ok"
into rank<k>.txt in argv[1]."""
import os
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bindings", "python"))
import pcnn  # noqa: E402

SHARE = 3      # samples per rank and step
STEPS = 3      # the longest shard's steps; only the last is uneven


def shard_lengths(size):
    # Rank r holds (STEPS - 1) * SHARE + 1 + r % SHARE samples: all differ
    # at np <= 3, and only the last global step is partial.
    return [(STEPS - 1) * SHARE + 1 + r % SHARE for r in range(size)]


def make_net(comm, max_batch):
    net = pcnn.Net(comm, seed=7, learning_rate=0.05, threads=1, timeout_ms=30000)
    x = net.input(2, 4, 4)
    h = net.relu(net.dense(net.flatten(x), 6))
    net.set_loss(net.dense(h, 3))
    net.finalize(max_batch)
    return net


def main(out):
    comm = pcnn.Comm.world()
    rank, size = comm.rank, comm.size
    lengths = shard_lengths(size)
    rng = np.random.default_rng(3)  # the same global data on every rank
    xs = [rng.standard_normal((n, 2, 4, 4)).astype(np.float32) for n in lengths]
    ys = [rng.integers(0, 3, n).astype(np.int32) for n in lengths]
    # The unsharded global order: step k holds every rank's k-th slice.
    gx = np.concatenate([xs[r][k * SHARE:(k + 1) * SHARE]
                         for k in range(STEPS) for r in range(size)])
    gy = np.concatenate([ys[r][k * SHARE:(k + 1) * SHARE]
                         for k in range(STEPS) for r in range(size)])
    assert len(gx) == sum(lengths)
    batch = SHARE * size

    whole = make_net(comm, batch)
    h1 = whole.fit(gx, gy, batch_size=batch, epochs=2, shuffle=False, verbose=0)
    e1 = whole.evaluate(gx, gy)

    sharded = make_net(comm, batch)
    h2 = sharded.fit(xs[rank], ys[rank], batch_size=batch, epochs=2, shuffle=False, verbose=0,
                     sharded=True)
    e2 = sharded.evaluate(xs[rank], ys[rank], sharded=True)
    np.testing.assert_allclose(h2["loss"], h1["loss"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sharded.get_params(), whole.get_params(), rtol=1e-6, atol=1e-6)
    assert abs(e2.loss - e1.loss) < 1e-6 and abs(e2.accuracy - e1.accuracy) < 1e-6, (e1, e2)
    # Equal on every rank: the same bits, whatever the shard.
    mine = np.array([e2.loss, e2.accuracy] + list(h2["loss"]), np.float64)
    first = comm.bcast(mine, root=0)
    assert np.array_equal(first, mine), (first, mine)

    # An HDF5 shard per rank, as a DDP user would open it.
    path = os.path.join(out, "shard%d.h5" % rank)
    with h5py.File(path, "w") as f:
        f["full"] = xs[rank]
        f["unitPar"] = ys[rank]
    ds = pcnn.open_hdf5(path, volumes=False)
    e3 = sharded.evaluate(ds, sharded=True)
    assert abs(e3.loss - e2.loss) < 1e-6 and e3.accuracy == e2.accuracy, (e2, e3)
    assert not ds.sharded  # the mode is the call's, restored after

    # Ranks that disagree on the mode fail together.
    for call in (lambda: sharded.fit(xs[rank], ys[rank], batch_size=batch, verbose=0,
                                     sharded=rank == 0),
                 lambda: sharded.evaluate(ds, sharded=rank == 0)):
        try:
            call()
            raise SystemExit("rank %d: no MismatchError" % rank)
        except pcnn.MismatchError as e:
            assert "sharded mode" in str(e), str(e)
    ds.close()
    whole.close()
    sharded.close()
    open(os.path.join(out, "rank%d.txt" % rank), "w").write("ok")


if __name__ == "__main__":
    main(sys.argv[1])
