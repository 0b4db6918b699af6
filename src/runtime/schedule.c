/*
 * schedule.c: ready blocks onto the driver or the pool, under the budget;
 * see schedule.h.
 *
 * Invariants: a lid is in ready at most once (queued[lid]); pinned[lid] is
 * set from the acquire before its task runs until collect hands it back
 * (a task the driver runs itself is unpinned right after it, since it is
 * done); running counts tasks submitted to the pool and not collected; done
 * and failed hold lids finished without the pool, until collect.
 *
 * The estimates: a table kept by the operation between operations, one
 * entry per (kind, round) in a slot picked by hash (a clash replaces the
 * entry: its kind is then unknown again). An entry holds two averages of
 * the last few run times, on the driver and on the workers (see figures);
 * one sample can raise an average at most to 8
 * times itself plus 4 us, so a run stretched by the operating system (a
 * preempted vCPU) does not send a cheap kind to the pool for long, while a kind that really
 * grew (a larger array) gets there in a few runs. The driver times the runs
 * it makes itself only now and then once they are far below what could pay
 * for a hand-off: reading the clock costs about as much as a tiny callback.
 *
 * Picking is O(ready) per task: the first ready block already in memory, or
 * else the first ready block (depth_first: of the latest round). That keeps
 * a foreach over N blocks O(N^2) in the worst case, which is nothing next
 * to a load at any realistic N. depth_first times the driver's runs (two
 * clock reads; one run in TIME_EVERY while they are short), to return from
 * pump after a long one.
 */
#include "runtime/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "base/thread.h"
#include "base/trace.h"

#define COST_SLOTS 64
#define LONG_FACTOR 16    /* a task this many hand-offs long goes to a worker even alone */
#define MARGIN_PERCENT 20 /* handing over must save this much of the time on the driver */
#define TIME_EVERY 16     /* a driver's run far below paying is timed once in this many */
#define DEPTH_NS 20000    /* depth_first: a driver's run this long ends the pump */

typedef struct task_cost {
  blk__task_kind kind;
  int round;
  int64_t ns;      /* its run time on the driver; < 0: unknown */
  int64_t pool_ns; /* on a worker (next to other workers, caches cold); < 0: unknown */
  unsigned char moving, pool_moving; /* its last sample was far from the average */
  unsigned char pool_last;           /* the last sample was a worker's */
  unsigned runs;
} task_cost;

struct blk__task_costs {
  task_cost slot[COST_SLOTS];
};

static int forced; /* blk__sched_force */

void blk__sched_force(int mode) {
  forced = mode;
}

static void run_task(void *arg) {
  blk__task *t = arg;
  int64_t start = blk__now_ns();
  t->s->run(t->s->args[t->lid]);
  t->ran_ns = blk__now_ns() - start;
}

static void kept_free(void *mem) {
  free(mem);
}

/* The budget's hooks while the operation runs: a ready block is needed
 * now, the others when the operation says (never again, if it does not
 * say: a foreach runs each block once). */
static uint64_t future(void *ctx, int lid) {
  blk__sched *s = ctx;
  if (s->queued[lid]) return 0;
  return s->future ? s->future(s->future_ctx, lid) : UINT64_MAX;
}

static void io_failed(void *ctx, int lid, int code) {
  blk__sched *s = ctx;
  if (s->on_error) s->on_error(s->on_error_ctx, lid, code);
}

