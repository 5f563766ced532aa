#!/usr/bin/env bash
# The main job: install what is missing, build, and train LeNet-5 on
# Fashion-MNIST across 2 MPI ranks (1 thread each) with the overlapped
# all-to-all + all-gather exchange.  Extra arguments go to the example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
# build/pcnn-mpiexec: the launcher of the MPI this build uses (mpiexec.mpich
# by default), never whatever a bare mpiexec points at.
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 build/pcnn-mpiexec -n 2 build/examples/fashion_mnist "$@"
