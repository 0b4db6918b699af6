/*
 * exchange.c: neighbour exchange over links, exchange to any gid, and the
 * value all-reduce.
 *
 * Each block's out queue i < nlinks goes to link i's neighbour and lands in
 * the neighbour's in queue for the link that points back (same gid, reverse
 * direction, same occurrence among such links). A queue to any gid goes to
 * the rank the caller's assigner names and lands in the receiver's queue
 * from the sender's gid (block_table.h keeps those in gid order, so what a
 * callback reads does not depend on arrival). A queue for a block on this
 * rank is handed over by swapping buffers: no copy, no MPI. Queues to other
 * ranks go through comm.c; empty ones are not sent at all (the receiver's
 * queue is already empty).
 *
 * Nobody knows in advance how many messages it will receive, so termination
 * is NBX (Hoefler, Siebert, Lumsdaine 2010): headers are sent synchronously;
 * once all of a rank's headers are matched it joins a non-blocking barrier;
 * when that completes everyone's headers have been matched. Then the
 * closing agreement (operation.h) carries what failed, including a message
 * that found no memory where it arrived (which may happen after its
 * receiver joined the barrier, hence two steps), and the posted values
 * (values.h), so the all-reduce comes at no extra latency.
 *
 * Failure: a queue that cannot be sent (it failed to fill, to come back
 * from storage, or to start) is recorded and not sent, and the exchange
 * goes on: nobody counts messages here, so nobody waits for it. Every rank
 * then returns the failure. What arrived is delivered either way.
 *
 * Cost per exchange: alpha + beta*n per remote non-empty queue, plus the
 * barrier and the agreement (2 alpha log p, about 0.6 us at two ranks).
 */
#include "collectives/exchange.h"

#include <string.h>

/* The receiving end of a link message: the link of dst that points back. */
static int find_slot(const blk__block *dst, const blk__msg *msg) {
  for (int i = 0; i < dst->nlinks; i++)
    if (dst->link_gids[i] == msg->src_gid && dst->keys[i].rev_code == msg->key &&
        dst->keys[i].occ == msg->aux)
      return i;
  return -1;
}

int blk__exchange_in_slot(blk__block *dst, const blk__msg *msg) {
  if (msg->key == BLK__REMOTE_KEY) return blk__block_open_in(dst, msg->src_gid);
  int slot = find_slot(dst, msg);
  if (slot < 0)
    return blk__fail(BLK_EINVAL,
                     "gid %d sent to gid %d over a link that gid %d has no link back for (links "
                     "must be symmetric)",
                     msg->src_gid, msg->dst_gid, msg->dst_gid);
  return slot;
}

/* The block of this rank a message is for; -1 (recorded as a failure) for
 * a message to any gid that the sender's assigner put here but nobody
 * added. A link message for a block that is not here is blk's bug. */
static int dst_lid(blk_master *m, const blk__msg *msg) {
  int lid = blk__table_lid(&m->table, msg->dst_gid);
  if (lid >= 0) return lid;
  if (msg->key != BLK__REMOTE_KEY)
    blk__panic("exchange %u: rank %d got a message from gid %d for gid %d, which it does not own",
               m->op.epoch, blk__comm_rank(m->comm), msg->src_gid, msg->dst_gid);
  blk__op_fail(&m->op, BLK_EINVAL, msg->src_gid, m->exchanges,
               "the message to gid %d went to rank %d, where the assigner puts it, but that rank "
               "has no block %d",
               msg->dst_gid, blk__comm_rank(m->comm), msg->dst_gid);
  return -1;
}

static void route_exchange(const blk__msg *msg, blk_buffer *payload, void *ctx) {
  blk_master *m = ctx;
  int lid = dst_lid(m, msg);
  if (lid < 0) return;
  blk__block *dst = blk__table_at(&m->table, lid);
  int slot = blk__exchange_in_slot(dst, msg);
  if (slot == BLK_EINVAL) blk__panic("exchange %u: %s", m->op.epoch, blk_last_error());
  if (slot < 0) {
    blk__op_fail(&m->op, slot, dst->gid, m->exchanges, "the message from gid %d was lost: %s",
                 msg->src_gid, blk_last_error());
    return;
  }
  if (dst->in[slot].size || dst->in_rec[slot].stored)
    blk__panic("exchange %u: gid %d received two messages from gid %d on %s %d", m->op.epoch,
               msg->dst_gid, msg->src_gid, slot < dst->nlinks ? "link" : "queue", slot);
  if (msg->flags & BLK__MSG_FAILED) return; /* lost on arrival: recorded, nothing to keep */
  blk_buffer_swap(&dst->in[slot], payload);
  /* Out-of-core: a large queue for a block that is out goes out too (if the
   * write fails it stays in memory; the block loses nothing). */
  if (!dst->resident)
    blk__budget_spill_queue(&m->budget, dst->gid, &dst->in[slot], &dst->in_rec[slot]);
}

