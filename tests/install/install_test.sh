#!/usr/bin/env bash
# The 'install' suite (tests/install/meson.build): stage `meson install` in
# a temporary directory and use it as a user of the README's "Installing
# and linking" would.  Arguments, from meson:
#   MESON BUILD_DIR SOURCE_DIR PREFIX LIBDIR INCLUDEDIR PYTHON_DIR LAUNCHER
#   MPI_FAMILY CMAKE CXX       (empty: that part is skipped, and says so)
set -euo pipefail
meson=$1 build=$2 src=$3 prefix=$4 libdir=$5 includedir=$6 pydir=$7 launcher=$8 family=$9
cmake=${10} cxx=${11}
here=$src/tests/install
unset LD_LIBRARY_PATH   # meson test's, naming the build tree: hosts must not need it
py=/usr/bin/python3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pcnn-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "meson install --destdir $tmp/stage"
"$meson" install -C "$build" --no-rebuild --quiet --destdir "$tmp/stage" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "meson install"; }
root=$tmp/stage$prefix           # the staged prefix, used as the prefix itself
lib=$root/$libdir
inc=$root/$includedir
for f in "$inc/pcnn.h" "$inc/pcnn_config.h" "$lib/libpcnn.so" "$lib/pkgconfig/pcnn.pc" \
         "$lib/cmake/pcnn/pcnnConfig.cmake" "$lib/cmake/pcnn/pcnnConfigVersion.cmake"; do
  [ -e "$f" ] || fail "not installed: ${f#"$root"/}"
done
grep -q "^#define PCNN_MPI_FAMILY PCNN_MPI_FAMILY_$( [ "$family" = mpich ] && echo MPICH || echo OPENMPI)\$" \
  "$inc/pcnn_config.h" || fail "pcnn_config.h does not record $family"

# pkg-config: only PKG_CONFIG_PATH (pcnn.pc is relocatable).  A build
# directory configured before the project defaulted to relocatable .pc files
# keeps absolute ones: then the staged copy is pointed at the stage.
export PKG_CONFIG_PATH=$lib/pkgconfig
if grep -q "^prefix=/" "$lib/pkgconfig/pcnn.pc"; then
  echo "note: $build has pkgconfig.relocatable=false (meson configure -Dpkgconfig.relocatable=true)"
  sed -i "s|^prefix=.*|prefix=$root|" "$lib/pkgconfig/pcnn.pc"
fi
cflags=$(pkg-config --cflags pcnn) || fail "pkg-config --cflags pcnn"
libs=$(pkg-config --libs pcnn)
incdir=$(for f in $cflags; do if [ -f "${f#-I}/pcnn.h" ]; then realpath "${f#-I}"; fi; done)
[ "$incdir" = "$(realpath "$inc")" ] || fail "pkg-config --cflags pcnn gave '$cflags', not -I$inc"
[ "$(pkg-config --variable=mpi_family pcnn)" = "$family" ] || fail "pcnn.pc mpi_family"

step "C host through pkg-config, rpath, on 2 ranks"
cc -std=c11 -Wall -Wextra -Werror $cflags "$here/host.c" -o "$tmp/host_c" $libs -Wl,-rpath,"$lib"
if [ -n "$launcher" ]; then
  out=$("$launcher" -n 2 "$tmp/host_c")
  [ "$(grep -c '^host ok' <<<"$out")" -eq 2 ] || fail "2 ranks did not both say ok: $out"
else
  out=$("$tmp/host_c")
fi
echo "$out" | head -1
grep -q "=> $lib/libpcnn.so" <<<"$(ldd "$tmp/host_c")" || fail "the host does not load the staged libpcnn"

step "the header refuses another MPI's mpi.h"
other=$([ "$family" = mpich ] && echo ompi-c || echo mpich)
if pkg-config --exists "$other"; then
  if cc -std=c11 -fsyntax-only -I"$inc" $(pkg-config --cflags "$other") "$here/host.c" \
      2>"$tmp/other.log"; then
    fail "host.c compiled against $other's mpi.h"
  fi
  grep -q "libpcnn was built against" "$tmp/other.log" || { cat "$tmp/other.log"; fail "no clear #error"; }
  grep -m1 "#error\|error:" "$tmp/other.log"
else
  echo "skipped: no $other installed"
fi

step "C++ host through pkg-config, LD_LIBRARY_PATH"
if [ -n "$cxx" ]; then
  "$cxx" -std=c++11 -Wall -Wextra -Werror $cflags "$here/host.cpp" -o "$tmp/host_cpp" $libs
  LD_LIBRARY_PATH=$lib "$tmp/host_cpp"
else
  echo "skipped: no C++ compiler"
fi

