/*
 * exchange.c: neighbour exchange over links, and the value all-reduce.
 *
 * Each block's out queue i goes to link i's neighbour and lands in the
 * neighbour's in queue for the link that points back (same gid, reverse
 * direction, same occurrence among such links). A queue for a block on this
 * rank is handed over by swapping buffers: no copy, no MPI. Remote queues
 * go through comm.c; empty ones are not sent at all (the receiver's queue is
 * already empty).
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
#include <string.h>

#include "master/master_state.h"

/* The receiving end of a message: the link of dst that points back. */
static int find_slot(const blk__block *dst, const blk__msg *msg) {
  for (int i = 0; i < dst->nlinks; i++)
    if (dst->link_gids[i] == msg->src_gid && dst->keys[i].rev_code == msg->key &&
        dst->keys[i].occ == msg->aux)
      return i;
  return -1;
}

static void route_exchange(const blk__msg *msg, blk_buffer *payload, void *ctx) {
  blk_master *m = ctx;
  int lid = blk__table_lid(&m->table, msg->dst_gid);
  if (lid < 0)
    blk__panic("exchange %u: rank %d got a message from gid %d for gid %d, which it does not own",
               m->op.epoch, blk__comm_rank(m->comm), msg->src_gid, msg->dst_gid);
  blk__block *dst = blk__table_at(&m->table, lid);
  int slot = find_slot(dst, msg);
  if (slot < 0)
    blk__panic(
        "exchange %u: gid %d sent to gid %d over a link that gid %d has no link back for "
        "(links must be symmetric)",
        m->op.epoch, msg->src_gid, msg->dst_gid, msg->dst_gid);
  if (dst->in[slot].size || dst->in_rec[slot].stored)
    blk__panic("exchange %u: gid %d received two messages from gid %d on link %d", m->op.epoch,
               msg->dst_gid, msg->src_gid, slot);
  if (msg->flags & BLK__MSG_FAILED) return; /* lost on arrival: recorded, nothing to keep */
  blk_buffer_swap(&dst->in[slot], payload);
  /* Out-of-core: a large queue for a block that is out goes out too (if the
   * write fails it stays in memory; the block loses nothing). */
  if (!dst->resident)
    blk__budget_spill_queue(&m->budget, dst->gid, &dst->in[slot], &dst->in_rec[slot]);
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

/* Sends (or hands over) block b's out queue l, or records why it cannot. */
static void send_queue(blk_master *m, blk__block *b, int l) {
  blk__op *o = &m->op;
  blk_buffer *out = &b->out[l];
  int rc = blk__budget_restore_queue(&m->budget, out, &b->out_rec[l]);
  if (rc) {
    /* Its bytes are gone: drop the record, so no later exchange sends
     * them as its own. */
    blk__op_fail(o, rc, b->gid, m->exchanges, "the queue to gid %d was lost: %s", b->link_gids[l],
                 blk_last_error());
    blk__budget_drop_queue(&m->budget, &b->out_rec[l]);
    blk_buffer_clear(out);
    return;
  }
  if (out->error) {
    blk__op_fail(o, out->error, b->gid, m->exchanges,
                 "the queue to gid %d failed to fill (%s) and was not sent", b->link_gids[l],
                 blk_strerror(out->error));
    blk_buffer_clear(out);
    return;
  }
  if (out->size == 0) return;
  blk__msg msg = {o->epoch,       b->gid, b->link_gids[l],   b->keys[l].code,
                  b->keys[l].occ, 0,      (int64_t)out->size};
  if (b->links[l].rank == o->rank) {
    blk__op_count_handed(o, out->size);
    route_exchange(&msg, out, m);
    blk_buffer_clear(out);
  } else if ((rc = blk__comm_send(m->comm, b->links[l].rank, &msg, out, 1))) {
    blk__op_fail(o, rc, b->gid, m->exchanges, "the queue to gid %d was not sent: %s",
                 b->link_gids[l], blk_last_error());
    blk_buffer_clear(out);
  }
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

static int exchange(blk_master *m) {
  int n = blk__table_count(&m->table);
  for (int i = 0; i < n; i++) {
    blk__block *b = blk__table_at(&m->table, i);
    for (int l = 0; l < b->nlinks; l++) {
      blk_buffer_clear(&b->in[l]);
      blk__budget_drop_queue(&m->budget, &b->in_rec[l]);
    }
  }
  blk__op *o = &m->op;
  blk__op_begin(o, "exchange", route_exchange, m);
  for (int i = 0; i < n; i++)
    for (int l = 0; l < blk__table_at(&m->table, i)->nlinks; l++)
      send_queue(m, blk__table_at(&m->table, i), l);
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
  int rc = exchange(m);
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
