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
 * Cost per block per round: the callback, plus alpha + beta*n per remote
 * out-partner and nothing but a pointer swap per local one. A rank finishes
 * once its own blocks have run their last round: every message a block
 * needs was sent to it, so nothing is left to wait for.
 */
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "blk/reduce.h"
#include "master_state.h"
#include "reduce_run.h"
#include "schedule.h"

typedef struct pending_msg {
  int round;
  int src;
  blk_buffer payload;
  blk__record rec; /* out-of-core: the payload, when spilled */
} pending_msg;

struct rstate;

typedef struct rblock {
  struct rstate *s;
  int lid, gid;
  int round;      /* the round it is waiting for or running; R+1 when finished */
  int busy;       /* handed to the scheduler, until finish() */
  int with_block; /* this round's callback gets the block (it is pinned) */
  int nin, nout, cap_in, cap_out;
  int *in_gids, *out_gids;
  blk_buffer *in, *out;
  blk__record *in_rec; /* out-of-core: in queues spilled while the block is out */
  unsigned char *filled;
  int arrived;
  pending_msg *pending;
  size_t npending, cap_pending;
  int code; /* the callback's return, when it failed */
  blk_proxy proxy;
} rblock;

typedef struct rstate {
  blk_master *m;
  const blk_assigner *a;
  const blk_partners *p;
  blk_reduce_fn fn;
  void *user;
  int rounds;                                /* R: callbacks run in rounds 0..R */
  int (*needs_block)(int round, void *user); /* NULL: every round */
  rblock *rb;
  int nblocks, finished;
  blk__sched sched;
  int fail_gid, fail_round, fail_code;
} rstate;

/* Reallocates an array from old to ncap elements, zeroing the new ones. */
static int resize(void **array, int old, int ncap, size_t elem) {
  void *grown = realloc(*array, (size_t)ncap * elem);
  if (!grown) return BLK_ENOMEM;
  memset((char *)grown + (size_t)old * elem, 0, (size_t)(ncap - old) * elem);
  *array = grown;
  return BLK_OK;
}

/* Makes room for nin in queues and nout out queues. */
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

static void mark_ready(rstate *s, rblock *b) {
  if (b->busy || b->arrived < b->nin || b->round > s->rounds) return;
  b->busy = 1;
  b->with_block = !s->needs_block || s->needs_block(b->round, s->user);
  blk__sched_ready(&s->sched, b->lid, b->with_block);
}

/* A message for a block that is swapped out goes to storage too, if large,
 * so an out-of-core reduction does not run out of memory through its
 * messages. A failed write just keeps it in memory. */
static void spill_if_out(rstate *s, rblock *b, blk_buffer *q, blk__record *rec) {
  if (blk__buffer_is_ref(q)) return; /* never under a budget: a reference cannot be spilled */
  if (!b->busy && !blk__budget_resident(s->m, b->lid))
    blk__budget_spill_queue(s->m, b->gid, q, rec);
}

static int slot_of(const rblock *b, int src) {
  for (int i = 0; i < b->nin; i++)
    if (b->in_gids[i] == src && !b->filled[i]) return i;
  return -1;
}

/* Puts a message for the block's current round into its slot. */
static void fill(rstate *s, rblock *b, int src, blk_buffer *payload) {
  int i = slot_of(b, src);
  if (i < 0)
    blk__panic(
        "reduce %d: gid %d received a message from gid %d in round %d, which is not "
        "(or no longer) one of its in-partners",
        s->m->epoch, b->gid, src, b->round);
  blk_buffer_swap(&b->in[i], payload);
  b->filled[i] = 1;
  b->arrived++;
  spill_if_out(s, b, &b->in[i], &b->in_rec[i]);
  mark_ready(s, b);
}

