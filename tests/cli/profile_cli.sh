#!/usr/bin/env bash
# `cleave profile` on the MLP at 2 ranks, and `--profile` in the cost model. Checks:
#  - the profile has a measured time for every op of the plan (cleave plan's op lines) and a curve for every
#    collective over 2 ranks at every size 4..MAX (powers of two), with positive times;
#  - profiling changes nothing a run prints on stdout (the `step <k> loss <v>` lines are identical with and without
#    CLEAVE_PROFILE), every rank wrote its JSON, rank 0 logged the step median on stderr, and per step the timed
#    statements add up to no more than the step; statement_gap is the median untimed step time per statement;
#  - `cleave explain --profile`: each op's compute seconds are the profile's time of its share (the data plan's two
#    shares have the same key) at its slower rank's speed (rank_scale), not the roofline's; the report counts every
#    share as measured; the communication of every event comes from the curves, and so does the time of every data
#    read (the profiled run timed them: rank files carry data sites with their bytes).
# Usage: profile_cli.sh CLEAVE_BINARY SOURCE_DIR
set -u
CLEAVE=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; return 1; fi; echo "ok: $1"; }
# The main build's runtime, so the bundle compiles only its rank sources.
rt=$(dirname "$(dirname "$(readlink -f "$CLEAVE")")")/runtime
rtflag=()
[ -f "$rt/libcleave_rt_cpu.a" ] && rtflag=(--runtime-dir "$rt")
max=65536

"$CLEAVE" plan "$SRC/models/mlp.onnx" --devices 2 --batch 8 --planner data -o "$tmp/data.plan" 2>/dev/null
start=$(date +%s)
"$CLEAVE" profile "$SRC/models/mlp.onnx" --backend cpu --devices 2 --batch 8 --plan "$tmp/data.plan" -o "$tmp/p.json" \
  --steps 3 --repeats 2 --build-type Debug --max-bytes $max --reps 2 --work-dir "$tmp/work" "${rtflag[@]}" 2>"$tmp/profile.err"
code=$?
echo "cleave profile: exit $code in $(($(date +%s) - start)) s"
check "cleave profile succeeds" "[ $code -eq 0 ]" || { tail -20 "$tmp/profile.err"; }
check "rank 0 logged the step median (stderr)" "grep -q 'cleave: profile: step median .* s over 2 steps after 1 warm-up step' '$tmp/profile.err'"
check "every rank wrote its profile, in each run" "[ -f '$tmp/work/plan_0/profile.rank_0.json' ] && [ -f '$tmp/work/plan_0/profile.rank_1.json' ] && [ -f '$tmp/work/plan_0/profile_1.rank_0.json' ] && [ -f '$tmp/work/plan_0/profile_1.rank_1.json' ]"
# --repeats 2: a plan's step is the median over both runs of each run's median after warm-up. Each rank's speed
# (rank_scale, mean 1) and each share's time at the mean speed are the fixed point of fitting t_rank,share =
# share_time * scale_rank: a share's time is the mean over both runs and both ranks of each one's mean after warm-up
# (without samples over 5x their median) divided by its rank's scale, and a rank's scale the sum of its shares' times
# over the sum of the profile's times of those shares. The data plan's two ranks run the same share of every op.
check "with --repeats, the step and kernel times are taken over the runs at each rank's fitted speed" "/usr/bin/python3 - '$tmp/p.json' '$tmp/work/plan_0' <<'PY'
import json, os, statistics, sys
def expected(v):
    cap = 5 * statistics.median(v)
    return statistics.mean([x for x in v if x <= cap])
p = json.load(open(sys.argv[1]))
runs = [[json.load(open('%s/%s.rank_%d.json' % (sys.argv[2], pre, r))) for r in (0, 1)] for pre in ('profile', 'profile_1')]
step = statistics.median(statistics.median(run[0]['steps'][1:]) for run in runs)
assert abs(p['plans'][0]['step_seconds'] - step) <= 1e-5 * step, (p['plans'][0], step)
scale = p.get('rank_scale')
if os.cpu_count() < 2:  # ranks sharing a core get no fitted speeds
    assert scale is None, scale
    scale = [1.0, 1.0]
assert len(scale) == 2 and abs(sum(scale) / 2 - 1) < 1e-5, scale
times = {}  # op -> rank -> [per-run expected seconds]; a fused kernel's time split equally among its ops
for run in runs:
    for r, rank in enumerate(run):
        for s in rank['sites']:
            if s['kind'] == 'kernel':
                for op in s['ops']:
                    times.setdefault(op, {}).setdefault(r, []).append(expected(s['seconds'][1:]) / len(s['ops']))
