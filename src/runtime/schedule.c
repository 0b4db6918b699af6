/*
 * schedule.c: ready blocks onto the pool, under the budget; see schedule.h.
 *
 * Invariants: a lid is in ready at most once (queued[lid]); pinned[lid] is
 * set from the acquire before its task is submitted until collect hands it
 * back; running counts submitted, uncollected tasks.
 *
 * Picking is O(ready) per task: the first ready block already in memory, or
 * else the first ready block. That keeps a foreach over N blocks O(N^2) in
 * the worst case, which is nothing next to a load at any realistic N.
 */
#include "runtime/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"

static void run_task(void *arg) {
  blk__task *t = arg;
  t->s->run(t->s->args[t->lid]);
}

int blk__sched_init(blk__sched *s, blk__budget *budget, blk__pool *pool, blk__op *o,
                    void (*run)(void *arg), int (*prepare)(void *arg), void **args) {
  memset(s, 0, sizeof *s);
  s->budget = budget;
  s->pool = pool;
  int nblocks = blk__table_count(budget->table);
  s->run = run;
  s->prepare = prepare;
  s->args = args;
  s->limit = blk__pool_nthreads(pool);
  /* The per-lid arrays in one piece of storage kept between operations
   * (this runs once per operation): tasks, then ready and failed, then the
   * three flag arrays. */
  static const char owner = 0;
  size_t n = (size_t)(nblocks ? nblocks : 1);
  size_t bytes = n * (sizeof *s->tasks + 2 * sizeof(int) + 3);
  void *mem = blk__op_scratch(o, &owner, bytes);
  if (!mem) return blk__fail(BLK_ENOMEM, "schedule: no memory for %d blocks", nblocks);
  s->tasks = mem;
  s->ready = (int *)(s->tasks + n);
  s->failed = s->ready + n;
  s->queued = (unsigned char *)(s->failed + n);
  s->needs = s->queued + n;
  s->pinned = s->needs + n;
  memset(s->queued, 0, 3 * n);
  for (int i = 0; i < nblocks; i++) s->tasks[i] = (blk__task){s, i};
  return BLK_OK;
}

void blk__sched_free(blk__sched *s) {
  memset(s, 0, sizeof *s); /* the arrays stay with the master */
}

void blk__sched_ready(blk__sched *s, int lid, int needs_block) {
  if (s->queued[lid]) return;
  s->queued[lid] = 1;
  s->needs[lid] = (unsigned char)needs_block;
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

/* Takes lid out of the running: collect returns it with ran = 0. */
static void not_run(blk__sched *s, int lid) {
  if (s->pinned[lid]) {
    s->pinned[lid] = 0;
    blk__budget_release(s->budget, lid);
  }
  s->failed[s->nfailed++] = lid;
}

void blk__sched_pump(blk__sched *s) {
  while (s->running < s->limit && s->nready > 0) {
    int i = 0;
    while (i < s->nready && !in_memory(s, s->ready[i])) i++;
    if (i == s->nready) i = 0;
    int lid = s->ready[i];
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
    if (!rc) rc = blk__pool_submit(s->pool, run_task, &s->tasks[lid]);
    if (rc) {
      tell(s, lid, rc);
      not_run(s, lid);
      continue;
    }
    s->running++;
  }
  /* Every worker busy: bring the next block in while they compute. */
  if (blk__budget_active(s->budget) && s->running >= s->limit)
    for (int i = 0; i < s->nready; i++)
      if (!in_memory(s, s->ready[i])) {
        int rc = blk__budget_prefetch(s->budget, s->ready[i], s->queued);
        if (rc < 0) tell(s, s->ready[i], rc);
        break;
      }
}

size_t blk__sched_collect(blk__sched *s, int *lids, int *ran, size_t max, long timeout_ns) {
  size_t n = 0;
  while (n < max && s->nfailed > 0) {
    lids[n] = s->failed[--s->nfailed];
    ran[n++] = 0;
  }
  if (n) timeout_ns = 0;
  void *done[64];
  size_t want = max - n < 64 ? max - n : 64;
  size_t got = want ? blk__pool_collect(s->pool, done, want, timeout_ns) : 0;
  for (size_t i = 0; i < got; i++) {
    int lid = ((blk__task *)done[i])->lid;
    s->running--;
    if (s->pinned[lid]) {
      s->pinned[lid] = 0;
      blk__budget_release(s->budget, lid);
    }
    lids[n] = lid;
    ran[n++] = 1;
  }
  return n;
}
