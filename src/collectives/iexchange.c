/*
 * iexchange.c: blk_master_iexchange, callbacks run as messages come until
 * the whole job is quiet.
 *
 * Each block is idle, ready (on the scheduler's list), running, or failed.
 * Every block starts ready. When a run returns, the driver empties the
 * block's in queues, moves in what came while it ran, and sends its out
 * queues (exchange.h: to links, or to any gid through the assigner); the
 * block is ready again if something came or the run asked for another.
 * A message that comes for an idle or ready block goes straight into its
 * in queue (an idle one becomes ready); for a running block it waits in
 * the block's pending list, since the callback owns its queues until it
 * returns. Out of core, the scheduler loads a ready block before it runs,
 * as in a foreach; a large queue for a block that is out is stored with it.
 * Blocks become ready in generations (make_ready), so that the
 * scheduler's preference for blocks in memory never starves one that is
 * out.
 *
 * The end: every message sent (handed to a block of this rank or to MPI)
 * and every message routed here is counted, and the ranks run counting
 * waves whenever they have no block ready or running (quiescence.h).
 * After the end, the closing agreement makes any failure every rank's.
 *
 * Failure: a run that fails (or a block that cannot be loaded) is recorded;
 * the block is not run again, its unsent queues and what comes for it are
 * dropped, and the others go on, so every rank still reaches the end.
 *
 * Cost: per message alpha + beta*n (as an exchange's); per run a
 * scheduler hand-off; at the end two waves (2 alpha log p each) and the
 * agreement.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/backoff.h"
#include "base/fail.h"
#include "collectives/exchange.h"
#include "runtime/callback.h"
#include "runtime/proxy_state.h"
#include "runtime/quiescence.h"
#include "runtime/schedule.h"

enum { IDLE, READY, RUNNING, FAILED };

/* A message that came while its block ran. */
typedef struct pending_msg {
  blk__msg msg;
  blk_buffer payload;
} pending_msg;

typedef struct iblock {
  int state;
  int runs;
  int again; /* the last run returned > 0 */
  int code;  /* the last run's failure (0: none), and blk's reason */
  char *why;
  pending_msg *pending;
  int npending, cap_pending;
} iblock;

typedef struct ix {
  blk_master *m;
  const blk_assigner *a;
  blk_iexchange_fn fn;
  void *user;
  iblock *blocks;
  void **args; /* per lid: its task's argument (an ix_arg) */
  struct ix_arg *arg_mem;
  blk__sched sched;
  int active;             /* blocks ready or running */
  int *next, nnext;       /* ready, waiting for the scheduler's list to empty */
  int stop;               /* the call itself failed: run nothing more */
  int64_t sent, received; /* messages, for the waves */
} ix;

typedef struct ix_arg {
  ix *x;
  int lid;
} ix_arg;

/* What the user's callback returns, split: > 0 asks for another run. */
typedef struct run_ctx {
  blk_iexchange_fn fn;
  void *user;
  int again;
} run_ctx;

static int run_user(void *block, blk_proxy *p, void *user) {
  run_ctx *r = user;
  int rc = r->fn(block, p, r->user);
  if (rc > 0) {
    r->again = 1;
    return 0;
  }
  return rc;
}

/* The task: one run of the callback on a pool thread (or the driver). */
static void run_one(void *arg) {
  ix_arg *a = arg;
  ix *x = a->x;
  blk_master *m = x->m;
  blk__block *b = blk__table_at(&m->table, a->lid);
  iblock *ib = &x->blocks[a->lid];
  blk_proxy p = {
      .cache = m->cache,
      .rank = m->op.rank,
      .gid = b->gid,
      .round = ib->runs,
      .phase = "iexchange",
  };
  blk__proxy_of_block(&p, b);
  run_ctx r = {x->fn, x->user, 0};
  ib->code = blk__run_callback(run_user, b->data, &p, &r, 0, &ib->why);
  ib->again = r.again;
}