/* A link's in queue keeps its storage: delivered in place of the sender's
 * out queue (the hand-over swaps them), it spares the sender's next
 * enqueue a malloc (giving small ones to the cache, which frees them, cost
 * a neighbour exchange of 64 blocks 20 % more). A queue from any gid
 * closes, its storage to the cache. */
void blk__exchange_clear_in(blk_master *m, blk__block *b) {
  for (int l = 0; l < b->nin; l++) {
    if (l < b->nlinks)
      blk__buffer_release(&b->in[l]);
    else
      blk__buffer_cache_give(m->cache, &b->in[l]);
    blk__budget_drop_queue(&m->budget, &b->in_rec[l]);
  }
  b->nin = b->nlinks;
}

void blk__exchange_close_out(blk_master *m, blk__block *b) {
  for (int l = b->nlinks; l < b->nout; l++) {
    blk__buffer_cache_give(m->cache, &b->out[l]);
    blk__budget_drop_queue(&m->budget, &b->out_rec[l]);
  }
  b->nout = b->nlinks;
}

/* Combines the values posted by this rank's blocks into acc and resets
 * them; blocks that posted different sequences are a failure naming both. */
static void combine_posts(blk_master *m, blk__values *acc) {
  blk__values_clear(acc);
  int n = blk__table_count(&m->table);
  int gid0 = n ? blk__table_at(&m->table, 0)->gid : -1;
  int first = n ? blk__table_at(&m->table, 0)->posts.count : 0; /* (reset in the loop) */
  for (int i = 0; i < n; i++) {
    blk__block *b = blk__table_at(&m->table, i);
    if (!blk__values_mismatch(acc) && blk__values_combine(acc, &b->posts) != 0)
      blk__op_fail(&m->op, BLK_EINVAL, b->gid, m->exchanges,
                   "gid %d posted %d all-reduce values (or other types or ops) where gid %d "
                   "posted %d; every block must post the same sequence",
                   b->gid, b->posts.count, gid0, first);
    blk__values_none_posted(&b->posts);
  }
}

/* The rank of out queue q's receiver, or -1 (recorded) if there is none. */
static int dst_rank(blk_master *m, const blk__block *b, int q, const blk_assigner *a, int round) {
  if (q < b->nlinks) return b->links[q].rank;
  int gid = b->out_gids[q];
  if (!a) {
    blk__op_fail(&m->op, BLK_EINVAL, b->gid, round,
                 "%zu bytes enqueued to gid %d, which is not a link of gid %d: messages to any "
                 "gid are delivered by blk_master_exchange_remote (or iexchange), not "
                 "blk_master_exchange",
                 b->out[q].size, gid, b->gid);
    return -1;
  }
  int rank = blk_assigner_rank(a, gid);
  if (rank < 0 || rank >= m->op.size) {
    blk__op_fail(&m->op, BLK_EINVAL, b->gid, round,
                 "gid %d enqueued to gid %d, which the assigner (of %d blocks on %d ranks) has no "
                 "rank for",
                 b->gid, gid, blk_assigner_nblocks(a), blk_assigner_nranks(a));
    return -1;
  }
  return rank;
}

int blk__exchange_send(blk_master *m, blk__block *b, int q, const blk_assigner *a, int round) {
  blk__op *o = &m->op;
  blk_buffer *out = &b->out[q];
  int rc = blk__budget_restore_queue(&m->budget, out, &b->out_rec[q]);
  if (rc) {
    /* Its bytes are gone: drop the record, so no later exchange sends
     * them as its own. */
    blk__op_fail(o, rc, b->gid, round, "the queue to gid %d was lost: %s", b->out_gids[q],
                 blk_last_error());
    blk__budget_drop_queue(&m->budget, &b->out_rec[q]);
    blk_buffer_clear(out);
    return 0;
  }
  if (out->error) {
    blk__op_fail(o, out->error, b->gid, round,
                 "the queue to gid %d failed to fill (%s) and was not sent", b->out_gids[q],
                 blk_strerror(out->error));
    blk_buffer_clear(out);
    return 0;
  }
  if (out->size == 0) return 0;
  int rank = dst_rank(m, b, q, a, round);
  if (rank < 0) {
    blk_buffer_clear(out);
    return 0;
  }
  int link = q < b->nlinks;
  blk__msg msg = {o->epoch,
                  b->gid,
                  b->out_gids[q],
                  link ? b->keys[q].code : BLK__REMOTE_KEY,
                  link ? b->keys[q].occ : 0,
                  0,
                  (int64_t)out->size};
  if (rank == o->rank) {
    blk__op_count_handed(o, out->size);
    o->route(&msg, out, o->route_ctx);
    blk_buffer_clear(out);
    return 1;
  }
  if ((rc = blk__comm_send(m->comm, rank, &msg, out, 1))) {
    blk__op_fail(o, rc, b->gid, round, "the queue to gid %d was not sent: %s", b->out_gids[q],
                 blk_last_error());
    blk_buffer_clear(out);
    return 0;
  }
  return 1;
}

