/*
 * reduce.c: the round-by-round driver of reduction patterns.
 *
 * Each local block walks its own rounds: it waits in round r until the one
 * message from each in-partner of round r has arrived, runs the callback on
 * the pool, sends its out queues (a same-rank partner gets the buffer handed
 * over, a remote one gets it through comm.c) and moves to its next active
 * round. There is no barrier: blocks and ranks may be rounds apart, so a
 * message for a later round than its block is in waits in that block's
 * pending list until the block gets there.
 *
 * Only the driver thread (the master's) touches this state; a pool thread
 * running a block's callback touches only that block's queues, and the
 * driver leaves a running block's queues alone until the pool hands it back.
 * Deliveries never start callbacks directly (they only mark blocks ready),
 * so comm's progress is never re-entered.
 *
 * Failure: a block whose callback fails, or that cannot be loaded, or
 * whose message could not be kept, is failed from that round on: it runs no
 * more callbacks, sends an empty message flagged BLK__MSG_FAILED to each
 * out-partner of each round it has left, without waiting for its inputs,
 * and drops what still arrives for it. A block that receives a failed
 * message fails the same way, so a failure reaches exactly the blocks whose
 * result depends on it, and no callback ever reads a message that is not
 * whole; every other block finishes as if nothing had happened. An ABORT
 * (a rank that could not start) fails every block. Failed blocks are not
 * handled recursively: they wait in a list the driver's loop works off.
 * So does a block whose round leaves its callback nothing to do (every
 * input in place or empty, nothing to send, blk__driver.done_when_placed):
 * it moves on as if its callback had run.
 *
 * Cost per block per round: the callback, plus alpha + beta*n per remote
 * out-partner and nothing but a pointer swap per local one. A rank's part
 * ends once its own blocks have run their last round (every message a
 * block needs was sent to it, so nothing is left to wait for) and the
 * closing agreement (alpha log p) is done.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/backoff.h"
#include "blk/reduce.h"
#include "collectives/reduce_run.h"
#include "master/master_state.h"
#include "runtime/callback.h"
#include "runtime/proxy_state.h"
#include "runtime/schedule.h"

typedef struct pending_msg {
  int round;
  int src;
  int flags; /* BLK__MSG_FAILED */
  blk_buffer payload;
  blk__record rec; /* out-of-core: the payload, when spilled */
} pending_msg;

struct rstate;

typedef struct rblock {
  struct rstate *s;
  int lid, gid;
  int round;          /* the round it is waiting for or running; R+1 when finished */
  int busy;           /* handed to the scheduler, until finish() */
  int with_block;     /* this round's callback gets the block (it is pinned) */
  int failed;         /* from this round on: runs nothing, sends failed messages */
  int skipping;       /* in the list of blocks to move on without a callback */
  int quiet;          /* ... and not failed: nothing left to do (done_when_placed) */
  int refs_in_flight; /* references it sent to other ranks, not complete (hold_for_refs) */
  int held;           /* in the list of blocks waiting for them (see mark_ready) */
  int nin, nout, cap_in, cap_out;
  int *in_gids, *out_gids;
  blk_buffer *in, *out;
  blk__record *in_rec; /* out-of-core: in queues spilled while the block is out */
  unsigned char *filled;
  int arrived;
  int settled; /* of them, how many came empty or landed in place */
  /* Out of core (needed_next): the block of this rank that it waits for
   * and that runs last in the plan, found in round wait_round (-1: not
   * looked for since the block moved on); -1 if none. */
  int wait_lid, wait_round;
  pending_msg *pending;
  size_t npending, cap_pending;
  size_t kept; /* bytes of its messages kept in memory while it was out */
  int code;    /* the callback's return, when it failed */
  char *why;   /* blk's reason, when the code was one blk gave the callback */
  blk_proxy proxy;
} rblock;

typedef struct rstate {
  blk_master *m;
  blk__op *o;
  const blk_assigner *a;
  const blk_partners *p;
  blk_reduce_fn fn;
  void *user;
  const blk__driver *d;
  int rounds; /* R: callbacks run in rounds 0..R */
  int me;
  rblock *rb;
  int nblocks, finished;
  int *skip; /* lids of failed blocks to move on (see the top) */
  int nskip;
  int *held; /* lids of blocks whose inputs are in but whose references are in flight */
  int nheld;
  int abort_seen;
  int started; /* every block has taken its first round (the plan is made) */
  blk__sched sched;
  struct reduce_keep *keep; /* the plan (make_plan) */
} rstate;

/* Reallocates an array from old to ncap elements, zeroing the new ones. */
static int resize(void **array, int old, int ncap, size_t elem) {
  void *grown = blk__realloc(*array, (size_t)ncap * elem);
  if (!grown) return BLK_ENOMEM;
  memset((char *)grown + (size_t)old * elem, 0, (size_t)(ncap - old) * elem);
  *array = grown;
  return BLK_OK;
}

/* Makes room for nin in queues and nout out queues. The arrays are kept
 * between operations, so this allocates only when a pattern is wider than
 * any before; without the memory the block cannot take part in the round,
 * and since its partners count on its messages the job stops. */
static void size_queues(rblock *b, int nin, int nout) {
  int rc = BLK_OK;
  if (nin > b->cap_in) {
    int ncap = nin > 2 * b->cap_in ? nin : 2 * b->cap_in;
    rc = resize((void **)&b->in_gids, b->cap_in, ncap, sizeof(int));
    if (!rc) rc = resize((void **)&b->in, b->cap_in, ncap, sizeof(blk_buffer));
    if (!rc) rc = resize((void **)&b->filled, b->cap_in, ncap, 1);
    if (!rc) rc = resize((void **)&b->in_rec, b->cap_in, ncap, sizeof(blk__record));
    if (!rc) b->cap_in = ncap;
  }
  if (!rc && nout > b->cap_out) {
    int ncap = nout > 2 * b->cap_out ? nout : 2 * b->cap_out;
    rc = resize((void **)&b->out_gids, b->cap_out, ncap, sizeof(int));
    if (!rc) rc = resize((void **)&b->out, b->cap_out, ncap, sizeof(blk_buffer));
    if (!rc) b->cap_out = ncap;
  }
  if (rc) blk__panic("reduce: no memory for %d in and %d out queues of gid %d", nin, nout, b->gid);
}