/* Blocks become ready in generations: one made ready while the
 * scheduler still has a list waits until that list is empty. The
 * scheduler runs the blocks in memory first; without generations, blocks
 * in memory that keep becoming ready (a block that asks to run again
 * while it waits for a block that is out) would keep one that is out
 * from ever running. With them, every block of a list runs before any
 * block made ready after it, as in core. */
static void make_ready(ix *x, int lid) {
  x->blocks[lid].state = READY;
  x->active++;
  if (x->sched.nready == 0)
    blk__sched_ready(&x->sched, lid, 0, 1);
  else
    x->next[x->nnext++] = lid;
}

static void next_generation(ix *x) {
  if (x->sched.nready > 0) return;
  for (int i = 0; i < x->nnext; i++) blk__sched_ready(&x->sched, x->next[i], 0, 1);
  x->nnext = 0;
}

/* Appends a message's payload to b's in queue for it (taking the storage
 * when the queue is empty); records a failure and drops it otherwise. */
static void put_in(ix *x, int lid, const blk__msg *msg, blk_buffer *payload) {
  blk_master *m = x->m;
  blk__block *b = blk__table_at(&m->table, lid);
  int slot = blk__exchange_in_slot(b, msg);
  if (slot == BLK_EINVAL) blk__panic("iexchange %u: %s", m->op.epoch, blk_last_error());
  int rc = slot < 0 ? slot : blk__budget_restore_queue(&m->budget, &b->in[slot], &b->in_rec[slot]);
  if (!rc) {
    blk_buffer *q = &b->in[slot];
    if (q->size == 0) {
      blk__buffer_cache_give(m->cache, q);
      blk_buffer_swap(q, payload);
    } else {
      rc = blk_buffer_write(q, payload->data, payload->size);
    }
  }
  if (rc) {
    blk__op_fail(&m->op, rc, b->gid, x->blocks[lid].runs, "the message from gid %d was lost: %s",
                 msg->src_gid, blk_last_error());
    return;
  }
  if (!b->resident) blk__budget_spill_queue(&m->budget, b->gid, &b->in[slot], &b->in_rec[slot]);
}

static void route_iexchange(const blk__msg *msg, blk_buffer *payload, void *ctx) {
  ix *x = ctx;
  blk_master *m = x->m;
  x->received++;
  if (!x->blocks) return; /* this rank could not set up: its failure is recorded */
  int lid = blk__table_lid(&m->table, msg->dst_gid);
  if (lid < 0) {
    blk__op_fail(&m->op, BLK_EINVAL, msg->src_gid, -1,
                 "the message to gid %d went to rank %d, where the assigner puts it, but that "
                 "rank has no block %d",
                 msg->dst_gid, m->op.rank, msg->dst_gid);
    return;
  }
  iblock *ib = &x->blocks[lid];
  if (ib->state == FAILED || x->stop || (msg->flags & BLK__MSG_FAILED))
    return; /* dropped: its failure is recorded already */
  if (ib->state != RUNNING) {
    put_in(x, lid, msg, payload);
    if (ib->state == IDLE) make_ready(x, lid);
    return;
  }
  if (ib->npending == ib->cap_pending) {
    int ncap = ib->cap_pending ? 2 * ib->cap_pending : 4;
    pending_msg *grown = blk__realloc(ib->pending, (size_t)ncap * sizeof *grown);
    if (!grown) {
      blk__op_fail(&m->op, BLK_ENOMEM, msg->dst_gid, ib->runs,
                   "no memory to keep the message from gid %d", msg->src_gid);
      return;
    }
    ib->pending = grown;
    ib->cap_pending = ncap;
  }
  pending_msg *pm = &ib->pending[ib->npending++];
  pm->msg = *msg;
  blk_buffer_init(&pm->payload);
  blk_buffer_swap(&pm->payload, payload);
}

