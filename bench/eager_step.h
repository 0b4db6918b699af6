/*
 * eager_step.h: the message size at which the MPI below changes protocol,
 * as blk-tune finds it. Header-only (static inline), not part of blk's API.
 *
 * An MPI library sends a message up to some size eagerly (it is copied out
 * at once and lands in the receiver's buffers) and a larger one by
 * rendezvous (a handshake first, then the bytes). On this machine's MPICH
 * over UCX a round trip goes from 1.3 to 4.4 us between 8191 and 8932 bytes
 * (docs/performance.md 15.3). Every all-reduce algorithm's time steps where
 * its largest message crosses that size, and a time interpolated between
 * sizes measured on the two sides of a step is wrong in between; so
 * blk-tune measures the step and times the algorithms on both sides of it.
 * Define _POSIX_C_SOURCE (nanosleep) before including any system header.
 *
 * eager_step() is collective over MPI_COMM_WORLD. Ranks 0 and 1 time round
 * trips (MPI_Send, then MPI_Recv of the same size) at sizes from 1 KiB to
 * 256 KiB, 2^(1/8) apart, the least of three passes of 50 each. The step is
 * where the time jumps most from one size to the next, at least
 * EAGER_STEP_JUMP times, and stays up: the next EAGER_STEP_HOLD sizes, and
 * the two sizes around the jump timed once more, must show it too (one
 * scheduler slice in a pass must not read as a step). Rank 0 then halves the
 * gap until it is at most 64 bytes wide. Rank 0 says each size to rank 1
 * before timing it (0 ends), so the two never disagree on what to time. The
 * other ranks wait asleep (a rank that yields in a loop still takes slices
 * from the two timing ones when ranks outnumber cores). Every rank gets the
 * bracket: lo, the largest size timed below the step, and hi, the smallest
 * above it (bytes of one MPI message); both 0 with fewer than two ranks or
 * no such step (an MPI whose times grow smoothly has none to straddle).
 * One pair is timed, so one step is found: on a cluster whose ranks 0 and 1
 * share a node, the shared-memory limit, not the network's.
 */
#ifndef BLK_EAGER_STEP_H
#define BLK_EAGER_STEP_H

#include <math.h>
#include <mpi.h>
#include <stdlib.h>

#include "bench_util.h"

#define EAGER_STEP_JUMP 1.5
#define EAGER_STEP_HOLD 3
#define EAGER_STEP_SIZES 65 /* 1 KiB * 2^(i/8), i < 65: up to 256 KiB */
#define EAGER_STEP_PASSES 3
#define EAGER_STEP_TRIPS 50 /* round trips a pass */

typedef struct eager_bracket {
  size_t lo, hi;
} eager_bracket;

/* Rank 0: tells rank 1 the size, then the least over three passes of the
 * microseconds of one round trip of it. Rank 1 answers in eager_step. */
static inline double eager_step_time(MPI_Comm comm, char *buf, int bytes) {
  MPI_Send(&bytes, 1, MPI_INT, 1, 0, comm);
  double best = 0;
  for (int pass = 0; pass < EAGER_STEP_PASSES; pass++) {
    double t0 = MPI_Wtime();
    for (int i = 0; i < EAGER_STEP_TRIPS; i++) {
      MPI_Send(buf, bytes, MPI_BYTE, 1, 1, comm);
      MPI_Recv(buf, bytes, MPI_BYTE, 1, 1, comm, MPI_STATUS_IGNORE);
    }
    double usec = (MPI_Wtime() - t0) / EAGER_STEP_TRIPS * 1e6;
    best = pass ? fmin(best, usec) : usec;
  }
  return best;
}

/* Rank 0's search (see the top); 0 bytes when there is no step. */
static inline eager_bracket eager_step_find(MPI_Comm comm, char *buf) {
  int sizes[EAGER_STEP_SIZES];
  double t[EAGER_STEP_SIZES];
  for (int i = 0; i < EAGER_STEP_SIZES; i++) {
    sizes[i] = (int)lround(1024 * pow(2, i / 8.0));
    t[i] = eager_step_time(comm, buf, sizes[i]);
  }
  int at = -1;
  for (int i = 0; i + 1 + EAGER_STEP_HOLD < EAGER_STEP_SIZES; i++) {
    int holds = 1;
    for (int j = 1; j <= EAGER_STEP_HOLD; j++) holds &= t[i + j] >= EAGER_STEP_JUMP * t[i];
    if (holds && (at < 0 || t[i + 1] / t[i] > t[at + 1] / t[at])) at = i;
  }
  eager_bracket none = {0, 0};
  if (at < 0) return none;
  double fast = eager_step_time(comm, buf, sizes[at]),
         slow = eager_step_time(comm, buf, sizes[at + 1]);
  if (slow < EAGER_STEP_JUMP * fast) return none;
  /* Halve [lo, hi]: a size is past the step when its time is nearer (by
   * ratio) the slow side's than the fast side's. */
  int lo = sizes[at], hi = sizes[at + 1];
  double cut = sqrt(fast * slow);
  while (hi - lo > 64) {
    int mid = lo + (hi - lo) / 2;
    if (eager_step_time(comm, buf, mid) > cut)
      hi = mid;
    else
      lo = mid;
  }
  eager_bracket found = {(size_t)lo, (size_t)hi};
  return found;
}

static inline eager_bracket eager_step(void) {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  eager_bracket b = {0, 0};
  if (size < 2) return b;
  char *buf = rank < 2 ? malloc(1024 * 256) : NULL;
  if (rank < 2 && !buf) MPI_Abort(comm, 1);
  if (rank == 0) {
    b = eager_step_find(comm, buf);
    int end = 0;
    MPI_Send(&end, 1, MPI_INT, 1, 0, comm);
  } else if (rank == 1) {
    for (;;) {
      int bytes = 0;
      MPI_Recv(&bytes, 1, MPI_INT, 0, 0, comm, MPI_STATUS_IGNORE);
      if (bytes == 0) break;
      for (int i = 0; i < EAGER_STEP_PASSES * EAGER_STEP_TRIPS; i++) {
        MPI_Recv(buf, bytes, MPI_BYTE, 0, 1, comm, MPI_STATUS_IGNORE);
        MPI_Send(buf, bytes, MPI_BYTE, 0, 1, comm);
      }
    }
  }
  free(buf);
  bench_idle_barrier();
  unsigned long both[2] = {(unsigned long)b.lo, (unsigned long)b.hi};
  MPI_Bcast(both, 2, MPI_UNSIGNED_LONG, 0, comm);
  b.lo = (size_t)both[0];
  b.hi = (size_t)both[1];
  return b;
}

#endif
