#!/usr/bin/env python3
"""Merge per-rank libpcnn traces into one Chrome trace.

pcnn_net_write_trace writes one file per rank; every rank's timestamps are
already on rank 0's clock (measured at pcnn_net_finalize) and each rank is
its own process (pid = world rank), so merging is putting the events of
all files into one.  The result opens in ui.perfetto.dev and
chrome://tracing.  (pcnn_net_write_trace_merged writes the same file from
inside the program, collectively.)

    pcnn_merge_traces -o run.json trace.rank0.json trace.rank1.json ...

Exit status 1, with a message, when a file is not a trace, when two files
hold the same process, or when a file of several was written without a
common clock (a network without a communicator).
"""
import argparse
import json
import os
import sys
import tempfile


def load(path):
    with open(path) as f:
        doc = json.load(f)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a Chrome trace (no traceEvents list)")
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
    if out is None:
        json.dump(doc, sys.stdout)
        sys.stdout.write("\n")
        return
    directory = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
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
        doc = merge(args.traces)
    except (OSError, ValueError) as e:
        print(f"pcnn_merge_traces: {e}", file=sys.stderr)
        return 1
    write(doc, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