share = {}
for op, per_rank in times.items():
    assert sorted(per_rank) == [0, 1] and len(p['compute'][op]) == 1, (op, per_rank, p['compute'][op])
    share[op] = list(p['compute'][op].values())[0]
    want = statistics.mean(t / scale[r] for r, ts in per_rank.items() for t in ts)
    assert abs(share[op] - want) <= 1e-4 * want, (op, share[op], want)
for r in (0, 1):
    want = sum(statistics.mean(times[op][r]) for op in times) / sum(share.values())
    assert abs(scale[r] - want) <= 1e-4 * want, (r, scale, want)
PY"

# statement_gap: per rank and run, the median over the steps after warm-up of the step time no site timed (never
# below 0), over the statements the rank runs (explain's per-device count); the profile keeps the median of those.
"$CLEAVE" explain "$SRC/models/mlp.onnx" --batch 8 --plan "$tmp/data.plan" --topology k80x8 --format json \
  >"$tmp/count.json" 2>/dev/null
check "statement_gap is the median of the ranks' untimed step time per statement" "/usr/bin/python3 - '$tmp/p.json' '$tmp/work/plan_0' '$tmp/count.json' <<'PY'
import json, statistics, sys
p = json.load(open(sys.argv[1]))
n = [d['statements'] for d in json.load(open(sys.argv[3]))['per_device']]
gaps = []
for pre in ('profile', 'profile_1'):
    for r in (0, 1):
        j = json.load(open('%s/%s.rank_%d.json' % (sys.argv[2], pre, r)))
        outside = [max(0.0, step - sum(s['seconds'][k] for s in j['sites'])) for k, step in enumerate(j['steps']) if k > 0]
        gaps.append(statistics.median(outside) / n[r])
want = statistics.median(gaps)
assert n[0] > 0 and want > 0 and 'statement_gap' in p, (p.get('statement_gap'), want, gaps, n)
assert abs(p['statement_gap'] - want) <= 1e-5 * want, (p['statement_gap'], want, gaps, n)
PY"

check "the profile has every op of the plan and every collective" "/usr/bin/python3 - '$tmp/p.json' '$tmp/data.plan' $max <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
ops = [l.split()[1] for l in open(sys.argv[2]) if l.startswith('op ')]
assert ops, 'no op lines in the plan'
missing = [o for o in ops if not p['compute'].get(o)]
assert not missing, 'ops without a measured time: %s' % missing[:5]
assert all(v > 0 for o in p['compute'].values() for v in o.values())
sizes = []
b = 4
while b <= int(sys.argv[3]):
    sizes.append(b)
    b *= 2
for k in ['all_gather', 'all_reduce', 'all_to_all', 'reduce_scatter', 'send_recv']:
    curve = p['collectives'][k]['2']
    assert [x for x, _ in curve] == sizes, (k, curve)
    assert all(t > 0 for _, t in curve), k
assert p['plans'][0]['devices'] == 2 and p['plans'][0]['step_seconds'] > 0
# The data plan reads x and y: a curve of data reads, bytes increasing. Its updates write their params in place, so
# it copies nothing and has no copy curve.
curve = p['statements']['data']
assert curve and all(t > 0 for _, t in curve) and [b for b, _ in curve] == sorted({b for b, _ in curve}), curve
assert 'copy' not in p['statements'], p['statements']
assert list(p) == sorted(p), 'keys not sorted'
PY"

