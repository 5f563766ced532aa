#!/usr/bin/env bash
# The test command: install what is missing, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
meson test -C build --print-errorlogs --num-processes 2 "$@"
