#!/usr/bin/env bash
# scripts/run.sh: set up, build and run blk on a Debian machine.
#
#   bash scripts/run.sh example   install what is missing, build, run the flagship
#                                 example under mpiexec -n 4
#   bash scripts/run.sh test      install what is missing, build, run the whole suite:
#                                 plain, then under AddressSanitizer+UBSan, then
#                                 under ThreadSanitizer
#
# Build trees go under build/ (BLK_BUILD_ROOT to change). Installing packages needs
# root (or sudo); nothing is installed when everything is already there.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${BLK_BUILD_ROOT:-$here/build}
jobs=$(nproc 2>/dev/null || echo 2)

# Debian packages blk needs to build and run (build-essential brings gcc, make,
# the C library headers, g++ for the header_cxx11 test and binutils' readelf
# for install_consumer; gcc brings the sanitizer runtimes).
# libpng-dev is for an example (composite writes PNGs); the library itself keeps
# its three dependencies, MPI, pthreads and zstd.
packages=(build-essential cmake pkgconf mpich libmpich-dev libzstd-dev libpng-dev)

install_missing() {
  local missing=()
  for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "run.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

configure_build() { # dir, extra cmake args...
  local dir=$1
  shift
  cmake -S "$here" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBLK_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs" 2>&1 | grep -Ev '^\[ *[0-9]+%\]' || true
  # The grep above swallows the exit code; ask again so a failed build stops here.
  cmake --build "$dir" -j "$jobs" >/dev/null
}

run_example() {
  configure_build "$root/release"
  echo "run.sh: mpiexec -n 4 diffusion --blocks 12 --threads 2 --steps 20"
  mpiexec -n 4 "$root/release/examples/diffusion" --blocks 12 --threads 2 --steps 20
}

run_tests() {
  local started=$SECONDS
  echo "== plain build: the whole suite"
  configure_build "$root/release"
  ctest --test-dir "$root/release" --output-on-failure -j 2

  # The sanitizer stages run every test at 1, 2 and 3 ranks and leave the
  # 4-rank runs (label ranks4) to the plain stage: 3 ranks already take the
  # paths more ranks do (rounds across ranks, a rank count that is not a
  # power of k, oversubscribed ranks), and the 4-rank runs, the slowest on 2
  # cores, were a third of the sanitizers' time (170 of 508 s under ASan,
  # 84 of 272 under TSan; 140 and 72 s once the tests' own MPI waits
  # yielded), which the 15-minute budget does not have.
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer: the whole suite at 1-3 ranks"
  configure_build "$root/asan" -DBLK_SANITIZE=address,undefined -DBLK_BUILD_BENCH=OFF
  ASAN_OPTIONS=fast_unwind_on_malloc=0:detect_leaks=1 \
    LSAN_OPTIONS=suppressions=$here/tests/lsan.supp:print_suppressions=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/asan" --output-on-failure -j 2 -LE "large|ranks4"

  # The tests labelled threads1 run callbacks on one thread: no race of
  # blk's to find there but the out-of-core I/O thread's, whose code the
  # threads2 out-of-core tests and spill_failures run as well (the plain and
  # ASan runs have them all), so ThreadSanitizer, the slowest run, takes
  # every test that may run callbacks on two threads (but those labelled
  # tsan_covered, whose threaded paths other tests take).
  echo "== ThreadSanitizer: every test that may start threads"
  configure_build "$root/tsan" -DBLK_SANITIZE=thread -DBLK_BUILD_BENCH=OFF
  UCX_MEM_EVENTS=no TSAN_OPTIONS=halt_on_error=1:suppressions=$here/tests/tsan.supp \
    ctest --test-dir "$root/tsan" --output-on-failure -j 2 -LE "large|threads1|tsan_covered|ranks4"
  echo "run.sh: all suites passed in $((SECONDS - started)) s"
}

case "${1:-}" in
  example) install_missing; run_example ;;
  test) install_missing; run_tests ;;
  *) echo "usage: bash scripts/run.sh example|test" >&2; exit 2 ;;
esac
