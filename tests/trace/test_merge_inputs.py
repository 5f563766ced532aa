#!/usr/bin/env python3
"""pcnn_merge_traces on malformed inputs: every one refused with exit
status 1 and one line naming the problem (no traceback, no hang), NaN never
written, the merged file created with the umask's mode.

    test_merge_inputs.py MERGE_SCRIPT
"""
import json
import os
import subprocess
import sys
import tempfile

MERGE = sys.argv[1]
failures = []


def run(args, timeout=20):
    return subprocess.run([sys.executable, MERGE] + args, capture_output=True, text=True,
                          timeout=timeout)


def expect_refused(label, text, needle):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.json")
        with open(path, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())
        p = run(["-o", os.path.join(d, "out.json"), path])
        lines = p.stderr.strip().splitlines()
        ok = (p.returncode == 1 and len(lines) == 1 and "Traceback" not in p.stderr
              and needle in p.stderr and not os.path.exists(os.path.join(d, "out.json")))
        if not ok:
            failures.append(f"{label}: exit {p.returncode}, stderr {p.stderr!r}")


def event(**kw):
    e = {"name": "x", "ph": "X", "pid": 0, "tid": 0, "ts": 1.0, "dur": 2.0}
    e.update(kw)
    return json.dumps({"traceEvents": [e]})


expect_refused("a list of numbers", "[1, 2, 3]", "event 0 is a int")
expect_refused("pid as a list", event(pid=[0]), "pid is not an integer")
expect_refused("pid as true", event(pid=True), "pid is not an integer")
expect_refused("ts as a string", event(ts="5"), "ts is not a finite number")
expect_refused("ts null", event(ts=None), "ts is not a finite number")
expect_refused("ts NaN", '{"traceEvents": [{"ph": "X", "pid": 0, "ts": NaN}]}',
               "NaN is not a JSON number")
expect_refused("ts Infinity", '{"traceEvents": [{"ph": "X", "pid": 0, "ts": Infinity}]}',
               "Infinity is not a JSON number")
expect_refused("dur huge", '{"traceEvents": [{"ph": "X", "pid": 0, "ts": 1, "dur": 1e999}]}',
               "dur is not a finite number")
expect_refused("deep nesting", "[" * 100000 + "]" * 100000, "nested too deeply")
expect_refused("args a list", event(args=[1]), "args is not an object")
expect_refused("not JSON", "{\"traceEvents\": [", "not JSON")
expect_refused("no events", '{"other": 1}', "no traceEvents list")
expect_refused("not UTF-8", b"\xff\xfe{}", "not UTF-8 text")

with tempfile.TemporaryDirectory() as d:
    good = os.path.join(d, "rank0.json")
    with open(good, "w") as f:
        f.write(event())
    # Output into a directory that does not exist.
    p = run(["-o", os.path.join(d, "missing", "out.json"), good])
    if p.returncode != 1 or "does not exist" not in p.stderr or "Traceback" in p.stderr:
        failures.append(f"missing output directory: exit {p.returncode}, {p.stderr!r}")
    # A FIFO as input: refused at once, never opened for a blocking read.
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    try:
        p = run([fifo], timeout=10)
        if p.returncode != 1 or "not a regular file" not in p.stderr:
            failures.append(f"FIFO: exit {p.returncode}, {p.stderr!r}")
    except subprocess.TimeoutExpired:
        failures.append("FIFO: the tool blocked")
    # A directory as input.
    p = run([d])
    if p.returncode != 1 or "not a regular file" not in p.stderr:
        failures.append(f"directory: exit {p.returncode}, {p.stderr!r}")
    # A good merge: written, valid, mode from the umask (0644 under 022).
    out = os.path.join(d, "merged.json")
    old = os.umask(0o022)
    try:
        p = run(["-o", out, good])
    finally:
        os.umask(old)
    if p.returncode != 0:
        failures.append(f"good merge: exit {p.returncode}, {p.stderr!r}")
    else:
        mode = os.stat(out).st_mode & 0o777
        if mode != 0o644:
            failures.append(f"merged file mode {oct(mode)}, want 0o644")
        with open(out) as f:
            doc = json.load(f)
        if [e["ts"] for e in doc["traceEvents"]] != [1.0]:
            failures.append(f"merged events {doc['traceEvents']}")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