/* Moves the block to its next active round at or after `round`. */
static void advance(rstate *s, rblock *b, int round) {
  while (round <= s->rounds && !blk_partners_active(s->p, round, b->gid)) round++;
  b->round = round;
  b->arrived = 0;
  if (round > s->rounds) {
    b->nin = b->nout = 0;
    s->finished++;
    if (b->npending)
      blk__panic(
          "reduce %d: gid %d finished with %zu messages for rounds it never ran (round %d "
          "from gid %d first)",
          s->m->epoch, b->gid, b->npending, b->pending[0].round, b->pending[0].src);
    return;
  }
  int nin = blk_partners_in(s->p, round, b->gid, NULL, 0);
  int nout = blk_partners_out(s->p, round, b->gid, NULL, 0);
  size_queues(b, nin, nout);
  b->nin = blk_partners_in(s->p, round, b->gid, b->in_gids, nin);
  b->nout = blk_partners_out(s->p, round, b->gid, b->out_gids, nout);
  for (int i = 0; i < b->nin; i++) {
    blk__buffer_release(&b->in[i]);
    blk__budget_drop_queue(s->m, &b->in_rec[i]);
    b->filled[i] = 0;
  }
  for (int i = 0; i < b->nout; i++) blk__buffer_release(&b->out[i]);
  /* Messages that came early for this round. */
  size_t kept = 0;
  for (size_t i = 0; i < b->npending; i++) {
    pending_msg *pm = &b->pending[i];
    if (pm->round == round) {
      int slot = slot_of(b, pm->src);
      fill(s, b, pm->src, &pm->payload);
      if (pm->rec.stored) { /* still in storage: the slot takes the record */
        blk__budget_drop_queue(s->m, &b->in_rec[slot]);
        b->in_rec[slot] = pm->rec;
      }
      blk__buffer_cache_give(s->m->cache, &pm->payload);
    } else {
      b->pending[kept++] = *pm;
    }
  }
  b->npending = kept;
  mark_ready(s, b);
}

static void receive(rstate *s, int dst_gid, int src_gid, int round, blk_buffer *payload) {
  int lid = blk__gid_map_get(&s->m->lids, dst_gid);
  if (lid < 0)
    blk__panic("reduce %d: rank %d got a message from gid %d for gid %d, which it does not own",
               s->m->epoch, blk__comm_rank(s->m->comm), src_gid, dst_gid);
  rblock *b = &s->rb[lid];
  if (round == b->round && !b->busy) {
    fill(s, b, src_gid, payload);
    return;
  }
  if (round <= b->round)
    blk__panic("reduce %d: gid %d got a message from gid %d for round %d while in round %d",
               s->m->epoch, dst_gid, src_gid, round, b->round);
  if (b->npending == b->cap_pending) {
    size_t ncap = b->cap_pending ? 2 * b->cap_pending : 4;
    pending_msg *grown = realloc(b->pending, ncap * sizeof *grown);
    if (!grown) blk__panic("reduce: no memory to keep an early message for gid %d", dst_gid);
    b->pending = grown;
    b->cap_pending = ncap;
  }
  pending_msg *pm = &b->pending[b->npending++];
  pm->round = round;
  pm->src = src_gid;
  memset(&pm->rec, 0, sizeof pm->rec);
  blk_buffer_init(&pm->payload);
  blk_buffer_swap(&pm->payload, payload);
  spill_if_out(s, b, &pm->payload, &pm->rec);
}

static void route_reduce(blk_master *m, const blk__msg *msg, blk_buffer *payload, void *ctx) {
  (void)m;
  receive(ctx, msg->dst_gid, msg->src_gid, msg->key, payload);
}

static void run_block(void *arg) {
  rblock *b = arg;
  void *block = b->with_block ? b->s->m->blocks[b->lid].data : NULL;
  b->code = b->s->fn(block, &b->proxy, b->s->user);
}

/* On the driver, just before the task runs: spilled inputs come back. */
static int prepare(void *arg) {
  rblock *b = arg;
  rstate *s = b->s;
  for (int i = 0; i < b->nin; i++) {
    int rc = blk__budget_restore_queue(s->m, &b->in[i], &b->in_rec[i]);
    if (rc) return rc;
  }
  b->proxy = (blk_proxy){
      .master = s->m,
      .gid = b->gid,
      .round = b->round,
      .phase = "reduce",
      .nin = b->nin,
      .nout = b->nout,
      .in_gids = b->in_gids,
      .out_gids = b->out_gids,
      .in = b->in,
      .out = b->out,
      .posts = NULL,
      .results = NULL,
  };
  return BLK_OK;
}

