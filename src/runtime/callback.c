/*
 * callback.c: a user's callback run, and its code made a failure; see
 * callback.h.
 */
#include "runtime/callback.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/thread.h"
#include "base/trace.h"

int blk__callback_error(const char *which, int code) {
  if (blk__last_code() != code) return blk__fail(BLK_ECALLBACK, "the %s returned %d", which, code);
  char said[384];
  snprintf(said, sizeof said, "%s", blk_last_error());
  return blk__fail(BLK_ECALLBACK, "the %s returned %d after blk said: %s", which, code, said);
}

/* The bytes in a proxy's queues. */
static int64_t queued(const blk_buffer *q, int n) {
  int64_t bytes = 0;
  for (int i = 0; i < n; i++) bytes += (int64_t)q[i].size;
  return bytes;
}

int blk__run_callback(int (*fn)(void *, blk_proxy *, void *), void *block, blk_proxy *p, void *user,
                      int own_codes, char **why) {
  blk__clear_error();
  /* Traced: a span with the block's gid, round and bytes in and out. */
  blk__trace *t = blk__trace_here();
  blk__trace_span span = {p->phase, 0, 0, BLK__TRACE_CALLBACK, p->gid, p->round, 0, 0, 0, 0};
  if (t) {
    span.a = queued(p->in, p->nin);
    span.start_ns = blk__now_ns();
  }
  int code = fn(block, p, user);
  if (t) {
    span.end_ns = blk__now_ns();
    span.b = queued(p->out, p->nout);
    blk__trace_record(t, &span);
  }
  *why = NULL;
  if (!code) return 0;
  if (!own_codes) code = blk__callback_error("callback", code);
  if (blk__last_code() == code) {
    size_t n = strlen(blk_last_error()) + 1;
    if ((*why = blk__malloc(n))) memcpy(*why, blk_last_error(), n);
  }
  return code;
}

void blk__note_callback_failure(blk__op *o, int gid, int round, int code, char **why) {
  blk__op_fail(o, code, gid, round, "%s", *why ? *why : blk_strerror(code));
  free(*why);
  *why = NULL;
}