/* NBX: join a barrier once every header this rank sent is matched; once it
 * is done, every message of the exchange has been matched by its receiver.
 * Then, with the payloads here in too, every failure of a delivery is
 * known to its rank, and the closing agreement carries them (and the posted
 * values). */
static int nbx_done(blk__op *o, void *ctx) {
  blk_master *m = ctx;
  if (o->agreements == 0 && blk__comm_unmatched(m->comm) == 0) blk__op_barrier_start(o);
  if (o->agreements == 1 && blk__op_agree_done(o) && blk__comm_recvs_pending(m->comm) == 0) {
    blk__values posted;
    combine_posts(m, &posted);
    blk__op_agree_start(o, &posted);
  }
  return o->agreements == 2 && blk__op_agree_done(o);
}

/* remote: the caller asked for messages to any gid, through a. */
static int exchange(blk_master *m, const blk_assigner *a, int remote) {
  int n = blk__table_count(&m->table);
  for (int i = 0; i < n; i++) blk__exchange_clear_in(m, blk__table_at(&m->table, i));
  blk__op *o = &m->op;
  blk__op_begin(o, "exchange", route_exchange, m);
  if (remote && !a)
    blk__op_fail(o, BLK_EINVAL, -1, m->exchanges, "exchange_remote: the assigner is NULL");
  else if (a && blk_assigner_nranks(a) != o->size)
    blk__op_fail(o, BLK_EINVAL, -1, m->exchanges,
                 "the assigner is for %d ranks, the communicator has %d", blk_assigner_nranks(a),
                 o->size);
  for (int i = 0; i < n; i++) {
    blk__block *b = blk__table_at(&m->table, i);
    for (int q = 0; q < b->nout; q++) blk__exchange_send(m, b, q, a, m->exchanges);
    blk__exchange_close_out(m, b);
  }
  blk__op_wait(o, nbx_done, m);
  m->exchanges++;
  blk__values results;
  int rc = blk__op_end(o, &results);
  blk__values_clear(&m->results);
  if (rc) return rc;
  if (blk__values_mismatch(&results))
    return blk__fail(BLK_EINVAL,
                     "exchange %u: ranks posted different all-reduce sequences (count, type or op)",
                     o->epoch);
  blk__values_copy(&m->results, &results);
  return BLK_OK;
}

int blk_master_exchange(blk_master *m) {
  if (!m) return blk__fail(BLK_EINVAL, "exchange: the master is NULL");
  BLK__ENTER(m);
  int rc = exchange(m, NULL, 0);
  BLK__LEAVE();
  return rc;
}

int blk_master_exchange_remote(blk_master *m, const blk_assigner *a) {
  if (!m) return blk__fail(BLK_EINVAL, "exchange: the master is NULL");
  BLK__ENTER(m);
  int rc = exchange(m, a, 1);
  BLK__LEAVE();
  return rc;
}

/* A result asked for with the wrong index or type stops the job, as in a
 * callback (proxy.h), the way m says. */
static const blk__value *result(const blk_master *m, int i, int type) {
  if (i < 0 || i >= m->results.count || m->results.items[i].kind / 4 != type) {
    blk__context_enter(&m->context); /* for good: the job stops */
    blk__panic("master: all-reduce result %d as %s: the last exchange completed %d values", i,
               type == BLK__VALUE_F64 ? "double" : "int64", m->results.count);
  }
  return &m->results.items[i];
}

double blk_master_result_f64(const blk_master *m, int i) {
  return result(m, i, BLK__VALUE_F64)->v.f64;
}

int64_t blk_master_result_i64(const blk_master *m, int i) {
  return result(m, i, BLK__VALUE_I64)->v.i64;
}

int blk_master_result_count(const blk_master *m) {
  return m->results.count;
}
