/*
 * bench_util.h: what the MPI benches share. Header-only (static inline),
 * not part of blk's API.
 *
 *  - bench_vstop: says what is wrong, naming the program and the rank, and
 *    stops every rank with exit status 1 (a wrong result or a failed call
 *    must fail the run, never print a figure). Only from the thread that
 *    calls MPI, never from a callback on blk's pool.
 *  - bench_barrier: MPI_Barrier that yields the processor while it waits.
 *    MPICH spins in MPI_Barrier; with more ranks than cores (3 and 4 ranks
 *    here) a rank that arrived first keeps a core the others need, and the
 *    timed operation after the barrier starts a scheduler slice apart on
 *    the ranks. Yielding (no sleep, so a rank leaves as soon as the barrier
 *    is done) costs nothing when every rank has a core of its own.
 *  - bench_idle_barrier: the same, but the waiters sleep 0.2 ms between
 *    looks, for ranks that sit out a long stretch of work by others (a
 *    yield in a loop still takes scheduler slices from them). Needs
 *    _POSIX_C_SOURCE (nanosleep) defined before any system header.
 */
#ifndef BLK_BENCH_UTIL_H
#define BLK_BENCH_UTIL_H

#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__GNUC__)
static inline void bench_vstop(const char *program, int rank, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
#endif

static inline void bench_vstop(const char *program, int rank, const char *fmt, va_list ap) {
  fprintf(stderr, "%s (rank %d): ", program, rank);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1); /* MPI_Abort should not return */
}

/* The barrier; between looks a waiter sleeps nap_ns, or yields when 0. */
static inline void bench_barrier_waiting(long nap_ns) {
  MPI_Request req;
  int done = 0;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (nap_ns) {
      struct timespec pause = {0, nap_ns};
      nanosleep(&pause, NULL);
    } else
      sched_yield();
  }
}

static inline void bench_barrier(void) {
  bench_barrier_waiting(0);
}

static inline void bench_idle_barrier(void) {
  bench_barrier_waiting(200000);
}

#endif
