#!/usr/bin/env bash
# Network-bound benchmarks on an emulated cluster (scripts/cluster.sh):
# 2 hosts x 1 rank x 1 thread (each host bound to its own core), links
# capped at each rate in turn; at each
# rate, side by side in one run: the thesis's four cases (allreduce /
# all-to-all + all-gather, overlap off / on; dense layers on the network's
# exchange), libpcnn's default (no option set: all-to-all + all-gather with
# overlap, the FC gradient where eq. 4.8 holds, the engine it picks), for
# LeNet-5 the four cases again with the FC gradient on every dense layer,
# and PyTorch DDP (gloo) on the same links.  Needs root; brings up its own
# cluster and takes it down at the end.
#
#   bench/cluster_bench.sh [--rates "10gbit 1gbit 200mbit"] [--iters N]
#                          [--models "resnet20:128 vgg11:64 lenet:64"] [--out FILE]
#
# Prints one JSON line per run (also to FILE, default cluster_bench.jsonl)
# and a table per rate: step time, exposed communication, overlap ratio R,
# bytes each rank sends per step, the link's use over the step (bytes /
# step time against the cap) and, without overlap, the exchange's own
# bandwidth (bytes / time in the collectives, which then run one by one).  The self-check
# runs at every rate: figures are refused when traffic does not cross the
# capped links or beats the cap.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
rates="10gbit 1gbit 200mbit"
iters=5
models="resnet20:128 vgg11:64 lenet:64"
out=cluster_bench.jsonl
while [ $# -gt 0 ]; do
  case "$1" in
    --rates) rates=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '/^#   bench/,/^#  *\[--models/p' "$0" >&2; exit 2 ;;
  esac
done
cluster=scripts/cluster.sh
bench=build/bench/bench_parallel
[ -x "$bench" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
ddp_dir=/work/shared/bench
[ -f "$ddp_dir/ddp_bench.py" ] || ddp_dir=$repo/../shared/bench
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
: >"$out"

trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
first=${rates%% *}
"$cluster" up 2 --rate "$first" --cores 1 # each host owns one core, as 2 one-core machines
echo "# $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg), $(getconf _NPROCESSORS_ONLN) cores;" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} GLIBC_TUNABLES=${GLIBC_TUNABLES:-unset};" \
     "$iters steps after 3 warm-ups, median"

# One JSON line, tagged with the rate and case, to the file and stdout.
emit() { # RATE CASE JSON
  local line
  line=$(/usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[3]); d["rate"]=sys.argv[1]; d["case"]=sys.argv[2]; print(json.dumps(d))' "$1" "$2" "$3")
  echo "$line" | tee -a "$out"
}

# MPICH 4.0.2 + UCX 1.13 over TCP now and then never returns from
# MPI_Finalize (one rank spins in UCX, the other waits in PMI): a job whose
# JSON line is out gets 15 s to end, then its processes are ended.
run_pcnn() { # RATE CASE MODEL BATCH ARGS...
  local rate=$1 name=$2 model=$3 batch=$4 line="" job deadline
  shift 4
  setsid "$cluster" run -n 2 --timeout 1800 -- "$bench" "$model" "$batch" "$iters" "$@" \
    >"$out.job" 2>&1 &
  job=$!
  while kill -0 "$job" 2>/dev/null && ! grep -q '^{' "$out.job" 2>/dev/null; do sleep 0.2; done
  deadline=$((SECONDS + 15))
  while kill -0 "$job" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  if kill -0 "$job" 2>/dev/null; then
    echo "# $name $model: MPI_Finalize did not return; job ended" >&2
    kill -TERM -- "-$job" 2>/dev/null || true
    "$cluster" kill >/dev/null
  fi
  wait "$job" 2>/dev/null || true
  line=$(grep '^{' "$out.job" | tail -1 || true)
  rm -f "$out.job"
  if [ -z "$line" ]; then echo "# $name $model: failed" >&2; return 0; fi
  emit "$rate" "$name" "$line"
}

