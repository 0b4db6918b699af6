/* test_pool: submit/collect at 1, 2 and 4 threads: every task runs once, on
 * the right threads, at most T at once, T at once when asked; timeouts; the
 * order submit_first gives; and no wake-up lost around the spin-then-sleep
 * waits. */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <time.h>

#include "blk/blk.h"
#include "check.h"
#include "base/pool.h"

/* Each thread's copy of this has its own address: a thread identity that
 * needs no pthread.h. */
static _Thread_local int thread_marker;

static const void *thread_id(void) {
  return &thread_marker;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

/* Waits without sleeping: nanosleep cannot wait a few microseconds (timer
 * slack makes it 50 us or more). */
static void busy_us(long us) {
  double until = now_s() + 1e-6 * (double)us;
  while (now_s() < until) continue;
}

/* Waits (sleeping) until *flag >= value, for at most 10 s; returns whether it got there. */
static int wait_for(atomic_int *flag, int value) {
  double until = now_s() + 10.0;
  while (atomic_load(flag) < value) {
    if (now_s() > until) return 0;
    sleep_us(100);
  }
  return 1;
}

/* ---- a batch of tasks: every one exactly once, on the right threads ---- */

typedef struct count_ctx {
  atomic_int *hits;
  size_t *order;      /* order[i]: how many callbacks started before index i */
  const void **where; /* where[i]: the thread that ran index i */
  atomic_size_t started;
  atomic_int running;
  atomic_int max_running;
} count_ctx;

static void count_fn(size_t i, void *arg) {
  count_ctx *c = arg;
  int now = atomic_fetch_add(&c->running, 1) + 1;
  int max = atomic_load(&c->max_running);
  while (now > max && !atomic_compare_exchange_weak(&c->max_running, &max, now)) continue;
  c->order[i] = atomic_fetch_add(&c->started, 1);
  c->where[i] = thread_id();
  atomic_fetch_add(&c->hits[i], 1);
  atomic_fetch_sub(&c->running, 1);
}

/* Runs fn(i, ctx) for i in [0, n) as n tasks and collects them all (tasks
 * submitted earlier and still running are left alone). */
typedef struct indexed {
  void (*fn)(size_t i, void *ctx);
  void *ctx;
  size_t i;
} indexed;

static void indexed_fn(void *arg) {
  indexed *x = arg;
  x->fn(x->i, x->ctx);
}

static void run_batch(blk__pool *p, size_t n, void (*fn)(size_t i, void *ctx), void *ctx) {
  indexed *xs = calloc(n + 1, sizeof *xs);
  CHECK(xs);
  for (size_t i = 0; i < n; i++) {
    xs[i] = (indexed){fn, ctx, i};
    CHECK_OK(blk__pool_submit(p, indexed_fn, &xs[i]));
  }
  for (size_t got = 0; got < n;) {
    void *done[16];
    size_t k = blk__pool_collect(p, done, 16, -1);
    for (size_t j = 0; j < k; j++)
      CHECK_MSG((indexed *)done[j] >= xs && (indexed *)done[j] < xs + n,
                "collect returned a task of another batch");
    got += k;
  }
  free(xs);
}

static void check_batch(blk__pool *p, size_t n) {
  int t = blk__pool_nthreads(p);
  count_ctx c;
  c.hits = calloc(n + 1, sizeof *c.hits);
  c.order = calloc(n + 1, sizeof *c.order);
  c.where = calloc(n + 1, sizeof *c.where);
  CHECK(c.hits && c.order && c.where);
  for (size_t i = 0; i < n; i++) atomic_init(&c.hits[i], 0);
  atomic_init(&c.started, 0);
  atomic_init(&c.running, 0);
  atomic_init(&c.max_running, 0);
  run_batch(p, n, count_fn, &c);
  CHECK_EQ_INT(atomic_load(&c.started), n);
  for (size_t i = 0; i < n; i++) {
    CHECK_MSG(atomic_load(&c.hits[i]) == 1, "T=%d n=%zu: index %zu ran %d times", t, n, i,
              atomic_load(&c.hits[i]));
    if (t == 1) {
      CHECK_MSG(c.where[i] == thread_id(), "T=1: index %zu ran off the caller", i);
      CHECK_EQ_INT(c.order[i], i);
    } else {
      CHECK_MSG(c.where[i] != thread_id(), "T=%d: index %zu ran on the caller", t, i);
    }
  }
  CHECK_MSG(atomic_load(&c.max_running) <= t, "T=%d: %d callbacks ran at once", t,
            atomic_load(&c.max_running));
  free(c.hits);
  free(c.order);
  free(c.where);
}

/* T callbacks that each wait for all T to have started: only possible if T
 * of them really run at the same time. */
typedef struct meet_ctx {
  atomic_int arrived;
  atomic_int met;
  int need;
} meet_ctx;

static void meet_fn(size_t i, void *arg) {
  (void)i;
  meet_ctx *m = arg;
  atomic_fetch_add(&m->arrived, 1);
  if (wait_for(&m->arrived, m->need)) atomic_fetch_add(&m->met, 1);
}

static void check_concurrency(blk__pool *p) {
  int t = blk__pool_nthreads(p);
  meet_ctx m;
  atomic_init(&m.arrived, 0);
  atomic_init(&m.met, 0);
  m.need = t;
  run_batch(p, (size_t)t, meet_fn, &m);
  CHECK_MSG(atomic_load(&m.met) == t, "T=%d: only %d of %d callbacks ran at the same time", t,
            atomic_load(&m.met), t);
}

/* ---- submit / collect ---- */

typedef struct job {
  atomic_int ran;
  int collected;
} job;

static void job_fn(void *arg) {
  atomic_fetch_add(&((job *)arg)->ran, 1);
}

static void check_tasks(blk__pool *p) {
  const size_t ntasks = 10000;
  int t = blk__pool_nthreads(p);
  job *jobs = calloc(ntasks, sizeof *jobs);
  CHECK(jobs);
  for (size_t i = 0; i < ntasks; i++) atomic_init(&jobs[i].ran, 0);
  void *done[64];
  size_t ncollected = 0;
  for (size_t i = 0; i < ntasks; i++) {
    CHECK_OK(blk__pool_submit(p, job_fn, &jobs[i]));
    /* Collect a few now and then, so the rings wrap around. */
    if (i % 97 == 0) {
      size_t got = blk__pool_collect(p, done, 7, 0);
      CHECK(got <= 7);
      for (size_t k = 0; k < got; k++) {
        job *j = done[k];
        if (t == 1) CHECK_MSG(j == &jobs[ncollected], "T=1: task collected out of order");
        j->collected++;
        ncollected++;
      }
    }
    CHECK_EQ_INT(blk__pool_outstanding(p), i + 1 - ncollected);
  }
  while (blk__pool_outstanding(p) > 0) {
    size_t got = blk__pool_collect(p, done, 64, -1);
    CHECK(got > 0 && got <= 64);
    for (size_t k = 0; k < got; k++) {
      job *j = done[k];
      if (t == 1) CHECK_MSG(j == &jobs[ncollected], "T=1: task collected out of order");
      j->collected++;
      ncollected++;
    }
  }
  CHECK_EQ_INT(ncollected, ntasks);
  for (size_t i = 0; i < ntasks; i++) {
    CHECK_MSG(atomic_load(&jobs[i].ran) == 1, "T=%d: task %zu ran %d times", t, i,
              atomic_load(&jobs[i].ran));
    CHECK_MSG(jobs[i].collected == 1, "T=%d: task %zu collected %d times", t, i, jobs[i].collected);
  }
  /* Nothing outstanding: returns 0 at once, whatever the timeout. */
  double t0 = now_s();
  CHECK_EQ_INT(blk__pool_collect(p, done, 64, -1), 0);
  CHECK_EQ_INT(blk__pool_collect(p, done, 64, 0), 0);
  CHECK_EQ_INT(blk__pool_collect(p, done, 64, 5000000000L), 0);
  CHECK_MSG(now_s() - t0 < 1.0, "collect with nothing outstanding waited %g s", now_s() - t0);
  free(jobs);
}

/* A task that holds its worker until the test opens the gate. */
typedef struct gate {
  atomic_int started;
  atomic_int open;
  atomic_int passed;
} gate;

static void gate_fn(void *arg) {
  gate *g = arg;
  atomic_store(&g->started, 1);
  if (wait_for(&g->open, 1)) atomic_store(&g->passed, 1);
}

static void check_timeouts(blk__pool *p) {
  int t = blk__pool_nthreads(p);
  gate g;
  atomic_init(&g.started, 0);
  atomic_init(&g.open, t == 1); /* with one thread submit runs it at once */
  atomic_init(&g.passed, 0);
  void *done[4] = {NULL};
  CHECK_OK(blk__pool_submit(p, gate_fn, &g));
  CHECK_EQ_INT(blk__pool_outstanding(p), 1);
  if (t == 1) {
    CHECK_EQ_INT(atomic_load(&g.passed), 1);
    CHECK_EQ_INT(blk__pool_collect(p, done, 4, 0), 1);
    CHECK(done[0] == &g);
    return;
  }
  CHECK(wait_for(&g.started, 1));
  /* Running but not finished: timeout 0 returns at once, a short timeout
   * returns 0 after about that long. */
  CHECK_EQ_INT(blk__pool_collect(p, done, 4, 0), 0);
  double t0 = now_s();
  CHECK_EQ_INT(blk__pool_collect(p, done, 4, 20000000L), 0);
  double waited = now_s() - t0;
  CHECK_MSG(waited >= 0.019 && waited < 5.0, "collect(20 ms) returned after %g s", waited);
  /* A timeout shorter than the pool's spin is kept too. */
  t0 = now_s();
  CHECK_EQ_INT(blk__pool_collect(p, done, 4, 10000L), 0);
  waited = now_s() - t0;
  CHECK_MSG(waited >= 0.000009 && waited < 5.0, "collect(10 us) returned after %g s", waited);
  /* Other tasks still run while one holds a worker. */
  check_batch(p, 300);
  CHECK_EQ_INT(blk__pool_outstanding(p), 1);
  atomic_store(&g.open, 1);
  CHECK_EQ_INT(blk__pool_collect(p, done, 4, -1), 1);
  CHECK(done[0] == &g);
  CHECK_EQ_INT(atomic_load(&g.passed), 1);
  CHECK_EQ_INT(blk__pool_outstanding(p), 0);
  CHECK_EQ_INT(blk__pool_collect(p, done, 0, -1), 0);
}

/* ---- hand-offs: no wake-up lost at any point of the spin-then-sleep waits ---- */

typedef struct handoff {
  atomic_int ran;
  int collected;
  long work_us;   /* how long the task runs */
  meet_ctx *meet; /* or NULL; else the task waits for the whole batch to run at once */
} handoff;

static void handoff_fn(void *arg) {
  handoff *h = arg;
  if (h->meet)
    meet_fn(0, h->meet);
  else if (h->work_us >= 50)
    sleep_us(h->work_us);
  else
    busy_us(h->work_us);
  atomic_fetch_add(&h->ran, 1);
}

/* Batches of tasks submitted after gaps shorter and longer than the pool's
 * spin (so workers are found spinning, asleep, or between the two), tasks
 * that finish while the driver spins or after it has gone to sleep, and
 * collects without limit, with a long limit, and with limits shorter than
 * the spin. Every fourth kind of batch is T tasks that can finish only if all
 * T workers are awake at once, so a sleeper left asleep while a queued task
 * waits is caught too. A lost wake-up shows as a task that never runs: a
 * failed check, or (collect without limit) a hang for ctest's TIMEOUT. */
static void check_handoffs(blk__pool *p) {
  enum { CYCLES = 320 }; /* each gap, run time and kind of collect 4 times */
  static const long gap_us[] = {0, 3, 25, 35, 200}; /* before each submit; the spin is 30 us */
  static const long work_us[] = {0, 3, 40, 200};    /* each task's run time */
  int t = blk__pool_nthreads(p);
  size_t per = (size_t)t + 1;
  handoff *h = calloc(CYCLES * per, sizeof *h);
  CHECK(h);
  void *done[8];
  for (int c = 0; c < CYCLES; c++) {
    long gap = gap_us[c % 5], work = work_us[(c / 5) % 4];
    int mode = (c / 20) % 4;
    size_t k = mode == 3 ? (size_t)t : 1 + (size_t)c % per;
    handoff *batch = &h[(size_t)c * per];
    meet_ctx meet;
    atomic_init(&meet.arrived, 0);
    atomic_init(&meet.met, 0);
    meet.need = t;
    for (size_t i = 0; i < k; i++) {
      atomic_init(&batch[i].ran, 0);
      batch[i].work_us = work;
      batch[i].meet = mode == 3 ? &meet : NULL;
      if (gap >= 50)
        sleep_us(gap);
      else
        busy_us(gap);
      CHECK_OK(blk__pool_submit(p, handoff_fn, &batch[i]));
    }
    double until = now_s() + 5.0;
    for (size_t got = 0; got < k;) {
      long timeout = mode == 1 ? 1000000000L : mode == 2 ? 10000L : -1;
      double t0 = now_s();
      size_t n = blk__pool_collect(p, done, 8, timeout);
      /* A task takes 200 us at most: waiting half the 1 s limit means no one woke the driver. */
      CHECK_MSG(mode != 1 || now_s() - t0 < 0.5, "T=%d cycle %d: collect(1 s) waited %g s", t, c,
                now_s() - t0);
      CHECK_MSG(n > 0 || mode == 2, "T=%d cycle %d: collect(%ld ns) found none of %zu tasks", t, c,
                timeout, k - got);
      CHECK_MSG(now_s() < until, "T=%d cycle %d: %zu of %zu tasks never finished", t, c, k - got,
                k);
      for (size_t i = 0; i < n; i++) {
        handoff *d = done[i];
        CHECK_MSG(d >= batch && d < batch + k, "T=%d cycle %d: collected a task of another batch",
                  t, c);
        d->collected++;
      }
      got += n;
    }
    CHECK_EQ_INT(blk__pool_outstanding(p), 0);
    for (size_t i = 0; i < k; i++) {
      CHECK_MSG(atomic_load(&batch[i].ran) == 1 && batch[i].collected == 1,
                "T=%d cycle %d task %zu: ran %d times, collected %d times", t, c, i,
                atomic_load(&batch[i].ran), batch[i].collected);
    }
    if (mode == 3)
      CHECK_MSG(atomic_load(&meet.met) == t, "T=%d cycle %d: only %d of %d tasks ran at once", t, c,
                atomic_load(&meet.met), t);
  }
  free(h);
}

/* ---- submit_first: its tasks start first, each kind in submit order ---- */

typedef struct gated {
  atomic_int *open;    /* a gate task waits for it; NULL: an ordered task */
  atomic_int *started; /* gates up */
  atomic_int *next;    /* ordered tasks: the place of the next one to start */
  atomic_int *placed;  /* ordered tasks that have written their place */
  int place;           /* where it started */
} gated;

static void gated_fn(void *arg) {
  gated *g = arg;
  if (g->open) {
    atomic_fetch_add(g->started, 1);
    CHECK_MSG(wait_for(g->open, 1), "a gate task was never opened");
  } else {
    g->place = atomic_fetch_add(g->next, 1);
    atomic_fetch_add(g->placed, 1); /* after the place: the test reads it then */
  }
}

/* The T workers are held by gate tasks while tasks queue up, submit and
 * submit_first in turn (enough to grow the rings, and the head wraps as
 * submit_first moves it back); then one gate opens, and that worker alone
 * starts them all, in order: the first ones as submitted, then the others. */
static void check_first(blk__pool *p) {
  const int t = blk__pool_nthreads(p);
  enum { N = 300 };
  atomic_int open[4], started, next, placed;
  atomic_init(&started, 0);
  atomic_init(&next, 0);
  atomic_init(&placed, 0);
  gated gates[4], tasks[N];
  for (int g = 0; g < t; g++) {
    atomic_init(&open[g], 0);
    gates[g] = (gated){&open[g], &started, NULL, NULL, -1};
    CHECK_OK(blk__pool_submit(p, gated_fn, &gates[g]));
  }
  CHECK_MSG(wait_for(&started, t), "T=%d: the gate tasks did not all start", t);
  int nfirst = 0;
  for (int i = 0; i < N; i++) {
    tasks[i] = (gated){NULL, NULL, &next, &placed, -1};
    if (i % 3 == 1) {
      CHECK_OK(blk__pool_submit_first(p, gated_fn, &tasks[i]));
      nfirst++;
    } else {
      CHECK_OK(blk__pool_submit(p, gated_fn, &tasks[i]));
    }
  }
  atomic_store(&open[0], 1);
  CHECK_MSG(wait_for(&placed, N), "T=%d: the queued tasks did not all start", t);
  int first = 0, other = nfirst;
  for (int i = 0; i < N; i++) {
    int want = i % 3 == 1 ? first++ : other++;
    CHECK_MSG(tasks[i].place == want, "T=%d: task %d (%s) started %d-th, not %d-th", t, i,
              i % 3 == 1 ? "first" : "plain", tasks[i].place, want);
  }
  for (int g = 1; g < t; g++) atomic_store(&open[g], 1);
  for (size_t got = 0; got < (size_t)(N + t);) {
    void *done[64];
    got += blk__pool_collect(p, done, 64, -1);
  }
  CHECK_EQ_INT(blk__pool_outstanding(p), 0);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);

  blk__pool *p = (blk__pool *)&thread_marker;
  CHECK_ERR(blk__pool_create(&p, 0, NULL), BLK_EINVAL, "nthreads = 0");
  CHECK(p == NULL);
  CHECK_ERR(blk__pool_create(&p, -3, NULL), BLK_EINVAL, "nthreads = -3");
  CHECK(p == NULL);
  blk__pool_destroy(NULL);

  const int counts[] = {1, 2, 4};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    int t = counts[k];
    CHECK_OK(blk__pool_create(&p, t, NULL));
    CHECK_EQ_INT(blk__pool_nthreads(p), t);
    CHECK_EQ_INT(blk__pool_outstanding(p), 0);
    check_batch(p, 0);
    check_batch(p, 1);
    check_batch(p, 1000);
    check_batch(p, 1000); /* a second batch on the same workers */
    if (t > 1) check_concurrency(p);
    check_tasks(p);
    check_timeouts(p);
    check_tasks(p); /* the rings are reused after draining */
    check_handoffs(p);
    if (t > 1) check_first(p);
    blk__pool_destroy(p);
  }

  /* Create and destroy repeatedly, sometimes with work in between. */
  for (int r = 0; r < 50; r++) {
    int t = 1 + r % 4;
    CHECK_OK(blk__pool_create(&p, t, NULL));
    if (r % 3 == 0) check_batch(p, 17);
    if (r % 5 == 0) {
      static job j;
      atomic_store(&j.ran, 0);
      void *done[1];
      CHECK_OK(blk__pool_submit(p, job_fn, &j));
      CHECK_EQ_INT(blk__pool_collect(p, done, 1, -1), 1);
      CHECK(done[0] == &j);
      CHECK_EQ_INT(atomic_load(&j.ran), 1);
    }
    blk__pool_destroy(p);
  }

  printf("test_pool: ok\n");
  return 0;
}