/* Whether a reference sent in `round` holds the block (blk__driver). */
static int holds_refs(const blk__driver *d, int round) {
  return d->hold_for_refs && (!d->hold_split || round < d->hold_split);
}

/* Hands the block to the scheduler once its inputs are in; a failed block
 * goes to the list of blocks to move on instead. */
static void mark_ready(rstate *s, rblock *b) {
  if (b->busy || b->round > s->rounds) return;
  if (b->failed) {
    if (!b->skipping) {
      b->skipping = 1;
      s->skip[s->nskip++] = b->lid;
    }
    return;
  }
  if (b->arrived < b->nin) return;
  if (b->refs_in_flight && b->round > s->d->hold_split) { /* (counted: holds_refs) */
    if (!b->held) {
      b->held = 1;
      s->held[s->nheld++] = b->lid;
    }
    return;
  }
  if (b->nout == 0 && b->settled == b->nin && s->d->done_when_placed) {
    if (!b->skipping) { /* (moved on from the list, as a failed block is) */
      b->skipping = b->quiet = 1;
      b->code = 0;
      s->skip[s->nskip++] = b->lid;
    }
    return;
  }
  b->busy = 1;
  b->with_block = !s->d->needs_block || s->d->needs_block(b->round, s->user);
  blk__sched_ready(&s->sched, b->lid, b->round, b->with_block);
  blk__op_woke(s->o);
}

/* A message for a block that is swapped out goes to storage too, if large,
 * so an out-of-core reduction does not run out of memory through its
 * messages; but a few stay in memory (blk__budget_keep_queue): the block
 * is mostly loaded next, and writing and reading the message back would
 * cost as much as the block. A large one may also stay in a block's place
 * (blk__budget_lend: in a broadcast's last phase, the place of a block
 * that is done). A failed write just keeps it in memory; a failed
 * eviction for it fails the operation. (fill keeps the last input of a
 * round that runs without its block in memory: the task is ready then and
 * takes the message in the next pump.) */
static void spill_if_out(rstate *s, rblock *b, blk_buffer *q, blk__record *rec) {
  if (blk__buffer_is_ref(q)) return; /* never under a budget: a reference cannot be spilled */
  if (b->busy || blk__budget_resident(&s->m->budget, b->lid)) return;
  if (blk__budget_keep_queue(&s->m->budget, q->size)) {
    b->kept += q->size;
    return;
  }
  /* (Not for what begin hands over from the stash: the blocks have no
   * round yet, so the budget could not ask which are done.) */
  int lent = s->started ? blk__budget_lend(&s->m->budget, b->lid, q->size) : 0;
  if (lent > 0) return;
  if (lent < 0) blk__op_fail(s->o, lent, b->gid, b->round, "%s", blk_last_error());
  blk__budget_spill_queue(&s->m->budget, b->gid, q, rec);
}

/* The block's messages kept while it was out are its own again, and the
 * places they held in the budget. */
static void unkeep(rstate *s, rblock *b) {
  blk__budget_unkeep_queue(&s->m->budget, b->kept);
  b->kept = 0;
  blk__budget_unlend(&s->m->budget, b->lid);
}

static int slot_of(const rblock *b, int src) {
  for (int i = 0; i < b->nin; i++)
    if (b->in_gids[i] == src && !b->filled[i]) return i;
  return -1;
}

/* Puts a message for the block's current round into its slot; a failed
 * message fails the block. */
static void fill(rstate *s, rblock *b, int src, blk_buffer *payload, int flags) {
  int i = slot_of(b, src);
  if (i < 0)
    blk__panic(
        "%s %u: gid %d received a message from gid %d in round %d, which is not "
        "(or no longer) one of its in-partners",
        s->d->name, s->o->epoch, b->gid, src, b->round);
  b->filled[i] = 1;
  b->arrived++;
  if (!(flags & BLK__MSG_FAILED) && ((flags & BLK__COMM_PLACED) || payload->size == 0))
    b->settled++;
  if (flags & BLK__MSG_FAILED) {
    b->failed = 1;
  } else {
    blk_buffer_swap(&b->in[i], payload);
    /* The last input of a round that runs without the block (all_to_all's
     * forwarding): the task is ready now and needs no load, so the message
     * would be written out only to be read back at once. */
    if (b->arrived < b->nin || !s->d->needs_block || s->d->needs_block(b->round, s->user))
      spill_if_out(s, b, &b->in[i], &b->in_rec[i]);
  }
  mark_ready(s, b);
}

/* Gives a kept message's storage back. */
static void drop_pending(rstate *s, pending_msg *pm) {
  blk__buffer_cache_give(s->m->cache, &pm->payload);
  blk__budget_drop_queue(&s->m->budget, &pm->rec);
}

static void give_large(rstate *s, blk_buffer *q) {
  if (q->capacity >= BLK__BUFFER_CACHE_MIN) blk__buffer_cache_give(s->m->cache, q);
}

