/*
 * proxy.c: a callback's view of its block's queues; see blk/proxy.h.
 *
 * The proxy only points into the block's queues (proxy_state.h), so making
 * one per callback costs nothing. Misuse inside a collective phase stops the
 * job with the rank, gid, phase and round: an error code returned from a
 * callback on one rank would leave the others waiting.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/block_table.h"
#include "runtime/proxy_state.h"

_Static_assert(BLK_PROXY_MAX_REDUCTIONS == BLK__VALUES_MAX,
               "a block's posts fit the values an agreement carries");

void blk__proxy_misuse(const blk_proxy *p, const char *fmt, ...) {
  char what[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  blk__panic("rank %d, gid %d, %s round %d: %s", p->rank, p->gid, p->phase, p->round, what);
}

int blk_proxy_gid(const blk_proxy *p) {
  return p->gid;
}
int blk_proxy_round(const blk_proxy *p) {
  return p->round;
}
const blk_partners *blk_proxy_partners(const blk_proxy *p) {
  return p->partners;
}
int blk_proxy_out_count(const blk_proxy *p) {
  return p->nout;
}
int blk_proxy_in_count(const blk_proxy *p) {
  return p->nin;
}

static void check_out(const blk_proxy *p, int i) {
  if (i < 0 || i >= p->nout)
    blk__proxy_misuse(p, "out queue %d does not exist (the block has %d out queues)", i, p->nout);
}

static void check_in(const blk_proxy *p, int i) {
  if (i < 0 || i >= p->nin)
    blk__proxy_misuse(p, "in queue %d does not exist (the block has %d in queues)", i, p->nin);
}

int blk_proxy_out_gid(const blk_proxy *p, int i) {
  check_out(p, i);
  return p->out_gids[i];
}

int blk_proxy_in_gid(const blk_proxy *p, int i) {
  check_in(p, i);
  return p->in_gids[i];
}

int blk_proxy_link_count(const blk_proxy *p) {
  return p->links ? p->nlinks : 0;
}

const blk_link *blk_proxy_link(const blk_proxy *p, int i) {
  if (!p->links) return NULL;
  if (i >= p->nlinks && i < p->nin) return NULL; /* an in queue from any gid */
  check_out(p, i);
  return i < p->nlinks ? &p->links[i] : NULL;
}

static int find_gid(const int *gids, int n, int gid) {
  for (int i = 0; i < n; i++)
    if (gids[i] == gid) return i;
  return -1;
}

/* Out queue i as a buffer the callback may write: a reference it holds
 * (blk_proxy_enqueue_ref) is copied into storage of its own first. A copy
 * that finds no memory leaves the queue empty with its sticky error, so the
 * message goes out as failed (blk/proxy.h). */
static int own_out(blk_proxy *p, int i) {
  int rc = blk__buffer_cache_own(p->cache, &p->out[i]);
  if (rc)
    return blk__fail(rc, "rank %d, gid %d: no memory to copy the referenced bytes to gid %d",
                     p->rank, p->gid, p->out_gids[i]);
  return BLK_OK;
}

blk_buffer *blk_proxy_outgoing(blk_proxy *p, int i) {
  check_out(p, i);
  own_out(p, i);
  return &p->out[i];
}

blk_buffer *blk_proxy_incoming(blk_proxy *p, int i) {
  check_in(p, i);
  if (p->in_lent && blk__buffer_cache_own(p->cache, &p->in[i])) {
    p->in_lost = 1;
    blk__fail(BLK_ENOMEM, "rank %d, gid %d: no memory to copy the message from gid %d", p->rank,
              p->gid, p->in_gids[i]);
  }
  return &p->in[i];
}

const void *blk_proxy_dequeue_view(blk_proxy *p, int i, size_t n) {
  check_in(p, i);
  size_t left = blk_buffer_remaining(&p->in[i]);
  if (n > left)
    blk__proxy_misuse(p, "dequeue of %zu bytes from gid %d, but only %zu remain of its message", n,
                      p->in_gids[i], left);
  return blk_buffer_read_view(&p->in[i], n);
}

