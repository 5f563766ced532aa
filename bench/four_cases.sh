#!/usr/bin/env bash
# The thesis's four cases (seed 001 fig. 3.6 / 4.4) side by side in one run:
# allreduce and all-to-all + all-gather, each without and with overlap, on
# both progress engines, 2 ranks x 1 thread; then 1 rank x 2 threads and
# PyTorch DDP (2 x 1 thread) on the same model and global batch.
#   bench/four_cases.sh [MODEL [GLOBAL_BATCH [ITERS]]]   (default resnet20 128 10)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-resnet20}
batch=${2:-128}
iters=${3:-10}
mpiexec=$(command -v mpiexec.mpich || command -v mpiexec)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
echo "# $model, global batch $batch, $iters steps; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" \
     "GLIBC_TUNABLES=${GLIBC_TUNABLES:-unset}"
for engine in 1 2; do
  for exchange in allreduce a2a; do
    for overlap in 0 1; do
      "$mpiexec" -n 2 build/bench/bench_parallel "$model" "$batch" "$iters" \
        --exchange "$exchange" --overlap "$overlap" --engine "$engine"
    done
  done
done
OMP_NUM_THREADS=2 build/bench/bench_models "$model" "$batch" 2 "$iters"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  (cd /work/shared/bench 2>/dev/null || cd ../shared/bench
   /usr/bin/python3 bench_torch.py "$model" "$batch" 2 "$iters" 2>/dev/null || true
   /usr/bin/python3 ddp_bench.py ddp "$model" "$batch" "$iters" 2>/dev/null || true)
fi
