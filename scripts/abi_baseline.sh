#!/usr/bin/env bash
# Write the stable ABI's baseline abi/pcnn-<version>.abi from the library
# built with debug info (tests/api's libpcnn.so in ./build), for the
# 'abi' test (tests/api/check_abi.sh).  Run it when the stable sections of
# pcnn.h grow (a compatible change) or with a new version's incompatible
# one, and commit the file.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || scripts/build.sh
version=$(python3 scripts/header_version.py)
ninja -C build tests/api/libpcnn.so.$version
lib=build/tests/api/libpcnn.so.$version
# A version's baseline only grows: an incompatible change needs a new version.
if [ -f "abi/pcnn-$version.abi" ] && ! tests/api/check_abi.sh "$lib" "$PWD" "$version"; then
  echo "abi_baseline.sh: refused: the stable ABI changed incompatibly within $version;" \
       "move the version (include/pcnn.h) and write CHANGELOG.md's entry first" >&2
  exit 1
fi
mkdir -p abi
tests/api/check_abi.sh --dump "$lib" "$PWD" "abi/pcnn-$version.abi"
