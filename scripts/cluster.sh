#!/usr/bin/env bash
# An emulated cluster on this machine: N "hosts" are network namespaces
# joined by veth pairs to one bridge, each host's link capped with tbf in
# both directions (netem is not available: bandwidth is shaped, latency is
# what the kernel gives, measured by ping).  MPI jobs start on them exactly
# as on a real cluster: MPICH's hydra with a hostfile, its ssh launcher
# replaced by scripts/cluster_launcher.sh (ip netns exec HOST ...), -iface on
# the bridge, and UCX kept on TCP (UCX_TLS=tcp,self) so that ranks on
# different hosts cannot meet in shared memory behind the links' back.
#
#   scripts/cluster.sh up N [--rate 1gbit] [--cores C] [--no-check]   N hosts pcnnh1..N
#   scripts/cluster.sh run -n P [--rate R] [--timeout S] [--no-check] -- PROG ARGS...
#   scripts/cluster.sh exec HOST -- CMD ARGS...          one command on one host
#   scripts/cluster.sh link HOST up|down                 plug or cut a host's link
#   scripts/cluster.sh rate R                            change the cap (then self-check)
#   scripts/cluster.sh check                             the self-check again
#   scripts/cluster.sh status
#   scripts/cluster.sh kill                              end every job's processes
#   scripts/cluster.sh down                              remove all it made (idempotent)
#
# Ranks go round-robin over the hosts (rank r on host r mod N + 1).  With
# --cores C each host owns C cores of this machine (host K the C cores from
# (K-1)*C on, modulo the machine's): its processes are bound to them, as on
# separate machines (libpcnn's engine choice reads the affinity); without
# it, hosts share every core.
#
# The self-check times a 64 MiB MPI_Allreduce between host 1 and every
# other host and reads the byte counters of the links: the bytes must cross
# the capped links and the time must not beat the cap.  `up`, `rate` and
# `check` fail when it fails, and `run` refuses to start a job unless it
# passed at the current cap (no figures from a cluster that is not one);
# `run --no-check` skips it for runs whose figures do not matter (tests).
# Everything made is named pcnn* (namespaces pcnnhK, links pcnnvK, bridge
# pcnnbr0, /etc/netns/pcnnhK, state in /run/pcnn-cluster), in the subnet
# 10.213.13.0/24 (PCNN_CLUSTER_SUBNET=a.b.c to change it).  Needs root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
state=${PCNN_CLUSTER_STATE:-/run/pcnn-cluster}
subnet=${PCNN_CLUSTER_SUBNET:-10.213.13}
bridge=pcnnbr0
host_prefix=pcnnh
bridge_port_prefix=pcnnv   # the bridge's end of host K's veth pair
host_if=pcnn0              # the host's end, inside its namespace
probe_mib=64

die() { echo "cluster.sh: $*" >&2; exit 1; }
say() { echo "cluster: $*"; }

usage() {
  sed -n '/^#   scripts/s/^#   //p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

require_root() {
  [ "$(id -u)" -eq 0 ] ||
    die "needs root (it creates network namespaces, veth links and tc qdiscs): run it as root or with sudo"
  command -v ip >/dev/null || die "the ip command is missing (Debian package iproute2)"
  command -v tc >/dev/null || die "the tc command is missing (Debian package iproute2)"
  ip netns list >/dev/null 2>&1 || die "ip netns is not available here (no network namespaces)"
}

is_up() { [ -f "$state/n" ]; }
hosts_count() { cat "$state/n"; }
host_name() { echo "$host_prefix$1"; }

# Bits per second of a tc rate (200mbit, 1gbit, 10gbit, 500kbit, 1000000bit).
rate_bps() {
  local r=${1,,} num unit
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)([kmg]?)(bit)?$ ]] || die "rate '$1': use e.g. 200mbit, 1gbit, 10gbit"
  num=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[3]}
  case "$unit" in
    k) awk -v x="$num" 'BEGIN { printf "%.0f", x * 1e3 }' ;;
    m) awk -v x="$num" 'BEGIN { printf "%.0f", x * 1e6 }' ;;
    g) awk -v x="$num" 'BEGIN { printf "%.0f", x * 1e9 }' ;;
    *) awk -v x="$num" 'BEGIN { printf "%.0f", x }' ;;
  esac
}