/* Moves the block to its next active round at or after `round`. */
static void advance(rstate *s, rblock *b, int round) {
  while (round <= s->rounds && !blk_partners_active(s->p, round, b->gid)) round++;
  b->round = round;
  b->arrived = b->settled = 0;
  b->wait_round = -1;
  if (round > s->rounds) {
    b->nin = b->nout = 0;
    s->finished++;
    /* Done: the large storage its queues hold goes where other blocks'
     * messages can take it (a merge's senders and roots kept theirs until
     * the end of the operation, and every message of round 0 faulted in new
     * pages); small storage, which the cache would free, stays till then. */
    for (int i = 0; i < b->cap_in; i++) give_large(s, &b->in[i]);
    for (int i = 0; i < b->cap_out; i++) give_large(s, &b->out[i]);
    if (b->npending && !b->failed)
      blk__panic(
          "%s %u: gid %d finished with %zu messages for rounds it never ran (round %d "
          "from gid %d first)",
          s->d->name, s->o->epoch, b->gid, b->npending, b->pending[0].round, b->pending[0].src);
    for (size_t i = 0; i < b->npending; i++) drop_pending(s, &b->pending[i]);
    b->npending = 0;
    return;
  }
  /* Into the arrays as they are; asked again only when they were too small
   * (the partners' arithmetic is a few divisions a call, on the path of a
   * kilobyte's operation). */
  int nin = blk_partners_in(s->p, round, b->gid, b->in_gids, b->cap_in);
  int nout = blk_partners_out(s->p, round, b->gid, b->out_gids, b->cap_out);
  if (nin > b->cap_in || nout > b->cap_out) {
    size_queues(b, nin, nout);
    nin = blk_partners_in(s->p, round, b->gid, b->in_gids, nin);
    nout = blk_partners_out(s->p, round, b->gid, b->out_gids, nout);
  }
  b->nin = nin;
  b->nout = nout;
  for (int i = 0; i < b->nin; i++) {
    blk__buffer_release(&b->in[i]);
    blk__budget_drop_queue(&s->m->budget, &b->in_rec[i]);
    b->filled[i] = 0;
  }
  for (int i = 0; i < b->nout; i++) blk__buffer_release(&b->out[i]);
  /* Messages that came early for this round. */
  size_t kept = 0;
  for (size_t i = 0; i < b->npending; i++) {
    pending_msg *pm = &b->pending[i];
    if (pm->round != round) {
      b->pending[kept++] = *pm;
    } else if (b->failed) {
      drop_pending(s, pm);
    } else {
      int slot = slot_of(b, pm->src);
      fill(s, b, pm->src, &pm->payload, pm->flags);
      if (pm->rec.stored && !b->failed) { /* still in storage: the slot takes the record */
        blk__budget_drop_queue(&s->m->budget, &b->in_rec[slot]);
        b->in_rec[slot] = pm->rec;
        memset(&pm->rec, 0, sizeof pm->rec);
      }
      drop_pending(s, pm);
    }
  }
  b->npending = kept;
  mark_ready(s, b);
}

static void receive(rstate *s, int dst_gid, int src_gid, int round, blk_buffer *payload,
                    int flags) {
  int lid = blk__table_lid(&s->m->table, dst_gid);
  if (lid < 0)
    blk__panic("%s %u: rank %d got a message from gid %d for gid %d, which it does not own",
               s->d->name, s->o->epoch, s->me, src_gid, dst_gid);
  rblock *b = &s->rb[lid];
  if (b->failed) return; /* it moves on without its inputs */
  if (round == b->round && !b->busy) {
    fill(s, b, src_gid, payload, flags);
    return;
  }
  if (round <= b->round)
    blk__panic("%s %u: gid %d got a message from gid %d for round %d while in round %d", s->d->name,
               s->o->epoch, dst_gid, src_gid, round, b->round);
  if (b->npending == b->cap_pending) {
    size_t ncap = b->cap_pending ? 2 * b->cap_pending : 4;
    pending_msg *grown = blk__realloc(b->pending, ncap * sizeof *grown);
    if (!grown) { /* it cannot keep its input: it fails (and drops what it has) */
      blk__op_fail(s->o, BLK_ENOMEM, dst_gid, round,
                   "no memory to keep the message from gid %d for round %d", src_gid, round);
      b->failed = 1;
      mark_ready(s, b);
      return;
    }
    b->pending = grown;
    b->cap_pending = ncap;
  }
  pending_msg *pm = &b->pending[b->npending++];
  pm->round = round;
  pm->src = src_gid;
  pm->flags = flags;
  memset(&pm->rec, 0, sizeof pm->rec);
  blk_buffer_init(&pm->payload);
  blk_buffer_swap(&pm->payload, payload);
  spill_if_out(s, b, &pm->payload, &pm->rec);
}

static void route_reduce(const blk__msg *msg, blk_buffer *payload, void *ctx) {
  receive(ctx, msg->dst_gid, msg->src_gid, msg->key, payload, msg->flags);
}

/* Where a payload from another rank is received: in the block's own memory
 * when the driver says so (blk__driver.place), for the round the block
 * waits in and a slot still empty: the block cannot run that round before
 * the message is whole. Not while the block is handed to the scheduler
 * (place reads the block), so a message that comes while the block still
 * runs (or waits to run) an earlier round lands in blk's storage, unless
 * the driver places ahead (d->place_ahead: without the block). In-core
 * only (the block must stay in memory). */
static int place_reduce(const blk__msg *msg, blk_buffer *into, void *ctx) {
  rstate *s = ctx;
  if (blk__budget_may_swap(&s->m->budget)) return 0;
  int lid = blk__table_lid(&s->m->table, msg->dst_gid);
  if (lid < 0) return 0;
  rblock *b = &s->rb[lid];
  int now = msg->key == b->round && !b->busy;
  if (b->failed || msg->key < b->round || (!now && !s->d->place_ahead) ||
      (b->refs_in_flight && msg->key > s->d->hold_split) || (now && slot_of(b, msg->src_gid) < 0))
    return 0;
  void *block = now ? blk__table_at(&s->m->table, lid)->data : NULL;
  void *at = s->d->place(block, b->gid, msg->src_gid, msg->key, (size_t)msg->size, s->user);
  if (!at) return 0;
  blk__buffer_ref(into, at, (size_t)msg->size);
  return 1;
}