/* Drops what a failed block holds: its unsent queues, what came for it. */
static void drop_block(ix *x, int lid) {
  blk_master *m = x->m;
  blk__block *b = blk__table_at(&m->table, lid);
  iblock *ib = &x->blocks[lid];
  ib->state = FAILED;
  for (int q = 0; q < b->nout; q++) {
    blk__buffer_cache_give(m->cache, &b->out[q]);
    blk__budget_drop_queue(&m->budget, &b->out_rec[q]);
  }
  blk__exchange_close_out(m, b);
  blk__exchange_clear_in(m, b);
  for (int i = 0; i < ib->npending; i++) blk__buffer_cache_give(m->cache, &ib->pending[i].payload);
  ib->npending = 0;
}

/* A run has returned (ran: 0 if its block could not be loaded). */
static void finish(ix *x, int lid, int ran) {
  blk_master *m = x->m;
  blk__block *b = blk__table_at(&m->table, lid);
  iblock *ib = &x->blocks[lid];
  x->active--;
  if (ran) blk__op_count_callback(&m->op);
  if (!ran || ib->code || m->op.aborted || x->stop) {
    if (ran && ib->code) blk__note_callback_failure(&m->op, b->gid, ib->runs, ib->code, &ib->why);
    drop_block(x, lid);
    return;
  }
  int round = ib->runs++;
  ib->state = IDLE;
  blk__exchange_clear_in(m, b);
  for (int i = 0; i < ib->npending; i++) {
    put_in(x, lid, &ib->pending[i].msg, &ib->pending[i].payload);
    blk__buffer_cache_give(m->cache, &ib->pending[i].payload);
  }
  int came = ib->npending > 0;
  ib->npending = 0;
  if (came || ib->again) make_ready(x, lid);
  /* Last: a message to itself must find it ready or idle, not running. */
  for (int q = 0; q < b->nout; q++) x->sent += blk__exchange_send(m, b, q, x->a, round);
  blk__exchange_close_out(m, b);
}

/* Just before its run, on the driver: from now on what comes waits. */
static int prepare(void *arg) {
  ix_arg *a = arg;
  a->x->blocks[a->lid].state = RUNNING;
  return BLK_OK;
}

static void load_failed(void *ctx, int lid, int code) {
  ix *x = ctx;
  blk_master *m = x->m;
  blk__op_fail(&m->op, code, blk__table_at(&m->table, lid)->gid, x->blocks[lid].runs, "%s",
               blk_last_error());
}

/* Runs blocks as messages come, until the waves find the end. */
static void drive(ix *x) {
  blk_master *m = x->m;
  blk__op *o = &m->op;
  blk__quiescence q;
  blk__quiescence_init(&q, blk__comm_mpi(m->comm));
  blk__backoff wait = {0};
  int lids[64], ran[64];
  for (;;) {
    next_generation(x);
    blk__sched_pump(&x->sched);
    size_t got = blk__sched_collect(&x->sched, lids, ran, 64, 0);
    for (size_t i = 0; i < got; i++) finish(x, lids[i], ran[i]);
    int progressed = 0;
    blk__op_progress(o, &progressed);
    if (blk__quiescence_poll(&q, x->active == 0, x->sent, x->received)) return;
    if (!got && !progressed && blk__sched_running(&x->sched)) {
      got = blk__sched_collect(&x->sched, lids, ran, 64, 50000);
      for (size_t i = 0; i < got; i++) finish(x, lids[i], ran[i]);
    }
    if (progressed || got)
      blk__backoff_reset(&wait);
    else if (!blk__sched_running(&x->sched) && blk__comm_transfers(m->comm))
      blk__backoff_poll(&wait); /* a payload's bytes move only while MPI is polled */
    else if (!blk__sched_running(&x->sched))
      blk__backoff_idle(&wait);
  }
}

