#!/bin/sh
# Run a libFuzzer binary for SECONDS from the committed corpus, writing new
# inputs and crash artifacts into WORKDIR (never into the source tree).
# Usage: run_fuzz.sh FUZZER WORKDIR CORPUS SECONDS
set -eu
mkdir -p "$2"
exec "$1" -max_total_time="$4" -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$2/" "$2" "$3"