int blk_proxy_enqueue(blk_proxy *p, int i, const void *data, size_t n) {
  check_out(p, i);
  if (n == 0) return BLK_OK;
  int rc = own_out(p, i);
  if (rc) return rc;
  /* Growing takes spare storage that is already faulted in, if there is. */
  rc = blk__buffer_cache_reserve(p->cache, &p->out[i], n);
  if (!rc) rc = blk_buffer_write(&p->out[i], data, n);
  if (rc)
    return blk__fail(rc, "rank %d, gid %d: enqueue of %zu bytes to gid %d failed", p->rank, p->gid,
                     n, p->out_gids[i]);
  return BLK_OK;
}

void blk__proxy_enqueue_ref(blk_proxy *p, int i, const void *data, size_t n) {
  check_out(p, i);
  if (p->out[i].size)
    blk__proxy_misuse(p, "a reference enqueued after %zu bytes to gid %d", p->out[i].size,
                      p->out_gids[i]);
  blk__buffer_cache_give(p->cache, &p->out[i]);
  blk__buffer_ref(&p->out[i], data, n);
}

int blk_proxy_enqueue_ref(blk_proxy *p, int i, const void *data, size_t n) {
  check_out(p, i);
  blk_buffer *q = &p->out[i];
  if (!p->refs || q->size || q->error || n == 0) return blk_proxy_enqueue(p, i, data, n);
  blk__buffer_cache_give(p->cache, q); /* empty storage it held goes back */
  blk__buffer_ref(q, data, n);
  return BLK_OK;
}

/* The out queue for gid: open_out's (all_to_all's send phase), or the
 * first partner with that gid; -2 when open_out found no memory. */
static int out_of_gid(blk_proxy *p, int gid) {
  int i = p->open_out ? p->open_out(p, gid) : find_gid(p->out_gids, p->nout, gid);
  if (i == -1)
    blk__proxy_misuse(p, "enqueue to gid %d, which is not an out-partner of this block", gid);
  return i;
}

int blk_proxy_enqueue_gid(blk_proxy *p, int gid, const void *data, size_t n) {
  int i = out_of_gid(p, gid);
  if (i == -2) return BLK_ENOMEM; /* open_out found no memory (the detail says so) */
  return blk_proxy_enqueue(p, i, data, n);
}

int blk_proxy_enqueue_ref_gid(blk_proxy *p, int gid, const void *data, size_t n) {
  int i = out_of_gid(p, gid);
  if (i == -2) return BLK_ENOMEM;
  return blk_proxy_enqueue_ref(p, i, data, n);
}

static int open_remote(blk_proxy *p, int gid) {
  blk__block *b = p->hook;
  int i = blk__block_open_out(b, gid);
  p->out = b->out; /* it may have moved */
  p->out_gids = b->out_gids;
  p->nout = b->nout;
  return i;
}

void blk__proxy_of_block(blk_proxy *p, blk__block *b) {
  p->nin = b->nin;
  p->nout = b->nout;
  p->in_gids = b->in_gids;
  p->out_gids = b->out_gids;
  p->in = b->in;
  p->out = b->out;
  p->links = b->links;
  p->nlinks = b->nlinks;
  p->hook = b;
  p->open_remote = open_remote;
}

int blk_proxy_open_to(blk_proxy *p, int gid) {
  if (!p->open_remote)
    blk__proxy_misuse(p, "enqueue to any gid (%d): only foreach and iexchange callbacks can", gid);
  if (gid < 0) blk__proxy_misuse(p, "enqueue to gid %d", gid);
  return p->open_remote(p, gid);
}

int blk_proxy_enqueue_to(blk_proxy *p, int gid, const void *data, size_t n) {
  int i = blk_proxy_open_to(p, gid);
  if (i < 0) return i;
  return blk_proxy_enqueue(p, i, data, n);
}

int blk_proxy_enqueue_array(blk_proxy *p, int i, const void *data, size_t elem_size, size_t count) {
  check_out(p, i);
  uint64_t header[2] = {(uint64_t)elem_size, (uint64_t)count};
  int rc = blk_proxy_enqueue(p, i, header, sizeof header);
  if (!rc && count) {
    if (elem_size && count > SIZE_MAX / elem_size)
      return blk__fail(BLK_EINVAL, "gid %d: enqueue_array of %zu elements of %zu bytes overflows",
                       p->gid, count, elem_size);
    rc = blk_proxy_enqueue(p, i, data, elem_size * count);
  }
  return rc;
}