int blk__sched_init(blk__sched *s, blk__budget *budget, blk__pool *pool, blk__op *o,
                    blk__task_kind kind, void (*run)(void *arg), int (*prepare)(void *arg),
                    void **args) {
  memset(s, 0, sizeof *s);
  s->budget = budget;
  s->pool = pool;
  int nblocks = blk__table_count(budget->table);
  s->run = run;
  s->prepare = prepare;
  s->args = args;
  s->kind = kind;
  s->limit = blk__pool_nthreads(pool);
  /* The per-lid arrays in one piece of storage kept between operations
   * (this runs once per operation): tasks, then ready, failed, done and
   * round, then the three flag arrays. */
  static const char owner = 0;
  size_t n = (size_t)(nblocks ? nblocks : 1);
  size_t bytes = n * (sizeof *s->tasks + 4 * sizeof(int) + 3);
  void *mem = blk__op_scratch(o, &owner, bytes);
  if (!mem) return blk__fail(BLK_ENOMEM, "schedule: no memory for %d blocks", nblocks);
  s->tasks = mem;
  s->ready = (int *)(s->tasks + n);
  s->failed = s->ready + n;
  s->done = s->failed + n;
  s->round = s->done + n;
  s->queued = (unsigned char *)(s->round + n);
  s->needs = s->queued + n;
  s->pinned = s->needs + n;
  memset(s->queued, 0, 3 * n);
  for (int i = 0; i < nblocks; i++) s->tasks[i] = (blk__task){s, i, 0};
  if (s->limit > 1) { /* the estimates matter only with workers to hand to */
    static const char costs_owner = 0;
    blk__kept *k = blk__op_kept(o, &costs_owner, kept_free);
    if (!k->mem && (k->mem = blk__malloc(sizeof *s->costs)))
      for (int i = 0; i < COST_SLOTS; i++)
        ((struct blk__task_costs *)k->mem)->slot[i] = (task_cost){NULL, 0, -1, -1, 0, 0, 0, 0};
    if (!k->mem) return blk__fail(BLK_ENOMEM, "schedule: no memory for the estimates");
    s->costs = k->mem;
  }
  /* What the master's operations taught (schedule.h); without memory to
   * keep it, this operation starts afresh. */
  static const char kept_owner = 0;
  blk__kept *k = blk__op_kept(o, &kept_owner, kept_free);
  if (!k->mem && (k->mem = blk__calloc(1, sizeof *s->kept)))
    blk__hold_init(&((blk__sched_kept *)k->mem)->hold);
  if (!k->mem) blk__hold_init(&s->own.hold);
  s->kept = k->mem ? k->mem : &s->own;
  /* (No wait spans two operations; what the waits taught stays.) */
  s->kept->hold.since = 0;
  s->kept->hold.expired = 0;
  budget->future = future;
  budget->on_error = io_failed;
  budget->ctx = s;
  return BLK_OK;
}

void blk__sched_drain(blk__sched *s) {
  blk__budget_flush(s->budget); /* (its errors are told through io_failed) */
}

void blk__sched_free(blk__sched *s) {
  if (s->budget) {
    s->budget->future = NULL;
    s->budget->on_error = NULL;
    s->budget->ctx = NULL;
  }
  memset(s, 0, sizeof *s); /* the arrays stay with the master */
}

void blk__sched_ready(blk__sched *s, int lid, int round, int needs_block) {
  if (s->queued[lid]) return;
  s->queued[lid] = 1;
  s->needs[lid] = (unsigned char)needs_block;
  s->round[lid] = round;
  if (round > s->top_round) s->top_round = round;
  s->ready[s->nready++] = lid;
}

static int in_memory(const blk__sched *s, int lid) {
  return !s->needs[lid] || blk__budget_resident(s->budget, lid);
}

static void unqueue(blk__sched *s, int i) {
  s->queued[s->ready[i]] = 0;
  memmove(&s->ready[i], &s->ready[i + 1], (size_t)(s->nready - i - 1) * sizeof *s->ready);
  s->nready--;
}

static void tell(blk__sched *s, int lid, int code) {
  if (code && s->on_error) s->on_error(s->on_error_ctx, lid, code);
}

static void unpin(blk__sched *s, int lid) {
  if (s->pinned[lid]) {
    s->pinned[lid] = 0;
    blk__budget_release(s->budget, lid);
  }
}

/* Takes lid out of the running: collect returns it with ran = 0. */
static void not_run(blk__sched *s, int lid) {
  unpin(s, lid);
  s->failed[s->nfailed++] = lid;
}

/* ---- the estimates ---- */

static task_cost *cost_of(blk__sched *s, int round) {
  uintptr_t key = 0;
  memcpy(&key, &s->kind, sizeof key < sizeof s->kind ? sizeof key : sizeof s->kind);
  size_t h = (size_t)((key >> 4) * 31u + (uintptr_t)(unsigned)round) % COST_SLOTS;
  task_cost *c = &s->costs->slot[h];
  if (c->kind != s->kind || c->round != round) *c = (task_cost){s->kind, round, -1, -1, 0, 0, 0, 0};
  return c;
}

/* One run's time into the estimate *avg (< 0: none yet); *moving says
 * whether the sample was far from the average (more than twice or less
 * than half of it): the callbacks are changing, and the average lags
 * behind them for a few runs. */
static void learn(int64_t *avg, unsigned char *moving, int64_t ns) {
  if (ns < 0) ns = 0;
  if (*avg < 0) {
    *avg = ns;
    *moving = 0;
    return;
  }
  *moving = ns > 2 * *avg + 1000 || 2 * ns + 1000 < *avg;
  int64_t cap = 8 * *avg + 4000;
  if (ns > cap) ns = cap;
  *avg += (ns - *avg) / 4;
}