/* The waves of a rank that could not set up: it has no work. */
static void drive_empty(ix *x) {
  blk__op *o = &x->m->op;
  blk__quiescence q;
  blk__quiescence_init(&q, blk__comm_mpi(x->m->comm));
  blk__backoff wait = {0};
  for (;;) {
    int progressed = 0;
    blk__op_progress(o, &progressed);
    if (blk__quiescence_poll(&q, 1, x->sent, x->received)) return;
    if (progressed)
      blk__backoff_reset(&wait);
    else
      blk__backoff_idle(&wait);
  }
}

static int agreed(blk__op *o, void *ctx) {
  (void)ctx;
  if (!o->agreements) blk__op_agree_start(o, NULL);
  return blk__op_agree_done(o);
}

static void free_ix(ix *x) {
  int n = blk__table_count(&x->m->table);
  if (x->blocks)
    for (int i = 0; i < n; i++) {
      iblock *ib = &x->blocks[i];
      for (int j = 0; j < ib->npending; j++) blk_buffer_free(&ib->pending[j].payload);
      free(ib->pending);
      free(ib->why);
    }
  free(x->blocks);
  free(x->next);
  free(x->args);
  free(x->arg_mem);
  x->blocks = NULL;
  x->next = NULL;
  x->args = NULL;
  x->arg_mem = NULL;
}

static int iexchange(ix *x) {
  blk_master *m = x->m;
  blk__op *o = &m->op;
  int n = blk__table_count(&m->table);
  size_t nn = (size_t)(n ? n : 1);
  x->blocks = blk__calloc(nn, sizeof *x->blocks);
  x->args = blk__calloc(nn, sizeof *x->args);
  x->arg_mem = blk__calloc(nn, sizeof *x->arg_mem);
  x->next = blk__calloc(nn, sizeof *x->next);
  int ready = x->blocks && x->args && x->arg_mem && x->next;
  for (int i = 0; ready && i < n; i++) {
    x->arg_mem[i] = (ix_arg){x, i};
    x->args[i] = &x->arg_mem[i];
    blk__exchange_clear_in(m, blk__table_at(&m->table, i));
  }
  if (ready && blk__sched_init(&x->sched, &m->budget, m->pool, o, (blk__task_kind)x->fn, run_one,
                               prepare, x->args))
    ready = 0;
  if (!ready) free_ix(x); /* the router counts what comes, and drops it */
  /* Every rank takes part in the waves, also one that cannot run its
   * blocks. */
  blk__op_begin(o, "iexchange", route_iexchange, x);
  if (!ready)
    blk__op_fail(o, BLK_ENOMEM, -1, -1, "no memory to run %d blocks", n);
  else if (!x->fn || !x->a)
    blk__op_fail(o, BLK_EINVAL, -1, -1, "the %s is NULL", x->fn ? "assigner" : "callback");
  else if (blk_assigner_nranks(x->a) != o->size)
    blk__op_fail(o, BLK_EINVAL, -1, -1, "the assigner is for %d ranks, the communicator has %d",
                 blk_assigner_nranks(x->a), o->size);
  if (ready) {
    x->sched.on_error = load_failed;
    x->sched.on_error_ctx = x;
    x->stop = o->failure.code || o->aborted;
    for (int i = 0; i < n; i++) {
      if (x->stop && x->blocks[i].state == IDLE)
        drop_block(x, i);
      else if (x->blocks[i].state == IDLE)
        make_ready(x, i);
    }
    drive(x);
    blk__sched_drain(&x->sched);
    blk__sched_free(&x->sched);
  } else {
    drive_empty(x);
  }
  blk__op_wait(o, agreed, NULL);
  return blk__op_end(o, NULL);
}

int blk_master_iexchange(blk_master *m, const blk_assigner *a, blk_iexchange_fn fn, void *user) {
  if (!m) return blk__fail(BLK_EINVAL, "iexchange: the master is NULL");
  BLK__ENTER(m);
  ix x = {.m = m, .a = a, .fn = fn, .user = user};
  int rc = iexchange(&x);
  free_ix(&x);
  BLK__LEAVE();
  return rc;
}
