#!/usr/bin/env bash
# The stable ABI of libpcnn (pcnn.h sections 1-8) against the committed
# baseline abi/pcnn-<version>.abi, with Debian's abigail-tools.  LIB is
# the library built with debug info (tests/api's libpcnn.so, the same
# sources at -O0 -g).  Section 9's functions are left out of the comparison
# (a suppression file generated from the header), and so are the library's private types
# (only types of include/ count: a handle stays opaque).
#   check_abi.sh LIB SOURCE_ROOT VERSION           the test (exit 77: skipped)
#   check_abi.sh --dump LIB SOURCE_ROOT OUT.abi    what scripts/abi_baseline.sh writes
# Fails on an incompatible change (abidiff's bit 8: a function removed, a
# parameter or return type changed, an enum value renumbered...) unless the
# version moved and abi/ holds the baseline of the new version; compatible
# additions pass, and are named so that the baseline can be refreshed.
set -uo pipefail
dump=0
if [ "${1:-}" = --dump ]; then dump=1; shift; fi
lib=$1 root=$2
if ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
  echo "SKIP: abigail-tools (abidw, abidiff) not installed: the ABI check is skipped" \
       "(scripts/install_deps.sh installs them)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$root/scripts/gen_experimental_hints.py" --header "$root/include/pcnn.h" \
        --abi-suppressions >"$tmp/experimental.supp" || exit 1

abi_of() {  # LIB OUT
  abidw --headers-dir "$root/include" --drop-private-types \
        --suppressions "$tmp/experimental.supp" \
        --no-corpus-path --no-comp-dir-path --no-show-locs --out-file "$2" "$1"
}

if [ $dump -eq 1 ]; then
  abi_of "$lib" "$3" || exit 1
  echo "wrote $3"
  exit 0
fi

version=$3
baseline="$root/abi/pcnn-$version.abi"
if [ ! -f "$baseline" ]; then
  # The version moved without its baseline: the last release's must hold.
  baseline=$(ls "$root"/abi/pcnn-*.abi 2>/dev/null | sort -V | tail -1)
  [ -n "$baseline" ] || { echo "FAIL no baseline in $root/abi (scripts/abi_baseline.sh)"; exit 1; }
  echo "note: no abi/pcnn-$version.abi: comparing with $(basename "$baseline")"
fi
abi_of "$lib" "$tmp/current.abi" || { echo "FAIL abidw on $lib"; exit 1; }
abidiff --no-show-locs --suppressions "$tmp/experimental.supp" "$baseline" "$tmp/current.abi" >"$tmp/diff"
rc=$?
cat "$tmp/diff"
if [ $((rc & 3)) -ne 0 ]; then
  echo "FAIL abidiff could not compare (exit $rc)"
  exit 1
fi
# abidiff sets bit 8 for what it knows breaks (a symbol removed) and bit 4
# for any change, a changed parameter type included: a removed or changed
# function or variable of the stable sections breaks hosts, additions do not.
broken=$(sed -n 's/^\(Functions\|Variables\) changes summary: \([0-9]*\) Removed, \([0-9]*\) Changed.*/\2 \3/p' \
         "$tmp/diff" | awk '{n += $1 + $2} END {print n + 0}')
if [ $((rc & 8)) -ne 0 ] || [ "$broken" -ne 0 ]; then
  echo "FAIL the stable ABI of libpcnn $version changed incompatibly against" \
       "$(basename "$baseline"): keep the old signatures, or move the version" \
       "(include/pcnn.h's PCNN_VERSION_*, CHANGELOG.md) together with a new baseline" \
       "(scripts/abi_baseline.sh writes abi/pcnn-<version>.abi)"
  exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
  echo "ok: compatible changes only (additions) against $(basename "$baseline");" \
       "scripts/abi_baseline.sh records them"
else
  echo "ok: the stable ABI equals $(basename "$baseline")"
fi
exit 0
