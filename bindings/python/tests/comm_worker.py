"""Run by test_comm_net_calls.py under `mpiexec -n 2`: Comm.barrier and
Comm.bcast without mpi4py, and Net.write_trace_merged, abort and
async_error over two ranks; each rank writes OUT/rank<r>.json."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import pcnn  # noqa: E402

out = sys.argv[1]
comm = pcnn.Comm.world()
info = {}
# rank 0 writes a file the others wait for with a barrier, not by polling
marker = os.path.join(out, "from-rank0.txt")
if comm.rank == 0:
    time.sleep(0.3)
    with open(marker, "w") as f:
        f.write("ready")
comm.barrier()
info["saw_marker"] = os.path.exists(marker)
b = comm.bcast(b"hello from rank 1" if comm.rank == 1 else None, root=1)
a = comm.bcast(np.arange(12, dtype=np.float64).reshape(3, 4) * 0.5 if comm.rank == 0 else None)
e = comm.bcast(b"" if comm.rank == 0 else None)
info["bytes"] = b.decode()
info["array"] = [a.dtype.str, list(a.shape), a.ravel().tolist()]
info["empty"] = e == b""
try:
    comm.bcast("a str", root=0) if comm.rank == 0 else comm.bcast(None, root=0)
except Exception as ex:  # noqa: BLE001 - root refuses before sending anything
    info["str_refused"] = type(ex).__name__
    comm.bcast(b"", root=0)  # root's refusal sent nothing: complete the peers' bcast
else:
    info["str_refused"] = None

with pcnn.Net(comm, seed=1, threads=1, trace_events=64) as net:
    h = net.input(1, 4, 4)
    net.set_loss(net.dense(h, 2), "softmax_cross_entropy")
    net.finalize(4)
    x = np.ones((2, 1, 4, 4), np.float32)
    net.train_step(x, np.array([0, 1], np.int32))
    path = os.path.join(out, "merged.json")
    net.write_trace_merged(path)
    info["trace_pids"] = sorted({e.get("pid") for e in json.load(open(path))["traceEvents"]
                                 if "pid" in e}) if comm.rank == 0 else None
    info["async_before"] = net.async_error().name
    net.abort()
    info["async_after_abort"] = net.async_error().name
    try:
        net.train_step(x, np.array([0, 1], np.int32))
        info["after_abort"] = None
    except pcnn.InvalidStateError:
        info["after_abort"] = "InvalidStateError"
with open(os.path.join(out, "rank%d.json" % comm.rank), "w") as f:
    json.dump(info, f)