#define STALE_RATIO 4 /* figures this far apart: the older one is stale */

/* The policy's figures for c. Each side is measured only while callbacks
 * run there, so the two figures next to each other say how much slower a
 * worker is (memory bandwidth, cold caches) only while both are current. A
 * side is taken as fast as the other where it is unknown, where its figure
 * still moves and the other's does not, and where the two are STALE_RATIO
 * apart or both move (then the side measured last is believed: a worker is
 * not that much slower, the callbacks changed). */
static void figures(const task_cost *c, int64_t *here, int64_t *pool) {
  *here = c->ns;
  *pool = c->pool_ns;
  if (*here < 0 || *pool < 0) return;
  int far = *here > STALE_RATIO * *pool + 1000 || *pool > STALE_RATIO * *here + 1000;
  if (!far && !c->moving && !c->pool_moving) return;
  int here_stale = far || (c->moving && c->pool_moving) ? c->pool_last : c->moving;
  if (here_stale)
    *here = *pool;
  else
    *pool = *here;
}

int blk__sched_hand_over(int64_t here_ns, int64_t pool_ns, int n, int threads, int64_t handoff_ns) {
  if (threads <= 1) return 0;
  if (here_ns < 0 && pool_ns < 0)
    return 1;                         /* unknown: a worker measures it, the driver stays free */
  if (here_ns < 0) here_ns = pool_ns; /* one side unknown: as fast as the other */
  if (pool_ns < 0) pool_ns = here_ns;
  /* Long on its own, and about as fast on a worker. */
  if (here_ns >= LONG_FACTOR * handoff_ns && pool_ns * (100 - MARGIN_PERCENT) <= here_ns * 100)
    return 1;
  if (n < 2) return 0;
  /* n tasks on the driver take n c; on the workers h + ceil(n / T) c', c'
   * as measured there (next to each other they share the memory bandwidth,
   * and they start with cold caches). */
  int64_t on_driver = (int64_t)n * here_ns;
  int64_t on_pool = handoff_ns + (int64_t)((n + threads - 1) / threads) * pool_ns;
  return on_pool * 100 <= on_driver * (100 - MARGIN_PERCENT);
}

/* ---- running ---- */

/* Runs lid's task on the driver, timing it when the estimate asks for it,
 * or depth_first when the last timed run was not short (else one run in
 * TIME_EVERY: the clock costs as much as a tiny callback). */
static void run_here(blk__sched *s, int lid, task_cost *c, int64_t handoff) {
  void *arg = s->args[lid];
  int learning =
      c && (c->ns < 0 || c->ns * LONG_FACTOR * 4 > handoff || c->runs++ % TIME_EVERY == 0);
  blk__sched_kept *k = s->kept;
  int depth = s->depth_first && (k->depth_ns * 4 >= DEPTH_NS || k->depth_skip++ % TIME_EVERY == 0);
  if (learning || depth) {
    int64_t start = blk__now_ns();
    s->run(arg);
    int64_t ns = blk__now_ns() - start;
    if (learning) {
      learn(&c->ns, &c->moving, ns);
      c->pool_last = 0;
    }
    if (s->depth_first) {
      /* One short run only halves it: a merge's root sends nothing in
       * round 0, and taking its 0 us as the driver's runs stopped the
       * timing, and so the returns, for the next 15 long ones (each group's
       * root then waited for every block's round 0). */
      k->depth_ns = ns > k->depth_ns / 2 ? ns : k->depth_ns / 2;
      s->yield = ns >= DEPTH_NS;
    }
  } else {
    s->run(arg);
  }
  unpin(s, lid);
  s->done[s->ndone++] = lid;
}

void blk__hold_init(blk__hold *h) {
  *h = (blk__hold){0, 0, 0};
}

int blk__hold_wait(blk__hold *h, int64_t now_ns, int64_t limit_ns) {
  if (limit_ns <= 0) return 0;
  if (!h->since) h->since = now_ns;
  if (now_ns - h->since < (limit_ns >> h->shift)) return 1;
  if (!h->expired) {
    h->expired = 1;
    if (h->shift < BLK__SCHED_HOLD_HALVINGS) h->shift++;
  }
  return 0;
}

void blk__hold_over(blk__hold *h) {
  if (h->since && !h->expired && h->shift > 0) h->shift--;
  h->since = 0;
  h->expired = 0;
}

/* Whether a load that would evict v, needed sooner, waits: while v waits
 * for another rank's message, as blk__hold_wait says, with the limit that
 * this block size's reads give (schedule.h). */