# Every object is written down as it is made; `down` removes what is
# written down (and, should the record be lost, only names of our pattern).
record() { echo "$*" >>"$state/made"; }

# The cap on both directions of host K's link: the bridge's port sends to
# the host (its download), the host's interface sends to the bridge.
apply_rate() {
  local rate=$1 bps burst k n
  bps=$(rate_bps "$rate")
  # A real link has no burst: tokens saved while a host computes let that
  # much of the next exchange through at memory speed.  1 ms of traffic, at
  # least 128 KiB (two GSO packets: below that, TCP over tbf loses half its
  # throughput here), bounds the gain at 1 ms per idle period (5 ms at
  # 200mbit), and is named by `status`.
  burst=$(awk -v b="$bps" 'BEGIN { x = b / 8 * 0.001; if (x < 131072) x = 131072; printf "%.0f", x }')
  echo "$burst" >"$state/burst"
  n=$(hosts_count)
  for ((k = 1; k <= n; k++)); do
    tc qdisc replace dev "$bridge_port_prefix$k" root tbf rate "$rate" burst "$burst" latency 20ms
    ip netns exec "$(host_name "$k")" tc qdisc replace dev "$host_if" root tbf rate "$rate" \
      burst "$burst" latency 20ms
  done
  echo "$rate" >"$state/rate"
  rm -f "$state/verified"
}

# Round-trip time between host 1 and host 2 (or the bridge on one host).
measure_latency() {
  local target out
  if [ "$(hosts_count)" -ge 2 ]; then target=$subnet.2; else target=$subnet.254; fi
  command -v ping >/dev/null || { echo "unknown (no ping: Debian package iputils-ping)"; return; }
  out=$(ip netns exec "$(host_name 1)" ping -q -c 20 -i 0.05 -W 1 "$target" 2>&1 | grep rtt || true)
  # rtt min/avg/max/mdev = 0.041/0.060/0.121/0.018 ms
  if [ -n "$out" ]; then
    echo "$out" | awk -F'[=/ ]+' '{ printf "min %s ms, avg %s ms, max %s ms (ping, %s)\n", $6, $7, $8, "'"$(host_name 1)"' -> '"$target"'" }'
  else
    echo "unknown (ping failed)"
  fi
}

link_bytes() { cat "/sys/class/net/$bridge_port_prefix$1/statistics/$2_bytes"; }

mpiexec_cmd() {
  # Printed by `status`, used by run and check.
  echo mpiexec.mpich -launcher ssh -launcher-exec "$here/cluster_launcher.sh" -iface "$bridge"
}

build_probe() {
  # A probe built with the project (the tests pass it) or one compiled here.
  if [ -n "${PCNN_CLUSTER_PROBE:-}" ]; then
    [ -x "$PCNN_CLUSTER_PROBE" ] || die "PCNN_CLUSTER_PROBE=$PCNN_CLUSTER_PROBE is not a program"
    ln -sf "$PCNN_CLUSTER_PROBE" "$state/probe"
    return
  fi
  [ -x "$state/probe" ] && return
  command -v mpicc.mpich >/dev/null || die "mpicc.mpich is missing (Debian package libmpich-dev)"
  mpicc.mpich -O2 -o "$state/probe" "$repo/tests/cluster/allreduce_probe.c"
}

