#!/usr/bin/env bash
# bench/ooc_examples.sh: what out-of-core costs the examples that move data.
#
# Runs redistribute, redistribute_a2a, sort and histogram in-core and with 1/8
# of each rank's blocks in memory (--mem-blocks), at 1 and 2 ranks, 2 threads,
# and prints a markdown table: the median of the times the examples print
# (each example checks its own result; a FAIL or a non-zero exit stops this
# script), the ratio, and rank 0's loads and evictions out-of-core.
#
# Sizes: 64 blocks (issue 12's case); redistribute and redistribute_a2a move
# 200 000 points of 16 bytes per block (3.2 MB; 6.4 MB before the points
# went to floats and a 32-bit id) with k = 4; sort sorts 800 000 keys of 8
# bytes per block and histogram merges 800 000 bins of 8 bytes per block
# (6.4 MB a block), k = 4, over a 2048 x 2048 grid.
# The in-core and out-of-core runs alternate, so drift hits both alike.
#
# What each example times (its own summary line): redistribute, the
# blk_reduce that routes the points (slowest rank, from a barrier);
# redistribute_a2a, the blk_all_to_all (the same); sort, its two
# all_to_alls (samples, then keys), on rank 0 from no barrier; histogram,
# the foreach that bins the cells plus the merge blk_reduce, the same way.
#
#   flock /tmp/blk-bench.lock bash bench/ooc_examples.sh
#
# Settings from the environment: BUILD (default build/release), REPS (5),
# RANKS ("1 2"), THREADS (2), SPILL_DIR (/tmp), EXAMPLES (all four),
# EXTRA (more options for every run, e.g. "--compression none"). Run it under
# the bench lock; it does not take the lock itself.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$here/build/release}
reps=${REPS:-5}
ranks=${RANKS:-"1 2"}
threads=${THREADS:-2}
spill=${SPILL_DIR:-/tmp}
examples=${EXAMPLES:-"redistribute redistribute_a2a sort histogram"}
extra=${EXTRA:-}
blocks=64
fraction=8

declare -A sizes=(
  [redistribute]="--points 200000 --k 4"
  [redistribute_a2a]="--points 200000 --k 4"
  [sort]="--keys 800000 --k 4"
  [histogram]="--bins 800000 --size 2048 --k 4"
)

# run NP EXAMPLE MEM_BLOCKS: prints "seconds loads evictions" (0 0 in-core).
run() {
  local np=$1 ex=$2 mem=$3 out line
  # shellcheck disable=SC2086 # the option lists split into words on purpose
  if ! out=$(mpiexec -n "$np" "$build/examples/$ex" --blocks $blocks --threads "$threads" \
    ${sizes[$ex]} --mem-blocks "$mem" --spill-dir "$spill" $extra 2>&1); then
    printf '%s\n' "$out" >&2
    echo "ooc_examples.sh: $ex at $np ranks, --mem-blocks $mem failed" >&2
    exit 1
  fi
  line=$(grep -E "^$ex: .*: PASS\$" <<<"$out" || true)
  if [ -z "$line" ]; then
    printf '%s\n' "$out" >&2
    echo "ooc_examples.sh: $ex at $np ranks, --mem-blocks $mem did not PASS" >&2
    exit 1
  fi
  local secs loads=0 evictions=0
  secs=$(sed -E 's/.*, ([0-9.]+) s: PASS$/\1/' <<<"$line")
  if [ "$mem" -gt 0 ]; then
    loads=$(sed -nE 's/.* ([0-9]+) loads, .*/\1/p' <<<"$out")
    evictions=$(sed -nE 's/.* ([0-9]+) evictions, .*/\1/p' <<<"$out")
  fi
  echo "$secs $loads $evictions"
}

median() { # of the numbers on stdin, one a line (the middle one of an odd count)
  sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

echo "ooc_examples.sh: $blocks blocks, $threads threads, in-core and 1/$fraction of the blocks in memory, median of $reps, spill in $spill${extra:+, $extra}"
echo
echo "| example | ranks | in memory per rank | in-core s | out-of-core s | OOC/in-core | loads | evictions |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for ex in $examples; do
  for np in $ranks; do
    mem=$((blocks / np / fraction))
    [ "$mem" -ge 1 ] || mem=1
    t_in=() t_out=() l=() e=()
    for ((r = 0; r < reps; r++)); do
      res=$(run "$np" "$ex" 0) # a failed run stops the script (set -e)
      read -r s _ _ <<<"$res"
      t_in+=("$s")
      res=$(run "$np" "$ex" "$mem")
      read -r s lo ev <<<"$res"
      t_out+=("$s") l+=("$lo") e+=("$ev")
    done
    mi=$(printf '%s\n' "${t_in[@]}" | median)
    mo=$(printf '%s\n' "${t_out[@]}" | median)
    ml=$(printf '%s\n' "${l[@]}" | median)
    me=$(printf '%s\n' "${e[@]}" | median)
    ratio=$(awk -v a="$mo" -v b="$mi" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    echo "| $ex | $np | $mem of $((blocks / np)) | $mi | $mo | $ratio | $ml | $me |"
  done
done
