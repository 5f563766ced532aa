#!/usr/bin/env bash
# The test command: install what is missing, build, run every test suite,
# then the unit and I/O suites again under AddressSanitizer + UBSan.
#   scripts/test.sh               everything (what CI runs)
#   scripts/test.sh --suite mpi   one suite of the normal build (no ASan stage)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
meson test -C build --print-errorlogs --num-processes 2 "$@"
if [ $# -eq 0 ]; then
  scripts/sanitize.sh asan
fi
