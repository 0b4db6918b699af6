#!/usr/bin/env bash
# bench/ab.sh: one command run on two builds of blk, alternating, with the
# medians: how this machine compares two trees (docs/performance.md, "The
# machine and the procedure": it is shared and changes speed from one
# process to the next, so only runs that alternate in one sitting compare).
#
#   bash bench/ab.sh [-n PAIRS] [-r RANKS] [-x SED] BUILD_A BUILD_B PROGRAM [ARGS...]
#
# PROGRAM is a path inside each build tree (examples/histogram,
# bench/blk-ooc-bench, ...), run as `mpiexec -n RANKS BUILD/PROGRAM ARGS`.
# A run's figure is what the sed -E expression SED prints from its output;
# the default takes the seconds an example prints on its PASS line
# ("..., 0.123 s: PASS"). A run that exits non-zero or yields no figure
# stops the script (its output goes to stderr). Pairs alternate the order
# (A B, then B A), so drift over the sitting hits both alike. MPIEXEC
# names the launcher (default mpiexec).
#
# Prints each pair, then for A and B the median and range, in how many
# pairs B was faster (smaller), and B's median over A's. PAIRS defaults to
# 5, RANKS to 1. Take the bench lock yourself, as for the other scripts:
#
#   flock /tmp/blk-bench.lock bash bench/ab.sh -n 6 /tmp/base/build build/release \
#     examples/histogram --blocks 64 --bins 800000 --size 2048 --k 4 --mem-blocks 8
#
# To build the tree before a change outside the repository:
#   mkdir -p /tmp/base && git archive REV | tar x -C /tmp/base && \
#     cmake -S /tmp/base -B /tmp/base/build \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/base/build -j2
set -euo pipefail

pairs=5 ranks=1 mpiexec=${MPIEXEC:-mpiexec}
figure='s/.*, ([0-9.]+) s: PASS$/\1/p'
usage() {
  sed -n '7p' "$0" | sed 's/^# *//' >&2
  exit 2
}
while getopts "n:r:x:h" opt; do
  case $opt in
    n) pairs=$OPTARG ;;
    r) ranks=$OPTARG ;;
    x) figure=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 3 ] || usage
a=$1 b=$2 program=$3
shift 3
for build in "$a" "$b"; do
  [ -x "$build/$program" ] || { echo "ab.sh: no program $build/$program" >&2; exit 2; }
done

# run BUILD ARGS...: prints the figure of one run of BUILD/PROGRAM ARGS.
run() {
  local build=$1 out value
  shift
  if ! out=$("$mpiexec" -n "$ranks" "$build/$program" "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "ab.sh: $build/$program failed" >&2
    exit 1
  fi
  value=$(sed -nE "$figure" <<<"$out" | head -n 1)
  if [ -z "$value" ]; then
    printf '%s\n' "$out" >&2
    echo "ab.sh: no figure in the output of $build/$program (sed -E '$figure')" >&2
    exit 1
  fi
  echo "$value"
}

ta=() tb=()
for ((i = 1; i <= pairs; i++)); do
  # (One assignment a line: set -e sees each run's status.)
  if ((i % 2)); then
    x=$(run "$a" "$@")
    y=$(run "$b" "$@")
  else
    y=$(run "$b" "$@")
    x=$(run "$a" "$@")
  fi
  ta+=("$x") tb+=("$y")
  echo "pair $i: A $x  B $y"
done

stats() { # the numbers on stdin: median, min, max
  sort -g | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.4g %.4g %.4g", m, v[1], v[NR] }'
}
read -r ma loa hia <<<"$(printf '%s\n' "${ta[@]}" | stats)"
read -r mb lob hib <<<"$(printf '%s\n' "${tb[@]}" | stats)"
wins=0
for ((i = 0; i < pairs; i++)); do
  if awk -v x="${ta[i]}" -v y="${tb[i]}" 'BEGIN { exit !(y < x) }'; then wins=$((wins + 1)); fi
done
echo "A ($a): median $ma ($loa-$hia)"
echo "B ($b): median $mb ($lob-$hib)"
awk -v ma="$ma" -v mb="$mb" -v w="$wins" -v n="$pairs" \
  'BEGIN { printf "B smaller in %d of %d pairs; B/A by the medians %.3f\n", w, n, (ma > 0 ? mb / ma : 0) }'
