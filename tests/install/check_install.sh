#!/usr/bin/env bash
# check_install.sh BUILD_DIR SOURCE_DIR KIND CC MPIEXEC: installs blk and
# builds and runs tests/install/consumer.c against it four ways: {shared,
# static} libblk x {CMake find_package(blk), plain CC with pkg-config}.
#
# BUILD_DIR is the tree ctest runs in, of KIND (shared or static); the other
# kind is configured from SOURCE_DIR here, library only, into a scratch
# directory. Each is installed into a scratch prefix of its own, so a static
# consumer cannot pick up a libblk.so by accident.
#
# Checks: the shared library's soname follows the policy (0.x: libblk.so.0.<minor>,
# from 1.0: libblk.so.<major>, read from the installed blk/version.h) and its
# file name, the CMake package and the .pc carry the header's version; a
# shared consumer needs the versioned soname and finds it in the prefix by
# its own run path (the loader's view, from ldd: the scratch prefix cannot be
# on LD_LIBRARY_PATH, which this script leaves as it finds it); a static
# consumer needs no libblk.so; the pkg-config consumers build with plain CC
# (not mpicc), strictly, and the static one with `pkg-config --static`. Every
# consumer runs under MPIEXEC -n 2 and checks its own result.
set -euo pipefail
build=$1
source=$2
kind=$3
cc=$4
mpiexec=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "check_install: FAIL: $*" >&2
  exit 1
}

# Prints the library directory of the install at prefix $1 (where blk.pc is).
libdir_of() {
  local pc
  pc=$(find "$1" -name blk.pc -path '*/pkgconfig/*' | head -1)
  [ -n "$pc" ] || fail "no blk.pc under $1"
  dirname "$(dirname "$pc")"
}

# The version of the installed headers at prefix $1: "major minor patch".
header_version() {
  local h=$1/include/blk/version.h
  [ -f "$h" ] || fail "no $h"
  local v
  for part in MAJOR MINOR PATCH; do
    v=$(sed -n "s/^#define BLK_VERSION_${part} \([0-9]*\)$/\1/p" "$h")
    [ -n "$v" ] || fail "no BLK_VERSION_${part} in $h"
    printf '%s ' "$v"
  done
}

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }

# Runs a consumer on two ranks; it prints one line per rank and checks itself.
run_consumer() { # label, executable
  local out
  out=$("$mpiexec" -n 2 "$2" 2>&1) || fail "$1: the consumer failed:"$'\n'"$out"
  [ "$(grep -c ': ok$' <<<"$out")" -eq 2 ] || fail "$1: expected two ranks ok:"$'\n'"$out"
  echo "check_install: $1: ran on 2 ranks"
}

# The CMake consumer of the install at prefix $1, built in $2.
build_cmake_consumer() {
  cmake -S "$source/tests/install" -B "$2" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$1" >"$2.log" 2>&1 || fail "find_package(blk) from $1:"$'\n'"$(cat "$2.log")"
  cmake --build "$2" >>"$2.log" 2>&1 || fail "building the CMake consumer:"$'\n'"$(cat "$2.log")"
}

# The consumer of the install at prefix $1 built with plain cc and
# `pkg-config [--static]` ($3), into $2.
build_pc_consumer() {
  local pcpath flags
  pcpath="$(libdir_of "$1")/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  flags=$(PKG_CONFIG_PATH=$pcpath pkg-config ${3:+"$3"} --cflags --libs blk) || fail "pkg-config $3 blk"
  # shellcheck disable=SC2086 # the flags are words
  "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror "$source/tests/install/consumer.c" $flags \
    -o "$2" || fail "cc consumer.c \$(pkg-config $3 --cflags --libs blk) did not build: $flags"
}

# A shared consumer needs libblk by its versioned soname and finds it under
# the prefix ($3: the library directory).
check_shared_consumer() { # label, executable, libdir
  needed "$2" | grep -qx "$soname" ||
    fail "$1: NEEDED is not $soname:"$'\n'"$(needed "$2")"
  local found
  found=$(ldd "$2" | sed -n "s/^[[:space:]]*$soname => \([^ ]*\) .*/\1/p")
  if [ -z "$found" ] || [ "$(realpath "$found")" != "$(realpath "$3/$soname")" ]; then
    fail "$1: the loader finds $soname at '$found', not in $3"
  fi
}

check_static_consumer() { # label, executable
  if needed "$2" | grep -q '^libblk\.so'; then
    fail "$1: a static consumer needs $(needed "$2" | grep '^libblk')"
  fi
}

# The other kind of libblk, library only.
other=shared
[ "$kind" = shared ] && other=static
shared_on=ON
[ "$other" = static ] && shared_on=OFF
if ! cmake -S "$source" -B "$work/build-$other" -DCMAKE_C_COMPILER="$cc" -DBUILD_SHARED_LIBS=$shared_on \
  -DBLK_BUILD_TESTS=OFF -DBLK_BUILD_EXAMPLES=OFF -DBLK_BUILD_BENCH=OFF >"$work/build.log" 2>&1 ||
  ! cmake --build "$work/build-$other" -j 2 >>"$work/build.log" 2>&1; then
  fail "building a $other libblk:"$'\n'"$(cat "$work/build.log")"
fi

declare -A builds=([$kind]=$build [$other]=$work/build-$other)
for k in shared static; do
  cmake --install "${builds[$k]}" --prefix "$work/$k" >/dev/null
done

# The soname and the versions.
read -r major minor patch <<<"$(header_version "$work/shared")"
if [ "$major" -eq 0 ]; then
  soname=libblk.so.0.$minor
else
  soname=libblk.so.$major
fi
shared_lib=$(libdir_of "$work/shared")
static_lib=$(libdir_of "$work/static")
[ -f "$shared_lib/libblk.so.$major.$minor.$patch" ] ||
  fail "no libblk.so.$major.$minor.$patch in $shared_lib: $(ls "$shared_lib")"
got=$(readelf -d "$shared_lib/libblk.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
[ "$got" = "$soname" ] || fail "the soname is '$got', not $soname"
for k in shared static; do
  lib=$(libdir_of "$work/$k")
  pcv=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --modversion blk)
  [ "$pcv" = "$major.$minor.$patch" ] || fail "blk.pc says $pcv, blk/version.h $major.$minor.$patch"
  grep -q "PACKAGE_VERSION \"$major.$minor.$patch\"" "$lib/cmake/blk/blkConfigVersion.cmake" ||
    fail "blkConfigVersion.cmake is not $major.$minor.$patch"
done
if compgen -G "$static_lib/libblk.so*" >/dev/null; then
  fail "the static install has $(ls "$static_lib"/libblk.so*)"
fi
echo "check_install: $soname, version $major.$minor.$patch"

build_cmake_consumer "$work/shared" "$work/cmake-shared"
check_shared_consumer "shared, find_package" "$work/cmake-shared/consumer" "$shared_lib"
run_consumer "shared, find_package" "$work/cmake-shared/consumer"

build_pc_consumer "$work/shared" "$work/pc-shared" ""
check_shared_consumer "shared, pkg-config" "$work/pc-shared" "$shared_lib"
run_consumer "shared, pkg-config" "$work/pc-shared"

build_cmake_consumer "$work/static" "$work/cmake-static"
check_static_consumer "static, find_package" "$work/cmake-static/consumer"
run_consumer "static, find_package" "$work/cmake-static/consumer"

build_pc_consumer "$work/static" "$work/pc-static" --static
check_static_consumer "static, pkg-config --static" "$work/pc-static"
run_consumer "static, pkg-config --static" "$work/pc-static"

echo "check_install: ok"