void blk_proxy_dequeue(blk_proxy *p, int i, void *data, size_t n) {
  check_in(p, i);
  size_t left = blk_buffer_remaining(&p->in[i]);
  if (n > left)
    blk__proxy_misuse(p, "dequeue of %zu bytes from gid %d, but only %zu remain of its message", n,
                      p->in_gids[i], left);
  if (n) blk_buffer_read(&p->in[i], data, n);
}

void blk_proxy_dequeue_gid(blk_proxy *p, int gid, void *data, size_t n) {
  int i = find_gid(p->in_gids, p->nin, gid);
  if (i < 0)
    blk__proxy_misuse(p, "dequeue from gid %d, which is not an in-partner of this block", gid);
  blk_proxy_dequeue(p, i, data, n);
}

/* Reads an array's header and checks it against what the caller expects. */
static size_t array_count(blk_proxy *p, int i, size_t elem_size) {
  uint64_t header[2];
  blk_proxy_dequeue(p, i, header, sizeof header);
  if (header[0] != elem_size)
    blk__proxy_misuse(p,
                      "dequeue_array of %zu-byte elements from gid %d, which sent %llu-byte ones",
                      elem_size, p->in_gids[i], (unsigned long long)header[0]);
  size_t left = blk_buffer_remaining(&p->in[i]);
  if (elem_size && header[1] > left / elem_size)
    blk__proxy_misuse(p, "array from gid %d claims %llu elements but only %zu bytes remain",
                      p->in_gids[i], (unsigned long long)header[1], left);
  return (size_t)header[1];
}

size_t blk_proxy_dequeue_array(blk_proxy *p, int i, void *dst, size_t elem_size, size_t max_count) {
  size_t count = array_count(p, i, elem_size);
  if (count > max_count)
    blk__proxy_misuse(p, "array from gid %d has %zu elements, room for only %zu", p->in_gids[i],
                      count, max_count);
  if (count) blk_proxy_dequeue(p, i, dst, count * elem_size);
  return count;
}

size_t blk_proxy_dequeue_array_view(blk_proxy *p, int i, const void **data, size_t elem_size) {
  size_t count = array_count(p, i, elem_size);
  *data = blk_buffer_read_view(&p->in[i], count * elem_size);
  return count;
}

size_t blk_proxy_incoming_remaining(const blk_proxy *p, int i) {
  check_in(p, i);
  return blk_buffer_remaining(&p->in[i]);
}

static int post(blk_proxy *p, int type, double f, int64_t v, blk_op op) {
  if (!p->posts)
    blk__proxy_misuse(p, "all-reduce posted outside blk_master_foreach (post it in a foreach)");
  return blk__values_post(p->posts, type, op, f, v);
}

int blk_proxy_all_reduce_f64(blk_proxy *p, double value, blk_op op) {
  return post(p, BLK__VALUE_F64, value, 0, op);
}

int blk_proxy_all_reduce_i64(blk_proxy *p, int64_t value, blk_op op) {
  return post(p, BLK__VALUE_I64, 0.0, value, op);
}

static const blk__value *result(const blk_proxy *p, int i, int type) {
  const blk__values *r = p->results;
  if (!r || i < 0 || i >= r->count)
    blk__proxy_misuse(p, "all-reduce result %d asked for, but the last exchange completed %d", i,
                      r ? r->count : 0);
  if (r->items[i].kind / 4 != type)
    blk__proxy_misuse(p, "all-reduce result %d is %s, asked for as %s", i,
                      r->items[i].kind / 4 == BLK__VALUE_F64 ? "double" : "int64",
                      type == BLK__VALUE_F64 ? "double" : "int64");
  return &r->items[i];
}

double blk_proxy_result_f64(const blk_proxy *p, int i) {
  return result(p, i, BLK__VALUE_F64)->v.f64;
}

int64_t blk_proxy_result_i64(const blk_proxy *p, int i) {
  return result(p, i, BLK__VALUE_I64)->v.i64;
}
