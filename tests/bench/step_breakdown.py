#!/usr/bin/python3
"""Where a measured step's time goes, next to what the cost model predicts for it (issue 7, item 6).

Usage: step_breakdown.py PREFIX [EXPLAIN_JSON]
  PREFIX        a bundle's CLEAVE_PROFILE prefix (reads PREFIX.rank_<r>.json for every rank)
  EXPLAIN_JSON  `cleave explain --format json` of the same plan (with or without --profile)

Per rank, the median over the steps after the first (a warm-up) of: the step's wall time, and the sum of its timed
statements by kind (kernel, comm: collectives and send/recv, copy: packing/unpacking and assign copies, data: .npy
reads), with `untimed` the rest (loss logging, starting non-blocking reductions, the loop and the profiling marks
themselves). With EXPLAIN_JSON, the predicted seconds of the same kinds for that device (kernel = compute_seconds,
comm = comm_seconds, copy = copy_seconds, data = data_seconds) and, per kernel, the largest misses. Prints a table;
for people, not machines.
"""
import glob
import json
import statistics
import sys

KINDS = ['kernel', 'comm', 'copy', 'data']


def rank_breakdown(path):
    j = json.load(open(path))
    steps = j['steps'][1:] if len(j['steps']) > 1 else j['steps']
    first = 1 if len(j['steps']) > 1 else 0
    out = {'rank': j['rank'], 'step': statistics.median(steps)}
    per_step = {k: [0.0] * len(steps) for k in KINDS}
    kernels = {}
    for s in j['sites']:
        sec = s['seconds'][first:]
        for i, v in enumerate(sec):
            per_step[s['kind']][i] += v
        if s['kind'] == 'kernel':
            for op in s['ops']:
                kernels[op] = kernels.get(op, 0) + statistics.median(sec) / len(s['ops'])
    for k in KINDS:
        out[k] = statistics.median(per_step[k])
    out['untimed'] = statistics.median(
        [st - sum(per_step[k][i] for k in KINDS) for i, st in enumerate(steps)])
    out['kernels'] = kernels
    return out


def main():
    prefix = sys.argv[1]
    files = sorted(glob.glob(prefix + '.rank_*.json'), key=lambda f: int(f.rsplit('_', 1)[1].split('.')[0]))
    if not files:
        sys.exit('error: no %s.rank_*.json' % prefix)
    ranks = [rank_breakdown(f) for f in files]
    pred = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
    cols = ['step'] + KINDS + ['untimed']
    print('%-10s' % 'rank' + ''.join('%11s' % c for c in cols))
    for r in ranks:
        print('%-10s' % ('r%d meas' % r['rank']) + ''.join('%11.3e' % r[c] for c in cols))
        if pred:
            d = pred['per_device'][r['rank']]
            p = {'step': float(d['step_seconds']), 'kernel': float(d['compute_seconds']),
                 'comm': float(d['comm_seconds']), 'copy': float(d.get('copy_seconds', 0)),
                 'data': float(d.get('data_seconds', 0)), 'untimed': float(d.get('gap_seconds', 0))}
            print('%-10s' % ('r%d pred' % r['rank']) + ''.join('%11.3e' % p[c] for c in cols))
    if pred:
        # The kernels the prediction misses most on the slowest rank (explain lists each op's slowest device).
        slow = max(ranks, key=lambda r: r['step'])
        predicted = {o['op']: float(o['compute_seconds']) for o in pred['ops']}
        misses = sorted(((m - predicted.get(op, 0.0), op, m) for op, m in slow['kernels'].items()),
                        key=lambda x: -abs(x[0]))
        print('largest kernel misses on rank %d (measured - predicted):' % slow['rank'])
        for diff, op, m in misses[:5]:
            print('  %-50s %11.3e  (measured %.3e)' % (op, diff, m))


if __name__ == '__main__':
    main()
