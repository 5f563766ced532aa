#!/usr/bin/env python3
"""Run test_trace on --np ranks and check its traces: the merged file is one
valid Chrome trace holding every rank as its own process (pid = world rank,
named), one step marker per step on every rank, the ranks' steps
overlapping on the common clock within the measured error (each step's
agreements hold every rank inside the step at once), and the per-rank
files merged by pcnn_merge_traces give the same events."""
import argparse
import json
import os
import shutil
import subprocess
import sys

failures = 0


def expect(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failures += 1


def main():
    p = argparse.ArgumentParser()
    for a in ("--mpiexec", "--program", "--merge", "--dir"):
        p.add_argument(a, required=True)
    p.add_argument("--np", type=int, required=True)
    a = p.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    run = subprocess.run([a.mpiexec, "-n", str(a.np), a.program, a.dir],
                         capture_output=True, text=True, timeout=100)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    expect(run.returncode == 0, "the traced run succeeds")
    if run.returncode:
        return 1
    steps = int([l for l in run.stdout.splitlines() if l.startswith("steps ")][0].split()[1])

    with open(os.path.join(a.dir, "merged.json")) as f:
        doc = json.load(f)  # raises on invalid JSON: the test fails
    events = doc["traceEvents"]
    pids = {e["pid"] for e in events}
    expect(pids == set(range(a.np)), f"the merged trace holds every rank's process: {sorted(pids)}")
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    expect(names == {r: f"rank {r}" for r in range(a.np)}, "each process is named after its rank")
    tracks = {(e["pid"], e["tid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    expect(tracks == {(r, t, n) for r in range(a.np)
                      for t, n in enumerate(("compute", "communication", "steps"))},
           "each process names its compute, communication and steps tracks")
    sync = {e["pid"]: e["args"] for e in events if e["name"] == "clock sync"}
    expect(all(sync[r]["measured"] and sync[r]["measurements"] == 2 for r in range(a.np)),
           "every rank's clock was measured at finalize and at the merged write")
    expect(sync[0]["offset_us"] == 0 and sync[0]["error_us"] == 0, "rank 0 is the reference")
    # One machine: one monotonic clock, so the true offset is 0.
    expect(all(abs(s["offset_us"]) <= s["error_us"] + 1 for s in sync.values()),
           "each measured offset is within its error bound of the truth (0 on one machine)")

    marks = {}
    for e in events:
        if e.get("cat") == "step":
            marks.setdefault(e["pid"], []).append(e)
    expect(all(len(marks.get(r, [])) == steps for r in range(a.np)),
           f"{steps} step markers on every rank")
    expect(all(sorted(m["args"]["step"] for m in marks[r]) == list(range(steps))
               for r in range(a.np)), "the markers name steps 0 .. steps - 1")
    ok_order = True
    for r in range(a.np):
        ms = sorted(marks[r], key=lambda m: m["args"]["step"])
        for prev, nxt in zip(ms, ms[1:]):
            ok_order &= nxt["ts"] >= prev["ts"] + prev["dur"] - 0.002
    expect(ok_order, "on each rank, step S + 1 starts after step S ends")
    ok_overlap, worst = True, 0.0
    for s in range(steps):
        spans = {r: next(m for m in marks[r] if m["args"]["step"] == s) for r in range(a.np)}
        for r in range(1, a.np):
            slack = sync[r]["error_us"] + 0.002
            r0, rq = spans[0], spans[r]
            gap = max(rq["ts"] - (r0["ts"] + r0["dur"]), r0["ts"] - (rq["ts"] + rq["dur"]))
            worst = max(worst, gap)
            ok_overlap &= gap <= slack
    expect(ok_overlap, f"every step overlaps on all ranks on the common clock "
                       f"(largest gap {worst:.3f} us, within the error bound)")
    expect(all(e["ts"] >= 0 for e in events if e.get("ph") == "X"),
           "no span starts before the clock measurement at finalize")

    parts = [os.path.join(a.dir, f"rank{r}.json") for r in range(a.np)]
    out = os.path.join(a.dir, "by_tool.json")
    tool = subprocess.run([sys.executable, a.merge, "-o", out] + parts,
                          capture_output=True, text=True)
    expect(tool.returncode == 0, "pcnn_merge_traces merges the per-rank files: " + tool.stderr)
    if tool.returncode == 0:
        with open(out) as f:
            merged = json.load(f)["traceEvents"]
        key = lambda e: json.dumps(e, sort_keys=True)
        expect(sorted(map(key, merged)) == sorted(map(key, events)),
               "the tool's merge holds exactly the merged call's events")
    if a.np > 1:
        dup = subprocess.run([sys.executable, a.merge, parts[0], parts[0]],
                             capture_output=True, text=True)
        expect(dup.returncode == 1 and "process 0" in dup.stderr,
               "the tool refuses the same rank twice")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
