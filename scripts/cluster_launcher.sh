#!/bin/sh
# The "ssh" of an emulated cluster (scripts/cluster.sh): MPICH's hydra calls
#   cluster_launcher.sh [ssh options] HOST COMMAND...
# to start its proxy on HOST; here HOST is a network namespace on this
# machine, so the proxy runs inside it.  Like ssh, the command words are
# joined and run by a shell.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "cluster_launcher.sh: usage: cluster_launcher.sh [-x] HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
# cluster.sh up --cores: the host owns these cores of this machine.
cpus=${PCNN_CLUSTER_STATE:-/run/pcnn-cluster}/cpus.$host
if [ -f "$cpus" ]; then
  exec taskset -c "$(cat "$cpus")" ip netns exec "$host" sh -c "$*"
fi
exec ip netns exec "$host" sh -c "$*"