step "Fortran host through pkg-config pcnn-fortran: the installed pcnn.mod, never pcnn.f90"
fc=$(command -v gfortran || true)
if [ -n "$fc" ] && [ -f "$lib/pkgconfig/pcnn-fortran.pc" ]; then
  if grep -q "^prefix=/" "$lib/pkgconfig/pcnn-fortran.pc"; then
    sed -i "s|^prefix=.*|prefix=$root|" "$lib/pkgconfig/pcnn-fortran.pc"
  fi
  fflags=$(pkg-config --cflags pcnn-fortran) || fail "pkg-config --cflags pcnn-fortran"
  flibs=$(pkg-config --libs pcnn-fortran)
  moddir=$(pkg-config --variable=moddir pcnn-fortran)
  [ -f "$moddir/pcnn.mod" ] || fail "pcnn-fortran.pc's moddir holds no pcnn.mod"
  mkdir -p "$tmp/fortran" && cp "$here/host.f90" "$tmp/fortran/"   # alone: no pcnn.f90 near
  (cd "$tmp/fortran" && "$fc" -Wall -Werror $fflags host.f90 -o host_fortran $flibs \
     -Wl,-rpath,"$lib") || fail "the Fortran host does not build against the installed module"
  [ ! -e "$tmp/fortran/pcnn.mod" ] || fail "the Fortran host wrote its own pcnn.mod"
  "$tmp/fortran/host_fortran" | tee "$tmp/fortran.log"
  grep -q "^fortran host ok" "$tmp/fortran.log" || fail "the Fortran host"
  # Not `ldd | grep -q`: grep leaving early kills ldd, and pipefail fails.
  grep -q "=> $lib/libpcnn_fortran.so" <<<"$(ldd "$tmp/fortran/host_fortran")" ||
    fail "the Fortran host does not load the staged libpcnn_fortran"
  if [ -n "$cmake" ]; then
    "$cmake" -S "$here/fortran" -B "$tmp/cmake-fortran" -DCMAKE_PREFIX_PATH="$root" \
      -DCMAKE_Fortran_COMPILER="$fc" -DPCNN_HOST_SOURCE="$tmp/fortran/host.f90" \
      >"$tmp/cmake-fortran.log" 2>&1 || { cat "$tmp/cmake-fortran.log"; fail "cmake (Fortran)"; }
    "$cmake" --build "$tmp/cmake-fortran" >"$tmp/cmake-fortran-build.log" 2>&1 ||
      { cat "$tmp/cmake-fortran-build.log"; fail "cmake build (Fortran)"; }
    "$tmp/cmake-fortran/host_fortran_cmake" | grep "^fortran host ok" ||
      fail "the CMake Fortran host"
  fi
elif [ -n "$fc" ]; then
  fail "a Fortran compiler exists but pcnn-fortran.pc was not installed"
else
  echo "skipped: no gfortran"
fi

step "C host through CMake find_package(pcnn)"
if [ -n "$cmake" ]; then
  "$cmake" -S "$here" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$root" -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake configure"; }
  grep "pcnn .* with" "$tmp/cmake.log" || true
  "$cmake" --build "$tmp/cmake" >"$tmp/cmake-build.log" 2>&1 ||
    { cat "$tmp/cmake-build.log"; fail "cmake build"; }
  "$tmp/cmake/host_cmake"      # CMake's build rpath names the imported library's directory
else
  echo "skipped: no cmake"
fi

# Python: never the build tree's or an environment's copy of the library.
unset PCNN_LIBRARY
if [ -z "$pydir" ]; then
  echo "skipped: Python package not installed (-Dpython=false)"
elif ! "$py" -c "import numpy" 2>/dev/null; then
  echo "skipped: $py cannot import numpy"
else
  pycheck='
import os, sys, pcnn
from pcnn import comm
path, want = pcnn.library_path(), sys.argv[1]
assert os.path.realpath(path).startswith(os.path.realpath(want) + os.sep), (path, want)
info = comm.mpi_info()
family = {"mpich": "MPICH", "openmpi": "Open MPI"}[sys.argv[2]]
assert info["family"] == family and info["built_with"].startswith(family), info
assert comm.mpi_family_of(info["library"]) == family, info
c = pcnn.Comm.world()
assert (c.rank, c.size) == (0, 1), (c.rank, c.size)
print("python ok: pcnn", pcnn.library_version(), "from", path, "MPI", info["built_with"])
'
  step "the meson-installed package finds the library installed with it"
  (cd "$tmp" && env -u PKG_CONFIG_PATH PYTHONPATH="$tmp/stage$pydir" "$py" -c "$pycheck" "$lib" "$family")

  step "pip install --target (offline) of bindings/python, found through pkg-config"
  if "$py" -m pip --version >/dev/null 2>&1; then
    "$py" -m pip install --quiet --no-index --no-deps --disable-pip-version-check \
      --root-user-action=ignore --target "$tmp/pip" "$src/bindings/python" >"$tmp/pip.log" 2>&1 ||
      { cat "$tmp/pip.log"; fail "pip install"; }
    [ -f "$tmp/pip/pcnn/_loader.py" ] || fail "pip installed no pcnn package"
    (cd "$tmp" && PYTHONPATH="$tmp/pip" "$py" -c "$pycheck" "$lib" "$family")
    # Without any way to find it: a clear error, unless a system-wide
    # install answers (then it is that one).
    (cd "$tmp" && env -u PKG_CONFIG_PATH PYTHONPATH="$tmp/pip" "$py" -c '
import pcnn
try:
    print("a system libpcnn answered:", pcnn.library_path())
except pcnn.LibraryNotFoundError as e:
    assert "PCNN_LIBRARY" in str(e) and "pkg-config" in str(e), str(e)
    print("no library: clear error:", str(e).splitlines()[0])
')
  else
    echo "skipped: no pip for $py"
  fi
fi
echo "install ok"
