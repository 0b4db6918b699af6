#!/usr/bin/env bash
# traced_example.sh MPIEXEC RANKS HISTOGRAM TRACE_CHECK [histogram options]:
# runs the histogram example with BLK_TRACE set, then checks the file it
# wrote with trace_check (every callback span there, on its rank). The
# histogram's own line says its decomposition ("12 blocks (4x3)"), which is
# what trace_check needs to work out the merge's rounds.
set -euo pipefail
mpiexec=$1 ranks=$2 histogram=$3 trace_check=$4
shift 4
dir=$(mktemp -d "${TMPDIR:-/tmp}/blk-trace-XXXXXX")
trap 'rm -rf "$dir"' EXIT
out=$(BLK_TRACE="$dir/histogram.json" "$mpiexec" -n "$ranks" "$histogram" "$@")
echo "$out"
[[ $out =~ \(([0-9]+)x([0-9]+)\) ]] || { echo "no decomposition in the example's line"; exit 1; }
d0=${BASH_REMATCH[1]} d1=${BASH_REMATCH[2]}
[[ $out =~ merge\ k=([0-9]+)\ (contiguous|halving) ]] || { echo "no k in the example's line"; exit 1; }
k=${BASH_REMATCH[1]} order=()
[ "${BASH_REMATCH[2]}" = halving ] && order=(--halving)
# histogram runs two foreach calls: the local histograms, and the check at the root.
"$trace_check" "$dir/histogram.json" --ranks "$ranks" --divisions "$d0" "$d1" --k "$k" \
  "${order[@]}" --foreach 2