/* After the callback (or instead of it, when the block could not be
 * loaded: its out queues are then empty): send the out queues, move on. */
static int finish(rstate *s, rblock *b, int ran) {
  b->busy = 0;
  if (!ran) b->code = BLK_OK; /* the scheduler holds the load error */
  if (b->code && !s->fail_code) {
    s->fail_code = b->code;
    s->fail_gid = b->gid;
    s->fail_round = b->round;
  }
  int me = blk__comm_rank(s->m->comm);
  for (int i = 0; i < b->nout; i++) {
    int dst = b->out_gids[i];
    int rank = blk_assigner_rank(s->a, dst);
    if (rank == me) {
      receive(s, dst, b->gid, b->round + 1, &b->out[i]);
      blk__buffer_release(&b->out[i]);
    } else {
      blk__msg msg = {s->m->epoch, b->gid, dst, b->round + 1, 0, 0, (int64_t)b->out[i].size};
      int rc = blk__comm_send(s->m->comm, rank, &msg, &b->out[i], 0);
      if (rc) return rc;
    }
  }
  advance(s, b, b->round + 1);
  return BLK_OK;
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

/* This rank's blocks against the assigner: only this rank can see a wrong
 * one, and returning would leave the others waiting for its messages, so a
 * mismatch stops the job (it is a bug in the caller's setup, like a wrong
 * enqueue). Agreeing on the outcome first would cost an MPI_Allreduce per
 * operation: a quarter of a small reduction's time (docs/performance.md). */
static void check_blocks(const blk_master *m, const blk_assigner *a, const blk_partners *p) {
  int nb = blk_partners_nblocks(p), me = blk__comm_rank(m->comm);
  for (int i = 0; i < m->nblocks; i++) {
    int gid = m->blocks[i].gid;
    if (gid >= nb)
      blk__panic("reduce: rank %d has a block with gid %d, but the partners are for %d blocks", me,
                 gid, nb);
    if (blk_assigner_rank(a, gid) != me)
      blk__panic("reduce: rank %d has a block with gid %d, which the assigner puts on rank %d", me,
                 gid, blk_assigner_rank(a, gid));
  }
}

/* The driver's per-block records and the scheduler's arguments outlive the
 * operation: kept by the master (their queue arrays too), so a reduction of
 * small messages does not spend its time in malloc and free. */
struct blk__reduce_keep {
  rblock *rb;
  void **args;
  int cap;
};

/* Records for the master's blocks, reset; NULL without memory. */
static rblock *take_records(blk_master *m, void ***args) {
  blk__reduce_keep *k = m->reduce_keep;
  if (!k && !(k = m->reduce_keep = calloc(1, sizeof *k))) return NULL;
  if (k->cap < m->nblocks || !k->rb) { /* (a rank with no blocks gets one record) */
    int ncap = m->nblocks > 2 * k->cap ? m->nblocks : 2 * k->cap;
    if (ncap < 1) ncap = 1;
    if (resize((void **)&k->rb, k->cap, ncap, sizeof *k->rb)) return NULL;
    void **grown = realloc(k->args, (size_t)ncap * sizeof *grown);
    if (!grown) return NULL; /* rb grew: its cap still says the old size */
    k->args = grown;
    k->cap = ncap;
  }
  for (int i = 0; i < m->nblocks; i++) {
    rblock *b = &k->rb[i];
    b->busy = b->with_block = b->nin = b->nout = b->arrived = b->code = 0;
    b->npending = 0;
    b->round = -1;
    b->lid = i;
    b->gid = m->blocks[i].gid;
    k->args[i] = b;
  }
  *args = k->args;
  return k->rb;
}

/* Empties the records at the end of an operation: message storage to the
 * buffer cache, spilled queues dropped; the arrays stay for the next. */
static void end_state(rstate *s) {
  for (int i = 0; s->rb && i < s->nblocks; i++) {
    rblock *b = &s->rb[i];
    for (int j = 0; j < b->cap_in; j++) {
      blk__buffer_cache_give(s->m->cache, &b->in[j]);
      blk__budget_drop_queue(s->m, &b->in_rec[j]);
    }
    for (int j = 0; j < b->cap_out; j++) blk__buffer_cache_give(s->m->cache, &b->out[j]);
    for (size_t j = 0; j < b->npending; j++) {
      blk__buffer_cache_give(s->m->cache, &b->pending[j].payload);
      blk__budget_drop_queue(s->m, &b->pending[j].rec);
    }
    b->npending = 0;
  }
  blk__sched_free(&s->sched);
}

void blk__reduce_keep_free(blk__reduce_keep *k) {
  if (!k) return;
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
  free(k);
}

int blk__reduce_run(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
                    void *user, int (*needs_block)(int round, void *user)) {
  if (!fn || !a || !p)
    return blk__fail(BLK_EINVAL, "reduce: the callback, assigner or partners is NULL");
  int rc = check_arguments(m, a, p);
  if (rc) return rc;
  check_blocks(m, a, p);

  rstate s = {.m = m,
              .a = a,
              .p = p,
              .fn = fn,
              .user = user,
              .needs_block = needs_block,
              .nblocks = m->nblocks};
  s.rounds = blk_partners_rounds(p);
  void **args = NULL;
  if (!(s.rb = take_records(m, &args)))
    return blk__fail(BLK_ENOMEM, "reduce: no memory for %d blocks", m->nblocks);
  for (int i = 0; i < m->nblocks; i++) s.rb[i].s = &s;
  if ((rc = blk__sched_init(&s.sched, m, run_block, prepare, args))) {
    end_state(&s);
    return rc;
  }
  blk__master_begin(m, route_reduce, &s);
  for (int i = 0; i < m->nblocks; i++) advance(&s, &s.rb[i], 0);

  blk__backoff wait = {0};
  int lids[64], ran[64];
  while (s.finished < s.nblocks) {
    if ((rc = blk__sched_pump(&s.sched))) break;
    int progressed = 0;
    if ((rc = blk__comm_progress(m->comm, blk__master_deliver, m, 1, &progressed))) break;
    /* With callbacks running, sleep on the pool (a finished task wakes us);
     * otherwise poll MPI with backoff. */
    long timeout = !progressed && s.sched.running ? 50000 : 0;
    size_t got = blk__sched_collect(&s.sched, lids, ran, 64, timeout);
    for (size_t i = 0; i < got && !rc; i++) rc = finish(&s, &s.rb[lids[i]], ran[i]);
    if (rc) break;
    if (progressed || got)
      blk__backoff_reset(&wait);
    else if (!s.sched.running)
      blk__backoff_idle(&wait);
  }
  /* After an error, callbacks still running point into this state. */
  while (blk__sched_busy(&s.sched)) blk__sched_collect(&s.sched, lids, ran, 64, -1);
  /* Sends that read a block's own memory (references) must be complete
   * before the caller may change it. */
  blk__backoff_reset(&wait);
  while (blk__comm_ref_sends(m->comm)) {
    int progressed = 0, crc = blk__comm_progress(m->comm, blk__master_deliver, m, 0, &progressed);
    if (crc) {
      if (!rc) rc = crc;
      break;
    }
    if (progressed)
      blk__backoff_reset(&wait);
    else
      blk__backoff_idle(&wait);
  }
  m->route = NULL;
  int io = s.sched.error;
  end_state(&s);
  if (!rc) rc = io;
  if (!rc && s.fail_code)
    rc = blk__fail(BLK_ECALLBACK, "reduce: the callback returned %d (%s) for gid %d in round %d",
                   s.fail_code, blk_strerror(s.fail_code), s.fail_gid, s.fail_round);
  return rc;
}

int blk_reduce(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
               void *user) {
  return blk__reduce_run(m, a, p, fn, user, NULL);
}
