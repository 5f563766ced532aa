#!/bin/sh
# Runs notes/param_hash.c built against two libraries (old, new) over a
# matrix of configurations, alternating, and prints each configuration's
# verdict: the parameters' and the summary's hashes and the losses equal.
# Usage: param_hash_matrix.sh OLD_BINARY NEW_BINARY
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
old=$1 new=$2 same=0 differ=0
for np in 1 2; do
for dim in 2 3; do
for split in 0 1 2; do
for exch in 0 1 2 3; do
for opt in 1 2; do
for ov in 0 1; do
  [ $split -ne 0 ] && [ $dim -eq 2 ] && [ $exch -eq 2 ] && continue # spatial: no FC gradient
  [ $np -eq 1 ] && [ $split -ne 0 ] && continue
  for halo in 0 1; do
    [ $split -eq 0 ] && [ $halo -eq 1 ] && continue
    keep=$(( (exch + opt) % 2 )); engine=$(( ov * 2 ))
    args="$dim $exch $opt $ov $engine $split $halo $keep"
    a=$(mpiexec.mpich -n $np $old $args 2>&1); b=$(mpiexec.mpich -n $np $new $args 2>&1)
    if [ "$a" = "$b" ]; then same=$((same + 1)); v=same; else differ=$((differ + 1)); v=DIFFER; fi
    echo "np $np args $args: $v $(echo "$b" | grep '^params' | cut -d' ' -f4)"
  done
done; done; done; done; done; done
echo "same $same differ $differ"
