/*
 * all_gather.c: every block's bytes to every block (see blk/all_gather.h).
 *
 * A run is the pieces of a range of gids, as one message:
 *     [u64 m][u64 size of each of the m pieces][their bytes, in gid order]
 * Round 0 makes a block's run of one piece from give. In round r (1..R) the
 * block reads the runs its round r-1 group sent it and its own (in the
 * message it sent itself, so that it travels out of core with the block),
 * and joins them in the order of the members' positions: with contiguous
 * swap rounds the members' ranges are adjacent in that order, so the joined
 * run is the range of the whole group, still in gid order. A folded count
 * (patterns/partners_folded.h) adds a first round in which an extra sends
 * its run to its stand-in, the gid before it, and a last in which the
 * stand-in sends it the whole; the runs of those rounds join in gid order.
 * Before the last
 * round it sends the joined run to the others and keeps it in the message
 * to itself; in the last round the runs hold every gid, and their bytes
 * are written once, into the region place gives (blk_all_gather_with) or
 * one of blk's, which take gets with the pieces' offsets.
 *
 * A run's sizes are checked against its length (sum of sizes = bytes), and
 * the joined run against n pieces in the last round: a mismatch is a blk
 * bug or a foreign message, and stops the job (blk__proxy_misuse).
 */
#include "blk/all_gather.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/copy.h"
#include "base/fail.h"
#include "base/settings.h"
#include "blk/partners.h"
#include "collectives/reduce_run.h"
#include "collectives/swap_partners.h"
#include "runtime/callback.h"
#include "runtime/proxy_state.h"

typedef struct gather {
  const blk_partners *p;
  int nblocks;
  blk_gather_give_fn give;
  blk_gather_take_fn take;
  blk_gather_place_fn place; /* NULL: every result in blk's storage */
  void *user;
} gather;

/* A run as it sits in a message: its piece count, sizes and bytes. */
typedef struct run {
  uint64_t m;
  const unsigned char *sizes; /* m native u64, read with memcpy (unaligned) */
  const unsigned char *bytes;
  size_t nbytes;
} run;

static uint64_t size_at(const run *r, uint64_t i) {
  uint64_t v;
  memcpy(&v, r->sizes + 8 * i, sizeof v);
  return v;
}

/* Reads the run in in queue i (all of it, in place: one view, taken apart
 * here, for a kilobyte's run costs about as much as a view). */
static run read_run(blk_proxy *p, int i) {
  run r = {0, NULL, NULL, 0};
  size_t left = blk_proxy_incoming_remaining(p, i);
  if (left < 8)
    blk__proxy_misuse(p, "all_gather: a run of %zu bytes from gid %d", left,
                      blk_proxy_in_gid(p, i));
  const unsigned char *at = blk_proxy_dequeue_view(p, i, left);
  memcpy(&r.m, at, 8);
  left -= 8;
  if (r.m > left / 8)
    blk__proxy_misuse(p, "all_gather: %llu pieces in %zu bytes from gid %d",
                      (unsigned long long)r.m, left, blk_proxy_in_gid(p, i));
  r.sizes = at + 8;
  left -= (size_t)(8 * r.m);
  uint64_t sum = 0;
  for (uint64_t j = 0; j < r.m; j++) sum += size_at(&r, j);
  if (sum != left)
    blk__proxy_misuse(p, "all_gather: pieces of %llu bytes in %zu from gid %d",
                      (unsigned long long)sum, left, blk_proxy_in_gid(p, i));
  r.nbytes = left;
  r.bytes = r.sizes + 8 * r.m;
  return r;
}

static int out_self(blk_proxy *p, int gid) {
  for (int i = 0; i < blk_proxy_out_count(p); i++)
    if (blk_proxy_out_gid(p, i) == gid) return i;
  return -1;
}

/* The runs of this round's group, in position order (k of them; a fold
 * round's in gid order), read in place from the in queues into runs. */
