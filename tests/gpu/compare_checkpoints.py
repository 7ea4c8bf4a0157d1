#!/usr/bin/env python3
"""Compares two checkpoints of the runtime's format (runtime/common/checkpoint_format.h) buffer by buffer: float32 buffers within
fp32 tolerance (|a - b| <= rtol * max(1, max|b|), rtol 1e-4 unless given), the buffers named with --exact byte for
byte. Every buffer of one file must be in the other; a NaN anywhere fails. Prints one line per buffer, then ok/FAIL.

Usage: compare_checkpoints.py GOT.bin WANT.bin [--rtol R] [--exact NAME ...]
"""
import math
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    version = {b"CLEAVEC1": 1, b"CLEAVEC2": 2}.get(data[:8])
    if version is None:
        sys.exit(f"error: {path}: not a cleave checkpoint")
    at, out = 16, {}
    (count,) = struct.unpack_from("<Q", data, 8)

    def string():
        nonlocal at
        (n,) = struct.unpack_from("<Q", data, at)
        s = data[at + 8:at + 8 + n].decode()
        at += 8 + n
        return s

    for _ in range(count):
        name = string()
        if version == 2:
            string()  # dtype
            (rank,) = struct.unpack_from("<Q", data, at)
            at += 8 + 3 * 8 * rank  # shape, begin, end
        (bl,) = struct.unpack_from("<Q", data, at)
        out[name] = data[at + 8:at + 8 + bl]
        at += 8 + bl
    return out


def main():
    args = sys.argv[1:]
    rtol, exact = 1e-4, set()
    if "--rtol" in args:
        k = args.index("--rtol")
        rtol = float(args[k + 1])
        del args[k:k + 2]
    if "--exact" in args:
        k = args.index("--exact")
        exact = set(args[k + 1:])
        del args[k:]
    got, want = read(args[0]), read(args[1])
    problems = []
    if set(got) != set(want):
        problems.append(f"buffers differ: only in {args[0]}: {sorted(set(got) - set(want))}, "
                        f"only in {args[1]}: {sorted(set(want) - set(got))}")
    for name in sorted(set(got) & set(want)):
        a, b = got[name], want[name]
        if len(a) != len(b):
            problems.append(f"{name}: {len(a)} bytes vs {len(b)}")
            continue
        if name in exact:
            same = a == b
            print(f"{name}: {'identical' if same else 'DIFFERENT'} ({len(a)} bytes)")
            if not same:
                problems.append(f"{name}: not byte-identical")
            continue
        x = struct.unpack(f"<{len(a) // 4}f", a)
        y = struct.unpack(f"<{len(b) // 4}f", b)
        if any(math.isnan(v) for v in x + y):
            problems.append(f"{name}: NaN")
            continue
        scale = max([1.0] + [abs(v) for v in y])
        worst = max([0.0] + [abs(p - q) for p, q in zip(x, y)]) / scale
        print(f"{name}: max |diff| / max(1, max|want|) = {worst:.3g}")
        if not worst <= rtol:
            problems.append(f"{name}: relative difference {worst:.3g} > {rtol}")
    for p in problems:
        print(f"FAIL: {p}")
    print("ok" if not problems else f"FAIL: {len(problems)} buffers differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
