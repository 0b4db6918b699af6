#!/usr/bin/env bash
# check_layers.sh [SRC]: the rules of docs/architecture.md, checked from the
# code itself.
#  - Every source file sits in the folder of its layer, and includes only
#    headers of its own layer or of layers below (internal headers are
#    included with their folder, "base/pool.h"; public ones as "blk/x.h").
#  - No cycle between files: "a includes a header of b" (a header belongs to
#    the .c that implements it) must be a partial order.
#  - Only storage/codec.c includes zstd.h, only base/thread.c includes
#    pthread.h, only runtime/comm.c makes MPI point-to-point calls, and
#    nothing below the runtime includes mpi.h.
set -u
src=${1:-$(dirname "$0")/../src}
src=$(cd "$src" && pwd)
inc=$(dirname "$src")/include/blk
fail=0
complain() {
  echo "check_layers: $*"
  fail=1
}

# The layers, bottom up.
layers=(base storage geometry patterns runtime master collectives)
layer_no() { # folder -> 1..n, 0 if not a layer
  local i
  for i in "${!layers[@]}"; do
    [ "${layers[$i]}" = "$1" ] && { echo $((i + 1)); return; }
  done
  echo 0
}

# Public headers: the layer of the code that implements them.
public_folder() {
  case "$1" in
    error | log | version | buffer | types) echo base ;;
    bounds | decomposer | assigner | link) echo geometry ;;
    partners) echo patterns ;;
    proxy) echo runtime ;;
    master) echo master ;;
    reduce | all_to_all | all_gather | all_reduce | arrays | checkpoint | kdtree) echo collectives ;;
    *) echo "" ;;
  esac
}

# Headers named apart from the file that implements them.
module_of_header() { # folder/name (no extension) -> folder/module
  case "$1" in
    base/fail) echo base/error ;;
    base/logger) echo base/log ;;
    base/alloc) echo base/fault ;;
    master/master_state) echo master/master ;;
    geometry/decomposer_axis) echo geometry/decomposer ;;
    runtime/proxy_state) echo runtime/proxy ;;
    collectives/reduce_run) echo collectives/reduce ;;
    *) echo "$1" ;;
  esac
}

for f in "$src"/*.c "$src"/*.h; do
  [ -e "$f" ] && complain "$f is in no layer folder (${layers[*]})"
done

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for f in "$src"/*/*.c "$src"/*/*.h "$inc"/*.h; do
  rel=${f#"$src"/}
  name=$(basename "$f")
  base=${name%.*}
  if [ "${f#"$inc"}" != "$f" ]; then # a public header
    [ "$base" = blk ] && continue      # the umbrella includes everything
    folder=$(public_folder "$base")
    [ -z "$folder" ] && { complain "include/blk/$name has no layer: add it to tests/check_layers.sh"; continue; }
    module=""
  else
    folder=${rel%%/*}
    module=$(module_of_header "$folder/$base")
  fi
  mine=$(layer_no "$folder")
  [ "$mine" = 0 ] && { complain "$rel: $folder is not a layer (${layers[*]})"; continue; }
  for dep in $(grep -oE '^#include +"[a-z_/]+\.h"' "$f" | sed -E 's/.*"(.*)\.h"/\1/'); do
    case "$dep" in
      blk/*) dfolder=$(public_folder "${dep#blk/}") dmodule="" ;;
      */*) dfolder=${dep%%/*} dmodule=$(module_of_header "$dep") ;;
      *) complain "$rel includes \"$dep.h\" without its folder"; continue ;;
    esac
    [ -z "$dfolder" ] && continue
    dl=$(layer_no "$dfolder")
    if [ "$dl" -gt "$mine" ]; then
      complain "$rel (layer $folder) includes $dep.h (layer $dfolder, above it)"
    fi
    if [ -n "$module" ] && [ -n "$dmodule" ] && [ "$module" != "$dmodule" ]; then
      echo "$module $dmodule" >>"$edges"
    fi
  done
  if [ "$mine" -lt "$(layer_no runtime)" ] && grep -qE '^#include +<mpi\.h>' "$f"; then
    complain "$rel (layer $folder) includes mpi.h; only the runtime and above may"
  fi
done

if ! loop=$(tsort "$edges" 2>&1 >/dev/null) || [ -n "$loop" ]; then
  complain "the files include each other in a cycle: $(echo "$loop" | tr '\n' ' ')"
fi

only() { # pattern, allowed file (folder/name), what
  local hits
  hits=$(grep -lE "$1" "$src"/*/*.c "$src"/*/*.h 2>/dev/null | grep -v "/$2\$" || true)
  [ -n "$hits" ] && complain "$3 outside src/$2: $hits"
}
only '#include +<zstd\.h>' storage/codec.c "zstd.h"
only '#include +<pthread\.h>' base/thread.c "pthread.h"
only 'MPI_(I?[bsr]?send|I?recv|Improbe|Mrecv|Iprobe|Probe|Sendrecv|Imrecv)\(' runtime/comm.c \
  "MPI point-to-point"

[ $fail = 0 ] && echo "check_layers: ok"
exit $fail
