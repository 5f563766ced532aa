#!/usr/bin/env bash
# Configure (once) and build libpcnn in ./build.  Extra arguments go to
# `meson setup` (e.g. -Dsanitize=address).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
fi
ninja -C build
