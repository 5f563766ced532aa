"""Finding and loading libpcnn.so: the one place that knows where to look.

Order: an explicit path (pcnn.load_library(path)), the PCNN_LIBRARY
environment variable, the library this package was installed with (`meson
install` writes _install.py beside this file), the build tree next to this
package (<repo>/build/lib), pkg-config's libdir of pcnn (PKG_CONFIG_PATH
applies), the prefix this package is installed under and the standard
prefixes (/usr/local, /usr), then the dynamic loader's own search
(LD_LIBRARY_PATH, ld.so.cache).  The first file that loads wins; if none
does, the error lists every place tried and why.
"""
import ctypes
import os
import shutil
import subprocess

from .errors import LibraryNotFoundError

_HERE = os.path.dirname(os.path.abspath(__file__))


# The soname carries the major version; the unversioned name is the
# development symlink of a build tree or a -dev package.
def _names(major):
    return ("libpcnn.so.%d" % major, "libpcnn.so")


def _installed_with():
    # A relative path, so a DESTDIR staging or a moved prefix keeps working.
    try:
        from . import _install
    except ImportError:
        return []
    return [os.path.normpath(os.path.join(_HERE, _install.LIBDIR_FROM_PACKAGE,
                                          _install.LIBRARY_FILE))]


def _build_tree_dirs():
    # bindings/python/pcnn/_loader.py -> <repo>/build/lib
    repo = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    return [os.path.join(repo, "build", "lib")]


def _pkg_config_dirs():
    exe = shutil.which("pkg-config")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--variable=libdir", "pcnn"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    libdir = out.stdout.strip()
    return [libdir] if out.returncode == 0 and libdir else []


def _prefix_dirs():
    # <prefix>/lib/python3/dist-packages/pcnn or
    # <prefix>/lib/python3.X/site-packages/pcnn -> <prefix>/lib[/<multiarch>]
    dirs = []
    parts = _HERE.split(os.sep)
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
    for file in _installed_with():
        out.append(("installed with this package", file))
    for origin, dirs in (("build tree", _build_tree_dirs()),
                         ("pkg-config", _pkg_config_dirs()),
                         ("installed prefix", _prefix_dirs())):
        for d in dirs:
            for n in _names(major):
                file = os.path.join(d, n)
                if all(file != f for _, f in out):
                    out.append((origin, file))
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
        "\nBuild it (ninja -C build) or install it (meson install; then make "
        "pkg-config find pcnn.pc through PKG_CONFIG_PATH, or add its libdir to "
        "LD_LIBRARY_PATH), or point PCNN_LIBRARY or pcnn.load_library(path) "
        "at libpcnn.so.")