# The self-check: host 1 with each other host, a 64 MiB allreduce.  Each
# rank sends and receives 64 MiB (2n(P-1)/P at P = 2), so the cap allows no
# less than 64 MiB * 8 / rate; those bytes must be counted on both links.
self_check() {
  local n rate bps k t1 r1 tk rk out secs floor eff pct moved ok=1
  n=$(hosts_count)
  rate=$(cat "$state/rate")
  if [ "$n" -lt 2 ]; then
    say "self-check: one host, no link to cross"
    echo "$rate" >"$state/verified"
    return 0
  fi
  bps=$(rate_bps "$rate")
  build_probe
  for ((k = 2; k <= n; k++)); do
    printf '%s\n%s\n' "$(host_name 1)" "$(host_name "$k")" >"$state/pair"
    t1=$(link_bytes 1 tx); r1=$(link_bytes 1 rx); tk=$(link_bytes "$k" tx); rk=$(link_bytes "$k" rx)
    out=$(cd "$state" && UCX_TLS=tcp,self timeout 120 $(mpiexec_cmd) -f "$state/pair" -n 2 \
          "$state/probe" "$probe_mib" 1 2>&1) || { echo "$out" >&2; kill_host_processes; die "self-check: the probe failed"; }
    secs=$(echo "$out" | awk '/^allreduce_probe/ { print $NF }')
    [ -n "$secs" ] || die "self-check: no result from the probe: $out"
    # The fewest bytes that crossed any of the four directions of the two links.
    moved=$(( $(link_bytes 1 tx) - t1 ))
    for d in $(( $(link_bytes 1 rx) - r1 )) $(( $(link_bytes "$k" tx) - tk )) $(( $(link_bytes "$k" rx) - rk )); do
      [ "$d" -lt "$moved" ] && moved=$d
    done
    read -r floor eff pct < <(awk -v s="$secs" -v b="$bps" -v m="$probe_mib" \
      'BEGIN { f = m * 1048576 * 8 / b; e = m * 1048576 * 8 / s; printf "%.3f %.0f %.0f\n", f, e / 1e6, 100 * e / b }')
    say "self-check $(host_name 1)<->$(host_name "$k"): ${probe_mib} MiB allreduce ${secs} s, the cap allows ${floor} s;" \
        "effective ${eff} Mbit/s = ${pct} % of $rate; $(( moved / 1000000 )) MB crossed each direction of both links"
    if [ "$moved" -lt $(( probe_mib * 1048576 * 95 / 100 )) ]; then
      say "FAILED: the allreduce's bytes did not cross the links (shared memory behind their back?)"
      ok=0
    elif awk -v s="$secs" -v f="$floor" 'BEGIN { exit !(s < 0.8 * f) }'; then
      say "FAILED: faster than the cap allows: the tbf cap is not in effect"
      ok=0
    elif [ "$pct" -lt 50 ]; then
      say "warning: the link carries only ${pct} % of the cap (the CPUs, not the link, set the pace here)"
    fi
  done
  rm -f "$state/pair"
  [ "$ok" -eq 1 ] || return 1
  echo "$rate" >"$state/verified"
}

# The processes of our jobs: everything inside our namespaces, and the
# launchers (mpiexec.mpich) on this side, which name our launcher script.
job_pids() {
  local ns
  for ns in $(our_namespaces); do ip netns pids "$ns" 2>/dev/null || true; done
  pgrep -f -- "-launcher-exec $here/cluster_launcher.sh" || true
}

kill_host_processes() {
  local pids
  pids=$(job_pids)
  [ -z "$pids" ] && return 0
  kill -TERM $pids 2>/dev/null || true
  sleep 0.5
  pids=$(job_pids)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
  return 0
}

# Namespaces we made: the record, and any pcnnhK left by a lost record.
our_namespaces() {
  {
    [ -f "$state/made" ] && awk '$1 == "netns" { print $2 }' "$state/made"
    ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E "^${host_prefix}[0-9]+$" || true
  } | sort -u
}

