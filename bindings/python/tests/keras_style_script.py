"""A training script written from the README and Net.fit's docstring by a
Keras user: batch_size, validation_data, a callback reaching the network
as self.model, ModelCheckpoint, CSVLogger.  Runs unchanged on one process
or under mpiexec (every rank passes the same arrays).

    python3 keras_style_script.py OUTDIR        (or mpiexec.mpich -n 2 ...)
"""
import json
import os
import sys

import numpy as np

import pcnn

out = sys.argv[1]
rng = np.random.default_rng(0)
x = rng.normal(size=(96, 1, 6, 6)).astype(np.float32)
y = ((x[:, 0, :3].sum(axis=(1, 2)) > 0).astype(np.int32) + (x[:, 0, 0, 0] > 1)).astype(np.int32)
x_val, y_val = x[64:], y[64:]
x, y = x[:64], y[:64]


class Watch(pcnn.Callback):
    """Records what a Keras callback sees."""

    def __init__(self):
        self.seen = []
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1

    def on_epoch_end(self, epoch, logs=None):
        # self.model is the network: read a parameter count and the option
        self.seen.append([epoch, self.model.num_params, logs["val_loss"], logs["loss"]])


comm = pcnn.Comm.world() if "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_SIZE" in os.environ \
    else None
net = pcnn.Net(comm, seed=3, learning_rate=0.05, optimizer="momentum", threads=1)
h = net.input(1, 6, 6)
h = net.relu(net.conv2d(h, 3, 3, padding=1))
net.set_loss(net.dense(h, 3), "softmax_cross_entropy")
net.finalize(16)
watch = Watch()
ckpt = pcnn.ModelCheckpoint(os.path.join(out, "best-{epoch:02d}.pcnn"), monitor="val_loss",
                            save_best_only=True)
history = net.fit(x, y, batch_size=16, epochs=3, validation_data=(x_val, y_val),
                  callbacks=[watch, ckpt, pcnn.CSVLogger(os.path.join(out, "log.csv"))],
                  verbose=2)
rank = comm.rank if comm is not None else 0
with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
    json.dump({"history": {k: v for k, v in history.history.items() if k != "seconds"},
               "seen": watch.seen, "batches": watch.batches, "saved": ckpt.saved,
               "params": net.get_params().tolist()}, f)
net.close()
if comm is not None:
    comm.close()
