#!/usr/bin/env bash
# Compares Google Benchmark binaries on a VM whose speed drifts: runs them alternately,
# ROUNDS rounds of 4 repetitions each, and prints each benchmark's min, p25 and median per
# binary over all its repetitions (bench/RESULTS.md, "Per-user BM25 at 1,000x").
#   bench/ab.sh 'ProfileBm25Kept/n:(57|64)/k:5' 3 old/bench_bm25 new/bench_bm25
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: bench/ab.sh FILTER ROUNDS BINARY BINARY [BINARY ...]" >&2
  exit 2
fi
filter=$1 rounds=$2
shift 2
for b in "$@"; do [ -x "$b" ] || { echo "ab.sh: $b is not an executable" >&2; exit 2; }; done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$rounds"); do
  for b in "$@"; do
    OMP_NUM_THREADS=1 "$b" --benchmark_filter="$filter" --benchmark_min_time=0.2 --benchmark_repetitions=4 \
      --benchmark_format=csv 2>/dev/null | awk -F, -v b="$b" '$1 ~ /^"/ && $1 !~ /_(mean|median|stddev|cv)"$/ {print b "," $1 "," $3 "," $5}' >>"$out"
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    binary, name, real, unit = line.rstrip("\n").split(",")
    runs[(name.strip('"'), binary)].append((float(real), unit))
for (name, binary), v in sorted(runs.items()):
    t = sorted(x for x, _ in v)
    print(f"{name:34s} {binary:40s} min {t[0]:9.1f}  p25 {t[len(t) // 4]:9.1f}  median {statistics.median(t):9.1f} {v[0][1]}  n={len(t)}")
PY
