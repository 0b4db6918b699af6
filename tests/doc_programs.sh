#!/usr/bin/env bash
# doc_programs.sh BUILD_DIR SOURCE_DIR MPIEXEC: the whole programs the docs
# show, other than the tutorial's (tests/tutorial.sh does that one), built
# and run as a reader would. Installs this build into a scratch prefix,
# writes every fenced block after "<!-- file: NAME.c -->" in docs/*.md,
# compiles each with `cc ... $(pkg-config --cflags --libs blk)`, and checks
# every block after "<!-- output: COMMAND -->" line for line against what
# COMMAND prints (mpiexec as this build found it).
set -euo pipefail
build=$1 source=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "doc_programs: FAIL: $*" >&2
  exit 1
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(dirname "$(find "$work/prefix" -name blk.pc | head -1)")
export PKG_CONFIG_PATH=$pc

# shellcheck source=doc_blocks.sh
. "$source/tests/doc_blocks.sh"

programs=0
for doc in "$source"/docs/*.md; do
  [ "$(basename "$doc")" = tutorial.md ] && continue
  files=$(doc_blocks file "$doc" | cut -f1 | sort -u)
  [ -n "$files" ] || continue
  dir=$work/$(basename "$doc" .md)
  mkdir "$dir"
  cd "$dir"
  for f in $files; do
    doc_block file "$doc" "$f" >"$f"
    # shellcheck disable=SC2046 # pkg-config's words are meant to split
    cc -std=c11 -Wall -Werror "$f" -o "${f%.c}" $(pkg-config --cflags --libs blk) ||
      fail "$(basename "$doc"): $f does not build"
    programs=$((programs + 1))
    echo "doc_programs: $(basename "$doc"): $f built"
  done
  doc_blocks output "$doc" | cut -f1 | sort -u | while read -r cmd; do
    want=$(doc_block output "$doc" "$cmd")
    got=$(eval "${cmd/#mpiexec/$mpiexec}") || fail "$(basename "$doc"): $cmd failed"
    [ "$got" = "$want" ] || fail "$(basename "$doc"): $cmd printed:
$got
the doc shows:
$want"
    echo "doc_programs: $(basename "$doc"): $cmd: as shown"
  done
done
[ "$programs" -gt 0 ] || fail "no <!-- file: --> programs in $source/docs"
echo "doc_programs: PASS ($programs programs)"
