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
 * once all of a rank's headers are matched it joins a non-blocking
 * collective; when that completes everyone's headers have been matched.
 * The collective is the MPI_Iallreduce of the posted values (values.h), so
 * the all-reduce comes at no extra latency.
 *
 * Cost per exchange: alpha + beta*n per remote non-empty queue, plus one
 * Iallreduce of 520 bytes (alpha*log p).
 */
#include <string.h>

#include "master_state.h"

/* The receiving end of a message: the link of dst that points back. */
static int find_slot(const blk__block *dst, const blk__msg *msg) {
  for (int i = 0; i < dst->nlinks; i++)
    if (dst->link_gids[i] == msg->src_gid && dst->keys[i].rev_code == msg->key &&
        dst->keys[i].occ == msg->aux)
      return i;
  return -1;
}

static void route_exchange(blk_master *m, const blk__msg *msg, blk_buffer *payload, void *ctx) {
  (void)ctx;
  int lid = blk__gid_map_get(&m->lids, msg->dst_gid);
  if (lid < 0)
    blk__panic("exchange %d: rank %d got a message from gid %d for gid %d, which it does not own",
               m->epoch, blk__comm_rank(m->comm), msg->src_gid, msg->dst_gid);
  blk__block *dst = &m->blocks[lid];
  int slot = find_slot(dst, msg);
  if (slot < 0)
    blk__panic(
        "exchange %d: gid %d sent to gid %d over a link that gid %d has no link back for "
        "(links must be symmetric)",
        m->epoch, msg->src_gid, msg->dst_gid, msg->dst_gid);
  if (dst->in[slot].size || dst->in_rec[slot].stored)
    blk__panic("exchange %d: gid %d received two messages from gid %d on link %d", m->epoch,
               msg->dst_gid, msg->src_gid, slot);
  blk_buffer_swap(&dst->in[slot], payload);
  /* Out-of-core: a large queue for a block that is out goes out too (if the
   * write fails it stays in memory; the block loses nothing). */
  if (!dst->resident) blk__budget_spill_queue(m, dst->gid, &dst->in[slot], &dst->in_rec[slot]);
}

/* Combines the values posted by this rank's blocks; a block that posted a
 * different sequence from the others is a programming error. */
static void combine_posts(blk_master *m, blk__values *acc) {
  blk__values_clear(acc);
  for (int i = 0; i < m->nblocks; i++) {
    blk__block *b = &m->blocks[i];
    if (blk__values_combine(acc, &b->posts) != 0)
      blk__panic(
          "exchange %d: gid %d posted %d all-reduce values, or other types or ops, than "
          "gid %d did (%d values); every block must post the same sequence",
          m->epoch + 1, b->gid, b->posts.count, m->blocks[0].gid, m->blocks[0].posts.count);
    blk__values_clear(&b->posts);
  }
}

typedef struct nbx {
  int started;
  MPI_Request request;
  blk__values local, global;
  int rc;
} nbx;

static int nbx_done(blk_master *m, void *ctx) {
  nbx *x = ctx;
  if (!x->started && blk__comm_unmatched(m->comm) == 0) {
    x->rc = blk__comm_check(MPI_Iallreduce(&x->local, &x->global, 1, m->values_mpi.type,
                                           m->values_mpi.op, blk__comm_mpi(m->comm), &x->request),
                            "MPI_Iallreduce");
    if (x->rc) return 1;
    x->started = 1;
  }
  if (!x->started) return 0;
  int flag = 0;
  x->rc = blk__comm_check(MPI_Test(&x->request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  if (x->rc) return 1;
  /* Every header is matched; payload receives posted for them may still be
   * in flight. */
  return flag && blk__comm_recvs_pending(m->comm) == 0;
}

int blk_master_exchange(blk_master *m) {
  int rc = BLK_OK, io = BLK_OK;
  int me = blk__comm_rank(m->comm);
  nbx x = {0};
  x.request = MPI_REQUEST_NULL;
  combine_posts(m, &x.local);

  for (int i = 0; i < m->nblocks; i++)
    for (int l = 0; l < m->blocks[i].nlinks; l++) {
      blk_buffer_clear(&m->blocks[i].in[l]);
      blk__budget_drop_queue(m, &m->blocks[i].in_rec[l]);
    }
  blk__master_begin(m, route_exchange, NULL);

  for (int i = 0; i < m->nblocks; i++) {
    blk__block *b = &m->blocks[i];
    for (int l = 0; l < b->nlinks; l++) {
      blk_buffer *out = &b->out[l];
      int qrc = blk__budget_restore_queue(m, out, &b->out_rec[l]);
      if (qrc) { /* keep going, or the other ranks would wait: report it at the end */
        if (!io) io = qrc;
        continue;
      }
      if (out->error)
        blk__panic("exchange %d: gid %d's queue to gid %d failed earlier (%s)", m->epoch, b->gid,
                   b->link_gids[l], blk_strerror(out->error));
      if (out->size == 0) continue;
      blk__msg msg = {m->epoch,       b->gid, b->link_gids[l],   b->keys[l].code,
                      b->keys[l].occ, 0,      (int64_t)out->size};
      if (b->links[l].rank == me) {
        route_exchange(m, &msg, out, NULL);
        blk_buffer_clear(out);
      } else if ((rc = blk__comm_send(m->comm, b->links[l].rank, &msg, out, 1))) {
        return rc;
      }
    }
  }
  if ((rc = blk__master_progress_until(m, nbx_done, &x))) return rc;
  if (x.rc) return x.rc;
  m->route = NULL;
  if (blk__values_mismatch(&x.global)) {
    blk__values_clear(&m->results);
    return blk__fail(BLK_EINVAL,
                     "exchange %d: ranks posted different all-reduce sequences (count, type or op)",
                     m->epoch);
  }
  m->results = x.global;
  return io;
}

double blk_master_result_f64(const blk_master *m, int i) {
  if (i < 0 || i >= m->results.count || m->results.items[i].kind / 4 != BLK__VALUE_F64)
    blk__panic("master: all-reduce result %d as double: the last exchange completed %d values", i,
               m->results.count);
  return m->results.items[i].v.f64;
}

int64_t blk_master_result_i64(const blk_master *m, int i) {
  if (i < 0 || i >= m->results.count || m->results.items[i].kind / 4 != BLK__VALUE_I64)
    blk__panic("master: all-reduce result %d as int64: the last exchange completed %d values", i,
               m->results.count);
  return m->results.items[i].v.i64;
}

int blk_master_result_count(const blk_master *m) {
  return m->results.count;
}
