"""The networks of tests/python/c_reference.c, built through the binding
call for call, and the reader of its output file."""
import numpy as np

import pcnn

SAMPLE = {"mix": (3, 12, 10), "lenet": (1, 28, 28), "tiny": (4, 1, 1)}
CLASSES = {"mix": 5, "lenet": 10, "tiny": 4}


def build(model, max_batch, comm=None):
    net = pcnn.Net()
    if model == "mix":
        x = net.input(3, 12, 10)
        a = net.conv2d(x, 8, 3, padding=1, bias=False)
        a.set_init("glorot_uniform")
        c = net.relu(net.batchnorm(a, 1e-5, 0.1))
        e = net.conv2d(net.dropout(c, 0.25), 8, 3, padding=1, bias=False)
        g = net.maxpool2d(net.add(c, e), 2, 2)
        i = net.leaky_relu(net.conv2d(g, 4, 1), 0.1)
        y = net.dense(i, 5)
        net.set_optimizer(pcnn.Optimizer.ADAM)
        net.configure(learning_rate=0.01, weight_decay=1e-3, seed=7)
    elif model == "lenet":
        a = net.input(1, 28, 28)
        a = net.maxpool2d(net.relu(net.conv2d(a, 6, 5, padding=2)), 2)
        a = net.maxpool2d(net.relu(net.conv2d(a, 16, 5)), 2)
        a = net.relu(net.dense(a, 120))
        a = net.relu(net.dense(a, 84))
        y = net.dense(a, 10)
        net.set_optimizer("momentum")
        net.configure(learning_rate=0.05, momentum=0.9, seed=3)
    elif model == "tiny":
        y = net.dense(net.input(4, 1, 1), 4)
        net.configure(seed=1)
    else:
        raise ValueError(model)
    net.set_loss(y, "softmax_cross_entropy")
    net.set_option("threads", 1)
    if comm is not None:
        net.set_comm(comm)
    net.finalize(max_batch)
    return net


def make_data(model, steps, n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(steps, n) + SAMPLE[model]).astype(np.float32)
    labels = rng.integers(0, CLASSES[model], size=(steps, n), dtype=np.int32)
    return x, labels


def read_sections(path):
    """The (uint64 count, float32 values) sections c_reference writes."""
    raw = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(raw):
        count = int(np.frombuffer(raw, np.uint64, 1, pos)[0])
        pos += 8
        out.append(np.frombuffer(raw, np.float32, count, pos).copy())
        pos += 4 * count
    return out


def run_python(model, x, labels, comm=None):
    """What c_reference train writes, computed through the binding."""
    steps, n = labels.shape
    rank, size = (comm.rank, comm.size) if comm is not None else (0, 1)
    first, mine = pcnn.comm.share(n, rank, size)
    with build(model, n, comm) as net:
        losses = np.array([net.train_step(x[s, first:first + mine],
                                          labels[s, first:first + mine])
                           for s in range(steps)], np.float32)
        params = net.get_params()
        pred = net.predict(x[0]).ravel()
        gloss = net.compute_gradients(x[0, first:first + mine], labels[0, first:first + mine])
        grads = net.get_grads()
    return [params, losses, pred, np.array([gloss], np.float32), grads]
