#!/usr/bin/python3
"""Train LeNet-5 on Fashion-MNIST with libpcnn's Python binding, on one or
several MPI ranks.

    OMP_NUM_THREADS=1 mpiexec.mpich -n 2 /usr/bin/python3 examples/fashion_mnist.py \
        [--epochs 5] [--batch 64] [--lr 0.05] [--momentum 0.9] [--warmup 1]
        [--decay-every 3] [--decay 0.1] [--seed 0] [--threads 0] [--no-overlap]
        [--exchange a2a|allreduce] [--engine auto|thread|nonblocking]
        [--train-limit N] [--schedule START_BATCH] [--csv curves.csv]
        [--plot curves.png] [--trace FILE] [--progress auto|bar|lines|off]
        [--data /usr/share/datasets/fashion-mnist] [--library path/to/libpcnn.so]
        [--mpi4py]

The Python twin of examples/fashion_mnist.c, with the C example's
defaults option for option: LeNet-5 with Glorot-uniform weights, momentum
SGD (lr 0.05, momentum 0.9) on global batches of 64 samples split over the
ranks, a one-epoch linear warm-up, the learning rate x 0.1 every 3
epochs, 5 epochs, the training set shuffled by (seed, epoch) and
--train-limit taking the first N samples of each epoch's order.  On the
same ranks and threads it computes the same steps: the losses and
accuracies it prints equal the C example's (checked by the meson test
example_fashion_mnist_py_matches_c).  What differs is the driver: the C
example copies each rank's share of every batch itself and calls
pcnn_net_train_step; this one calls Net.train_epoch (the same steps,
driven by the binding).  Rank 0 prints the
model summary, a progress bar per epoch (redrawn in place on a terminal,
plain lines otherwise: under mpiexec stdout is a pipe, so pass --progress
bar to get the bar there), per-epoch metrics, and at the end libpcnn's
timing breakdown.  --csv and --plot write the training curves (the plot
needs python3-matplotlib).  --schedule B_s grows the batch from B_s to
--batch with the adaptive batch scheduler, the learning rate starting at
--lr x B_s / --batch and following the batch (the step decay is then
off: the scheduler decays on plateaus).  MPI is initialised by libpcnn
(pcnn.Comm.world()), or by mpi4py with --mpi4py (an MPICH build of mpi4py:
Debian's python3-mpi4py uses Open MPI and cannot share a process with
libpcnn's MPICH).
"""
import argparse
import csv
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bindings", "python"))

import pcnn  # noqa: E402

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training-set pixel statistics
ENGINES = ["auto", "thread", "nonblocking"]  # the values of the engine option


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=64, help="global batch (largest, with --schedule)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--warmup", type=int, default=1, metavar="EPOCHS",
                   help="ramp the learning rate up over the first EPOCHS epochs (0: off)")
    p.add_argument("--decay-every", type=int, default=3,
                   help="multiply the learning rate by --decay every N epochs (0: off)")
    p.add_argument("--decay", type=float, default=0.1)
    p.add_argument("--no-overlap", action="store_true",
                   help="exchange gradients after the backward pass, not during it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: bf16 products with fp32 sums and master weights")
    p.add_argument("--threads", type=int, default=0,
                   help="OpenMP threads per rank (0: OMP_NUM_THREADS)")
    p.add_argument("--exchange", choices=["a2a", "allreduce"], default="a2a")
    p.add_argument("--engine", choices=["auto", "thread", "nonblocking"], default="auto",
                   help="progress engine (auto: the communication thread when MPI provides "
                        "THREAD_MULTIPLE)")
    p.add_argument("--trace", metavar="FILE",
                   help="write each rank's last steps as a Chrome trace FILE.rankR.json")
    p.add_argument("--schedule", type=int, metavar="START_BATCH",
                   help="adaptive batch: grow from START_BATCH to --batch")
    p.add_argument("--train-limit", type=int, metavar="N",
                   help="train on the first N samples of each epoch's order (all 60000)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--csv", help="write per-epoch curves to this CSV file")
    p.add_argument("--plot", help="write the curves as a PNG plot (matplotlib)")
    p.add_argument("--progress", choices=["auto", "bar", "lines", "off"], default="auto")
    p.add_argument("--library", help="the libpcnn.so to use (default: see pcnn.load_library)")
    p.add_argument("--mpi4py", action="store_true", help="let mpi4py initialise MPI")
    return p.parse_args()


