"""Finding and loading libpcnn.so: the one place that knows where to look.

Order: an explicit path (pcnn.load_library(path)), the PCNN_LIBRARY
environment variable, the build tree next to this package
(<repo>/build/lib), the prefix this package is installed under, then the
dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).  The first file
that loads wins; if none does, the error lists every place tried and why.
"""
import ctypes
import os

from .errors import LibraryNotFoundError

# The soname carries the major version; the unversioned name is the
# development symlink of a build tree or a -dev package.
def _names(major):
    return ("libpcnn.so.%d" % major, "libpcnn.so")


def _build_tree_dirs():
    # bindings/python/pcnn/_loader.py -> <repo>/build/lib
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    return [os.path.join(repo, "build", "lib")]


def _prefix_dirs():
    # <prefix>/lib/python3/dist-packages/pcnn or
    # <prefix>/lib/python3.X/site-packages/pcnn -> <prefix>/lib[/<multiarch>]
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = []
    parts = here.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].startswith("python3"):
            libdir = os.sep.join(parts[:i]) or os.sep
            dirs.append(libdir)
            dirs.append(os.path.join(libdir, "x86_64-linux-gnu"))
            break
    for prefix in ("/usr/local", "/usr"):
        for sub in ("lib/x86_64-linux-gnu", "lib64", "lib"):
            d = os.path.join(prefix, sub)
            if d not in dirs:
                dirs.append(d)
    return dirs


def candidates(path=None, major=0):
    """The (origin, file) pairs to try, in order."""
    out = []
    if path:
        out.append(("explicit path", path))
        return out
    env = os.environ.get("PCNN_LIBRARY")
    if env:
        out.append(("PCNN_LIBRARY", env))
        return out
    for d in _build_tree_dirs():
        for n in _names(major):
            out.append(("build tree", os.path.join(d, n)))
    for d in _prefix_dirs():
        for n in _names(major):
            out.append(("installed prefix", os.path.join(d, n)))
    for n in _names(major):
        out.append(("dynamic loader search", n))
    return out


def load(path=None, major=0):
    """Load the first libpcnn that opens.  Returns (CDLL, resolved path).

    An explicit path or PCNN_LIBRARY is final: if it does not load, the
    error says so rather than silently falling back to another copy."""
    tried = []
    for origin, file in candidates(path, major):
        bare = os.sep not in file
        if not bare and not os.path.exists(file):
            tried.append("  %s: %s (no such file)" % (origin, file))
            continue
        try:
            # RTLD_GLOBAL, as mpi4py does for libmpi: the MPI library that
            # libpcnn pulls in stays visible to components MPI loads later.
            lib = ctypes.CDLL(file, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            tried.append("  %s: %s (%s)" % (origin, file, e))
            continue
        return lib, (os.path.realpath(file) if not bare else file)
    raise LibraryNotFoundError(
        "libpcnn could not be loaded; looked in:\n" + "\n".join(tried) +
        "\nBuild it (ninja -C build), or point PCNN_LIBRARY or "
        "pcnn.load_library(path) at libpcnn.so.")
