#!/usr/bin/env bash
# check_install.sh BUILD_DIR SOURCE_DIR: installs blk from BUILD_DIR into a
# scratch prefix, builds tests/install with find_package(blk) and a second
# consumer with pkg-config, and runs both under mpiexec.
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" mpiexec -n 2 "$work/consumer/consumer"
pc_dir=$(dirname "$(find "$work/prefix" -name blk.pc | head -1)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs blk)
mpicc -std=c11 -Wall -Werror "$source/tests/install/consumer.c" $flags -o "$work/consumer_pc"
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" mpiexec -n 1 "$work/consumer_pc"
echo "check_install: ok"
