#!/usr/bin/env bash
# Install the Debian packages libpcnn needs to build, test and run its
# examples, if they are missing.  Needs root (or sudo) only when something
# is missing.
#   scripts/install_deps.sh [extra-package ...]
#   scripts/install_deps.sh --openmpi    Open MPI and its mpi4py too (the CI's
#                                        -Dmpi=openmpi stage); fails if they
#                                        cannot be installed here
# Installing Open MPI makes Debian point mpicc, mpiexec and mpi.pc at it;
# this script puts back the choice that was there before (MPICH), so that a
# bare mpiexec keeps meaning what it meant (our builds name their MPI and
# its launcher explicitly and do not depend on it either way).
set -euo pipefail
packages=(gcc g++ gfortran libc6-dev libopenblas-dev libmpich-dev mpich meson ninja-build pkg-config
          zlib1g-dev python3 python3-numpy python3-pytest dataset-fashion-mnist
          libhdf5-mpich-dev python3-h5py                      # HDF5 datasets (-Dhdf5), their tests
          cmake python3-pip                                   # the 'install' suite
          abigail-tools clang                                 # the ABI check, hosts built by clang
          python3-matplotlib                                  # the examples' plots
          iproute2 iputils-ping procps openssh-client)        # the cluster suite
                                                              # (hydra's ssh launcher, scripts/cluster.sh)
openmpi=0
if [ "${1:-}" = --openmpi ]; then
  openmpi=1
  shift
  packages+=(libopenmpi-dev openmpi-bin python3-mpi4py libhdf5-openmpi-dev)
fi
packages+=("$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
if [ "$openmpi" -eq 1 ]; then
  for p in libopenmpi-dev openmpi-bin; do
    grep -q "Candidate: [0-9]" <<<"$(apt-cache policy "$p" 2>/dev/null)" ||
      { echo "install_deps.sh: $p is not installable here" >&2; exit 3; }
  done
fi
# The MPI alternatives before: restored after the install.
groups=(mpi mpirun "mpi-$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)")
declare -A before=()
for g in "${groups[@]}"; do
  v=$(update-alternatives --query "$g" 2>/dev/null | sed -n 's/^Value: //p' || true) # no group yet on a fresh machine
  [ -n "$v" ] && before[$g]=$v
done
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
for g in "${!before[@]}"; do
  now=$(update-alternatives --query "$g" 2>/dev/null | sed -n 's/^Value: //p' || true)
  if [ "$now" != "${before[$g]}" ]; then
    echo "install_deps.sh: keeping $g -> ${before[$g]} (the install chose $now)"
    $sudo update-alternatives --quiet --set "$g" "${before[$g]}"
  fi
done
