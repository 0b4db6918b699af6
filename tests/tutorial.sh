#!/usr/bin/env bash
# tutorial.sh BUILD_DIR SOURCE_DIR MPIEXEC: docs/tutorial.md, done as a
# reader would. Installs this build into a scratch prefix (the tutorial's
# $HOME/blk), writes every file the tutorial shows (a fenced block after
# "<!-- file: NAME -->") into an empty directory, builds it with the
# tutorial's commands, checks the output it shows (a block after "<!--
# output: COMMAND -->") line for line, runs the commands marked "<!-- run
# -->", and checks that the trace one wrote is there (and JSON, where
# python3 is).
set -euo pipefail
build=$1 source=$2 mpiexec=$3
doc=$source/docs/tutorial.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "tutorial: FAIL: $*" >&2
  exit 1
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null
mkdir "$work/hist"
cd "$work/hist"

# shellcheck source=doc_blocks.sh
. "$source/tests/doc_blocks.sh"

files=$(doc_blocks file "$doc" | cut -f1 | sort -u)
[ -n "$files" ] || fail "no files in $doc"
for f in $files; do
  doc_block file "$doc" "$f" >"$f"
done

cmake -S . -B build -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build build >/dev/null

# Every shown output, from its command (mpiexec as this build found it).
doc_blocks output "$doc" | cut -f1 | sort -u | while read -r cmd; do
  want=$(doc_block output "$doc" "$cmd")
  got=$(eval "${cmd/#mpiexec/$mpiexec}")
  [ "$got" = "$want" ] || fail "$cmd printed:
$got
the tutorial shows:
$want"
  echo "tutorial: $cmd: as shown"
done
# The same at 3 ranks, as the text says.
got3=$("$mpiexec" -n 3 build/hist)
[ "$got3" = "$("$mpiexec" -n 2 build/hist)" ] || fail "3 ranks printed $got3"

# The commands to run as they are.
doc_blocks run "$doc" | cut -f2- | while read -r line; do
  eval "${line/mpiexec/$mpiexec}" >/dev/null || fail "$line"
  echo "tutorial: $line: ran"
done
[ -s hist.json ] || fail "no hist.json after the trace command"
if command -v python3 >/dev/null; then
  python3 -m json.tool hist.json >/dev/null || fail "hist.json is not JSON"
fi
echo "tutorial: PASS"
