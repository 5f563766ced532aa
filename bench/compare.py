#!/usr/bin/python3
"""libpcnn against PyTorch, side by side in the same run.

    /usr/bin/python3 bench/compare.py [--build build] [--threads 2] [--rounds 1]
        [--models lenet:64,lenet:256,resnet20:128,vgg11:64,edsr:16,cosmoflow:4]
        [--alloc peers,default] [--coretype unset,Haswell] [--precision fp32]
        [--json results.jsonl]

For every allocator setting (the peers' GLIBC_TUNABLES, see
../shared/docs/MACHINE.md, and glibc's default) and every OpenBLAS kernel
choice (OPENBLAS_CORETYPE unset = AVX-512 kernels on these machines, or
Haswell = AVX2), each model is timed by bench/bench_models and right after
by the peers' bench_torch.py, with OMP_NUM_THREADS set to --threads for
both.  With --rounds > 1 the pair is repeated and the medians of the
per-round medians are reported (the machines are shared and noisy).  Each
setting also gets one line of OpenBLAS square SGEMM throughput on the same
threads (bench/sgemm_peak), the ceiling for the GEMM-bound models.

--precision fp32,bf16 adds the mixed-precision runs: libpcnn with
PCNN_PRECISION=bf16 (bench_models: PCNN_OPT_PRECISION) against PyTorch's
bf16 autocast (bench_torch.py ... bf16), each compared with its own kind.

Prints one table per setting and a summary: the median and the largest
libpcnn/PyTorch step-time ratio, of the medians and of the best steps
(min-ratio: the fastest step of each side, which other load on a shared
machine disturbs least).  Needs the peers' scripts in
<repo>/../shared/bench (or --peers) and /usr/bin/python3 with torch.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS_TUNABLES = 'glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736'
ITERS = {'lenet': 50, 'resnet20': 10, 'vgg11': 10, 'edsr': 5, 'cosmoflow': 10}


def run_json(cmd, env, cwd=None):
    """Run cmd and return its last JSON line (or an error record)."""
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    for line in reversed(p.stdout.splitlines()):
        line = line.strip()
        if line.startswith('{'):
            return json.loads(line)
    return {'error': (p.stderr.strip().splitlines() or ['exit %d' % p.returncode])[-1]}


def environment(alloc, coretype, threads):
    env = dict(os.environ)
    env['OMP_NUM_THREADS'] = str(threads)
    env.pop('GLIBC_TUNABLES', None)
    env.pop('OPENBLAS_CORETYPE', None)
    env.pop('PCNN_PRECISION', None)
    if alloc == 'peers':
        env['GLIBC_TUNABLES'] = PEERS_TUNABLES
    if coretype != 'unset':
        env['OPENBLAS_CORETYPE'] = coretype
    return env


def median_of(records, key):
    vals = [r[key] for r in records if key in r]
    return statistics.median(vals) if vals else None


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else '-'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', default=os.path.join(REPO, 'build'))
    ap.add_argument('--peers', default=os.path.join(REPO, '..', 'shared', 'bench'))
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--rounds', type=int, default=1)
    ap.add_argument('--iters-scale', type=float, default=1.0,
                    help='multiply the default number of timed steps')
    ap.add_argument('--models', default='lenet:64,lenet:256,resnet20:128,vgg11:64,edsr:16,'
                                        'cosmoflow:4')
    ap.add_argument('--alloc', default='peers,default')
    ap.add_argument('--coretype', default='unset,Haswell')
    ap.add_argument('--precision', default='fp32', help='fp32, bf16 or fp32,bf16')
    ap.add_argument('--json', help='append every raw record to this file (JSON lines)')
    args = ap.parse_args()

    ours = os.path.join(args.build, 'bench', 'bench_models')
    sgemm = os.path.join(args.build, 'bench', 'sgemm_peak')
    torch_bench = os.path.join(os.path.abspath(args.peers), 'bench_torch.py')
    for f in (ours, sgemm, torch_bench):
        if not os.path.exists(f):
            sys.exit('compare.py: %s not found (build first, or see --build/--peers)' % f)
    models = [(m.split(':')[0], int(m.split(':')[1])) for m in args.models.split(',')]
    out = open(args.json, 'a') if args.json else None
    summary = []

    settings = [(a, c, p) for a in args.alloc.split(',') for c in args.coretype.split(',')
                for p in args.precision.split(',')]
    for alloc, coretype, precision in settings:
        if precision not in ('fp32', 'bf16'):
            sys.exit('compare.py: --precision takes fp32 and bf16, not %s' % precision)
        env = environment(alloc, coretype, args.threads)
        torch_extra = []
        if precision == 'bf16':
            env['PCNN_PRECISION'] = 'bf16'
            torch_extra = ['bf16']
        title = 'allocator %s%s, OPENBLAS_CORETYPE %s, %d threads, %s' % (
            alloc, ' (GLIBC_TUNABLES=%s)' % PEERS_TUNABLES if alloc == 'peers' else '',
            coretype, args.threads, precision)
        peak = run_json([sgemm, str(args.threads), '2048', '10'], env)
        print('\n== %s' % title)
        print('OpenBLAS sgemm 2048^3 on %d threads: %s GFLOP/s median (%s kernels); '
              '75%% of it: %s' % (args.threads, fmt(peak.get('median_gflops'), '.1f'),
                                  peak.get('blas_core', '?'),
                                  fmt(0.75 * peak['median_gflops'], '.1f')
                                  if 'median_gflops' in peak else '-'))
        print('%-10s %5s %11s %11s %6s %9s %8s %8s %8s %8s %8s' % (
            'model', 'batch', 'libpcnn ms', 'PyTorch ms', 'ratio', 'min-ratio', 'GFLOP/s',
            'torch', 'faults', 'mallocs', 'RSS MB'))
        ratios, min_ratios = [], []
        for name, batch in models:
            iters = max(3, int(ITERS.get(name, 10) * args.iters_scale))
            mine, theirs = [], []
            for _ in range(args.rounds):
                r = run_json([ours, name, str(batch), str(args.threads), str(iters)], env)
                t = run_json(['/usr/bin/python3', torch_bench, name, str(batch),
                              str(args.threads), str(iters)] + torch_extra, env,
                             cwd=args.peers)
                for rec, who in ((r, 'libpcnn'), (t, 'pytorch')):
                    rec.update(side=who, alloc=alloc, coretype=coretype,
                               precision=precision)
                    if out:
                        out.write(json.dumps(rec) + '\n')
                mine.append(r)
                theirs.append(t)
            ms, tms = median_of(mine, 'median_ms'), median_of(theirs, 'median_ms')
            ratio = ms / tms if ms and tms else None
            mn = min([r['min_ms'] for r in mine if 'min_ms' in r], default=None)
            tmn = min([r['min_ms'] for r in theirs if 'min_ms' in r], default=None)
            min_ratio = mn / tmn if mn and tmn else None
            if ratio:
                ratios.append(ratio)
                min_ratios.append(min_ratio)
            note = ''
            if ms is None:
                note = '  (libpcnn: %s)' % (mine[0].get('unsupported') or
                                            mine[0].get('error', '?'))
            print('%-10s %5d %11s %11s %6s %9s %8s %8s %8s %8s %8s%s' % (
                name, batch, fmt(ms, '.2f'), fmt(tms, '.2f'), fmt(ratio, '.3f'),
                fmt(min_ratio, '.3f'),
                fmt(median_of(mine, 'achieved_gflops'), '.1f'),
                fmt(median_of(theirs, 'achieved_gflops'), '.1f'),
                fmt(median_of(mine, 'faults_per_step'), '.1f'),
                fmt(median_of(mine, 'mallocs_per_step'), '.1f'),
                fmt(median_of(mine, 'peak_rss_mb'), '.0f'), note))
            sys.stdout.flush()
        if ratios:
            summary.append((title, statistics.median(ratios), max(ratios),
                            statistics.median(min_ratios), max(min_ratios), len(ratios)))
            _, med, mx, mmed, mmx, count = summary[-1]
            print('ratio libpcnn/PyTorch over %d models: median %.3f, max %.3f '
                  '(of best steps: median %.3f, max %.3f)' % (count, med, mx, mmed, mmx))
    print('\n== summary (targets: fp32 median <= 0.75, max <= 0.95; bf16 against PyTorch bf16 '
          'median <= 0.7, max <= 0.95)')
    print('ratio = median step time ratio; min-ratio = best step time ratio (less sensitive '
          'to other load on the machine)')
    for title, med, mx, mmed, mmx, n in summary:
        print('%s\n    ratio median %.3f max %.3f; min-ratio median %.3f max %.3f (%d models)'
              % (title, med, mx, mmed, mmx, n))
    if out:
        out.close()


if __name__ == '__main__':
    main()