ddp_port=29533
run_ddp() { # RATE MODEL BATCH
  local rate=$1 model=$2 batch=$3 line="" try peer root
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then echo "# no PyTorch: DDP skipped" >&2; return 0; fi
  for try in 1 2 3; do
    # A fresh port each run: the previous run's store may still hold the last.
    ddp_port=$((ddp_port + 1))
    local -a ddp_env=(env WORLD_SIZE=2 MASTER_ADDR=10.213.13.1 MASTER_PORT=$ddp_port
                      GLOO_SOCKET_IFNAME=pcnn0 OMP_NUM_THREADS=1)
    (cd "$ddp_dir" && exec "$repo/$cluster" exec pcnnh1 -- "${ddp_env[@]}" RANK=0 \
       timeout 900 /usr/bin/python3 ddp_bench.py ddp "$model" "$batch" "$iters" >"$out.ddp0" 2>&1) &
    root=$!
    (cd "$ddp_dir" && exec "$repo/$cluster" exec pcnnh2 -- "${ddp_env[@]}" RANK=1 \
       timeout 900 /usr/bin/python3 ddp_bench.py ddp "$model" "$batch" "$iters" >"$out.ddp1" 2>&1) &
    peer=$!
    # gloo here sometimes refuses the peer's connection (then rank 0 waits
    # for ever), and a rank may spin in destroy_process_group after the
    # figures: whichever side ends first, the other gets 15 s.
    while kill -0 "$root" 2>/dev/null && kill -0 "$peer" 2>/dev/null; do sleep 0.2; done
    local deadline=$((SECONDS + 15))
    while { kill -0 "$root" 2>/dev/null || kill -0 "$peer" 2>/dev/null; } &&
          [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    kill "$root" "$peer" 2>/dev/null || true
    wait "$root" "$peer" 2>/dev/null || true
    line=$(grep '^{' "$out.ddp0" | tail -1 || true)
    [ -n "$line" ] && break
    echo "# ddp $model, try $try failed: $(tail -1 "$out.ddp1")" >&2
  done
  rm -f "$out.ddp0" "$out.ddp1"
  [ -n "$line" ] && emit "$rate" "pytorch ddp" "$line"
  return 0
}

for rate in $rates; do
  "$cluster" rate "$rate" # runs the self-check, and stops here if it fails
  echo "# rate $rate, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for mb in $models; do
    model=${mb%%:*}
    batch=${mb##*:}
    run_pcnn "$rate" "default" "$model" "$batch"
    for exchange in allreduce a2a; do
      for overlap in 0 1; do
        run_pcnn "$rate" "$exchange overlap $overlap" "$model" "$batch" \
          --exchange "$exchange" --overlap "$overlap" --fc off
        if [ "$model" = lenet ]; then
          run_pcnn "$rate" "$exchange overlap $overlap fc" "$model" "$batch" \
            --exchange "$exchange" --overlap "$overlap" --fc on
        fi
      done
    done
    run_ddp "$rate" "$model" "$batch"
  done
done

# The tables.
/usr/bin/python3 - "$out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def bps(rate):
    r = rate.lower().rstrip('bit')
    mult = {'k': 1e3, 'm': 1e6, 'g': 1e9}.get(r[-1], 1)
    return float(r[:-1] if r[-1] in 'kmg' else r) * mult
def ms(x):
    return f"{x:.1f}" if x < 100 else f"{x:.0f}"
for rate in dict.fromkeys(r['rate'] for r in rows):
    cap = bps(rate)
    print(f"\n| {rate} | model | case (engine) | step ms | exposed ms (% of step) | R % | MB/step | link use over the step, % of cap | exchange alone, Gbit/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in (x for x in rows if x['rate'] == rate):
        if r.get('bench') == 'ddp':
            use = r['grad_MB'] * 8e6 / (r['median_ms'] * 1e-3)
            print(f"| | {r['model']} | PyTorch DDP (gloo) | {ms(r['median_ms'])} | | | {r['grad_MB']:.2f} | {100 * use / cap:.0f} | |")
            continue
        use = r['mb_per_step'] * 8e6 / (r['median_ms'] * 1e-3)
        # Without overlap the collectives run one at a time: bytes / their time.
        alone = (f"{r['mb_per_step'] * 8e6 / (r['comm_ms'] * 1e-3) / 1e9:.2f}"
                 if not r['overlap'] and r['comm_ms'] > 0 else "")
        print(f"| | {r['model']} | {r['case']} ({r['engine']}) | {ms(r['median_ms'])} | {ms(r['exposed_ms'])} "
              f"({r['exposed_pct']:.0f}) | {r['overlap_ratio']:.0f} | {r['mb_per_step']:.2f} | "
              f"{100 * use / cap:.0f} | {alone} |")
EOF
