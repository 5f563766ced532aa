#!/usr/bin/env bash
# Configure (once) and build libpcnn in ./build, warnings as errors (the
# project's default leaves them warnings, for builds downstream).  Extra
# arguments go to `meson setup` (e.g. -Dmpi=openmpi, -Db_sanitize=address).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build -Dwerror=true "$@"
fi
ninja -C build