static int hold_for(blk__sched *s, int v) {
  if (!s->waits_elsewhere || !s->waits_elsewhere(s->future_ctx, v)) return 0;
  int64_t limit = BLK__SCHED_HOLD_LOADS * blk__budget_load_ns(s->budget);
  if (limit > BLK__SCHED_HOLD_NS) limit = BLK__SCHED_HOLD_NS;
  return blk__hold_wait(&s->kept->hold, blk__now_ns(), limit);
}

/* The index in ready of the block to load when none is in memory: the one
 * the operation needs soonest (its future; a reduction knows the order
 * that loads each block the fewest times), else the first; skipping the
 * first `nskip` lids in skip (read_ahead's picks so far). -1: none. */
static int pick_out(const blk__sched *s, const int *skip, int nskip) {
  int best = -1;
  uint64_t best_when = UINT64_MAX;
  for (int i = 0; i < s->nready; i++) {
    int lid = s->ready[i], taken = 0;
    for (int j = 0; j < nskip; j++) taken |= skip[j] == lid;
    if (taken || in_memory(s, lid)) continue;
    if (!s->future) return i;
    uint64_t when = s->future(s->future_ctx, lid);
    if (best < 0 || when < best_when) best = i, best_when = when;
  }
  return best;
}

/* The index in ready of the next block to run: the first in memory (else
 * the one to load, pick_out); depth_first, one in memory of the latest
 * round. Blocks join ready as their rounds come, so that one is looked for
 * from the end, where it nearly always is, and a whole scan only settles a
 * top round with none in memory: a full scan per pick cost a merge over
 * 4096 blocks 10 times its time (O(ready) per block run). */
static int pick(blk__sched *s) {
  if (!s->depth_first) {
    for (int i = 0; i < s->nready; i++)
      if (in_memory(s, s->ready[i])) return i;
    return pick_out(s, NULL, 0);
  }
  for (int i = s->nready - 1; i >= 0; i--)
    if (s->round[s->ready[i]] == s->top_round && in_memory(s, s->ready[i])) return i;
  int best = -1;
  for (int i = 0; i < s->nready; i++) {
    if (!in_memory(s, s->ready[i])) continue;
    if (best < 0 || s->round[s->ready[i]] > s->round[s->ready[best]]) best = i;
  }
  if (best < 0) return pick_out(s, NULL, 0);
  s->top_round = s->round[s->ready[best]];
  return best;
}

/* Starts reading ahead the ready blocks that are out, in the order pick
 * loads them, while the driver and the workers compute. */
static void read_ahead(blk__sched *s) {
  int chosen[BLK__BUDGET_AHEAD_MAX], n = 0;
  while (n < s->budget->ahead_max && s->budget->ahead < s->budget->ahead_max) {
    int i = pick_out(s, chosen, n);
    if (i < 0) break;
    chosen[n++] = s->ready[i];
    blk__budget_prefetch(s->budget, s->ready[i]);
  }
}

/* Hands lid's task to the pool. depth_first, a task of a later round than
 * the tasks queued behind starts before them: in core every ready task goes
 * to the pool at once, and a merge's roots, queued behind the other round-0
 * blocks, ran only once all those had sent, each message in new storage
 * (a merge of 64 blocks of 6.4 MB held 48 of them at once, and faulting
 * them in was a quarter of its time). Run first, they hand the storage
 * back (buffer cache) for the next group's messages. */
static int submit(blk__sched *s, int lid) {
  if (s->depth_first && s->running > 0 && s->round[lid] > s->back_round)
    return blk__pool_submit_first(s->pool, run_task, &s->tasks[lid]);
  s->back_round = s->round[lid];
  return blk__pool_submit(s->pool, run_task, &s->tasks[lid]);
}