class Progress:
    """A progress bar redrawn in place on a terminal; plain lines every 10%
    of the epoch otherwise.  Only rank 0 draws."""

    def __init__(self, mode, enabled, label):
        if mode == "auto":
            # Open MPI hands every rank a pseudo-terminal even when the
            # output goes to a pipe: only a real terminal gets the bar.
            mode = "bar" if sys.stdout.isatty() and "OMPI_COMM_WORLD_SIZE" not in os.environ \
                else "lines"
        self.mode = mode if enabled else "off"
        self.label = label
        self.t0 = time.perf_counter()
        self.last_draw = 0.0
        self.next_tenth = 1
        self.loss = None

    def __call__(self, s):
        # an exponential average smooths the per-step loss for display
        self.loss = s.loss if self.loss is None else 0.95 * self.loss + 0.05 * s.loss
        if self.mode == "off":
            return
        now = time.perf_counter()
        elapsed = now - self.t0
        rate = s.samples / elapsed if elapsed > 0 else 0.0
        if self.mode == "bar":
            if now - self.last_draw < 0.1 and s.step != s.steps:
                return
            self.last_draw = now
            width = 30
            fill = int(width * s.samples / s.total)
            eta = (s.total - s.samples) / rate if rate > 0 else 0.0
            sys.stdout.write("\r%s [%s%s] %3d%% %d/%d  loss %.4f  %.0f samples/s  ETA %3.0fs "
                             % (self.label, "#" * fill, "." * (width - fill),
                                100 * s.samples // s.total, s.samples, s.total, self.loss,
                                rate, eta))
            if s.step == s.steps:
                sys.stdout.write("\r" + " " * 100 + "\r")
            sys.stdout.flush()
        elif s.samples * 10 >= self.next_tenth * s.total:
            while s.samples * 10 >= self.next_tenth * s.total:
                self.next_tenth += 1
            if s.step != s.steps:
                print("%s %3d%%  %d/%d samples  loss %.4f  %.0f samples/s"
                      % (self.label, 100 * s.samples // s.total, s.samples, s.total,
                         self.loss, rate), flush=True)


def build_lenet(comm, args, threads, steps_per_epoch):
    """LeNet-5 as in the peers' models.py: conv5(pad 2) relu pool, conv5 relu
    pool, dense 120, 84, 10, with Glorot-uniform weights."""
    net = pcnn.Net(comm, optimizer="momentum", learning_rate=args.lr,
                   momentum=args.momentum, warmup_steps=args.warmup * steps_per_epoch,
                   seed=args.seed, threads=threads, overlap=0 if args.no_overlap else 1,
                   engine=ENGINES.index(args.engine),
                   precision=pcnn.Precision.BF16 if args.precision == "bf16" else pcnn.Precision.FP32)
    if args.trace:
        net.configure(trace_events=4096)
    if args.decay_every > 0 and not args.schedule:
        net.configure(decay_every_steps=args.decay_every * steps_per_epoch,
                      decay_factor=args.decay)

    def weights(layer):
        layer.set_init("glorot_uniform")
        return layer

    x = net.input(1, 28, 28)
    x = net.maxpool2d(net.relu(weights(net.conv2d(x, 6, 5, padding=2))), 2)
    x = net.maxpool2d(net.relu(weights(net.conv2d(x, 16, 5))), 2)
    x = net.relu(weights(net.dense(x, 120)))
    x = net.relu(weights(net.dense(x, 84)))
    net.set_loss(weights(net.dense(x, 10)), "softmax_cross_entropy")
    net.set_exchange("allreduce" if args.exchange == "allreduce" else "alltoall_allgather")
    net.finalize(args.batch)
    return net


def load(args):
    path = lambda name: os.path.join(args.data, name)  # noqa: E731
    train = pcnn.Dataset.load_idx(path("train-images-idx3-ubyte.gz"),
                                  path("train-labels-idx1-ubyte.gz"), MEAN, STD)
    test = pcnn.Dataset.load_idx(path("t10k-images-idx3-ubyte.gz"),
                                 path("t10k-labels-idx1-ubyte.gz"), MEAN, STD)
    return train, test