static int read_group(const gather *g, blk_proxy *p, int gid, run *runs, int k) {
  int r = blk_proxy_round(p), nin = blk_proxy_in_count(p),
      fold = blk_partners_round_radix(g->p, r - 1) < 0;
  unsigned char seen_stack[16], *seen = k <= 16 ? seen_stack : blk__calloc((size_t)k, 1);
  if (!seen)
    return blk__fail(BLK_ENOMEM, "all_gather: gid %d has no memory for a group of %d", gid, k);
  memset(seen, 0, (size_t)k);
  for (int i = 0; i < nin; i++) {
    int at = fold ? i : blk_partners_round_position(g->p, r - 1, blk_proxy_in_gid(p, i));
    if (at < 0 || at >= k || seen[at])
      blk__proxy_misuse(p, "all_gather: gid %d: a run from gid %d at place %d of %d", gid,
                        blk_proxy_in_gid(p, i), at, k);
    runs[at] = read_run(p, i);
    seen[at] = 1;
  }
  for (int j = 0; j < k; j++)
    if (!seen[j]) blk__proxy_misuse(p, "all_gather: gid %d has no run from place %d", gid, j);
  if (seen != seen_stack) free(seen);
  return BLK_OK;
}

/* The k runs joined into one, appended to q. */
static int join(const run *runs, int k, int gid, blk_buffer *q) {
  uint64_t m = 0;
  size_t bytes = 0;
  for (int j = 0; j < k; j++) {
    m += runs[j].m;
    bytes += runs[j].nbytes;
  }
  unsigned char *out = blk_buffer_append(q, 8 + 8 * (size_t)m + bytes);
  if (!out)
    return blk__fail(BLK_ENOMEM, "all_gather: gid %d has no memory for a run of %zu bytes", gid,
                     bytes);
  memcpy(out, &m, 8);
  unsigned char *sizes = out + 8, *data = sizes + 8 * m;
  for (int j = 0; j < k; j++) {
    memcpy(sizes, runs[j].sizes, (size_t)(8 * runs[j].m));
    sizes += 8 * runs[j].m;
    blk__copy(data, runs[j].bytes, runs[j].nbytes);
    data += runs[j].nbytes;
  }
  return BLK_OK;
}

/* The last round: the k runs, which hold every gid's piece, written into
 * the result (where place says, else blk's), and take called with it. */
static int hand_over(const gather *g, blk_proxy *p, void *block, int gid, const run *runs, int k) {
  uint64_t m = 0;
  for (int j = 0; j < k; j++) m += runs[j].m;
  if (m != (uint64_t)g->nblocks)
    blk__proxy_misuse(p, "all_gather: gid %d ends with %llu pieces of %d", gid,
                      (unsigned long long)m, g->nblocks);
  size_t few[64],
      *offsets = g->nblocks < 64 ? few : blk__malloc(((size_t)g->nblocks + 1) * sizeof *offsets);
  if (!offsets)
    return blk__fail(BLK_ENOMEM, "all_gather: gid %d has no memory for %d offsets", gid,
                     g->nblocks);
  size_t at = 0;
  int piece = 0;
  for (int j = 0; j < k; j++)
    for (uint64_t i = 0; i < runs[j].m; i++) {
      offsets[piece++] = at;
      at += (size_t)size_at(&runs[j], i);
    }
  offsets[g->nblocks] = at;
  unsigned char *own = NULL, *result = g->place ? g->place(block, gid, at, g->user) : NULL;
  if (!result && !(result = own = blk__malloc(at ? at : 1))) {
    if (offsets != few) free(offsets);
    return blk__fail(BLK_ENOMEM, "all_gather: gid %d has no memory for %zu bytes", gid, at);
  }
  unsigned char *to = result;
  for (int j = 0; j < k; j++) {
    blk__copy(to, runs[j].bytes, runs[j].nbytes);
    to += runs[j].nbytes;
  }
  int rc = g->take(block, gid, result, offsets, g->nblocks, g->user);
  free(own);
  if (offsets != few) free(offsets);
  return rc ? blk__callback_error("take callback", rc) : BLK_OK;
}

