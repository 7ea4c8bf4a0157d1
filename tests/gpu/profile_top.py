#!/usr/bin/python3
"""Where a rank's step goes, from the file CLEAVE_PROFILE wrote (PREFIX.rank_N.json; run with --cuda-graphs off so
each statement is timed): the median step, the time per op type (the node name's last component without its _N
suffix, '.grad' kept) and per site kind, and the costliest sites.
Usage: profile_top.py RANK_JSON [TOP]"""
import json
import re
import statistics
import sys
from collections import defaultdict


def op_type(name):
    last = name.rsplit("/", 1)[-1]
    if last.endswith(".update"):
        return "update"
    grad = ".grad" if ".grad" in last else ""
    return re.sub(r"_\d+$", "", last.split(".grad")[0]) + grad


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    prof = json.load(open(path))
    warm = 1 if len(prof["steps"]) > 1 else 0  # the first step allocates, plans algorithms and loads kernels
    step = statistics.median(prof["steps"][warm:])
    rows = []
    for i, site in enumerate(prof["sites"]):
        secs = statistics.median(site["seconds"][warm:]) if site["seconds"] else 0.0
        ops = site["ops"]
        kind = site["kind"]
        rows.append((secs, i, kind, op_type(ops[0]) if ops else kind, ", ".join(ops[:2]), site.get("shard", "")))
    timed = sum(r[0] for r in rows)
    print(f"{path}: step {step * 1e3:.2f} ms, {len(rows)} sites timing {timed * 1e3:.2f} ms "
          f"({max(0.0, step - timed) * 1e3:.2f} ms outside them)")
    by_type, by_kind, count = defaultdict(float), defaultdict(float), defaultdict(int)
    for secs, _, kind, t, _, _ in rows:
        by_type[t] += secs
        by_kind[kind] += secs
        count[t] += 1
    print("  by kind: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in sorted(by_kind.items(), key=lambda x: -x[1])))
    print("  by op type (ms, sites):")
    for t, v in sorted(by_type.items(), key=lambda x: -x[1])[:top]:
        print(f"    {t:<40} {v * 1e3:9.3f} {count[t]:5d}")
    print("  costliest sites (ms, site, kind, op, shard):")
    for secs, i, kind, _, ops, shard in sorted(rows, reverse=True)[:top]:
        print(f"    {secs * 1e3:9.3f} {i:5d} {kind:<8} {ops[:70]:<70} {shard}")


if __name__ == "__main__":
    main()