# Profiling must not change what a run prints: the same bundle, with and without CLEAVE_PROFILE.
data=$(/usr/bin/python3 -c "
import json, sys
m = json.load(open('$tmp/work/plan_0/manifest.json'))
print(','.join('%s=$tmp/work/plan_0/input_%d.npy' % (n, i + 1) for i, n in enumerate(m['inputs'])))")
"$CLEAVE" run "$tmp/work/plan_0" --data "$data" --steps 3 --build-type Debug "${rtflag[@]}" >"$tmp/plain.out" 2>/dev/null
CLEAVE_PROFILE="$tmp/again" "$CLEAVE" run "$tmp/work/plan_0" --data "$data" --steps 3 --build-type Debug "${rtflag[@]}" \
  >"$tmp/prof.out" 2>/dev/null
check "stdout is the same step/loss lines with and without CLEAVE_PROFILE" \
  "[ \$(grep -c '^step [0-9]* loss ' '$tmp/plain.out') -eq 3 ] && cmp -s '$tmp/plain.out' '$tmp/prof.out'"
check "CLEAVE_PROFILE names where the rank files go" "[ -f '$tmp/again.rank_0.json' ] && [ -f '$tmp/again.rank_1.json' ]"
# The timed statements are disjoint parts of a step: per rank and step their sum cannot exceed the step's wall time.
check "per step, the sites' times add up to at most the step's" "/usr/bin/python3 - '$tmp/again' <<'PY'
import json, sys
for r in (0, 1):
    j = json.load(open('%s.rank_%d.json' % (sys.argv[1], r)))
    assert j['rank'] == r and j['world'] == 2 and len(j['steps']) == 3, j
    for k, step in enumerate(j['steps']):
        timed = sum(s['seconds'][k] for s in j['sites'])
        assert 0 < timed <= step, (r, k, timed, step)
    assert any(s['kind'] == 'comm' for s in j['sites']) and any(s['kind'] == 'kernel' for s in j['sites'])
    assert all(s['bytes'] > 0 for s in j['sites'] if s['kind'] in ('copy', 'data'))
    assert sum(s['kind'] == 'data' for s in j['sites']) == 2, 'x and y are read each step'
PY"

"$CLEAVE" explain "$SRC/models/mlp.onnx" --batch 8 --plan "$tmp/data.plan" --topology k80x8 --format json \
  >"$tmp/roof.json" 2>/dev/null
"$CLEAVE" explain "$SRC/models/mlp.onnx" --batch 8 --plan "$tmp/data.plan" --topology k80x8 --format json \
  --profile "$tmp/p.json" >"$tmp/meas.json" 2>/dev/null
check "explain --profile takes each op's compute time from the profile, at its slower rank's speed" "/usr/bin/python3 - '$tmp/p.json' '$tmp/roof.json' '$tmp/meas.json' <<'PY'
import json, sys
p, roof, meas = (json.load(open(f)) for f in sys.argv[1:])
n = len(meas['ops'])
assert meas['profile']['measured_op_shares'] == 2 * n and meas['profile']['roofline_op_shares'] == 0, meas['profile']
assert meas['profile']['modelled_comm_events'] == 0 and meas['profile']['measured_comm_events'] > 0, meas['profile']
assert meas['profile']['modelled_local_statements'] == 0 and meas['profile']['measured_local_statements'] > 0, meas['profile']
differs = 0
for r, m in zip(roof['ops'], meas['ops']):
    keys = p['compute'][m['op']]
    assert len(keys) == 1, (m['op'], keys)   # both ranks' shares of a data plan have the same extents
    want = '%.3e' % (list(keys.values())[0] * max(p.get('rank_scale', [1])))  # an op's time: its slowest device's
    assert m['compute_seconds'] == want, (m['op'], m['compute_seconds'], want)
    differs += r['compute_seconds'] != want
assert differs > 0, 'measured times equal the roofline everywhere'
assert meas['predicted_step_seconds'] != roof['predicted_step_seconds']
print('ops %d, measured differs from roofline on %d; step roofline %s, measured %s' % (
    n, differs, roof['predicted_step_seconds'], meas['predicted_step_seconds']))
PY"
check "explain's text header names the profile" \
  "\"$CLEAVE\" explain '$SRC/models/mlp.onnx' --batch 8 --plan '$tmp/data.plan' --profile '$tmp/p.json' | head -1 | grep -q 'compute measured for'"
# The search planners take the profile: flexflow's reported step is `cleave simulate --profile`'s for its plan, and
# the frontier's table (whose points are re-scored with the profile) lists the plan it chose at explain's step.
"$CLEAVE" plan "$SRC/models/mlp.onnx" --devices 2 --batch 8 --planner flexflow --iterations 200 --profile "$tmp/p.json" \
  -o "$tmp/ff.plan" 2>"$tmp/ff.err"
"$CLEAVE" simulate "$SRC/models/mlp.onnx" --batch 8 --plan "$tmp/ff.plan" --profile "$tmp/p.json" >"$tmp/ff.sim" 2>/dev/null
check "flexflow --profile: its simulated step is simulate --profile's of its plan" \
  "grep -q \"simulated step \$(awk '/^simulated_step_seconds/ {print \$2}' '$tmp/ff.sim') s\" '$tmp/ff.err'" ||
  { cat "$tmp/ff.err"; head -3 "$tmp/ff.sim"; }
"$CLEAVE" plan "$SRC/models/mlp.onnx" --devices 2 --batch 8 --planner frontier --profile "$tmp/p.json" \
  --frontier-table "$tmp/ft.txt" -o "$tmp/ft.plan" 2>/dev/null
"$CLEAVE" explain "$SRC/models/mlp.onnx" --batch 8 --plan "$tmp/ft.plan" --topology k80x8 --format json \
  --profile "$tmp/p.json" >"$tmp/ft.json" 2>/dev/null
check "frontier --profile: the chosen plan's step in the table is explain --profile's" "/usr/bin/python3 - '$tmp/ft.txt' '$tmp/ft.json' <<'PY'
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith('#')]
step = json.load(open(sys.argv[2]))['predicted_step_seconds']
assert rows and abs(float(rows[0][1]) - float(step)) <= 1e-3 * float(step), (rows[0], step)  # explain prints 4 digits
PY"
# Last (it writes over the work dir's run files): profiling again into the same --work-dir rewrites no unchanged
# bundle file, so nothing is compiled again.
times() { stat -c '%n %Y.%y' "$tmp"/work/plan_0/src/*.cpp "$tmp"/work/plan_0/build/rank* "$tmp"/work/plan_0/plan.txt; }
times >"$tmp/times.before"
"$CLEAVE" profile "$SRC/models/mlp.onnx" --backend cpu --devices 2 --batch 8 --plan "$tmp/data.plan" -o "$tmp/p2.json" \
  --steps 3 --build-type Debug --max-bytes 4 --reps 1 --work-dir "$tmp/work" "${rtflag[@]}" 2>"$tmp/profile2.err"
code2=$?
check "profiling again into the work dir succeeds" "[ $code2 -eq 0 ]" || tail -20 "$tmp/profile2.err"
times >"$tmp/times.after"
check "profiling again rewrote and rebuilt nothing" "[ -s '$tmp/times.before' ] && cmp -s '$tmp/times.before' '$tmp/times.after'"
# A rank file that does not read as its run wrote it (truncated, from another rank, from another plan) is one error
# line naming the file, and no profile is written. A fake mpirun first on PATH runs the real one, then corrupts
# rank 1's file of the profiling run as $CORRUPT says.
mkdir -p "$tmp/fakebin"
cat >"$tmp/fakebin/mpirun" <<EOF
#!/usr/bin/env bash
PATH="$PATH" mpirun "\$@" || exit \$?
[ -n "\${CLEAVE_PROFILE:-}" ] || exit 0
exec /usr/bin/python3 - "\$CLEAVE_PROFILE.rank_1.json" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
kind = os.environ['CORRUPT']
if kind == 'steps':
    j['sites'][-1]['seconds'].pop()
elif kind == 'rank':
    j['rank'] = 0
elif kind == 'op':
    next(s for s in j['sites'] if s['kind'] == 'kernel')['ops'][0] = 'NoSuchOp_9'
json.dump(j, open(sys.argv[1], 'w'))
PY
EOF
chmod +x "$tmp/fakebin/mpirun"
for corrupt in 'steps:sites\[[0-9]*\]\.seconds: times 2 steps, not the 3 of steps' \
               'rank:rank: 0, not 1 as its name says' \
               'op:a kernel site times op "NoSuchOp_9", which plan data.plan does not run on rank 1'; do
  rm -f "$tmp/bad.json"
  CORRUPT=${corrupt%%:*} PATH="$tmp/fakebin:$PATH" "$CLEAVE" profile "$SRC/models/mlp.onnx" --backend cpu --devices 2 \
    --batch 8 --plan "$tmp/data.plan" -o "$tmp/bad.json" --steps 3 --build-type Debug --max-bytes 4 --reps 1 \
    --work-dir "$tmp/work" "${rtflag[@]}" 2>"$tmp/bad.err"
  code3=$?
  want="^error: $tmp/work/plan_0/profile.rank_1.json: ${corrupt#*:}\$"
  check "a corrupted rank file (${corrupt%%:*}): one error line naming it, exit 1, no profile" \
    "[ $code3 -eq 1 ] && [ \$(grep -c '^error: ' '$tmp/bad.err') -eq 1 ] && [ ! -e '$tmp/bad.json' ] && grep -q '$want' '$tmp/bad.err'" ||
    { tail -3 "$tmp/bad.err"; true; }
done
[ "$fail" -eq 0 ] && echo "all ok"
exit $fail
