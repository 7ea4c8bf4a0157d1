#!/usr/bin/env python3
"""Fails if a CUDA runtime, cuBLAS, cuDNN or NCCL call, or a kernel launch, is not wrapped in a checking macro.

Scanned: every source under runtime/ and the given generated rank sources (or bundle directories). A call is a name
`cuda*`, `cublas*`, `cudnn*` or `nccl*` (followed by an upper-case letter) directly followed by `(`; the checking
macros take the function name and its arguments apart (CLEAVE_CUDA(cudaMalloc, &p, n)), so a wrapped call never
has that form. Allowed: the libraries' error-string functions (they return text, not a status), a call that is the
first argument of a check_* function (the body of CLEAVE_LAUNCH), and a line marked `cleave-unchecked: <reason>`.
A kernel launch (`<<<`) is allowed only inside the definition of CLEAVE_LAUNCH, which checks it.

Usage: check_wrapped.py SOURCE_DIR [RANK_SOURCE_OR_BUNDLE_DIR ...]
       check_wrapped.py --self-test   (plants unwrapped calls and checks that each is reported)
"""
import os
import re
import sys
import tempfile

CALL = re.compile(r"\b((?:cuda|cublas|cudnn|nccl)[A-Z]\w*)\s*\(")
STRING_FUNCTIONS = {"cudaGetErrorString", "cudaGetErrorName", "cublasGetStatusString", "cublasGetStatusName",
                    "cudnnGetErrorString", "ncclGetErrorString", "ncclGetLastError"}
CHECKED_ARGUMENT = re.compile(r"check_(?:cuda|cublas|cudnn|nccl)\(\s*$")
EXTENSIONS = (".cu", ".cuh", ".cpp", ".h", ".hpp", ".cc")


def strip(text):
    """Blanks comments and string/char literals, keeping line structure and the `cleave-unchecked` markers."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" cleave-unchecked " if "cleave-unchecked:" in text[i:j] else " ")
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def launch_macro_lines(lines):
    """Line numbers (0-based) of the definition of CLEAVE_LAUNCH, with its continuation lines."""
    allowed, inside = set(), False
    for k, line in enumerate(lines):
        if re.match(r"\s*#\s*define\s+CLEAVE_LAUNCH\b", line):
            inside = True
        if inside:
            allowed.add(k)
            if not line.rstrip().endswith("\\"):
                inside = False
    return allowed


def problems(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip(f.read())
    lines = text.split("\n")
    launch = launch_macro_lines(lines)
    found = []
    for k, line in enumerate(lines):
        if "cleave-unchecked" in line:
            continue
        for m in CALL.finditer(line):
            name = m.group(1)
            if name in STRING_FUNCTIONS or CHECKED_ARGUMENT.search(line[:m.start()]):
                continue
            found.append(f"{path}:{k + 1}: unchecked call {name}(...): wrap it in a CLEAVE_CUDA/CLEAVE_CUBLAS/"
                         "CLEAVE_CUDNN/CLEAVE_NCCL macro")
        if "<<<" in line and k not in launch:
            found.append(f"{path}:{k + 1}: kernel launched with <<< >>>: use CLEAVE_LAUNCH, which checks it")
    return found


def sources(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for name in sorted(files):
                    if name.endswith(EXTENSIONS):
                        yield os.path.join(root, name)
        else:
            yield p


def self_test():
    """Each planted line must be reported, and the wrapped forms next to them must not be."""
    planted = ["cudaMalloc(&p, 16);", "cublasCreate(&h);", "cudnnSetStream(h, s);", "ncclAllReduce(a, b, n, t, o, c, s);",
               "kernel<<<1, 32>>>(x);", "if (cudaStreamSynchronize(s) != cudaSuccess) return;"]
    clean = ["CLEAVE_CUDA(cudaMalloc, &p, 16);", "// cudaMalloc(&p, 16) in a comment",
             "const char *m = \"cudaFree(p)\";", "report(cudaGetErrorString(code));",
             "check_cuda(cudaGetLastError(), \"k\", __FILE__, __LINE__);",
             "ncclCommAbort(c);  // cleave-unchecked: failing already", "cudaStream_t compute_stream();"]
    with tempfile.TemporaryDirectory() as tmp:
        for k, line in enumerate(planted):
            path = os.path.join(tmp, f"planted_{k}.cu")
            with open(path, "w") as f:
                f.write("void f() {\n" + "\n".join(clean) + "\n  " + line + "\n}\n")
            got = problems(path)
            if len(got) != 1 or f":{len(clean) + 2}:" not in got[0]:
                print(f"FAIL: planted `{line}` gave {got}")
                return 1
        path = os.path.join(tmp, "clean.cu")
        with open(path, "w") as f:
            f.write("\n".join(clean) + "\n")
        if problems(path):
            print(f"FAIL: wrapped calls reported: {problems(path)}")
            return 1
    print(f"ok: {len(planted)} planted unchecked calls reported, {len(clean)} checked forms accepted")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    src, extra = sys.argv[1], sys.argv[2:]
    files = list(sources([os.path.join(src, "runtime")] + extra))
    calls = 0
    found = []
    for path in files:
        found += problems(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            calls += len(re.findall(r"CLEAVE_(?:CUDA|CUBLAS|CUDNN|NCCL|LAUNCH|CUDA_QUERY)\(", strip(f.read())))
    for p in found:
        print(p)
    if found:
        print(f"FAIL: {len(found)} unchecked CUDA/cuBLAS/cuDNN/NCCL calls or launches in {len(files)} files")
        return 1
    if calls == 0:
        print("FAIL: no checked calls found at all (wrong directory?)")
        return 1
    print(f"ok: {len(files)} files, {calls} checked calls or launches, none unchecked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
