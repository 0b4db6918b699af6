/*
 * foreach.c: blk_master_foreach, one callback on every local block.
 *
 * One task per block, through the scheduler (runtime/schedule.h), so that
 * out-of-core blocks are loaded, and others evicted, around their turn. A
 * callback that fails does not stop the others: every block runs, the
 * failures are recorded, and the closing agreement makes the earliest one
 * every rank's. Cost: one pool hand-off per block (none with one thread)
 * and one agreement (2 alpha log p). blk_master_foreach_some asks its
 * select for every block first, from what the block table knows without
 * the block (its in queues, in memory or in their records), and schedules
 * only those it takes.
 */
#include <stddef.h>

#include "base/fail.h"
#include "master/master_state.h"
#include "runtime/callback.h"
#include "runtime/proxy_state.h"
#include "runtime/schedule.h"

typedef struct foreach_ctx {
  blk_master *m;
  blk_foreach_fn fn;
  void *user;
  int *codes;  /* per block: the callback's return */
  char **whys; /* per block: blk's reason, when the code was blk's */
} foreach_ctx;

typedef struct foreach_arg {
  foreach_ctx *f;
  int lid;
} foreach_arg;

static void foreach_one(void *arg) {
  foreach_arg *a = arg;
  blk_master *m = a->f->m;
  blk__block *b = blk__table_at(&m->table, a->lid);
  blk_proxy p = {
      .cache = m->cache,
      .rank = m->op.rank,
      .gid = b->gid,
      .round = m->exchanges,
      .phase = "foreach",
      .posts = &b->posts,
      .results = &m->results,
  };
  blk__proxy_of_block(&p, b);
  a->f->codes[a->lid] =
      blk__run_callback(a->f->fn, b->data, &p, a->f->user, 0, &a->f->whys[a->lid]);
}

/* The scheduler could not load a block (or evict one): its error, now. */
static void foreach_load_failed(void *ctx, int lid, int code) {
  blk_master *m = ctx;
  blk__op_fail(&m->op, code, blk__table_at(&m->table, lid)->gid, m->exchanges, "%s",
               blk_last_error());
}

int blk_select_incoming(int gid, size_t queued_bytes, void *user) {
  (void)gid;
  (void)user;
  return queued_bytes > 0;
}

static void run_foreach(blk_master *m, blk_foreach_fn fn, blk_select_fn select, void *user) {
  int nblocks = blk__table_count(&m->table);
  /* Per block: the code, blk's reason, the task's argument and a pointer to
   * it, in storage kept for the next foreach. */
  static const char owner = 0;
  size_t n = (size_t)nblocks;
  size_t bytes = n * (sizeof(foreach_arg) + sizeof(void *) + sizeof(char *) + sizeof(int));
  foreach_arg *args = blk__op_scratch(&m->op, &owner, bytes);
  if (!args) {
    blk__op_fail(&m->op, BLK_ENOMEM, -1, m->exchanges, "no memory to run %d blocks", nblocks);
    return;
  }
  void **argp = (void **)(args + n);
  foreach_ctx f = {m, fn, user, NULL, (char **)(argp + n)};
  f.codes = (int *)(f.whys + n);
  blk__sched s;
  int sched = 0, lids[64], ran[64];
  for (int i = 0; i < nblocks; i++) {
    args[i] = (foreach_arg){&f, i};
    argp[i] = &args[i];
    f.codes[i] = 0;
    f.whys[i] = NULL;
  }
  if (blk__sched_init(&s, &m->budget, m->pool, &m->op, (blk__task_kind)fn, foreach_one, NULL,
                      argp)) {
    blk__op_fail(&m->op, BLK_ENOMEM, -1, m->exchanges, "%s", blk_last_error());
    goto exit;
  }
  sched = 1;
  s.on_error = foreach_load_failed;
  s.on_error_ctx = m;
  int left = 0;
  for (int i = 0; i < nblocks; i++) {
    const blk__block *b = blk__table_at(&m->table, i);
    if (select && !select(b->gid, blk__block_queued(b), user)) continue;
    blk__sched_ready(&s, i, 0, 1);
    left++;
  }
  while (left > 0) {
    blk__sched_pump(&s);
    size_t got = blk__sched_collect(&s, lids, ran, 64, -1);
    for (size_t i = 0; i < got; i++)
      if (ran[i]) blk__op_count_callback(&m->op);
    left -= (int)got;
  }
  blk__sched_drain(&s); /* its writes' failures are this foreach's */
  for (int i = 0; i < nblocks; i++)
    if (f.codes[i])
      blk__note_callback_failure(&m->op, blk__table_at(&m->table, i)->gid, m->exchanges, f.codes[i],
                                 &f.whys[i]);
exit:
  if (sched) blk__sched_free(&s);
}

int blk_master_foreach_some(blk_master *m, blk_foreach_fn fn, blk_select_fn select, void *user) {
  if (!m) return blk__fail(BLK_EINVAL, "master: foreach: the master is NULL");
  BLK__ENTER(m);
  blk__op_begin(&m->op, "foreach", NULL, NULL);
  if (!fn)
    blk__op_fail(&m->op, BLK_EINVAL, -1, -1, "the callback is NULL");
  else if (blk__table_count(&m->table) > 0)
    run_foreach(m, fn, select, user);
  int rc = blk__op_close(&m->op);
  BLK__LEAVE();
  return rc;
}

int blk_master_foreach(blk_master *m, blk_foreach_fn fn, void *user) {
  return blk_master_foreach_some(m, fn, NULL, user);
}