static void run_block(void *arg) {
  rblock *b = arg;
  rstate *s = b->s;
  void *block = b->with_block ? blk__table_at(&s->m->table, b->lid)->data : NULL;
  b->code = blk__run_callback(s->fn, block, &b->proxy, s->user, s->d->own_codes, &b->why);
}

/* On the driver, just before the task runs: spilled inputs come back. */
static int prepare(void *arg) {
  rblock *b = arg;
  rstate *s = b->s;
  unkeep(s, b);
  for (int i = 0; i < b->nin; i++) {
    int rc = blk__budget_restore_queue(&s->m->budget, &b->in[i], &b->in_rec[i]);
    if (rc) return rc;
  }
  b->proxy = (blk_proxy){
      .cache = s->m->cache,
      .rank = s->me,
      .gid = b->gid,
      .round = b->round,
      .phase = s->d->name,
      .nin = b->nin,
      .nout = b->nout,
      .in_gids = b->in_gids,
      .out_gids = b->out_gids,
      .in = b->in,
      .out = b->out,
      .posts = NULL,
      .results = NULL,
      .partners = s->p,
  };
  return BLK_OK;
}

/* The scheduler could not load, prepare or start a block: why, now. */
static void load_failed(void *ctx, int lid, int code) {
  rstate *s = ctx;
  blk__op_fail(s->o, code, s->rb[lid].gid, s->rb[lid].round, "%s", blk_last_error());
}

/* After the callback (ran), or instead of it (a failed block moving on, or
 * one that could not be loaded): send the out queues, or failed messages,
 * and move on. */
static void finish(rstate *s, rblock *b, int ran) {
  b->busy = 0;
  if (ran) {
    if (!b->quiet) blk__op_count_callback(s->o);
    b->quiet = 0;
    if (b->code) {
      blk__note_callback_failure(s->o, b->gid, b->round, b->code, &b->why);
      b->failed = 1;
    }
  } else {
    b->failed = 1;
  }
  if (s->o->aborted) b->failed = 1;
  for (int i = 0; i < b->nout; i++) {
    int dst = b->out_gids[i];
    int rank = blk_assigner_rank(s->a, dst);
    int flags = 0;
    if (!b->failed && b->out[i].error) /* an enqueue failed and the callback went on */
      blk__op_fail(s->o, b->out[i].error, b->gid, b->round,
                   "the message to gid %d failed to fill (%s)", dst, blk_strerror(b->out[i].error));
    if (b->failed || b->out[i].error) {
      blk__buffer_cache_give(s->m->cache, &b->out[i]);
      flags = BLK__MSG_FAILED;
    }
    if (rank == s->me) {
      blk__op_count_handed(s->o, b->out[i].size);
      receive(s, dst, b->gid, b->round + 1, &b->out[i], flags);
      blk__buffer_release(&b->out[i]);
    } else {
      blk__msg msg = {s->o->epoch, b->gid, dst, b->round + 1, 0, flags, (int64_t)b->out[i].size};
      blk__op_send(s->o, rank, &msg, &b->out[i], b->round,
                   holds_refs(s->d, b->round) ? &b->refs_in_flight : NULL);
    }
  }
  advance(s, b, b->round + 1);
}

/* Hands on the held blocks whose references have gone (after progress). */
static void release_held(rstate *s) {
  int kept = 0;
  for (int i = 0; i < s->nheld; i++) {
    rblock *b = &s->rb[s->held[i]];
    if (b->refs_in_flight) {
      s->held[kept++] = b->lid;
    } else {
      b->held = 0;
      mark_ready(s, b);
    }
  }
  s->nheld = kept;
}

/* Moves on the blocks waiting in the list: the failed ones (see the top),
 * and those whose round left their callback nothing to do. */
static void move_on_skipped(rstate *s) {
  while (s->nskip > 0) {
    rblock *b = &s->rb[s->skip[--s->nskip]];
    b->skipping = 0;
    finish(s, b, b->quiet); /* (quiet: as if its callback ran and did nothing) */
  }
}

/* An ABORT arrived: every block fails (a busy one when it finishes). */
static void abort_all(rstate *s) {
  s->abort_seen = 1;
  for (int i = 0; i < s->nblocks; i++) {
    s->rb[i].failed = 1;
    mark_ready(s, &s->rb[i]);
  }
}

/* The arguments alone: every rank passes the same ones (as to an MPI
 * collective), so every rank finds the same answer and returns it; no rank
 * is left waiting, and no message is needed to agree. */
static int check_arguments(const blk_master *m, const blk_assigner *a, const blk_partners *p) {
  int nb = blk_partners_nblocks(p);
  if (blk_assigner_nblocks(a) != nb)
    return blk__fail(BLK_EINVAL, "reduce: the partners are for %d blocks but the assigner has %d",
                     nb, blk_assigner_nblocks(a));
  if (blk_assigner_nranks(a) != blk__comm_size(m->comm))
    return blk__fail(BLK_EINVAL, "reduce: the assigner has %d ranks but the communicator has %d",
                     blk_assigner_nranks(a), blk__comm_size(m->comm));
  return BLK_OK;
}

/* This rank's blocks against the assigner: the same count, and each one
 * placed here. Only this rank can see a wrong one; it then aborts the
 * operation, so every rank returns BLK_EINVAL naming it. */
