"""Shared setup: import the package from this source tree, find the C
reference program and the header (meson passes them in the environment;
the defaults fit a build in <repo>/build)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python: the pcnn package
sys.path.insert(0, HERE)  # models.py

C_REFERENCE = os.environ.get("PCNN_C_REFERENCE") or os.path.join(
    REPO, "build", "tests", "python", "c_reference")
HEADER = os.environ.get("PCNN_HEADER") or os.path.join(REPO, "include", "pcnn.h")


def _launcher():
    """PCNN_MPIEXEC (meson passes the build's), else the launcher of the
    MPI family libpcnn was built with: a bare mpiexec may be another MPI's
    (Debian's mpi4py makes Open MPI's the default)."""
    if os.environ.get("PCNN_MPIEXEC"):
        return os.environ["PCNN_MPIEXEC"]
    try:
        import pcnn
        family = pcnn.mpi_info()["family"]
    except Exception:  # the library is not built: the tests that need it say so
        return "mpiexec.mpich"
    return "mpiexec.openmpi" if family == "Open MPI" else "mpiexec.mpich"


MPIEXEC = _launcher()


def pytest_configure(config):
    config.addinivalue_line("markers", "mpi: runs mpiexec -n 2 (the 'mpi' test tier)")


@pytest.fixture(scope="session")
def c_reference():
    if not os.access(C_REFERENCE, os.X_OK):
        pytest.fail("the C reference program %s is not built (ninja -C build)" % C_REFERENCE)
    return C_REFERENCE
