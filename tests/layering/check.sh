#!/usr/bin/env bash
# The layering holds (cmake/cleave_layering.cmake): each case compiles a one-line file that includes HEADER with the
# include path TARGET builds with, and expects it to compile (ok) or to fail with the header not found (wrong-way).
# Usage: check.sh CXX CASES_FILE, CASES_FILE lines: `ok|wrong TARGET HEADER -I... ...` (written by CMake).
set -uo pipefail
cxx=$1
cases=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
n=0
while read -r want target header flags; do
  [ -z "$want" ] && continue
  n=$((n + 1))
  echo "#include \"$header\"" > "$tmp/t.cpp"
  # shellcheck disable=SC2086
  if "$cxx" -std=c++20 -fsyntax-only $flags "$tmp/t.cpp" 2> "$tmp/err"; then
    got=ok
  elif grep -q "$header: No such file or directory" "$tmp/err"; then
    got=wrong
  else
    got=error
  fi
  if [ "$got" != "$want" ]; then
    echo "FAIL: $target including $header: expected $want, got $got"
    head -5 "$tmp/err"
    failed=$((failed + 1))
  else
    echo "ok: $target including $header is $want"
  fi
done < "$cases"
[ "$n" -gt 0 ] || { echo "FAIL: no cases in $cases"; exit 1; }
[ "$failed" -eq 0 ]