static int check_blocks(const blk_master *m, const blk_assigner *a, const blk_partners *p) {
  int nb = blk_partners_nblocks(p), me = blk__comm_rank(m->comm);
  int count = blk__table_count(&m->table);
  for (int i = 0; i < count; i++) {
    int gid = blk__table_at(&m->table, i)->gid;
    if (gid >= nb)
      return blk__fail(BLK_EINVAL,
                       "rank %d has a block with gid %d, but the partners are for %d "
                       "blocks",
                       me, gid, nb);
    if (blk_assigner_rank(a, gid) != me)
      return blk__fail(BLK_EINVAL,
                       "rank %d has a block with gid %d, which the assigner puts on rank %d", me,
                       gid, blk_assigner_rank(a, gid));
  }
  int want = blk_assigner_local_count(a, me);
  if (count == want) return BLK_OK;
  /* Every block here belongs here, so some of the assigner's are missing:
   * name the first (the list is only built on this path). */
  int missing = -1, *gids = blk__malloc((size_t)want * sizeof *gids);
  if (gids) blk_assigner_local_gids(a, me, gids, want);
  for (int i = 0; gids && i < want && missing < 0; i++)
    if (blk__table_lid(&m->table, gids[i]) < 0) missing = gids[i];
  free(gids);
  return blk__fail(BLK_EINVAL,
                   "rank %d holds %d blocks, but the assigner puts %d there (gid %d was never "
                   "added): add every block before a collective",
                   me, count, want, missing);
}

/* The driver's per-block records and the scheduler's arguments outlive the
 * operation: kept by the master (their queue arrays too), so a reduction of
 * small messages does not spend its time in malloc and free. */
typedef struct reduce_keep {
  rblock *rb;
  void **args;
  int *skip, *held;
  int cap;
  /* make_plan's answer for the last partners, block count, room and
   * rounds (making it anew costs a tiny reduction a microsecond): the
   * start order, and per phase (nphases) each lid's place in the phase's
   * order; phase[c]: the phase of callback round c. Other partners at a
   * freed one's address with as many blocks and rounds get a stale plan:
   * any order is correct, so it costs at most speed, and the arrays fit. */
  int *order, *place, *phase;
  int nphases;
  const blk_partners *order_of;
  int order_n, order_room, order_rounds;
} reduce_keep;

static void keep_free(void *mem);
static const char keep_owner = 0;

static reduce_keep *keep_of(blk_master *m) {
  return blk__op_kept(&m->op, &keep_owner, keep_free)->mem;
}

/* Records for the master's blocks, reset; NULL without memory. */
static rblock *take_records(blk_master *m, void ***args, int **skip, int **held) {
  blk__kept *kept = blk__op_kept(&m->op, &keep_owner, keep_free);
  reduce_keep *k = kept->mem;
  int nblocks = blk__table_count(&m->table);
  if (!k && !(k = kept->mem = blk__calloc(1, sizeof *k))) return NULL;
  if (k->cap < nblocks || !k->rb) { /* (a rank with no blocks gets one record) */
    int ncap = nblocks > 2 * k->cap ? nblocks : 2 * k->cap;
    if (ncap < 1) ncap = 1;
    if (resize((void **)&k->rb, k->cap, ncap, sizeof *k->rb)) return NULL;
    void **grown = blk__realloc(k->args, (size_t)ncap * sizeof *grown);
    if (!grown) return NULL; /* rb grew: its cap still says the old size */
    k->args = grown;
    int *sgrown = blk__realloc(k->skip, (size_t)ncap * sizeof *sgrown);
    if (!sgrown) return NULL;
    k->skip = sgrown;
    int *hgrown = blk__realloc(k->held, (size_t)ncap * sizeof *hgrown);
    if (!hgrown) return NULL;
    k->held = hgrown;
    k->cap = ncap;
  }
  for (int i = 0; i < nblocks; i++) {
    rblock *b = &k->rb[i];
    b->busy = b->with_block = b->nin = b->nout = b->arrived = b->code = 0;
    b->failed = b->skipping = b->refs_in_flight = b->held = 0;
    b->why = NULL;
    b->npending = 0;
    b->kept = 0;
    b->round = -1;
    b->lid = i;
    b->gid = blk__table_at(&m->table, i)->gid;
    k->args[i] = b;
  }
  *args = k->args;
  *skip = k->skip;
  *held = k->held;
  return k->rb;
}

/* Empties the records at the end of an operation: message storage to the
 * buffer cache, spilled queues dropped; the arrays stay for the next. */
static void end_state(rstate *s) {
  for (int i = 0; s->rb && i < s->nblocks; i++) {
    rblock *b = &s->rb[i];
    for (int j = 0; j < b->cap_in; j++) {
      blk__buffer_cache_give(s->m->cache, &b->in[j]);
      blk__budget_drop_queue(&s->m->budget, &b->in_rec[j]);
    }
    for (int j = 0; j < b->cap_out; j++) blk__buffer_cache_give(s->m->cache, &b->out[j]);
    for (size_t j = 0; j < b->npending; j++) drop_pending(s, &b->pending[j]);
    b->npending = 0;
    unkeep(s, b);
    if (b->why) free(b->why);
    b->why = NULL;
  }
  blk__sched_free(&s->sched);
}

static void keep_free(void *mem) {
  reduce_keep *k = mem;
  for (int i = 0; i < k->cap; i++) {
    rblock *b = &k->rb[i];
    free(b->in_gids);
    free(b->out_gids);
    free(b->in);
    free(b->out);
    free(b->filled);
    free(b->in_rec);
    free(b->pending);
  }
  free(k->rb);
  free(k->args);
  free(k->skip);
  free(k->held);
  free(k->order);
  free(k->place);
  free(k->phase);
  free(k);
}

int blk__reduce_abort(blk_master *m, int code, const char *name) {
  BLK__ENTER(m);
  blk__op *o = &m->op;
  /* Noted as the next operation's abort, so that begin aborts before it
   * takes what faster ranks already sent for it (dropped then, as the
   * messages of a failed operation are; routed, they would find no driver). */
  blk__failure_note(&o->next, code, o->rank, -1, -1, "%s", blk_last_error());
  o->next_abort = 1;
  blk__op_begin(o, name, NULL, NULL);
  int rc = blk__op_close(o);
  BLK__LEAVE();
  return rc;
}

