/*
 * agreement.h: who talks to whom in the agreement that closes every
 * collective operation.
 *
 * Every rank brings a small record (what failed on it, values posted for an
 * all-reduce) and every rank must end with the same combination of all of
 * them. The plan is recursive doubling: in step j a rank sends what it has
 * to rank ^ 2^j and combines what that rank sent. With a rank count p that
 * is not a power of two, the p - p' ranks above the largest power of two p'
 * first hand their record to rank - p' and at the end get the result back
 * from it. Cost: ceil(log2 p) steps of alpha (plus two with the fold),
 * less than an MPI_Iallreduce driven by MPI_Test (docs/errors.md has the
 * figures).
 *
 * Two properties the runtime relies on:
 * - Every rank ends with the same combination, even of floating-point
 *   sums: in each step both partners combine the same two operands, so with
 *   a commutative combination they compute the same bits.
 * - A rank finishes only after every rank has started (each step carries
 *   news from twice as many ranks as the last), so finishing doubles as a
 *   barrier: the termination test of the neighbour exchange (NBX) and the
 *   proof that no rank is more than one operation ahead of another.
 *
 * From any one peer a rank receives at most one message per agreement, so
 * a message is identified by its operation and its step number (`key`).
 * Pure arithmetic, no MPI.
 */
#ifndef BLK_AGREEMENT_H
#define BLK_AGREEMENT_H

/* Steps of one rank, in order: 2 log2 p + 2 at most. */
#define BLK__AGREE_MAX_STEPS 64

typedef struct blk__agree_step {
  int peer;    /* the rank to send to or receive from */
  int send;    /* 1: send the record so far; 0: receive */
  int replace; /* a receive whose record is the result: take it as it is */
  int key;     /* the step's number, the same on both sides */
} blk__agree_step;

/* Fills steps (room for BLK__AGREE_MAX_STEPS) with rank's plan among size
 * ranks and returns their number (0 for one rank). */
int blk__agree_plan(int rank, int size, blk__agree_step *steps);

#endif
