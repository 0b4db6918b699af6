#!/usr/bin/env bash
# killed_run.sh MPIEXEC DIFFUSION: a job killed with SIGKILL while it spills
# blocks to disk leaves nothing in its spill directory. The spill files have
# no name from the start (src/storage.c), so there is nothing to clean up.
#
# The run spills for sure: 32 blocks on 2 ranks, 2 in memory per rank. The
# test waits until a rank holds an open spill file in the directory (its
# /proc/PID/fd) with data in it, then kills every rank.
set -u
mpiexec=$1
diffusion=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/blk-killed-XXXXXX")
"$mpiexec" -n 2 "$diffusion" --blocks 32 --size 512 512 --steps 1000000 --threads 1 \
  --mem-blocks 2 --spill-dir "$dir" >/dev/null 2>&1 &
launcher=$!

ranks() { pgrep -f -- "--spill-dir $dir" | grep -vx "$launcher"; }
spilling=0
for _ in $(seq 1 400); do
  for pid in $(ranks); do
    for fd in /proc/"$pid"/fd/*; do
      target=$(readlink "$fd" 2>/dev/null) || continue
      case "$target" in
        "$dir"/*)
          size=$(stat -L -c %s "$fd" 2>/dev/null || echo 0)
          [ "$size" -gt 0 ] && spilling=1
          ;;
      esac
    done
  done
  [ $spilling = 1 ] && break
  sleep 0.05
done

pids=$(ranks)
[ -n "$pids" ] && kill -9 $pids 2>/dev/null
kill -9 "$launcher" 2>/dev/null
wait "$launcher" 2>/dev/null

left=$(ls -A "$dir")
rm -rf "$dir"
if [ $spilling = 0 ]; then
  echo "killed_run: the job never wrote to a spill file in $dir; nothing was tested"
  exit 1
fi
if [ -n "$left" ]; then
  echo "killed_run: the killed job left files in its spill directory: $left"
  exit 1
fi
echo "killed_run: ok (the job spilled, was killed, and left nothing)"
