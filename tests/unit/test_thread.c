/* test_thread: threads run and are joined, a mutex makes a shared sum
 * exact under contention, a condition variable wakes a waiter and a timed
 * wait returns at its deadline (not before), destroy(NULL) does nothing. */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>

#include "base/thread.h"
#include "blk/blk.h"
#include "check.h"

enum { NTHREADS = 4, ADDS = 20000 };

typedef struct locked_sum {
  blk__mutex *m;
  long sum; /* guarded by m */
  int turns;
} locked_sum;

static void add_many(void *arg) {
  locked_sum *s = arg;
  for (int i = 0; i < ADDS; i++) {
    blk__mutex_lock(s->m);
    long v = s->sum; /* a read-modify-write the lock must keep whole */
    s->sum = v + 1;
    blk__mutex_unlock(s->m);
  }
}

static void check_mutex(void) {
  locked_sum s = {NULL, 0, 0};
  CHECK_OK(blk__mutex_create(&s.m));
  blk__thread *t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) CHECK_OK(blk__thread_start(&t[i], add_many, &s));
  for (int i = 0; i < NTHREADS; i++) blk__thread_join(t[i]);
  CHECK_EQ_INT(s.sum, (long)NTHREADS * ADDS);
  blk__mutex_destroy(s.m);
}

typedef struct mailbox {
  blk__mutex *m;
  blk__cond *c;
  int posted;      /* guarded by m */
  atomic_int seen; /* the waiter saw the post */
} mailbox;

static void wait_for_post(void *arg) {
  mailbox *b = arg;
  blk__mutex_lock(b->m);
  while (!b->posted) blk__cond_wait(b->c, b->m);
  blk__mutex_unlock(b->m);
  atomic_store(&b->seen, 1);
}

static void check_cond(void) {
  mailbox b = {NULL, NULL, 0, 0};
  CHECK_OK(blk__mutex_create(&b.m));
  CHECK_OK(blk__cond_create(&b.c));
  blk__thread *t;
  CHECK_OK(blk__thread_start(&t, wait_for_post, &b));
  blk__mutex_lock(b.m);
  b.posted = 1;
  blk__cond_signal(b.c);
  blk__mutex_unlock(b.m);
  blk__thread_join(t);
  CHECK_EQ_INT(atomic_load(&b.seen), 1);

  /* Nobody signals: the timed wait returns 0, at the deadline or after. */
  blk__mutex_lock(b.m);
  int64_t start = blk__now_ns();
  int64_t deadline = start + 20 * 1000 * 1000;
  int woken = 1;
  while (woken && blk__now_ns() < deadline) woken = blk__cond_wait_until(b.c, b.m, deadline);
  int64_t waited = blk__now_ns() - start;
  blk__mutex_unlock(b.m);
  CHECK_EQ_INT(woken, 0);
  CHECK_MSG(waited >= 20 * 1000 * 1000 && waited < 5000LL * 1000 * 1000,
            "a 20 ms timed wait returned after %lld ns", (long long)waited);
  blk__cond_broadcast(b.c); /* with no waiter: nothing happens */
  blk__cond_destroy(b.c);
  blk__mutex_destroy(b.m);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  blk__mutex_destroy(NULL);
  blk__cond_destroy(NULL);
  blk__thread_join(NULL);
  int64_t a = blk__now_ns(), b = blk__now_ns();
  CHECK(a > 0 && b >= a);
  check_mutex();
  check_cond();
  printf("test_thread: ok\n");
  return 0;
}