def epoch_data(train, args, epoch):
    """The epoch's samples in order: the shuffled training set, or with
    --train-limit a dataset of the first N samples of that order (as the C
    example's loop takes them); the caller closes it."""
    train.shuffle(args.seed, epoch)
    if not args.train_limit or args.train_limit >= len(train):
        return train
    x, y = train.batch(0, args.train_limit)
    return pcnn.Dataset(x, labels=y)


def write_plot(path, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    epochs = [r["epoch"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(epochs, [r["train_loss"] for r in rows], "o-", label="training")
    ax1.plot(epochs, [r["test_loss"] for r in rows], "s-", label="test")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("cross-entropy loss")
    ax1.legend()
    ax1.grid(alpha=0.3)
    ax2.plot(epochs, [100 * r["test_accuracy"] for r in rows], "s-", color="C1")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("test accuracy (%)")
    ax2.grid(alpha=0.3)
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle("LeNet-5 on Fashion-MNIST (libpcnn)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    args = parse_args()
    if args.library:
        pcnn.load_library(args.library)
    if args.mpi4py:
        from mpi4py import MPI
        comm = pcnn.Comm(MPI.COMM_WORLD)
    else:
        comm = pcnn.Comm.world()
    root = comm.rank == 0
    threads = args.threads or os.environ.get("OMP_NUM_THREADS", "all")
    train, test = load(args)
    n_train = min(len(train), args.train_limit or len(train))
    net = build_lenet(comm, args, args.threads, -(-n_train // args.batch))
    # --lr is the rate of the full batch: start from its linear share
    sched = (pcnn.Scheduler(net, args.schedule, args.batch,
                            args.lr * args.schedule / args.batch)
             if args.schedule else None)
    if root:
        print("libpcnn %s (%s) — LeNet-5 on Fashion-MNIST, %d rank(s) x %s thread(s), "
              "global batch %s, %s exchange"
              % (pcnn.library_version(), pcnn.library_path(), comm.size, threads,
                 "%d -> %d (adaptive)" % (args.schedule, args.batch) if sched else args.batch,
                 "allreduce" if args.exchange == "allreduce" else "all-to-all + all-gather"))
        print("training samples %d, test samples %d" % (n_train, len(test)))
        print(net.summary(), flush=True)

    rows, total = [], 0.0
    for epoch in range(1, args.epochs + 1):
        data = epoch_data(train, args, epoch)
        bar = Progress(args.progress, root, "epoch %d/%d" % (epoch, args.epochs))
        batch = sched.batch if sched else args.batch
        t0 = time.perf_counter()
        if sched:
            train_loss = sched.train_epoch(data, callback=bar)
        else:
            train_loss = net.train_epoch(data, args.batch, callback=bar)
        if data is not train:
            data.close()
        seconds = time.perf_counter() - t0
        total += seconds
        lr = net.get_option("learning_rate")
        test_loss, accuracy = net.evaluate(test)
        rows.append(dict(epoch=epoch, train_loss=train_loss, test_loss=test_loss,
                         test_accuracy=accuracy, epoch_seconds=seconds, batch=batch, lr=lr))
        if root:
            print("epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy %.2f%%  "
                  "%.2f s  %.0f samples/s%s"
                  % (epoch, args.epochs, train_loss, test_loss, 100 * accuracy, seconds,
                     n_train / seconds,
                     "  batch %d  lr %.4g" % (batch, lr) if sched else ""), flush=True)

    if root:
        print("trained %d epochs in %.2f s; final test accuracy %.2f%%"
              % (args.epochs, total, 100 * rows[-1]["test_accuracy"]))
        print("\ntiming breakdown (rank 0):")
        print(net.timing_report(), end="")
    if args.trace:
        path = "%s.rank%d.json" % (args.trace, comm.rank)
        net.write_trace(path)
        if root:
            print("trace written to %s (one file per rank)" % path)
    if root:
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
            print("curves written to %s" % args.csv)
        if args.plot:
            write_plot(args.plot, rows)
            print("plot written to %s" % args.plot)
    # Deterministic cleanup, in dependency order (the binding would also
    # do this at exit).
    if sched:
        sched.close()
    net.close()
    train.close()
    test.close()
    comm.close()


if __name__ == "__main__":
    main()
