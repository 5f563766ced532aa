#!/usr/bin/env bash
# The test command: install what is missing, build (warnings as errors),
# run every test suite, then the unit and I/O suites again under
# AddressSanitizer + UBSan, then the library built against Open MPI with
# its MPI and install suites (when Open MPI can be installed here).
#   scripts/test.sh               everything (what CI runs)
#   scripts/test.sh --suite mpi   one suite of the normal build (no other stage)
#   scripts/test.sh --openmpi     the Open MPI stage alone
set -euo pipefail
cd "$(dirname "$0")/.."

# Open MPI in build-openmpi: the library, the tests and the examples (the
# Fortran one included: it needs Open MPI's own mpi.mod; no benchmarks),
# and the suites where the MPI matters.
openmpi_stage() {
  if ! scripts/install_deps.sh --openmpi; then
    echo "test.sh: Open MPI cannot be installed here: the -Dmpi=openmpi stage is skipped"
    return 0
  fi
  [ -f build-openmpi/build.ninja ] ||
    meson setup build-openmpi -Dmpi=openmpi -Dwerror=true -Dbench=false  # examples too
  ninja -C build-openmpi
  meson test -C build-openmpi --print-errorlogs --num-processes 2 --suite mpi --suite install
}

if [ "${1:-}" = --openmpi ]; then
  openmpi_stage
  exit 0
fi
scripts/install_deps.sh
scripts/build.sh
meson test -C build --print-errorlogs --num-processes 2 "$@"
if [ $# -eq 0 ]; then
  scripts/sanitize.sh asan
  openmpi_stage
fi
