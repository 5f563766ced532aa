#!/usr/bin/python3
"""Read throughput of one batch of CosmoFlow universes (4 x W^3 int16,
channels last, one file per sample as published) into float32 NCDHW:

  - libpcnn's HDF5 reader (pcnn.open_hdf5), the whole samples and the half
    box a 2-rank D split reads, from contiguous and from chunked files;
  - h5py reading the whole samples, then astype(float32) and the
    channels-first transpose (what a Python loader feeds a framework);
  - libpcnn's .npy reader (pcnn.open_volumes) on float32 copies of the same
    contents (channels first: what that reader needs).

    /usr/bin/python3 bench/hdf5_read.py [--width 128] [--batch 4] [--reps 3]
                                        [--dir /tmp/pcnn_hdf5_bench]

Warm page cache (the files are written first, then read REPS times, best
kept): this measures the readers' own cost (conversion, transposes, system
calls), not the disk.  One JSON line per reader."""
import argparse
import json
import os
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bindings", "python"))
import pcnn  # noqa: E402


def write(d, width, batch):
    rng = np.random.default_rng(0)
    paths = {"cl": [], "chunked": [], "npy": []}
    manifest = os.path.join(d, "manifest.txt")
    entries = []
    for k in range(batch):
        u = rng.poisson(2.0, size=(width, width, width, 4)).astype(np.int16)
        for kind, kw in (("cl", {}), ("chunked", {"chunks": (16, 16, 16, 4)})):
            p = os.path.join(d, "%s_%d.h5" % (kind, k))
            with h5py.File(p, "w") as f:
                f.create_dataset("full", data=u, **kw)
                f["unitPar"] = np.zeros(4, np.float32)
            paths[kind].append(p)
        p = os.path.join(d, "u_%d.npy" % k)
        np.save(p, np.ascontiguousarray(np.moveaxis(u, -1, 0)).astype(np.float32))
        entries.append((p, np.zeros(4, np.float32)))
    pcnn.write_volume_manifest(manifest, entries)
    return paths, manifest


def best(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/pcnn_hdf5_bench")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    paths, manifest = write(a.dir, a.width, a.batch)
    W, B = a.width, a.batch
    out = np.empty((B, 4, W, W, W), np.float32)
    half = np.empty((B, 4, W // 2, W, W), np.float32)
    floats_mb = out.nbytes / 1e6
    rows = []

    def lib_reader(kind):
        ds = pcnn.open_hdf5(paths[kind], channels_last=True)
        return ds

    for kind in ("cl", "chunked"):
        ds = lib_reader(kind)
        t = best(lambda: ds.batch(0, B, x=out), a.reps)
        b0 = ds.io_bytes()[0]
        th = best(lambda: ds.batch_box(0, B, (0, 0, 0), (W // 2, W, W), x=half), a.reps)
        rows.append({"reader": "libpcnn hdf5 (%s)" % ("contiguous" if kind == "cl" else
                                                      "chunked 16^3x4"),
                     "batch_s": t, "MB_per_s": floats_mb / t, "half_box_s": th,
                     "half_box_bytes_per_pass": (ds.io_bytes()[0] - b0) // a.reps})
        ds.close()

    def h5py_batch():
        for k, p in enumerate(paths["cl"]):
            with h5py.File(p, "r") as f:
                out[k] = np.moveaxis(f["full"][...], -1, 0)  # int16 -> float32 on assignment
    t = best(h5py_batch, a.reps)
    rows.append({"reader": "h5py whole samples + astype + transpose", "batch_s": t,
                 "MB_per_s": floats_mb / t})

    vol = pcnn.open_volumes(manifest, (4, W, W, W), targets=4)
    t = best(lambda: vol.batch(0, B, x=out), a.reps)
    th = best(lambda: vol.batch_box(0, B, (0, 0, 0), (W // 2, W, W), x=half), a.reps)
    rows.append({"reader": "libpcnn .npy float32", "batch_s": t, "MB_per_s": floats_mb / t,
                 "half_box_s": th})
    vol.close()
    base = rows[0]["batch_s"]
    for r in rows:
        r["time_vs_libpcnn_hdf5"] = r["batch_s"] / base
        r.update(width=W, batch=B)
        print(json.dumps(r))


if __name__ == "__main__":
    main()
