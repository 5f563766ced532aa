"""The binding's overhead per training step against the same loop in C.

    PCNN_LIBRARY=build/lib/libpcnn.so OMP_NUM_THREADS=1 \
        /usr/bin/python3 bindings/python/tests/bench_overhead.py \
        [--c-reference build/tests/python/c_reference] [--rounds 7]

For each model (tests/python/c_reference.c builds the same ones) and
batch, runs `c_reference bench` (a C loop of pcnn_net_train_step) and the
same loop through the binding (Net.train_step with float32 / int32 arrays,
and the raw ctypes call with precomputed pointers), alternating, and
reports the minimum over rounds of the time per step.  The difference is
the binding's cost per step.  Not a test: timings are never asserted.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import numpy as np  # noqa: E402

import models  # noqa: E402
from pcnn._arrays import addr  # noqa: E402

CASES = [("tiny", 1, 100000), ("tiny", 64, 50000), ("lenet", 64, 300)]
if os.environ.get("PCNN_BENCH_CASES"):  # e.g. "tiny:1:100000,lenet:64:300"
    CASES = [(m, int(n), int(s)) for m, n, s in
             (c.split(":") for c in os.environ["PCNN_BENCH_CASES"].split(","))]


def c_loop(exe, model, n, steps):
    out = subprocess.run([exe, "bench", model, str(steps), str(n)], check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[1])


def data(model, n):
    # the same values as c_reference bench (an LCG), so the work is equal
    count = n * int(np.prod(models.SAMPLE[model]))
    x = np.empty(count, np.float32)
    r = 12345
    for i in range(count):
        r = (r * 1664525 + 1013904223) & 0xFFFFFFFF
        x[i] = np.float32((r >> 8) / 16777216.0) - np.float32(0.5)
    labels = (np.arange(n) % models.CLASSES[model]).astype(np.int32)
    return x.reshape((n,) + models.SAMPLE[model]), labels


def py_loop(net, x, labels, steps, raw):
    if raw:
        fn, h = net._lib.pcnn_net_train_step, net._h
        fn = getattr(fn, "__wrapped__", fn)  # the bare ctypes function
        xp, lp, loss = addr(x), addr(labels), ctypes.c_float()
        ref, n = ctypes.byref(loss), len(labels)
        for _ in range(20):
            fn(h, n, xp, lp, None, ref)
        t0 = time.perf_counter()
        for _ in range(steps):
            fn(h, n, xp, lp, None, ref)
    else:
        step = net.train_step
        for _ in range(20):
            step(x, labels)
        t0 = time.perf_counter()
        for _ in range(steps):
            step(x, labels)
    return (time.perf_counter() - t0) / steps * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--c-reference", default=os.environ.get("PCNN_C_REFERENCE") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "build", "tests", "python",
        "c_reference"))
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    print("%-6s %5s %12s %12s %12s %12s" % ("model", "batch", "C us/step", "ctypes raw",
                                           "Net.train_step", "overhead"))
    for model, n, steps in CASES:
        x, labels = data(model, n)
        best = {"c": [], "raw": [], "py": []}
        for _ in range(args.rounds):
            best["c"].append(c_loop(args.c_reference, model, n, steps))
            with models.build(model, n) as net:
                best["raw"].append(py_loop(net, x, labels, steps, raw=True))
            with models.build(model, n) as net:
                best["py"].append(py_loop(net, x, labels, steps, raw=False))
        c, raw, py = min(best["c"]), min(best["raw"]), min(best["py"])
        print("%-6s %5d %12.2f %12.2f %12.2f %+11.2f us (%.1f%%)"
              % (model, n, c, raw, py, py - c, 100 * (py - c) / c), flush=True)


if __name__ == "__main__":
    main()