cmd_up() {
  local n="" rate=1gbit check=1 cores=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      --cores) cores=${2:?--cores needs a value}; shift 2 ;;
      --no-check) check=0; shift ;;
      [0-9]*) n=$1; shift ;;
      *) usage ;;
    esac
  done
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: N must be 1..200"
  rate_bps "$rate" >/dev/null
  [ -z "$cores" ] || { [[ $cores =~ ^[0-9]+$ ]] && [ "$cores" -ge 1 ]; } || die "up: --cores C with C >= 1"
  is_up && die "a cluster of $(hosts_count) hosts is already up: scripts/cluster.sh down first"
  ip -4 -o addr | grep -q " $subnet\." && die "the subnet $subnet.0/24 is in use here: set PCNN_CLUSTER_SUBNET"
  ip link show "$bridge" >/dev/null 2>&1 && die "a link named $bridge exists: scripts/cluster.sh down first"
  mkdir -p "$state"
  trap 'echo "cluster.sh: up failed, removing what it made" >&2; cmd_down >/dev/null 2>&1 || true' ERR
  : >"$state/made"
  ip link add "$bridge" type bridge
  record link "$bridge"
  ip addr add "$subnet.254/24" dev "$bridge"
  ip link set "$bridge" up
  : >"$state/hosts"
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$state/addresses"
  for ((k = 1; k <= n; k++)); do
    echo "$subnet.$k $(host_name "$k")" >>"$state/addresses"
    echo "$(host_name "$k")" >>"$state/hosts"
  done
  for ((k = 1; k <= n; k++)); do
    local h
    h=$(host_name "$k")
    ip netns list | awk '{ print $1 }' | grep -qx "$h" && die "a namespace named $h exists: scripts/cluster.sh down first"
    ip netns add "$h"
    record netns "$h"
    # ip netns exec shows /etc/netns/HOST/hosts as the host's /etc/hosts.
    [ -d /etc/netns ] || { mkdir /etc/netns; record dir /etc/netns; }
    mkdir -p "/etc/netns/$h"
    record dir "/etc/netns/$h"
    cp "$state/addresses" "/etc/netns/$h/hosts"
    ip link add "$bridge_port_prefix$k" type veth peer name "$host_if" netns "$h"
    record link "$bridge_port_prefix$k"
    ip link set "$bridge_port_prefix$k" master "$bridge" up
    ip -n "$h" addr add "$subnet.$k/24" dev "$host_if"
    ip -n "$h" link set "$host_if" up
    ip -n "$h" link set lo up
    if [ -n "$cores" ]; then
      # Read by cluster_launcher.sh: the host's processes run on these cores.
      local c list=""
      for ((c = 0; c < cores; c++)); do list+="${list:+,}$(( ((k - 1) * cores + c) % $(getconf _NPROCESSORS_ONLN) ))"; done
      echo "$list" >"$state/cpus.$h"
    fi
  done
  echo "$n" >"$state/n"
  apply_rate "$rate"
  trap - ERR
  say "$n host(s) up: $(tr '\n' ' ' <"$state/hosts")on $bridge ($subnet.0/24), each link capped at $rate both ways${cores:+, $cores core(s) each}"
  say "native latency: $(measure_latency | tee "$state/latency")"
  say "hostfile $state/hosts, names in $state/addresses"
  if [ "$check" -eq 1 ]; then
    self_check || die "the self-check failed: this cluster's figures would not be the cap's (scripts/cluster.sh down)"
  fi
}

cmd_rate() {
  [ $# -eq 1 ] || usage
  is_up || die "no cluster is up"
  apply_rate "$1"
  say "links capped at $1 both ways"
  self_check || die "the self-check failed at $1"
}

cmd_check() {
  is_up || die "no cluster is up"
  self_check || die "the self-check failed"
}

cmd_run() {
  local np="" rate="" timeout_s="" check=1 status=0
  while [ $# -gt 0 ]; do
    case "$1" in
      -n) np=${2:?-n needs a value}; shift 2 ;;
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      --timeout) timeout_s=${2:?--timeout needs a value}; shift 2 ;;
      --no-check) check=0; shift ;;
      --) shift; break ;;
      *) usage ;;
    esac
  done
  [ $# -ge 1 ] || usage
  [[ $np =~ ^[0-9]+$ ]] && [ "$np" -ge 1 ] || die "run: -n P with P >= 1"
  is_up || die "no cluster is up: scripts/cluster.sh up N first"
  if [ -n "$rate" ] && [ "$rate" != "$(cat "$state/rate")" ]; then
    apply_rate "$rate"
    say "links capped at $rate both ways"
  fi
  if [ "$check" -eq 1 ] && [ "$(cat "$state/verified" 2>/dev/null)" != "$(cat "$state/rate")" ]; then
    self_check || die "refusing to run: the self-check failed at $(cat "$state/rate")"
  fi
  local -a cmd=($(mpiexec_cmd) -f "$state/hosts" -n "$np")
  [ -n "$timeout_s" ] && cmd=(timeout --foreground --kill-after=5 "$timeout_s" "${cmd[@]}")
  export UCX_TLS=tcp,self
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
  "${cmd[@]}" "$@" || status=$?
  # A failed or killed job may leave proxies or ranks behind on the hosts.
  [ "$status" -ne 0 ] && kill_host_processes
  return "$status"
}

