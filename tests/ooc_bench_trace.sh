#!/usr/bin/env bash
# ooc_bench_trace.sh MPIEXEC RANKS OOC_BENCH OOC_TRACE_CHECK: runs
# blk-ooc-bench with --trace PREFIX (tiny blocks, one in memory, two
# patterns), then checks that it wrote exactly one timeline per pattern,
# named PREFIX-PATTERN-M.json, and that each reads as a trace of an
# out-of-core run on every rank (tests/ooc_trace_check.c).
set -euo pipefail
mpiexec=$1 ranks=$2 bench=$3 check=$4
dir=$(mktemp -d "${TMPDIR:-/tmp}/blk-ooc-trace-XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$mpiexec" -n "$ranks" "$bench" --blocks 5 --bytes 16K --reps 1 --fraction one --threads 2 \
  --patterns merge,all_to_all --spill-dir "$dir" --trace "$dir/t"
want="t-all_to_all-1.json t-merge-1.json"
got=$(cd "$dir" && ls | sort | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$want" ] || { echo "ooc_bench_trace: wrote '$got', expected '$want'"; exit 1; }
"$check" --ranks "$ranks" "$dir/t-merge-1.json" "$dir/t-all_to_all-1.json"
