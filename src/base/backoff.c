/* backoff.c: spin, then yield, then sleep with a doubling cap; see backoff.h. */
#define _POSIX_C_SOURCE 200809L
#include "base/backoff.h"

#include <sched.h>
#include <time.h>

enum {
  SPIN_POLLS = 64,   /* about 10-50 us of polling */
  YIELD_POLLS = 256, /* then give the core away but stay runnable */
  MAX_SLEEP_NS = 200000
};

void blk__backoff_idle(blk__backoff *b) {
  unsigned n = ++b->idle;
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
  if (++b->idle > SPIN_POLLS) {
    b->idle = SPIN_POLLS; /* stays where idle yields */
    sched_yield();
  }
}
