#!/usr/bin/env bash
# check_headers.sh c|c++ COMPILER INCLUDE_DIR [MPI_INCLUDE_DIR...]: every
# public header (INCLUDE_DIR/blk/*.h) compiles alone, strictly, as C11 or as
# C++11 (-Wall -Wextra -Wpedantic -Werror; MPI's headers are -isystem, as a
# consumer's build would have them), included twice (its guard), with every
# X_INIT macro it defines expanded into a variable of type x
# (BLK_MASTER_CONFIG_INIT: blk_master_config): an initializer that falls
# behind its struct fails as C (-Wmissing-field-initializers), one that C++
# rejects (designated initializers) fails as C++.
# As C++ also: no blk name in a header has a double underscore (reserved in
# C++ wherever it stands, which g++ does not diagnose).
# Exits 77 (skipped) when COMPILER is empty or NOTFOUND: blk is C, and CMake
# only looks for a C++ compiler for this check.
set -euo pipefail
lang=$1
compiler=$2
include=$3
shift 3
case $lang in
  c) std=-std=c11 ;;
  c++) std=-std=c++11 ;;
  *) echo "usage: check_headers.sh c|c++ COMPILER INCLUDE_DIR [MPI_INCLUDE_DIR...]" >&2; exit 2 ;;
esac
if [ -z "$compiler" ] || [[ $compiler == *NOTFOUND ]]; then
  echo "check_headers: no $lang compiler was found (on Debian build-essential brings g++): skipped"
  exit 77
fi
mpi=()
for dir in "$@"; do mpi+=(-isystem "$dir"); done

status=0
if [ "$lang" = c++ ]; then
  if grep -nE '\b(blk|BLK)[A-Za-z0-9_]*__' "$include"/blk/*.h; then
    echo "check_headers: the names above have a double underscore, reserved in C++" >&2
    status=1
  fi
fi

checked=0
for header in "$include"/blk/*.h; do
  name=$(basename "$header")
  id=${name%.h}
  unit="#include <blk/$name>"$'\n'"#include <blk/$name>"$'\n'
  while read -r macro; do
    type=$(tr '[:upper:]' '[:lower:]' <<<"$macro")
    unit+="$type header_${id}_$type(void);"$'\n'
    unit+="$type header_${id}_$type(void) { $type v = ${macro}_INIT; return v; }"$'\n'
  done < <(sed -n 's/^#define \(BLK_[A-Z0-9_]*\)_INIT\b.*/\1/p' "$header")
  unit+="int header_${id}_compiles(void);"$'\n'"int header_${id}_compiles(void) { return 0; }"$'\n'
  if ! out=$("$compiler" "$std" -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$include" \
    "${mpi[@]}" -x "$lang" - <<<"$unit" 2>&1); then
    echo "check_headers: blk/$name does not compile alone as $lang ($std):" >&2
    echo "$unit$out" >&2
    status=1
  fi
  checked=$((checked + 1))
done
[ "$status" -eq 0 ] && echo "check_headers: $checked headers compile alone as $lang ($std)"
exit "$status"
