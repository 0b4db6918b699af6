/*
 * failure.h: what went wrong in a collective operation, and where.
 *
 * A failure names the code a caller gets back, the rank and block (gid) it
 * happened on, the round, and the cause in words. While an operation runs,
 * each rank keeps the earliest of its own failures (by round, then gid, so
 * the choice does not depend on threads or timing); the operation's closing
 * agreement merges the ranks' records into one, the lowest failing rank's,
 * and every rank returns that code with the same detail.
 *
 * Plain data, no locking: the driver thread owns an operation's record.
 */
#ifndef BLK_FAILURE_H
#define BLK_FAILURE_H

#include "base/fail.h"

#define BLK__FAILURE_WHAT 384

typedef struct blk__failure {
  int code;  /* 0: nothing failed; else a negative blk code */
  int rank;  /* where it happened */
  int gid;   /* the block, or -1 when the failure is not about one block */
  int round; /* the round (foreach: the exchanges so far), or -1 */
  int ranks; /* how many ranks failed (1 before the agreement merges records) */
  char what[BLK__FAILURE_WHAT];
} blk__failure;

/* Nothing failed. */
void blk__failure_clear(blk__failure *f);

/* Records a failure of this rank unless f already holds one that comes
 * first (a lower round, or the same round and a lower gid; -1 comes first). */
void blk__failure_note(blk__failure *f, int code, int rank, int gid, int round, const char *fmt,
                       ...) BLK__PRINTF(6, 7);

/* Merges another rank's record into acc: the lower failing rank's wins, and
 * the counts of failing ranks add up. The result does not depend on the
 * order of merges, so every rank of an agreement ends with the same. */
void blk__failure_merge(blk__failure *acc, const blk__failure *in);

/* Returns f->code after making the detail of blk_last_error() say, for the
 * operation `op`, where the failure happened and why; 0 when nothing failed. */
int blk__failure_report(const blk__failure *f, const char *op);

#endif
