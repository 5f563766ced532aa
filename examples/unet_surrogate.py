#!/usr/bin/python3
"""A U-Net surrogate of the 2D heat equation with libpcnn's Python binding:
the Python version of examples/unet_surrogate.c.

    OMP_NUM_THREADS=1 mpiexec.mpich -n 2 /usr/bin/python3 examples/unet_surrogate.py \
        [--grid 32] [--horizon 10] [--train 768] [--test 128] [--features 16]
        [--epochs 6] [--batch 16] [--lr 0.002] [--min-gain 5] [--seed 0]
        [--plot unet_surrogate.png] [--library path/to/libpcnn.so]

u_t = lap(u) on an N x N grid, zero outside it, explicit Euler with dt 0.2,
from random Gaussian blobs (numpy here; the C example has its own random
numbers, so the two data sets follow the same law with different draws).
The U-Net learns the state --horizon steps ahead from the current one: two
3x3 convolutions per level, stride-2 convolutions down, a transposed
convolution and a nearest upsampling + convolution up, concatenation
skips, a 1x1 convolution added to the input.  Training is data parallel
(Net.train_epoch splits each global batch over the ranks).  Rank 0 prints
per epoch the held-out test MSE against persistence's (predicting no
change) and draws input, prediction, truth and error of held-out states
side by side into --plot (matplotlib is required).  The exit status is 0
when the final MSE is --min-gain times below persistence's, 2 otherwise.
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bindings", "python"))

import pcnn  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grid", type=int, default=32, help="grid N x N, a multiple of 4")
    p.add_argument("--horizon", type=int, default=10, help="time steps predicted ahead")
    p.add_argument("--train", type=int, default=768, help="training states")
    p.add_argument("--test", type=int, default=128, help="held-out states")
    p.add_argument("--features", type=int, default=16, help="channels of the first level")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=16, help="global batch")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate")
    p.add_argument("--min-gain", type=float, default=5.0,
                   help="exit 2 unless persistence's MSE / test MSE >= this")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="threads per rank (0: OMP_NUM_THREADS)")
    p.add_argument("--plot", default="unet_surrogate.png",
                   help="PNG of input, prediction, truth and error (held-out states)")
    p.add_argument("--samples", type=int, default=3, help="held-out states drawn")
    p.add_argument("--library", help="the libpcnn.so to use")
    args = p.parse_args()
    if args.grid < 4 or args.grid % 4:
        p.error("--grid must be a positive multiple of 4 (two levels down)")
    return args


def heat_steps(u, steps):
    """`steps` explicit steps of u_t = lap(u), dt 0.2, zero outside, on a
    batch (n, N, N) at once."""
    for _ in range(steps):
        p = np.pad(u, ((0, 0), (1, 1), (1, 1)))
        u = u + 0.2 * (p[:, :-2, 1:-1] + p[:, 2:, 1:-1] + p[:, 1:-1, :-2] + p[:, 1:-1, 2:]
                       - 4.0 * u)
    return u


def make_set(rng, count, n, horizon):
    """(x, y) of shape (count, 1, n, n): states and the states `horizon`
    steps later, after a random warm-up of 0 to 2 horizons."""
    yy, xx = np.mgrid[0:n, 0:n]
    u = np.zeros((count, n, n))
    for i in range(count):
        for _ in range(rng.integers(3, 8)):
            cy, cx = rng.uniform(0, n, 2)
            width, amp = rng.uniform(1, 4), rng.uniform(-1, 1)
            u[i] += amp * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * width ** 2))
        u[i] = heat_steps(u[i:i + 1], int(rng.integers(0, 2 * horizon)))[0]
    y = heat_steps(u, horizon)
    return (u[:, None].astype(np.float32), y[:, None].astype(np.float32))


def build(comm, args):
    f, n = args.features, args.grid
    net = pcnn.Net(comm, optimizer="adam", learning_rate=args.lr, seed=args.seed,
                   threads=args.threads)

    def conv(x, c, stride=1):
        return net.relu(net.conv2d(x, c, 3, stride=stride, padding=1))

    x = net.input(1, n, n)
    e1 = conv(conv(x, f), f)                              # f x N
    e2 = conv(conv(e1, 2 * f, 2), 2 * f)                  # 2f x N/2
    mid = conv(conv(e2, 4 * f, 2), 4 * f)                 # 4f x N/4
    d = conv(net.concat(net.conv_transpose2d(mid, 2 * f, 2, stride=2), e2), 2 * f)
    d = conv(net.concat(conv(net.upsample2d(d, 2), f), e1), f)
    nxt = net.add(x, net.conv2d(d, 1, 1))                 # current + learned change
    net.set_loss(nxt, "mse")
    net.finalize(args.batch)
    return net


def draw(path, x, pred, truth):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = len(x)
    fig, axes = plt.subplots(rows, 4, figsize=(13, 3.2 * rows), squeeze=False)
    for r in range(rows):
        lim = float(np.abs(np.stack([x[r], pred[r], truth[r]])).max())
        err = pred[r] - truth[r]
        elim = float(np.abs(err).max()) or 1.0
        for c, (img, title, cmap, v) in enumerate((
                (x[r], "input (now)", "RdBu_r", lim),
                (pred[r], "U-Net prediction", "RdBu_r", lim),
                (truth[r], "truth (simulation)", "RdBu_r", lim),
                (err, "error (prediction - truth)", "PuOr_r", elim))):
            ax = axes[r][c]
            im = ax.imshow(img[0], cmap=cmap, vmin=-v, vmax=v)
            ax.set_title(title if c < 3 else "%s\nmax |err| %.2g" % (title, elim), fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
            fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main():
    args = parse_args()
    import matplotlib  # noqa: F401  (required: fail now, not after training)
    if args.library:
        pcnn.load_library(args.library)
    comm = pcnn.Comm.world()
    root = comm.rank == 0
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)  # every rank draws the same states
    train_x, train_y = make_set(rng, args.train, args.grid, args.horizon)
    test_x, test_y = make_set(rng, args.test, args.grid, args.horizon)
    persistence = float(np.mean((test_x.astype(np.float64) - test_y) ** 2))
    train = pcnn.Dataset(train_x, targets=train_y.reshape(args.train, -1))
    net = build(comm, args)
    if root:
        print("libpcnn %s: U-Net surrogate of the 2D heat equation on %dx%d, %d steps ahead\n"
              "%d training and %d held-out states (%.1f s to simulate), %d parameters, "
              "%d rank(s), global batch %d, Adam lr %g\npersistence (predict no change): "
              "test MSE %.3e" % (pcnn.library_version(), args.grid, args.grid, args.horizon,
                                 args.train, args.test, time.perf_counter() - t0,
                                 net.num_params, comm.size, args.batch, args.lr, persistence))
        print(net.summary())
    mse = persistence
    for epoch in range(1, args.epochs + 1):
        train.shuffle(args.seed, epoch)
        e0 = time.perf_counter()
        loss = net.train_epoch(train, args.batch)
        seconds = time.perf_counter() - e0
        mse = net.evaluate(test_x, test_y.reshape(args.test, -1)).loss  # collective
        if root:
            print("epoch %d/%d  train MSE %.3e  test MSE %.3e  persistence %.3e  (%.1fx better)"
                  "  %.1f s" % (epoch, args.epochs, loss, mse, persistence, persistence / mse,
                                seconds), flush=True)
    beats = mse * args.min_gain <= persistence
    if root:
        print("test MSE %.3e vs persistence %.3e: %.1fx better (%s the %.1fx asked)"
              % (mse, persistence, persistence / mse, "meets" if beats else "FAILS",
                 args.min_gain))
        if args.plot and args.samples > 0:
            k = min(args.samples, args.test)
            draw(args.plot, test_x[:k], net.predict(test_x[:k]), test_y[:k])
            print("input, prediction, truth and error: %s" % args.plot)
    net.close()
    train.close()
    comm.close()
    return 0 if beats else 2


if __name__ == "__main__":
    sys.exit(main())
