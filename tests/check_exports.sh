#!/bin/bash
# libblk.so exports the public API and nothing else: every defined dynamic
# symbol is a blk_ name (no blk__ internal, no helper without the prefix),
# and the API is there (a few names every program uses).
set -u
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//') || exit 1
bad=$(printf '%s\n' "$syms" | grep -v -E '^blk_[a-z]' | grep -v '^$')
status=0
if [ -n "$bad" ]; then
  echo "libblk exports names outside its API:"
  printf '  %s\n' $bad
  status=1
fi
for want in blk_master_create blk_master_destroy blk_reduce blk_all_to_all blk_strerror; do
  if ! printf '%s\n' "$syms" | grep -qx "$want"; then
    echo "libblk does not export $want"
    status=1
  fi
done
[ $status = 0 ] && echo "libblk exports $(printf '%s\n' "$syms" | wc -l) names, all public"
exit $status
