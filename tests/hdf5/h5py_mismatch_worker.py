"""Run by test_h5py.py under mpiexec: each rank writes its own HDF5 shard
(the last rank one sample more); Net.fit and Net.evaluate on them must
raise MismatchError on every rank naming both lengths, then agreeing
datasets train.  Writes "ok" into rank<k>.txt in argv[1]."""
import os
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bindings", "python"))
import pcnn  # noqa: E402


def shard(out, rank, n):
    path = os.path.join(out, "shard%d_%d.h5" % (rank, n))
    with h5py.File(path, "w") as f:
        f["full"] = (np.arange(n * 2 * 4 * 4 * 4) % 5).astype(np.int16).reshape(n, 2, 4, 4, 4)
        f["unitPar"] = np.ones((n, 3), np.float32)
    return pcnn.open_hdf5(path)


def main(out):
    comm = pcnn.Comm.world()
    rank, size = comm.rank, comm.size
    net = pcnn.Net(comm, seed=1, learning_rate=0.01, threads=1, timeout_ms=30000)
    x = net.input3d(2, 4, 4, 4)
    net.set_loss(net.dense(net.flatten(x), 3), "mse")
    net.finalize(4)
    ds = shard(out, rank, 8 + (rank == size - 1))
    want = "8 on rank 0, 9 on rank %d" % (size - 1)
    for call in (lambda: net.fit(ds, batch_size=4, epochs=1, verbose=0),
                 lambda: net.evaluate(ds)):
        try:
            call()
            raise SystemExit("rank %d: no MismatchError" % rank)
        except pcnn.MismatchError as e:
            assert want in str(e), str(e)
    ds.close()
    same = shard(out, rank, 8)
    net.fit(same, batch_size=4, epochs=1, verbose=0)
    net.evaluate(same)
    same.close()
    net.close()
    open(os.path.join(out, "rank%d.txt" % rank), "w").write("ok")


if __name__ == "__main__":
    main(sys.argv[1])
