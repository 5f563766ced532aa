"""mpi4py and libpcnn on one process (the 'install' and 'mpi' suites).

Both run the same MPI family: a pcnn.Comm made from mpi4py's COMM_WORLD on
2 ranks (started here through the build's launcher, PCNN_MPIEXEC) has
mpi4py's rank and size.  Different families (Debian's Open MPI mpi4py with
an MPICH libpcnn, or the reverse): pcnn.Comm(MPI.COMM_WORLD) and
pcnn.Comm.world() raise MPIMismatchError naming both, instead of crashing
in the first MPI call.  Skipped (77) without mpi4py or numpy.
"""
import os
import subprocess
import re
import sys

try:
    import numpy  # noqa: F401  (the binding needs it)
    import mpi4py
except ImportError as e:
    print("skipped: cannot import", e.name)
    sys.exit(77)


def parent():
    mpi4py.rc.initialize = False      # only ask which MPI it is
    from mpi4py import MPI
    import pcnn
    from pcnn import comm
    theirs = comm.mpi_family_of(MPI.Get_library_version())
    ours = comm.mpi_info()["family"]
    print("mpi4py runs %s, libpcnn is built for %s" % (theirs, ours))
    if theirs == ours:
        launcher = os.environ.get("PCNN_MPIEXEC")
        if not launcher:
            print("skipped: no launcher")
            sys.exit(77)
        run = subprocess.run([launcher, "-n", "2", sys.executable, __file__, "worker"],
                             capture_output=True, text=True, timeout=120)
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr)
        assert run.returncode == 0, run.returncode
        # The two ranks' lines may interleave in the launcher's output.
        assert sorted(re.findall(r"rank \d of 2 ok", run.stdout)) == \
            ["rank 0 of 2 ok", "rank 1 of 2 ok"], run.stdout
        return
    for make in (lambda: pcnn.Comm(MPI.COMM_WORLD), pcnn.Comm.world):
        try:
            make()
        except comm.MPIMismatchError as e:
            text = str(e)
            assert "mpi4py runs %s" % theirs in text and "built against %s" % ours in text, text
            assert isinstance(e, pcnn.LibraryError)
        else:
            raise AssertionError("a communicator across two MPI families was accepted")
    print("refused:", text)


def worker():
    from mpi4py import MPI
    import pcnn
    world = MPI.COMM_WORLD
    with pcnn.Comm(world) as c:
        assert (c.rank, c.size) == (world.Get_rank(), world.Get_size()), (c.rank, c.size)
        assert c.size == 2
        # The library's duplicate is its own: the host's traffic still flows.
        assert world.allreduce(c.rank + 1) == 3
        print("rank %d of %d ok" % (c.rank, c.size), flush=True)


if __name__ == "__main__":
    worker() if sys.argv[1:] == ["worker"] else parent()
