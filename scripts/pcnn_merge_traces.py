#!/usr/bin/env python3
"""Merge per-rank libpcnn traces into one Chrome trace.

pcnn_net_write_trace writes one file per rank; every rank's timestamps are
already on rank 0's clock (measured at pcnn_net_finalize) and each rank is
its own process (pid = world rank), so merging is putting the events of
all files into one.  The result opens in ui.perfetto.dev and
chrome://tracing.  (pcnn_net_write_trace_merged writes the same file from
inside the program, collectively.)

    pcnn_merge_traces -o run.json trace.rank0.json trace.rank1.json ...

Exit status 1, with one message, when a file is not a regular file, not
JSON, or not a trace (every event an object whose pid and tid are
integers and whose ts and dur are finite numbers), when two files hold the
same process, when a file of several was written without a common clock (a
network without a communicator), or when the output cannot be written.
"""
import argparse
import json
import math
import os
import stat
import sys
import tempfile

MAX_BYTES = 1 << 30  # a trace of 10^8 events is about 15 GB: 1 GiB is ample for a file
NUMBER = (int, float)


def read_regular(path):
    """The text of a regular file; a FIFO, device or directory is refused
    without blocking (opened non-blocking, checked before any read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path}: not a regular file")
        if st.st_size > MAX_BYTES:
            raise ValueError(f"{path}: {st.st_size} bytes, more than a trace of this tool "
                             f"({MAX_BYTES} bytes)")
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(MAX_BYTES + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def refuse_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def check_event(path, i, e):
    """One message naming the file, the event and the field that is wrong."""
    where = f"{path}: event {i}"
    if not isinstance(e, dict):
        raise ValueError(f"{where} is a {type(e).__name__}, not an object")
    for key in ("name", "ph", "cat"):
        if key in e and not isinstance(e[key], str):
            raise ValueError(f"{where}: {key} is not a string")
    for key in ("pid", "tid"):
        if key in e and (isinstance(e[key], bool) or not isinstance(e[key], int)):
            raise ValueError(f"{where}: {key} is not an integer")
    for key in ("ts", "dur"):
        if key in e:
            v = e[key]
            if isinstance(v, bool) or not isinstance(v, NUMBER) or not math.isfinite(v):
                raise ValueError(f"{where}: {key} is not a finite number")
    if "args" in e and not isinstance(e["args"], dict):
        raise ValueError(f"{where}: args is not an object")


def load(path):
    text = read_regular(path)
    try:
        doc = json.loads(text, parse_constant=refuse_constant)
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to be a trace") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") \
            from None
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a Chrome trace (no traceEvents list)")
    for i, e in enumerate(events):
        check_event(path, i, e)
    return events


def clock_measured(events):
    for e in events:
        if e.get("name") == "clock sync":
            return bool(e.get("args", {}).get("measured"))
    return True  # not written by libpcnn: trust it


def merge(paths):
    merged, owner = [], {}
    for path in paths:
        events = load(path)
        if len(paths) > 1 and not clock_measured(events):
            raise ValueError(f"{path}: written without a common clock (a network without a "
                             "communicator, or tracing off at finalize): its times are its own")
        for pid in {e.get("pid") for e in events if "pid" in e}:
            if pid in owner:
                raise ValueError(f"{path}: process {pid} is also in {owner[pid]}: "
                                 "the same rank twice?")
            owner[pid] = path
        merged.extend(events)
    # Metadata first (names, sort order), then the timeline in time order.
    merged.sort(key=lambda e: (e.get("ph") != "M", e.get("ts", 0), e.get("pid", 0)))
    return {"displayTimeUnit": "ms", "traceEvents": merged}


def write(doc, out):
    """Write atomically (a temporary file renamed over `out`), with the mode
    a new file gets from the umask, as any tool's output."""
    if out is None:
        json.dump(doc, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
        return
    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise ValueError(f"{out}: the directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out) + ".", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, allow_nan=False)
            f.write("\n")
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="pcnn_merge_traces",
        description="Merge the per-rank Chrome traces of a libpcnn run into one file "
                    "for ui.perfetto.dev or chrome://tracing.")
    parser.add_argument("traces", nargs="+", help="per-rank trace files (pcnn_net_write_trace)")
    parser.add_argument("-o", "--output", help="merged trace to write (default: stdout)")
    args = parser.parse_args(argv)
    try:
        write(merge(args.traces), args.output)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"pcnn_merge_traces: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"pcnn_merge_traces: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
