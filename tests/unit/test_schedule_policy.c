/* test_schedule_policy: the scheduler's choice between running a task on
 * the driver and handing it to the pool (runtime/schedule.h), the hand-off
 * cost the pool reports for it, and how long a load waits for another
 * rank's message (blk__hold). */
#include "base/pool.h"
#include "blk/blk.h"
#include "check.h"
#include "runtime/schedule.h"

static void nothing(void *arg) {
  (void)arg;
}

/* A load's wait for another rank's message is bounded, so a rank whose
 * message comes only after this rank's load still gets it: a wait lasts
 * at most its limit from its first call, then loads go ahead until a block
 * in memory runs; each wait that ran out halves the next (at most
 * BLK__SCHED_HOLD_HALVINGS times), each that ended in time doubles it back.
 * The clock and the limit are the test's. */
static void test_hold(void) {
  const int64_t ms = 1000 * 1000, L = 16 * ms;
  blk__hold h;
  blk__hold_init(&h);
  int64_t t = 1000 * ms; /* (any time but 0) */
  /* A wait that ends in time: a block in memory ran. */
  CHECK_EQ_INT(blk__hold_wait(&h, t, L), 1);
  CHECK_EQ_INT(blk__hold_wait(&h, t + L - 1, L), 1);
  blk__hold_over(&h);
  CHECK_EQ_INT(h.shift, 0);
  /* One that runs out: loads go ahead from then on, however late. */
  t += 10 * L;
  CHECK_EQ_INT(blk__hold_wait(&h, t, L), 1);
  CHECK_EQ_INT(blk__hold_wait(&h, t + L, L), 0);
  CHECK_EQ_INT(blk__hold_wait(&h, t + L + 1, L), 0);
  CHECK_EQ_INT(blk__hold_wait(&h, t + 100 * L, L), 0);
  /* The next wait is half as long, from its own start. */
  blk__hold_over(&h);
  t += 200 * L;
  CHECK_EQ_INT(blk__hold_wait(&h, t, L), 1);
  CHECK_EQ_INT(blk__hold_wait(&h, t + L / 2 - 1, L), 1);
  CHECK_EQ_INT(blk__hold_wait(&h, t + L / 2, L), 0);
  /* Waits that keep running out come down to the least, not to nothing. */
  for (int i = 0; i < 64; i++) {
    blk__hold_over(&h);
    t += 2 * L;
    CHECK_EQ_INT(blk__hold_wait(&h, t, L), 1);
    CHECK_EQ_INT(blk__hold_wait(&h, t + L, L), 0);
  }
  const int64_t least = L >> BLK__SCHED_HOLD_HALVINGS;
  CHECK(least > 0);
  blk__hold_over(&h);
  t += 2 * L;
  CHECK_EQ_INT(blk__hold_wait(&h, t, L), 1);
  CHECK_EQ_INT(blk__hold_wait(&h, t + least - 1, L), 1);
  blk__hold_over(&h);
  /* Waits that end in time double it back, up to the limit. */
  for (int i = 0; i < 64; i++) {
    t += 2 * L;
    CHECK_EQ_INT(blk__hold_wait(&h, t, L), 1);
    blk__hold_over(&h);
  }
  CHECK_EQ_INT(h.shift, 0);
  t += 2 * L;
  CHECK_EQ_INT(blk__hold_wait(&h, t + L - 1, L), 1); /* (began at t + L - 1) */
  blk__hold_over(&h);
  /* A block in memory running with no wait under way changes nothing. */
  blk__hold_over(&h);
  CHECK(h.shift == 0 && h.since == 0 && !h.expired);
  /* No limit (nothing read back yet): no wait, and no wait begun. */
  CHECK_EQ_INT(blk__hold_wait(&h, t, 0), 0);
  CHECK(h.shift == 0 && h.since == 0 && !h.expired);
  printf("hold: ok\n");
}