static int gather_round(void *block, blk_proxy *p, void *user) {
  const gather *g = user;
  int gid = blk_proxy_gid(p), r = blk_proxy_round(p), R = blk_partners_rounds(g->p);
  blk_buffer run_q = BLK_BUFFER_INIT;
  int rc = BLK_OK;
  if (r == 0) {
    const void *data = NULL;
    size_t size = 0;
    if ((rc = g->give(block, gid, &data, &size, g->user)))
      return blk__callback_error("give callback", rc);
    uint64_t one = 1, s = size;
    unsigned char *at = size <= SIZE_MAX - 16 ? blk_buffer_append(&run_q, 16 + size) : NULL;
    if (!at) {
      blk_buffer_free(&run_q);
      return blk__fail(BLK_ENOMEM, "all_gather: gid %d has no memory for its %zu bytes", gid, size);
    }
    memcpy(at, &one, 8);
    memcpy(at + 8, &s, 8);
    if (size) blk__copy(at + 16, data, size);
    if (R == 0) { /* one block: round 0 is the last (from the copy: give's bytes may be gone) */
      run mine = {1, run_q.data + 8, run_q.data + 16, size};
      rc = hand_over(g, p, block, gid, &mine, 1);
      blk_buffer_free(&run_q);
      return rc;
    }
  } else {
    int k = blk_partners_round_radix(g->p, r - 1);
    if (k < 0) k = blk_proxy_in_count(p); /* a fold round */
    run stack[16], *runs = k <= 16 ? stack : blk__calloc((size_t)k, sizeof *runs);
    if (!runs)
      return blk__fail(BLK_ENOMEM, "all_gather: gid %d has no memory for a group of %d", gid, k);
    rc = read_group(g, p, gid, runs, k);
    if (!rc) rc = r == R ? hand_over(g, p, block, gid, runs, k) : join(runs, k, gid, &run_q);
    if (runs != stack) free(runs);
    if (rc || r == R) {
      blk_buffer_free(&run_q);
      return rc;
    }
  }
  int self = out_self(p, gid);
  for (int i = 0; i < blk_proxy_out_count(p) && !rc; i++)
    if (i != self) rc = blk_proxy_enqueue(p, i, run_q.data, run_q.size);
  if (!rc && self >= 0) /* (an extra folding sends only to its stand-in) */
    blk_buffer_swap(blk_proxy_outgoing(p, self), &run_q); /* (its queue was empty) */
  blk_buffer_free(&run_q);
  return rc;
}

int blk_all_gather_config_init(blk_all_gather_config *cfg, unsigned int version) {
  static const blk_all_gather_config defaults = BLK_ALL_GATHER_CONFIG_INIT;
  return blk__settings_init(cfg, &defaults, sizeof defaults, NULL, version,
                            BLK_ALL_GATHER_CONFIG_VERSION, "all_gather: config init");
}

int blk_all_gather(blk_master *m, const blk_assigner *a, int k, blk_gather_give_fn give,
                   blk_gather_take_fn take, void *user) {
  return blk_all_gather_with(m, a, k, give, take, NULL, user);
}

int blk_all_gather_with(blk_master *m, const blk_assigner *a, int k, blk_gather_give_fn give,
                        blk_gather_take_fn take, const blk_all_gather_config *cfg, void *user) {
  static const blk__driver driver = {"all_gather", NULL, 1, NULL, 0, 0, 0, 0};
  if (!m) return blk__fail(BLK_EINVAL, "all_gather: the master is NULL");
  if (!a || !give || !take)
    return blk__fail(BLK_EINVAL, "all_gather: the assigner, give or take is NULL");
  gather g = {NULL, blk_assigner_nblocks(a), give, take, cfg ? cfg->place : NULL, user};
  const blk_partners *p = NULL;
  int rc = BLK_OK;
  /* A bad config aborts (rather than returns): every rank then returns the
   * same code, even when only this one was given it. */
  if (cfg && (cfg->version < 1 || cfg->version > BLK_ALL_GATHER_CONFIG_VERSION))
    rc = blk__fail(BLK_EINVAL,
                   "all_gather: the config has version %u; this blk knows 1..%u (initialise it "
                   "with BLK_ALL_GATHER_CONFIG_INIT or blk_all_gather_config_init)",
                   cfg->version, BLK_ALL_GATHER_CONFIG_VERSION);
  static const char owner = 0;
  int made = 0;
  if (!rc) rc = blk__swap_partners_kept(m, &owner, g.nblocks, k, 1, &p, &made);
  if (rc) return blk__reduce_abort(m, rc, driver.name); /* the others may be under way */
  g.p = p;
  return blk__reduce_run(m, a, p, gather_round, &g, &driver);
}
