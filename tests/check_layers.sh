#!/usr/bin/env bash
# check_layers.sh: the layer rules of docs/architecture.md, checked with grep.
#  - each src/ file belongs to one layer and includes only headers of its own
#    layer or the ones below;
#  - only codec.c includes zstd.h, only pool.c includes pthread.h, only comm.c
#    makes MPI point-to-point calls, and nothing below the runtime includes mpi.h.
set -u
src=${1:-$(dirname "$0")/../src}
inc=$(dirname "$src")/include/blk
fail=0

layer_of() { # file basename without extension -> layer number
  case "$1" in
    error|fail|failure|fault|alloc|agreement|log|logger|version|buffer|buffer_cache|pool|codec|shuffle|checksum|le64|backoff|gid_map|memory_limit) echo 1 ;;
    bounds|coord|decomposer|assigner|link) echo 2 ;;
    partners|partners_regular) echo 3 ;;
    comm|operation|values|master|master_state|proxy|exchange|reduce|reduce_run|all_to_all|arrays|combine|storage|budget|schedule) echo 4 ;;
    *) echo 0 ;;
  esac
}

for f in "$src"/*.c "$src"/*.h "$inc"/*.h; do
  name=$(basename "$f")
  base=${name%.*}
  [ "$base" = blk ] && continue # the umbrella includes everything
  mine=$(layer_of "$base")
  if [ "$mine" = 0 ]; then
    echo "check_layers: $f is in no layer: add it to tests/check_layers.sh and docs/architecture.md"
    fail=1
    continue
  fi
  for dep in $(grep -oE '#include +"(blk/)?[a-z_]+\.h"' "$f" | grep -oE '[a-z_]+\.h' ); do
    dbase=${dep%.h}
    dl=$(layer_of "$dbase")
    if [ "$dl" != 0 ] && [ "$dl" -gt "$mine" ]; then
      echo "check_layers: $f (layer $mine) includes $dep (layer $dl)"
      fail=1
    fi
  done
  if [ "$mine" -lt 4 ] && grep -qE '#include +<mpi\.h>' "$f"; then
    echo "check_layers: $f (layer $mine) includes mpi.h; only the runtime may"
    fail=1
  fi
done

only() { # pattern, allowed file, what
  local hits
  hits=$(grep -lE "$1" "$src"/*.c "$src"/*.h 2>/dev/null | grep -v "/$2\$" || true)
  if [ -n "$hits" ]; then
    echo "check_layers: $3 outside $2: $hits"
    fail=1
  fi
}
only '#include +<zstd\.h>' codec.c "zstd.h"
only '#include +<pthread\.h>' pool.c "pthread.h"
only 'MPI_(I?[bsr]?send|I?recv|Improbe|Mrecv|Iprobe|Probe|Sendrecv|Imrecv)\(' comm.c "MPI point-to-point"

[ $fail = 0 ] && echo "check_layers: ok"
exit $fail