void blk__sched_pump(blk__sched *s) {
  int64_t handoff = -1; /* asked of the pool once per pump, when needed */
  int ooc = blk__budget_active(s->budget);
  if (ooc) {
    blk__budget_poll(s->budget);
    read_ahead(s);
  }
  /* Once the driver is to run a round's task, it runs the rest of that
   * round's ready tasks in this pump too (fewer of them pay even less, and
   * none becomes ready meanwhile), without looking the estimate up again:
   * the policy costs a lookup per round, not per task. */
  int here_round = -1;
  task_cost *here_cost = NULL;
  while (s->nready > 0) {
    int i = pick(s);
    int lid = s->ready[i];
    task_cost *c = NULL;
    int pool = 0;
    if (s->limit > 1 && here_cost && s->round[lid] == here_round) {
      c = here_cost;
    } else if (s->limit > 1) {
      c = cost_of(s, s->round[lid]);
      if (forced) {
        pool = forced > 0;
      } else {
        if (handoff < 0) handoff = blk__pool_handoff_ns(s->pool);
        int64_t here_ns, pool_ns;
        figures(c, &here_ns, &pool_ns);
        pool = blk__sched_hand_over(here_ns, pool_ns, s->nready + s->running, s->limit, handoff);
      }
      if (!pool && (c->ns >= 0 || c->pool_ns >= 0)) {
        here_round = s->round[lid];
        here_cost = c;
      }
      /* Out-of-core, at most one running block per worker is pinned; in-core
       * the workers take queued tasks without waiting for the driver. */
      if (pool && s->running >= s->limit && blk__budget_active(s->budget)) break;
    }
    /* A load may evict: first let the operation take in what the driver
     * ran, so that it knows which blocks are done (the budget asks). */
    if (s->needs[lid] && s->ndone > 0 && !blk__budget_resident(s->budget, lid)) break;
    /* Nor load a block (a later group's, mostly) over one needed sooner
     * (the running group's, waiting for a callback on the pool to finish,
     * or for another rank's message): wait for the pool, or a while for
     * the message (hold_for), and load once what it ran has moved on. With
     * two threads a swap of 64 blocks with 8 in memory loaded 164 where
     * one thread loads 112. */
    if (ooc && s->needs[lid] && s->future && !blk__budget_resident(s->budget, lid)) {
      int v = blk__budget_sooner_victim(s->budget, lid, s->future(s->future_ctx, lid));
      if (v >= 0 && (s->running > 0 || hold_for(s, v))) break;
    } else {
      blk__hold_over(&s->kept->hold); /* a block in memory runs */
    }
    if (s->needs[lid]) {
      int rc = blk__budget_acquire(s->budget, lid);
      if (rc == BLK__BUDGET_FULL) break; /* wait for a running task to end */
      tell(s, lid, rc);
      if (!blk__budget_resident(s->budget, lid)) { /* it could not be loaded: do not run it */
        unqueue(s, i);
        not_run(s, lid);
        continue;
      }
      s->pinned[lid] = 1; /* resident, even if an eviction failed on the way */
    }
    unqueue(s, i);
    int rc = s->prepare ? s->prepare(s->args[lid]) : BLK_OK;
    if (!rc && !pool) {
      run_here(s, lid, c, handoff);
      if (s->yield) { /* depth_first: its messages go out before the next */
        s->yield = 0;
        break;
      }
      continue;
    }
    if (!rc) rc = submit(s, lid);
    if (rc) {
      tell(s, lid, rc);
      not_run(s, lid);
      continue;
    }
    s->running++;
  }
  if (ooc) read_ahead(s);
}

size_t blk__sched_collect(blk__sched *s, int *lids, int *ran, size_t max, long timeout_ns) {
  size_t n = 0;
  while (n < max && s->nfailed > 0) {
    lids[n] = s->failed[--s->nfailed];
    ran[n++] = 0;
  }
  /* In the order the driver ran them. */
  size_t from = 0;
  while (n < max && from < (size_t)s->ndone) {
    lids[n] = s->done[from++];
    ran[n++] = 1;
  }
  if (from) {
    memmove(s->done, s->done + from, ((size_t)s->ndone - from) * sizeof *s->done);
    s->ndone -= (int)from;
  }
  if (n == max || !s->running) return n;
  /* What the workers finished comes too, without waiting when the driver
   * ran something: a driver that keeps running short tasks (a block that
   * asks to run again) must not leave a worker's finished task unseen. */
  if (n) timeout_ns = 0;
  void *done[64];
  size_t want = max - n < 64 ? max - n : 64;
  blk__trace *trace = timeout_ns ? blk__trace_here() : NULL;
  int64_t waited = trace ? blk__now_ns() : 0;
  size_t got = want ? blk__pool_collect(s->pool, done, want, timeout_ns) : 0;
  if (trace)
    blk__trace_record(trace, &(blk__trace_span){"wait for workers", waited, blk__now_ns(),
                                                BLK__TRACE_WAIT, -1, -1, 0, 0, 0, 0});
  for (size_t i = 0; i < got; i++) {
    blk__task *t = done[i];
    int lid = t->lid;
    s->running--;
    if (s->costs) {
      task_cost *c = cost_of(s, s->round[lid]);
      learn(&c->pool_ns, &c->pool_moving, t->ran_ns);
      c->pool_last = 1;
    }
    unpin(s, lid);
    lids[n] = lid;
    ran[n++] = 1;
  }
  return n;
}