int main(void) {
  test_hold();
  const int64_t us = 1000, h = 60 * us;
  /* One thread: always on the driver. */
  CHECK_EQ_INT(blk__sched_hand_over(-1, -1, 8, 1, h), 0);
  CHECK_EQ_INT(blk__sched_hand_over(1000 * us, 1000 * us, 8, 1, h), 0);
  /* Nothing known yet: to a worker, which measures it. */
  CHECK_EQ_INT(blk__sched_hand_over(-1, -1, 1, 2, h), 1);
  /* Alone: only when 16 hand-offs long. */
  CHECK_EQ_INT(blk__sched_hand_over(100, 100, 1, 2, h), 0);
  CHECK_EQ_INT(blk__sched_hand_over(15 * h, 15 * h, 1, 2, h), 0);
  CHECK_EQ_INT(blk__sched_hand_over(16 * h, 16 * h, 1, 2, h), 1);
  /* Several: when running them side by side saves 20% after the hand-off.
   * 8 of 10 us on 2 workers: 80 us here, 60 + 40 us there: here. */
  CHECK_EQ_INT(blk__sched_hand_over(10 * us, 10 * us, 8, 2, h), 0);
  /* 8 of 30 us: 240 us here, 180 us there (within 80% of 240): there. */
  CHECK_EQ_INT(blk__sched_hand_over(30 * us, 30 * us, 8, 2, h), 1);
  /* Short callbacks never pay, however many. */
  CHECK_EQ_INT(blk__sched_hand_over(200, 200, 64, 2, h), 0);
  CHECK_EQ_INT(blk__sched_hand_over(200, 200, 64, 8, h), 0);
  /* A cheaper hand-off pays sooner. */
  CHECK_EQ_INT(blk__sched_hand_over(2 * us, 2 * us, 8, 2, 1 * us), 1);
  /* More workers: 8 of 20 us on 4: 160 here, 60 + 40 there. */
  CHECK_EQ_INT(blk__sched_hand_over(20 * us, 20 * us, 8, 4, h), 1);
  CHECK_EQ_INT(blk__sched_hand_over(20 * us, 20 * us, 8, 2, h), 0);

  /* Measured slower on the workers (memory-bound callbacks side by side):
   * 8 of 30 us here but 60 us there: 240 here, 60 + 240 there: here. */
  CHECK_EQ_INT(blk__sched_hand_over(30 * us, 60 * us, 8, 2, h), 0);
  /* Long, but much slower on a worker: here; about as fast: there. */
  CHECK_EQ_INT(blk__sched_hand_over(16 * h, 32 * h, 1, 2, h), 0);
  CHECK_EQ_INT(blk__sched_hand_over(16 * h, 17 * h, 1, 2, h), 1);
  /* Only one side known: the other taken as fast. */
  CHECK_EQ_INT(blk__sched_hand_over(30 * us, -1, 8, 2, h), 1);
  CHECK_EQ_INT(blk__sched_hand_over(-1, 10 * us, 8, 2, h), 0);
  CHECK_EQ_INT(blk__sched_hand_over(-1, 16 * h, 1, 2, h), 1);
  /* The pool's hand-off cost: none with one thread; a guess, then a
   * measurement, with more. */
  blk__pool *p;
  CHECK_OK(blk__pool_create(&p, 1, NULL));
  CHECK_EQ_INT(blk__pool_handoff_ns(p), 0);
  blk__pool_destroy(p);
  CHECK_OK(blk__pool_create(&p, 2, NULL));
  CHECK(blk__pool_handoff_ns(p) > 0);
  for (int i = 0; i < 20; i++) {
    void *done[1];
    CHECK_OK(blk__pool_submit(p, nothing, NULL));
    CHECK_EQ_INT(blk__pool_collect(p, done, 1, -1), 1);
  }
  int64_t measured = blk__pool_handoff_ns(p);
  CHECK_MSG(measured > 0 && measured < (int64_t)10 * 1000 * 1000 * 1000,
            "a hand-off measured %lld ns", (long long)measured);
  blk__pool_destroy(p);
  printf("test_schedule_policy: ok\n");
  return 0;
}