/* The driver's loop: runs blocks as their inputs arrive, moves failed ones
 * on, and once every local block is done, agrees. */
static void drive(rstate *s) {
  blk__op *o = s->o;
  blk__backoff wait = {0};
  int lids[64], ran[64];
  for (;;) {
    if (o->aborted && !s->abort_seen) abort_all(s);
    move_on_skipped(s);
    if (s->finished == s->nblocks && !o->agreements) {
      blk__sched_drain(&s->sched); /* its writes' failures are this operation's */
      blk__op_agree_start(o, NULL);
    }
    /* Sends that read a block's own memory (references), and receives into
     * it, must be complete before the caller may touch it. */
    if (o->agreements && blk__op_agree_done(o) && blk__comm_ref_sends(s->m->comm) == 0 &&
        blk__comm_placed_recvs(s->m->comm) == 0)
      return;
    blk__sched_pump(&s->sched);
    /* What the driver ran itself is done: its messages go out before MPI
     * is polled. */
    size_t got = blk__sched_collect(&s->sched, lids, ran, 64, 0);
    for (size_t i = 0; i < got; i++) finish(s, &s->rb[lids[i]], ran[i]);
    /* The last block done: the agreement's first message goes out now. */
    if (got && s->finished == s->nblocks && !o->agreements) continue;
    int progressed = 0;
    blk__op_progress(o, &progressed);
    if (s->nheld) release_held(s);
    /* With callbacks running on the pool, sleep on it (a finished task
     * wakes us); otherwise poll MPI with backoff. */
    if (!got && !progressed && blk__sched_running(&s->sched)) {
      got = blk__sched_collect(&s->sched, lids, ran, 64, 50000);
      for (size_t i = 0; i < got; i++) finish(s, &s->rb[lids[i]], ran[i]);
    }
    if (progressed || got)
      blk__backoff_reset(&wait);
    else if (!blk__sched_running(&s->sched) && blk__comm_transfers(s->m->comm))
      blk__backoff_poll(&wait); /* a payload's bytes move only while MPI is polled */
    else if (!blk__sched_running(&s->sched))
      blk__backoff_idle(&wait);
  }
}

/* The order of the blocks. In memory (one phase, below): sorted by the
 * number whose digits are a block's positions in rounds 0, 1, ... (round 0
 * the lowest digit), so the members of each round-0 group come together,
 * then those of each group of round 1, and so on. With the scheduler's
 * latest-round-first choice (schedule.h, depth_first) the blocks then go
 * through the rounds in small groups, whose messages are still in the
 * cache when their receivers run, instead of every block finishing a round
 * before any starts the next: a swap over 512 blocks of 640 KB moves 320 MB
 * a round, ten times the cache.
 *
 * Out of core, with room for M blocks, that order would load a block again
 * for each round beyond the first group's: a swap of 64 blocks with 8 in
 * memory ran each group of 8 through its rounds, then chased each block
 * that became ready in a later round into memory and out again (211 loads,
 * where two passes need 112). So the rounds are cut into phases, each as
 * many rounds as keep the blocks that meet in them (a group: the local
 * blocks their messages connect) within M, and a phase orders the blocks
 * group by group, each group by the digits of the phase's rounds first:
 * its groups come one at a time. (Groups from the messages, not from the
 * digits: a merge's block sits out the rounds between its send and its
 * broadcast, where it has no digit, yet it belongs to one group.)
 * A block is needed in the order (its phase, its place in the phase's
 * order); the scheduler loads the ready block needed soonest and the
 * budget evicts the one needed last, so every group is loaded once per
 * phase, as an out-of-core FFT's passes are.
 *
 * Any order is correct; a stale one (other partners at a freed one's
 * address) costs at most speed. */
typedef struct keyed {
  int group; /* first: the phase's group (0 in memory) */
  uint64_t key;
  int lid;
} keyed;

static int by_key(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->lid - y->lid;
}

/* A block's key in the order that starts at round `first` (see above): its
 * positions in rounds first, first+1, ..., then the earlier ones, as the
 * digits of a mixed-radix number, the first the lowest, up to the first
 * round it sits out (a merge's block that has sent: the later digits would
 * be its broadcast's, and sort it away from its group). */
static uint64_t order_key(const rstate *s, int lid, int first) {
  uint64_t key = 0, mult = 1;
  for (int i = 0; i < s->rounds && mult < (UINT64_MAX >> 16); i++) {
    int r = (first + i) % s->rounds;
    int pos = blk_partners_round_position(s->p, r, s->rb[lid].gid);
    int radix = blk_partners_round_radix(s->p, r);
    if (pos < 0 || radix <= 0 || radix > 0xffff) break;
    key += (uint64_t)pos * mult;
    mult *= (uint64_t)radix;
  }
  return key;
}

/* The groups of a phase: the local blocks connected by the messages of its
 * rounds, kept as a union-find forest over the lids (up: the parent, size:
 * a root's block count). */
typedef struct groups {
  int *up, *size;
  int n, largest;
} groups;

static int root_of(groups *g, int x) {
  while (g->up[x] != x) x = g->up[x] = g->up[g->up[x]];
  return x;
}

static void groups_reset(groups *g) {
  for (int i = 0; i < g->n; i++) g->up[i] = i, g->size[i] = 1;
  g->largest = 1;
}

/* Joins every local block with the local blocks it sends to in round r. */
static void groups_add_round(groups *g, const rstate *s, int r, int *buf, int cap) {
  for (int lid = 0; lid < g->n; lid++) {
    int n = blk_partners_out(s->p, r, s->rb[lid].gid, buf, cap);
    for (int i = 0; i < n && i < cap; i++) {
      int other = blk__table_lid(&s->m->table, buf[i]);
      if (other < 0) continue; /* on another rank: not in this rank's memory */
      int x = root_of(g, lid), y = root_of(g, other);
      if (x == y) continue;
      if (g->size[x] < g->size[y]) {
        int t = x;
        x = y;
        y = t;
      }
      g->up[y] = x;
      g->size[x] += g->size[y];
      if (g->size[x] > g->largest) g->largest = g->size[x];
    }
  }
}

