#!/usr/bin/python3
"""CosmoFlow (seed 003, Table 2) from files with libpcnn's Python binding:
the twin of examples/cosmoflow.c.

    OMP_NUM_THREADS=1 mpiexec.mpich -n 2 /usr/bin/python3 examples/cosmoflow.py \
        [--width 32] [--train 256] [--test 64] [--epochs 6] [--batch 8] [--lr 5e-4]
        [--channels-scale 1] [--prefetch 2] [--data cosmoflow_data_py] [--reuse] [--f64]
        [--seed 0] [--plot predictions.png] [--library path/to/libpcnn.so]
        [--spatial D|H|W|DH|... [--groups G]] [--hdf5]

Synthetic universes (Gaussian random fields whose power spectrum is set by
four parameters in [-1, 1]: amplitude, slope, small-scale cutoff and the
growth between the four channels) are written as .npy files with a manifest
(numpy.fft here; the C example has its own FFT, so the two data sets differ
in their noise, not in their law).  The network of Table 2 for any W
(3^3 "same" convolutions without bias, conv4 stride 2, leaky ReLU, 3^3
stride-2 average pooling while the output is larger than 2^3, dropout 0.2
before each FC, 2048-256-4, MSE, Adam) trains on the files through
pcnn.open_volumes (read batch by batch, ahead on a helper thread).  Rank 0
prints the test MSE per epoch against the variance of the targets, the
timing breakdown, and with --plot draws predicted against true parameters
(matplotlib).  With --spatial every universe is split across the ranks
(spatial or hybrid parallelism): train_epoch and evaluate read only each
rank's box from the files, and the halo and shuffle times are printed.
With --hdf5 the universes are written as the published CosmoFlow files
instead (h5py: one file per universe, `full` the 4 channels-last int16
counts, `unitPar` the 4 float32 parameters) and read by pcnn.open_hdf5
with the log(1 + counts) transform on reading, each rank its box; the
bytes each rank read are printed.
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bindings", "python"))

import pcnn  # noqa: E402
from pcnn.volumes import open_volumes, write_volume_manifest  # noqa: E402

CHANNELS, PARAMS = 4, 4
NAMES = ("amplitude", "slope", "cutoff", "growth")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--width", type=int, default=32, help="volume side W (samples 4 x W^3)")
    p.add_argument("--train", type=int, default=256, help="training universes")
    p.add_argument("--test", type=int, default=64, help="test universes")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=8, help="global batch")
    p.add_argument("--lr", type=float, default=5e-4, help="Adam learning rate")
    p.add_argument("--slope", type=float, default=0.01, help="leaky ReLU slope")
    p.add_argument("--dropout", type=float, default=0.2, help="dropout before each FC")
    p.add_argument("--channels-scale", type=int, default=1,
                   help="divide every layer's width by K (1: Table 2)")
    p.add_argument("--prefetch", type=int, default=2, help="batches read ahead (0: off)")
    p.add_argument("--data", default="cosmoflow_data_py", help="where the universes go")
    p.add_argument("--reuse", action="store_true", help="keep universes already in --data")
    p.add_argument("--f64", action="store_true", help="write float64 files")
    p.add_argument("--hdf5", action="store_true",
                   help="write and read HDF5 files in the published layout (needs h5py)")
    p.add_argument("--generate-only", action="store_true",
                   help="write the universes and stop (e.g. for the C example's --hdf5-train)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="threads per rank (0: OMP_NUM_THREADS)")
    p.add_argument("--plot", help="PNG of predicted against true parameters (matplotlib)")
    p.add_argument("--library", help="the libpcnn.so to use")
    p.add_argument("--spatial", help="split every universe along these of D, H, W (e.g. D, "
                   "DH): 2 ranks per letter, the last letter the rest of a group")
    p.add_argument("--groups", type=int, default=1, help="with --spatial: sample groups")
    return p.parse_args()


def universe(t, w, rng):
    """A 4 x W^3 Gaussian random field with P(k) = A k^-(1.5 + t2)
    exp(-(k / kc)^2), A = exp(t1), kc = W/8 2^t3, normalised so that A alone
    sets the variance; channel c is the field times exp(0.25 t4)^c."""
    k = np.fft.fftfreq(w) * w
    kk = np.sqrt(k[:, None, None] ** 2 + k[None, :, None] ** 2 + k[None, None, :] ** 2)
    kc = w / 8.0 * 2.0 ** t[2]
    with np.errstate(divide="ignore"):
        p = np.where(kk > 0, kk ** -(1.5 + t[1]) * np.exp(-(kk / kc) ** 2), 0.0)
    field = np.fft.ifftn(np.fft.fftn(rng.standard_normal((w, w, w))) * np.sqrt(p)).real
    field *= np.sqrt(np.exp(t[0]) / p.mean())
    g = np.exp(0.25 * t[3])
    return np.stack([field * g ** c for c in range(CHANNELS)])


def generate(args, rank, size):
    """Universes [0, train) and [train, train + test): rank r writes those
    with index % size == r, rank 0 the manifests."""
    os.makedirs(args.data, exist_ok=True)
    rng_t = np.random.default_rng(args.seed)
    targets = rng_t.uniform(-1, 1, (args.train + args.test, PARAMS))
    if args.hdf5:
        return generate_hdf5(args, rank, size, targets)
    dtype = np.float64 if args.f64 else np.float32
    paths = [os.path.join(args.data, "universe_%05d.npy" % i) for i in range(len(targets))]
    for i in range(rank, len(targets), size):
        rng = np.random.default_rng([args.seed, i])
        np.save(paths[i], universe(targets[i], args.width, rng).astype(dtype))
    if rank == 0:
        write_volume_manifest(os.path.join(args.data, "train.txt"),
                              list(zip(paths[:args.train], targets[:args.train])))
        write_volume_manifest(os.path.join(args.data, "test.txt"),
                              list(zip(paths[args.train:], targets[args.train:])))


COUNT_SHIFT = 2.0  # counts = round(exp(field + SHIFT) - 1): log1p(counts) - SHIFT ~ field


def hdf5_paths(args):
    """DATA/train/universe_*.h5 and DATA/test/universe_*.h5 (patterns the C
    example's --hdf5-train / --hdf5-test take)."""
    n = args.train + args.test
    paths = [os.path.join(args.data, "train" if i < args.train else "test",
                          "universe_%05d.h5" % i) for i in range(n)]
    return paths[:args.train], paths[args.train:]


def generate_hdf5(args, rank, size, targets):
    """The published layout: `full` (W, W, W, 4) int16 counts channels
    last, `unitPar` (4,) float32, one universe per file."""
    try:
        import h5py
    except ImportError:
        print("--hdf5 needs h5py (Debian: python3-h5py, with /usr/bin/python3)")
        sys.exit(77)  # "skipped" to the example test
    paths = sum(hdf5_paths(args), [])
    for sub in ("train", "test"):
        os.makedirs(os.path.join(args.data, sub), exist_ok=True)
    for i in range(rank, len(targets), size):
        rng = np.random.default_rng([args.seed, i])
        field = universe(targets[i], args.width, rng)
        counts = np.rint(np.expm1(np.clip(field + COUNT_SHIFT, 0.0, 10.0)))
        with h5py.File(paths[i], "w") as f:
            f["full"] = np.moveaxis(counts, 0, -1).astype(np.int16)
            f["unitPar"] = targets[i].astype(np.float32)
    if rank == 0:  # the marker --reuse looks for
        open(os.path.join(args.data, "hdf5.txt"), "w").write("%d\n" % len(targets))


def open_hdf5_sets(args):
    train, test = (pcnn.open_hdf5(p, volumes=True, channels_last=True)
                   for p in hdf5_paths(args))
    for d in (train, test):
        d.set_transform(log1p=True, shift=-COUNT_SHIFT)
    return train, test


def spatial_parts(dims, groups, ranks):
    """(P_N, P_D, P_H, P_W) of --spatial and --groups, as in cosmoflow.c."""
    parts = [groups, 1, 1, 1]
    dims = dims.upper()
    if not 1 <= len(dims) <= 3 or groups < 1 or ranks % groups:
        raise SystemExit("--spatial %s --groups %d: does not divide %d ranks"
                         % (dims, groups, ranks))
    left = ranks // groups
    for i, d in enumerate(dims):
        k = "DHW".find(d) + 1
        share = 2 if i + 1 < len(dims) else left
        if k == 0 or parts[k] != 1 or left % share:
            raise SystemExit("--spatial %s --groups %d: does not divide %d ranks"
                             % (dims, groups, ranks))
        parts[k] = share
        left //= share
    return parts


def build(comm, args):
    """Table 2 for any W (B.2's pool6/pool7 rule: pool while > 2^3)."""
    s = args.channels_scale
    net = pcnn.Net(comm, optimizer="adam", learning_rate=args.lr, adam_beta1=0.9,
                   adam_beta2=0.999, adam_epsilon=1e-8, seed=args.seed, threads=args.threads)
    x = net.input3d(CHANNELS, args.width, args.width, args.width)
    for i, ch in enumerate((16, 32, 64, 128, 256, 256, 256)):
        x = net.leaky_relu(net.conv3d(x, max(1, ch // s), 3, stride=2 if i == 3 else 1,
                                      padding=1, bias=False), args.slope)
        if x.output_shape[1] > 2:
            x = net.avgpool3d(x, 3, stride=2, padding=1)
    x = net.flatten(x)
    x = net.leaky_relu(net.dense(net.dropout(x, args.dropout), 2048 // s), args.slope)
    x = net.leaky_relu(net.dense(net.dropout(x, args.dropout), 256 // s), args.slope)
    x = net.dense(net.dropout(x, args.dropout), PARAMS)
    net.set_loss(x, "mse")
    if args.spatial:
        net.set_distribution(spatial_parts(args.spatial, args.groups, comm.size))
        net.set_option(pcnn.Option.SPATIAL_FALLBACK, 1)  # deep layers on fewer ranks
    net.finalize(args.batch)
    return net


def mpi_barrier():
    """MPI_Barrier(MPI_COMM_WORLD) of the MPICH libpcnn runs on (the
    binding has no barrier; MPICH's MPI_COMM_WORLD is 0x44000000)."""
    import ctypes
    mpich = ctypes.CDLL("libmpich.so.12", mode=ctypes.RTLD_GLOBAL)
    if mpich.MPI_Barrier(ctypes.c_int(0x44000000)) != 0:
        raise RuntimeError("MPI_Barrier failed")


def main():
    args = parse_args()
    if args.library:
        pcnn.load_library(args.library)
    comm = pcnn.Comm.world()
    root = comm.rank == 0
    train_m = os.path.join(args.data, "train.txt")
    test_m = os.path.join(args.data, "test.txt")
    marks = [os.path.join(args.data, "hdf5.txt")] if args.hdf5 else [train_m, test_m]
    t0 = time.perf_counter()
    if not (args.reuse and all(os.path.exists(m) for m in marks)):
        generate(args, comm.rank, comm.size)
    mpi_barrier()  # every universe and both manifests are written
    if args.generate_only:
        return
    shape = (CHANNELS,) + (args.width,) * 3
    dtype = "float64" if args.f64 else "float32"
    if args.hdf5:
        train, test = open_hdf5_sets(args)
    else:
        train = open_volumes(train_m, shape, PARAMS, dtype)
        test = open_volumes(test_m, shape, PARAMS, dtype)
    train.set_prefetch(args.prefetch)
    test.set_prefetch(args.prefetch)
    targets = np.concatenate([test.batch_box(i, 1, (0, 0, 0), (1, 1, 1))[1]
                              for i in range(len(test))])
    var = float(targets.var(axis=0).mean())

    net = build(comm, args)
    if root:
        print("libpcnn %s: CosmoFlow on 4 x %d^3 synthetic universes (%.1f s to prepare), "
              "%d parameters, %d/%d train/test, %d rank(s), batch %d, Adam lr %g"
              % (pcnn.library_version(), args.width, time.perf_counter() - t0,
                 net.num_params, len(train), len(test), comm.size, args.batch, args.lr))
        print("variance of the test targets (MSE of predicting their mean): %.4f" % var)
        print(net.summary())
    mse = net.evaluate(test).loss
    if root:
        print("before training: test MSE %.4f" % mse, flush=True)
    for epoch in range(1, args.epochs + 1):
        train.shuffle(args.seed, epoch)
        e0 = time.perf_counter()
        loss = net.train_epoch(train, args.batch)
        seconds = time.perf_counter() - e0
        mse = net.evaluate(test).loss
        if root:
            print("epoch %d/%d: train loss %.4f, test MSE %.4f (%.0f%% of the target variance), "
                  "%.1f s, %.1f samples/s" % (epoch, args.epochs, loss, mse, 100 * mse / var,
                                              seconds, len(train) / seconds), flush=True)
    if root:
        print(net.timing_report())
    if root and args.spatial:
        print("spatial breakdown per step (rank 0): halo %.2f ms (%.2f ms exposed), shuffle "
              "%.2f ms, of %.2f ms" % tuple(1e3 * net.time(w) for w in (
                  pcnn.Time.HALO, pcnn.Time.HALO_EXPOSED, pcnn.Time.SHUFFLE, pcnn.Time.STEP)))
    if args.hdf5:  # each rank its box: a spatial split reads its share of the bytes
        whole = 2 * CHANNELS * args.width ** 3 * (len(train) * args.epochs
                                                  + len(test) * (args.epochs + 1))
        got = train.io_bytes()[0] + test.io_bytes()[0]
        print("rank %d read %.2f MB of HDF5 samples, %.0f%% of the whole samples' %.2f MB"
              % (comm.rank, got / 1e6, 100.0 * got / whole, whole / 1e6), flush=True)
    if args.plot and args.spatial:  # collective: every rank passes each universe
        pred = np.concatenate([net.predict_parallel(test.batch(i, 1)[0])
                               for i in range(len(test))])
    elif root and args.plot:
        pred = np.concatenate([net.predict(test.batch(i, 1)[0]) for i in range(len(test))])
    if root and args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("--plot needs python3-matplotlib")
        else:
            fig, axes = plt.subplots(1, PARAMS, figsize=(4 * PARAMS, 4))
            for k, ax in enumerate(axes):
                ax.scatter(targets[:, k], pred[:, k], s=8)
                ax.plot([-1, 1], [-1, 1], "k--", lw=1)
                ax.set_title(NAMES[k])
                ax.set_xlabel("true")
                ax.set_ylabel("predicted")
            fig.tight_layout()
            fig.savefig(args.plot)
            print("predicted vs true: %s" % args.plot)
    net.close()
    train.close()
    test.close()
    comm.close()


if __name__ == "__main__":
    main()
