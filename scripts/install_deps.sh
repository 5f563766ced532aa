#!/usr/bin/env bash
# Install the Debian packages libpcnn needs to build, test and run its
# examples, if they are missing.  Needs root (or sudo) only when something
# is missing.  Usage: scripts/install_deps.sh [extra-package ...]
set -euo pipefail
packages=(gcc g++ gfortran libc6-dev libopenblas-dev libmpich-dev mpich meson ninja-build pkg-config
          zlib1g-dev python3 python3-numpy python3-pytest dataset-fashion-mnist
          iproute2 iputils-ping procps openssh-client "$@")   # the last four: the cluster suite
                                                              # (hydra's ssh launcher, scripts/cluster.sh)
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
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