/* The blocks in the order of a phase that starts at round `first`, with
 * g its groups: group by group (the groups in the order of their first
 * block, by lid), and within a group by order_key. */
static void phase_order(const rstate *s, groups *g, keyed *k, int *order, int first) {
  int n = s->nblocks;
  int *lowest = g->size; /* reused: a root's lowest lid (sizes are no longer needed) */
  for (int i = 0; i < n; i++) lowest[i] = n;
  for (int i = 0; i < n; i++) {
    int r = root_of(g, i);
    if (i < lowest[r]) lowest[r] = i;
  }
  for (int i = 0; i < n; i++) k[i] = (keyed){lowest[root_of(g, i)], order_key(s, i, first), i};
  qsort(k, (size_t)n, sizeof *k, by_key);
  for (int i = 0; i < n; i++) order[i] = k[i].lid;
}

/* The blocks the budget keeps in memory (INT_MAX: no limit). With a byte
 * limit only, as many as fit at the blocks' size now. */
static int room_in_blocks(const blk__budget *b) {
  if (!blk__budget_active(b)) return INT_MAX;
  int room = b->max_blocks > 0 ? b->max_blocks : INT_MAX;
  if (b->max_bytes > 0 && b->resident > 0) {
    size_t per = b->resident_bytes / (size_t)b->resident;
    size_t fit = per ? b->max_bytes / per : (size_t)INT_MAX;
    if (fit < (size_t)room) room = fit < 1 ? 1 : (int)fit;
  }
  return room;
}

/* Fills keep's plan for s (see above): the phases, the start order (phase
 * 0's) and each phase's place of every lid. In memory (room for every
 * block) one phase, ordered by order_key alone. Without memory it leaves
 * no plan: lid order, and the rounds as the only measure of need. */
static void make_plan(const rstate *s, reduce_keep *keep, int room) {
  int n = s->nblocks, R = s->rounds;
  if (keep->order && keep->order_of == s->p && keep->order_n == n && keep->order_room == room &&
      keep->order_rounds == R)
    return;
  keep->order_of = NULL;
  if (keep->order || keep->place || keep->phase) { /* (one block: none, every call) */
    free(keep->order);
    free(keep->place);
    free(keep->phase);
    keep->order = keep->place = keep->phase = NULL;
  }
  keep->nphases = 0;
  if (n < 2) return;
  keyed *k = blk__malloc((size_t)n * sizeof *k);
  int *phase = blk__malloc((size_t)(R + 1) * sizeof *phase);
  int *order = blk__malloc((size_t)n * sizeof *order);
  int *place = NULL, nph = 1, ok = k && phase && order;
  /* Out of core only: the phases' first rounds, a partner list as long as
   * the largest (custom patterns too), and the groups. */
  const int ooc = room < n;
  int cap = ooc ? blk_partners_max_group(s->p) : 0;
  cap = cap > 0 ? cap : 1;
  int *first = ooc ? blk__malloc((size_t)(R + 2) * sizeof *first) : NULL;
  int *buf = ooc ? blk__malloc((size_t)cap * sizeof *buf) : NULL;
  groups g = {ooc ? blk__malloc((size_t)n * sizeof(int)) : NULL,
              ooc ? blk__malloc((size_t)n * sizeof(int)) : NULL, n, 1};
  if (ooc) ok = ok && first && buf && g.up && g.size;
  if (ok && !ooc) { /* in memory: the depth-first order */
    for (int i = 0; i < n; i++) k[i] = (keyed){0, order_key(s, i, 0), i};
    qsort(k, (size_t)n, sizeof *k, by_key);
    for (int i = 0; i < n; i++) order[i] = k[i].lid;
    for (int r = 0; r <= R; r++) phase[r] = 0;
    ok = (place = blk__malloc((size_t)n * sizeof *place)) != NULL;
    for (int i = 0; ok && i < n; i++) place[order[i]] = i;
  } else if (ok) {
    /* The phases: a round joins the phase while its groups still fit.
     * Callback round c reads what round c-1 sent: it belongs to that
     * round's phase (round 0 to the first). */
    first[0] = 0;
    phase[0] = 0;
    groups_reset(&g);
    for (int r = 0; r < R; r++) {
      groups_add_round(&g, s, r, buf, cap);
      if (g.largest > room && r > first[nph - 1]) {
        first[nph++] = r;
        groups_reset(&g);
        groups_add_round(&g, s, r, buf, cap);
      }
      phase[r + 1] = nph - 1;
    }
    first[nph] = R;
    ok = (place = blk__malloc((size_t)nph * (size_t)n * sizeof *place)) != NULL;
    for (int f = 0; ok && f < nph; f++) {
      groups_reset(&g);
      for (int r = first[f]; r < first[f + 1]; r++) groups_add_round(&g, s, r, buf, cap);
      phase_order(s, &g, k, order, first[f]);
      for (int i = 0; i < n; i++) place[(size_t)f * (size_t)n + (size_t)order[i]] = i;
    }
    /* The start order is the first phase's. */
    for (int i = 0; ok && i < n; i++) order[place[i]] = i;
  }
  if (ok) {
    keep->order = order;
    keep->place = place;
    keep->phase = phase;
    keep->nphases = nph;
    keep->order_of = s->p;
    keep->order_n = n;
    keep->order_room = room;
    keep->order_rounds = R;
    order = place = phase = NULL;
  }
  free(k);
  free(phase);
  free(first);
  free(buf);
  free(g.up);
  free(g.size);
  free(order);
  free(place);
}

