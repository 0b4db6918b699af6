/*
 * test_failure: a collective operation's failure record (failure.h) keeps a
 * rank's earliest failure, merges to the lowest failing rank's whatever the
 * order, counts the failing ranks, and reports a detail naming rank, gid,
 * round and cause.
 */
#include <stdio.h>
#include <string.h>

#include "blk/blk.h"
#include "check.h"
#include "base/failure.h"

int main(void) {
  blk__failure f;
  blk__failure_clear(&f);
  CHECK_EQ_INT(blk__failure_report(&f, "reduce"), 0);
  /* Within a rank: the lowest round, then the lowest gid; a failure that is
   * not about a block (-1) comes first. */
  blk__failure_note(&f, BLK_EIO, 2, 7, 3, "late %d", 1);
  blk__failure_note(&f, BLK_ENOMEM, 2, 9, 1, "earlier round");
  CHECK_EQ_INT(f.code, BLK_ENOMEM);
  blk__failure_note(&f, BLK_ECORRUPT, 2, 4, 1, "same round, lower gid");
  CHECK_EQ_INT(f.code, BLK_ECORRUPT);
  blk__failure_note(&f, BLK_EIO, 2, 5, 1, "same round, higher gid");
  CHECK_EQ_INT(f.code, BLK_ECORRUPT);
  blk__failure_note(&f, 0, 2, 0, 0, "code 0 is no failure");
  CHECK_EQ_INT(f.code, BLK_ECORRUPT);
  CHECK_STR(f.what, "same round, lower gid");
  blk__failure_note(&f, BLK_EINVAL, 2, -1, -1, "setup");
  CHECK_EQ_INT(f.code, BLK_EINVAL);
  CHECK_EQ_INT(f.ranks, 1);

  /* Across ranks: the lowest rank wins in any order of merging. */
  blk__failure rec[3];
  for (int i = 0; i < 3; i++) blk__failure_clear(&rec[i]);
  blk__failure_note(&rec[0], BLK_EIO, 3, 1, 0, "rank three");
  blk__failure_note(&rec[2], BLK_ECALLBACK, 1, 6, 2, "rank one");
  const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int o = 0; o < 6; o++) {
    blk__failure acc;
    blk__failure_clear(&acc);
    for (int i = 0; i < 3; i++) blk__failure_merge(&acc, &rec[orders[o][i]]);
    CHECK_EQ_INT(acc.code, BLK_ECALLBACK);
    CHECK_EQ_INT(acc.rank, 1);
    CHECK_EQ_INT(acc.ranks, 2);
    CHECK_STR(acc.what, "rank one");
    CHECK_EQ_INT(blk__failure_report(&acc, "reduce 4"), BLK_ECALLBACK);
    CHECK_STR(blk_last_error(),
              "reduce 4 failed on rank 1, gid 6, round 2: rank one (2 ranks failed; the lowest "
              "is named)");
  }
  blk__failure_clear(&f);
  blk__failure_note(&f, BLK_EIO, 0, -1, -1, "the spill directory");
  CHECK_EQ_INT(blk__failure_report(&f, "master: create"), BLK_EIO);
  CHECK_STR(blk_last_error(), "master: create failed on rank 0: the spill directory");
  blk__failure_clear(&f);
  blk__failure_note(&f, BLK_ECALLBACK, 0, 3, -1, "create callback");
  blk__failure_report(&f, "decompose");
  CHECK_STR(blk_last_error(), "decompose failed on rank 0, gid 3: create callback");
  printf("test_failure: ok\n");
  return 0;
}
