#!/bin/sh
# Save a run at np=$3, resume it at np=$4 (tests/checkpoint/test_checkpoint_mpi.c).
# usage: mpi_resume.sh MPIEXEC TEST_BINARY NP_SAVE NP_RESUME
set -e
mpiexec=$1 exe=$2 np_save=$3 np_resume=$4
dir=$(mktemp -d "${TMPDIR:-/tmp}/pcnn_ckpt_mpi.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$mpiexec" -n "$np_save" "$exe" save "$dir"
"$mpiexec" -n "$np_resume" "$exe" resume "$dir"
