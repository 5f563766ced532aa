"""Run by test_fit_mpi.py under mpiexec -n 2: Net.fit and state dicts on a
communicator.  Writes rank<k>.npz / rank<k>.json into argv[1]."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pcnn  # noqa: E402


def build(comm):
    net = pcnn.Net(comm, seed=2, learning_rate=0.05, optimizer="momentum", threads=1)
    x = net.input(1, 6, 6)
    x = net.relu(net.batchnorm(net.conv2d(x, 3, 3, padding=1)))
    net.set_loss(net.dense(x, 3), "softmax_cross_entropy")
    net.finalize(16)
    return net


def main(out):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(70, 1, 6, 6)).astype(np.float32)
    y = rng.integers(0, 3, size=70, dtype=np.int32)
    comm = pcnn.Comm.world()
    net = build(comm)
    history = net.fit(x, y, epochs=2, batch=16, validation=(x[:20], y[:20]), verbose=1)
    info = {"history": history, "rank": comm.rank}
    info["state_dict_keys"] = list(net.state_dict())  # this rank's running statistics
    sd = net.state_dict(buffers=False)
    sd["2.batchnorm.running_mean"] = np.array([0.5, -0.25, 0.125], np.float32)
    sd["2.batchnorm.running_var"] = np.array([2.0, 0.5, 1.5], np.float32)
    net.load_state_dict(sd)  # every rank sets the same statistics
    np.savez(os.path.join(out, "rank%d.npz" % comm.rank), params=net.get_params(),
             pred=net.predict(x[:10]), x=x[:10],
             **{k.replace(".", "_"): v for k, v in sd.items()})
    json.dump(info, open(os.path.join(out, "rank%d.json" % comm.rank), "w"))
    net.close()


if __name__ == "__main__":
    main(sys.argv[1])