/* Where lid's block comes in the plan for its round: its phase, then its
 * place in the phase's order. */
static uint64_t plan_time(const rstate *s, const reduce_keep *k, int lid) {
  int f = k->phase[s->rb[lid].round];
  return (uint64_t)f * (uint64_t)s->nblocks +
         (uint64_t)k->place[(size_t)f * (size_t)s->nblocks + (size_t)lid];
}

/* The block of this rank that lid waits for in its round and that runs
 * last in the plan: one that has not run the round before (its message
 * cannot have come), found again only when the one found has run, so a
 * direct exchange's receiver, whose senders run in the plan's order, looks
 * through its in-partners about once a round. -1: none. */
static int last_awaited(rstate *s, const reduce_keep *k, rblock *b) {
  if (b->wait_round == b->round && (b->wait_lid < 0 || s->rb[b->wait_lid].round < b->round))
    return b->wait_lid;
  int last = -1;
  uint64_t last_time = 0;
  for (int i = 0; i < b->nin; i++) {
    if (b->filled[i]) continue;
    int j = blk__table_lid(&s->m->table, b->in_gids[i]);
    if (j < 0 || j == b->lid || s->rb[j].round >= b->round) continue;
    uint64_t t = plan_time(s, k, j);
    if (last < 0 || t > last_time) last = j, last_time = t;
  }
  b->wait_lid = last;
  b->wait_round = b->round;
  return last;
}

/* When lid's block is needed next, for the budget and the scheduler
 * (schedule.h): a block that is done is not needed again; the others in
 * the plan's order (plan_time), but not before the last block of this rank
 * they wait for (last_awaited); without a plan, one waiting in a later
 * round sooner, since the latest round runs first (depth_first). */
static uint64_t needed_next(void *ctx, int lid) {
  rstate *s = ctx;
  rblock *b = &s->rb[lid];
  if (b->round > s->rounds) return UINT64_MAX;
  const reduce_keep *k = s->keep;
  if (!k->place) return 1 + (uint64_t)(s->rounds - b->round);
  /* Not before the blocks of this rank it still waits for have run: in a
   * phase of one round whose group outgrows memory (a direct all_to_all's
   * send and receive), a block that has sent is needed only after every
   * block has, not at its own place; taken as sooner, it held its place
   * while the next sender waited, one send at a time. */
  uint64_t when = plan_time(s, k, lid);
  if (b->arrived >= b->nin) return when;
  int j = last_awaited(s, k, b);
  uint64_t t = j < 0 ? 0 : plan_time(s, k, j);
  return t > when ? t : when;
}

/* Whether lid's block waits for a message from a block on another rank, for
 * the scheduler (schedule.h): loading over it then waits a while for it. (A
 * failed block waits for nothing: it moves on without its inputs.) */
static int waits_elsewhere(void *ctx, int lid) {
  const rstate *s = ctx;
  const rblock *b = &s->rb[lid];
  if (b->busy || b->failed || b->round > s->rounds) return 0;
  for (int i = 0; i < b->nin; i++)
    if (!b->filled[i] && blk_assigner_rank(s->a, b->in_gids[i]) != s->me) return 1;
  return 0;
}

static int reduce_run(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
                      void *user, const blk__driver *d) {
  if (!fn || !a || !p)
    return blk__fail(BLK_EINVAL, "%s: the callback, assigner or partners is NULL", d->name);
  int rc = check_arguments(m, a, p);
  if (rc) return rc;
  if ((rc = check_blocks(m, a, p))) return blk__reduce_abort(m, rc, d->name);

  rstate s = {.m = m,
              .o = &m->op,
              .a = a,
              .p = p,
              .fn = fn,
              .user = user,
              .d = d,
              .me = blk__comm_rank(m->comm),
              .nblocks = blk__table_count(&m->table)};
  s.rounds = blk_partners_rounds(p);
  void **args = NULL;
  if (!(s.rb = take_records(m, &args, &s.skip, &s.held)))
    return blk__reduce_abort(
        m, blk__fail(BLK_ENOMEM, "no memory for the records of %d blocks", s.nblocks), d->name);
  for (int i = 0; i < s.nblocks; i++) s.rb[i].s = &s;
  if ((rc = blk__sched_init(&s.sched, &m->budget, m->pool, &m->op, (blk__task_kind)fn, run_block,
                            prepare, args)))
    return blk__reduce_abort(m, rc, d->name);
  s.sched.on_error = load_failed;
  s.sched.on_error_ctx = &s;
  s.sched.future = needed_next;
  s.sched.future_ctx = &s;
  s.sched.waits_elsewhere = waits_elsewhere;
  blk__op_begin(s.o, d->name, route_reduce, &s);
  if (d->place) blk__op_set_place(s.o, place_reduce);
  s.o->rounds = s.rounds + 1; /* (a message's key is its round from now on) */
  s.sched.depth_first = 1;
  s.keep = keep_of(m);
  make_plan(&s, s.keep, room_in_blocks(&m->budget));
  const int *order = s.keep->order;
  for (int i = 0; i < s.nblocks; i++) advance(&s, &s.rb[order ? order[i] : i], 0);
  s.started = 1;
  drive(&s);
  rc = blk__op_end(s.o, NULL);
  end_state(&s);
  return rc;
}

int blk__reduce_run(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
                    void *user, const blk__driver *d) {
  if (!m) return blk__fail(BLK_EINVAL, "%s: the master is NULL", d->name);
  BLK__ENTER(m);
  int rc = reduce_run(m, a, p, fn, user, d);
  BLK__LEAVE();
  return rc;
}

int blk_reduce(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
               void *user) {
  static const blk__driver user_callback = {"reduce", NULL, 0, NULL, 0, 0, 0, 0};
  return blk__reduce_run(m, a, p, fn, user, &user_callback);
}
