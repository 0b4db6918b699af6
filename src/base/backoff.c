/* backoff.c: spin, then yield, then sleep with a doubling cap; see backoff.h. */
#define _POSIX_C_SOURCE 200809L
#include "base/backoff.h"

#include <sched.h>
#include <time.h>

#include "base/thread.h"
#include "base/trace.h"

enum {
  SPIN_POLLS = 64,   /* about 10-50 us of polling */
  YIELD_POLLS = 256, /* then give the core away but stay runnable */
  MAX_SLEEP_NS = 200000
};

/* The first poll that found nothing starts a traced wait. */
static void begin(blk__backoff *b) {
  if (blk__trace_here()) b->since = blk__now_ns();
}

void blk__backoff_traced(blk__backoff *b) {
  blk__trace *t = blk__trace_here();
  if (t)
    blk__trace_record(t, &(blk__trace_span){"wait for messages", b->since, blk__now_ns(),
                                            BLK__TRACE_WAIT, -1, -1, 0, 0, 0, 0});
  b->since = 0;
}

void blk__backoff_idle(blk__backoff *b) {
  unsigned n = ++b->idle;
  if (n == 1) begin(b);
  if (n <= SPIN_POLLS) return;
  if (n <= YIELD_POLLS) {
    sched_yield();
    return;
  }
  unsigned shift = n - YIELD_POLLS;
  long ns = shift >= 16 ? MAX_SLEEP_NS : (long)1000 << shift;
  if (ns > MAX_SLEEP_NS) ns = MAX_SLEEP_NS;
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

void blk__backoff_poll(blk__backoff *b) {
  if (++b->idle == 1) begin(b);
  if (b->idle > SPIN_POLLS) {
    b->idle = SPIN_POLLS; /* stays where idle yields */
    sched_yield();
  }
}
