/*
 * failure.c: a collective operation's failure record; see failure.h.
 */
#include "base/failure.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void blk__failure_clear(blk__failure *f) {
  f->code = 0;
  f->rank = f->gid = f->round = -1;
  f->ranks = 0;
  f->what[0] = '\0';
}

/* Whether a failure at (round, gid) comes before the one f holds. */
static int earlier(const blk__failure *f, int round, int gid) {
  if (!f->code) return 1;
  if (round != f->round) return round < f->round;
  return gid < f->gid;
}

void blk__failure_note(blk__failure *f, int code, int rank, int gid, int round, const char *fmt,
                       ...) {
  if (!code || !earlier(f, round, gid)) return;
  f->code = code;
  f->rank = rank;
  f->gid = gid;
  f->round = round;
  f->ranks = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->what, sizeof f->what, fmt, ap);
  va_end(ap);
}

void blk__failure_merge(blk__failure *acc, const blk__failure *in) {
  if (!in->code) return;
  int ranks = acc->ranks + in->ranks;
  if (!acc->code || in->rank < acc->rank) *acc = *in;
  acc->ranks = ranks;
}

int blk__failure_report(const blk__failure *f, const char *op) {
  if (!f->code) return 0;
  char where[64] = "";
  if (f->gid >= 0 && f->round >= 0)
    snprintf(where, sizeof where, ", gid %d, round %d", f->gid, f->round);
  else if (f->gid >= 0)
    snprintf(where, sizeof where, ", gid %d", f->gid);
  char more[64] = "";
  if (f->ranks > 1)
    snprintf(more, sizeof more, " (%d ranks failed; the lowest is named)", f->ranks);
  return blk__fail(f->code, "%s failed on rank %d%s: %s%s", op, f->rank, where, f->what, more);
}
