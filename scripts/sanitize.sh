#!/usr/bin/env bash
# Build and test libpcnn under a sanitizer or Valgrind (docs/testing.md).
#
#   scripts/sanitize.sh asan      ASan + UBSan (gcc), quick, io, two-rank spatial, HDF5 fuzz, in build-asan
#   scripts/sanitize.sh tsan      TSan (clang-14, LLVM OpenMP + Archer), suite mpi, in build-tsan
#   scripts/sanitize.sh valgrind  memcheck over the quick and io suites of ./build
#   scripts/sanitize.sh fuzz      20 s of libFuzzer on the IDX reader (clang-14 + ASan), build-fuzz
#
# Extra arguments go to `meson test` (e.g. `asan --suite mpi`, or test
# names).  Suppression files hold third-party internals only (MPICH, hwloc,
# UCX, the OpenMP runtime): a report with a libpcnn frame is a bug to fix.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-}
shift || true

run_tests() { # build-dir, then meson test arguments
  local dir=$1
  shift
  meson test -C "$dir" --print-errorlogs --num-processes 2 "$@"
}

case "$mode" in
asan)
  scripts/install_deps.sh
  [ -f build-asan/build.ninja ] ||
    meson setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
      -Dbuildtype=debugoptimized
  ninja -C build-asan
  # fast_unwind_on_malloc=0: full stacks, so that leaks from dlopen'ed
  # hwloc plugins can be matched by tests/lsan.supp.
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1
  export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  # The Python binding would need libasan preloaded into the interpreter.
  if [ $# -eq 0 ]; then set -- --suite quick --suite io; fi
  # ASan and UBSan run the gradient checks 2-3x slower: a multiplier keeps
  # a slower machine within the timeouts; 'variant' repeats kernels run here.
  run_tests build-asan --no-suite python --no-suite fortran --no-suite variant \
    --timeout-multiplier 3 "$@"
  # Fortran strings are not NUL-terminated and libgfortran's I/O strndup()s
  # them: strict_string_checks reports that read as an overflow of the
  # literal; the Fortran tests run with everything else checked.
  if [ "$*" = "--suite quick --suite io" ]; then
    ASAN_OPTIONS=${ASAN_OPTIONS/strict_string_checks=1/strict_string_checks=0} \
      run_tests build-asan --suite fortran
    # Spatial parallelism on two ranks (three and four oversubscribe the
    # cores: minutes under ASan), the exchanges a re-plan switches, and the
    # link calibration (its broadcast buffer once overflowed unseen), the
    # model of a spatial network.
    run_tests build-asan spatial_np2 spatial_data_np2 spatial_strided_np2 exchange_auto_np2 \
      perf_calibration_np2 perf_split_np2
    # The HDF5 reader on mutated files, for memory errors.  A damaged heap
    # size makes libhdf5 ask malloc for exabytes, which returns NULL (and
    # HDF5 an error) outside ASan: allocator_may_return_null keeps that.
    # libhdf5 1.10 leaks its dataset layout structures when a damaged
    # dataset fails to open (H5D_open, H5D__layout_oh_read): leaks are
    # not checked here (the quick and io suites check ours).
    if meson test -C build-asan --list 2>/dev/null | grep -q '/ hdf5_fuzz$'; then
      ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}:allocator_may_return_null=1 \
        run_tests build-asan hdf5_fuzz
    fi
  fi
  ;;
tsan)
  scripts/install_deps.sh clang-14 libomp-14-dev libclang-rt-14-dev
  [ -f build-tsan/build.ninja ] ||
    CC=clang-14 CXX=clang++-14 meson setup build-tsan -Dwerror=true -Db_sanitize=thread \
      -Db_lundef=false -Dbuildtype=debugoptimized
  ninja -C build-tsan
  # Archer tells TSan about OpenMP's fork/join/barriers (LLVM's runtime is
  # not instrumented); second_deadlock_stack for lock-order reports.
  export OMP_TOOL_LIBRARIES=/usr/lib/llvm-14/lib/libarcher.so
  export TSAN_OPTIONS="suppressions=$root/tests/tsan.supp second_deadlock_stack=1 history_size=4 exitcode=66"
  # The lifecycle test then computes with 2 OpenMP threads beside the
  # communication thread.
  export PCNN_TEST_THREADS=2
  if [ $# -eq 0 ]; then set -- --suite mpi; fi
  run_tests build-tsan --no-suite python --num-processes 1 --timeout-multiplier 3 "$@"
  ;;
valgrind)
  scripts/install_deps.sh valgrind
  scripts/build.sh
  # Valgrind cannot run OpenBLAS's AVX-512 kernels.
  export OPENBLAS_CORETYPE=Haswell
  if [ $# -eq 0 ]; then
    # Not under Valgrind: 'exports' runs Python; 'checkpoint_process'
    # re-executes /proc/self/exe, which is Valgrind itself there.
    mapfile -t names < <(meson test -C build --list --suite quick --suite io --no-suite python \
      2>/dev/null | sed -n 's|^libpcnn:[^ ]* / ||p' | grep -vxE 'exports|checkpoint_process')
    set -- "${names[@]}"
  fi
  run_tests build --timeout-multiplier 20 \
    --wrap="valgrind --error-exitcode=1 --leak-check=full --show-leak-kinds=definite \
--errors-for-leak-kinds=definite --suppressions=$root/tests/valgrind.supp --quiet" "$@"
  ;;
fuzz)
  scripts/install_deps.sh clang-14 libclang-rt-14-dev
  [ -f build-fuzz/build.ninja ] ||
    CC=clang-14 CXX=clang++-14 meson setup build-fuzz -Dwerror=true -Db_sanitize=address,undefined \
      -Db_lundef=false -Dbuildtype=debugoptimized
  ninja -C build-fuzz tests/io/fuzz_idx
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  run_tests build-fuzz --no-rebuild --suite fuzz "$@"
  ;;
*)
  echo "usage: scripts/sanitize.sh {asan|tsan|valgrind|fuzz} [meson test arguments]" >&2
  exit 2
  ;;
esac
