/*
 * quiescence.h: finding that a job of asynchronous messages has ended: no
 * rank has work and no message is on its way (blk_master_iexchange).
 *
 * Mattern's four-counter method (F. Mattern, "Algorithms for distributed
 * termination detection", Distributed Computing 2(3), 1987), with
 * non-blocking all-reduces as the waves. Each rank counts the messages it
 * has sent and received. When it has no work (passive: it becomes active
 * again only by receiving a message) it joins a wave: an MPI_Iallreduce of
 * its two counts, read as it joins. A rank joins the next wave only after
 * the last one completed, so every contribution to wave k+1 is read after
 * every contribution to wave k. If wave k counted R_k messages received and
 * wave k+1 counted S_{k+1} sent, and R_k = S_{k+1}, the job was over when
 * wave k completed: received counts only grow, so nobody received after
 * joining wave k (hence all were still passive when it completed), and
 * every message sent by then had been received (R_k >= S at that time >=
 * received at that time >= R_k), so nobody could become active again. Here
 * the test is that two waves in a row give the same sums with sent =
 * received, which implies R_k = S_{k+1}.
 *
 * Cost: each wave is an all-reduce of 16 bytes (2 alpha log p); the end is
 * found two waves after the last message is received.
 *
 * The driver thread only.
 */
#ifndef BLK_QUIESCENCE_H
#define BLK_QUIESCENCE_H

#include <mpi.h>
#include <stdint.h>

typedef struct blk__quiescence {
  MPI_Comm comm;
  MPI_Request wave; /* the wave under way (MPI_REQUEST_NULL: none) */
  int64_t mine[2];  /* sent, received as this rank joined it */
  int64_t sums[2];
  int64_t last[2]; /* the previous wave's sums */
  int waves;       /* completed */
} blk__quiescence;

void blk__quiescence_init(blk__quiescence *q, MPI_Comm comm);

/* Moves the waves on. passive: this rank has no work now; sent and
 * received: its counts so far. Returns 1 once the end is found (the same
 * wave on every rank), else 0. An MPI failure stops the job (a rank
 * cannot tell the others). */
int blk__quiescence_poll(blk__quiescence *q, int passive, int64_t sent, int64_t received);

#endif