cmd_exec() {
  [ $# -ge 3 ] && [ "$2" = "--" ] || usage
  local h=$1
  shift 2
  is_up || die "no cluster is up"
  grep -qx "$h" "$state/hosts" || die "no host named $h in this cluster"
  [ -f "$state/cpus.$h" ] && exec taskset -c "$(cat "$state/cpus.$h")" ip netns exec "$h" "$@"
  exec ip netns exec "$h" "$@"
}

cmd_link() {
  [ $# -eq 2 ] || usage
  is_up || die "no cluster is up"
  grep -qx "$1" "$state/hosts" || die "no host named $1 in this cluster"
  [ "$2" = up ] || [ "$2" = down ] || usage
  # The host's own end: it loses its network as a host whose cable is pulled.
  ip -n "$1" link set "$host_if" "$2"
  say "$1: link $2"
}

cmd_status() {
  if ! is_up; then
    echo "no cluster is up"
    return 0
  fi
  local n
  n=$(hosts_count)
  echo "hosts: $n ($(tr '\n' ' ' <"$state/hosts"| sed 's/ $//')), bridge $bridge $subnet.254/24"
  echo "cap: $(cat "$state/rate") each way per host (tbf burst $(cat "$state/burst") B); self-check: $( [ "$(cat "$state/verified" 2>/dev/null)" = "$(cat "$state/rate")" ] && echo passed || echo "not passed at this rate")"
  echo "native latency: $(cat "$state/latency" 2>/dev/null || echo unknown)"
  echo "hostfile: $state/hosts"
  ls "$state"/cpus.* >/dev/null 2>&1 && echo "cores: $(for f in "$state"/cpus.*; do printf '%s on %s; ' "${f##*cpus.}" "$(cat "$f")"; done)"
  echo "launch: UCX_TLS=tcp,self $(mpiexec_cmd) -f $state/hosts -n P PROG"
  for ((k = 1; k <= n; k++)); do
    local h pids
    h=$(host_name "$k")
    pids=$(ip netns pids "$h" 2>/dev/null | tr '\n' ' ')
    printf '%s %s.%d link %s, sent %s B, received %s B, processes: %s\n' "$h" "$subnet" "$k" \
      "$(ip -n "$h" -o link show "$host_if" | grep -q 'state UP\|,UP' && echo up || echo down)" \
      "$(link_bytes "$k" rx)" "$(link_bytes "$k" tx)" "${pids:-none}"
  done
}

cmd_down() {
  local what name
  kill_host_processes
  for name in $(our_namespaces); do
    ip netns del "$name" 2>/dev/null || true   # takes the host's end of its veth along
  done
  if [ -f "$state/made" ]; then
    # Links and directories, newest first.
    tac "$state/made" | while read -r what name; do
      case "$what" in
        link) ip link del "$name" 2>/dev/null || true ;;
        dir) rm -f "$name/hosts"; rmdir "$name" 2>/dev/null || true ;;
      esac
    done
  fi
  # A lost record: only our own names.
  for name in $(ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | sed 's/@.*//' |
                grep -E "^(${bridge}|${bridge_port_prefix}[0-9]+)$" || true); do
    ip link del "$name" 2>/dev/null || true
  done
  for name in /etc/netns/${host_prefix}[0-9]*; do
    [ -d "$name" ] && { rm -f "$name/hosts"; rmdir "$name" 2>/dev/null || true; }
  done
  rm -rf "$state"
  local left
  left="$(our_namespaces | tr '\n' ' ')$(ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' |
          grep -E "^(${bridge}|${bridge_port_prefix}[0-9]+)$" | tr '\n' ' ' || true)$(job_pids | tr '\n' ' ')"
  [ -z "$left" ] || die "down: still there: $left"
  say "down: no namespace, link or process of the cluster left"
}

[ $# -ge 1 ] || usage
sub=$1
shift
case "$sub" in
  -h|--help|help) usage ;;
esac
require_root
case "$sub" in
  up) cmd_up "$@" ;;
  run) cmd_run "$@" ;;
  exec) cmd_exec "$@" ;;
  link) cmd_link "$@" ;;
  rate) cmd_rate "$@" ;;
  check) cmd_check "$@" ;;
  status) cmd_status ;;
  kill) kill_host_processes; say "no job process left" ;;
  down) cmd_down ;;
  *) usage ;;
esac
