/*
 * points.h: the particles of the two redistribution examples, kept in one
 * place so that redistribute.c (swap-reduce by hand) and redistribute_a2a.c
 * (blk_all_to_all) differ only in how they move them. Header-only (static
 * inline), not part of blk's API; it builds on example_util.h.
 *
 *  - point: a 32-bit id and a position in the unit cube (points_domain) in
 *    floats, 16 bytes. point_make gives the point with a given id, a pure
 *    function of (seed, id): the same on every rank, so any rank can say
 *    which block owns any point (point_coords widens it to doubles for the
 *    decomposer's calls; blk_router_cpoints_out_float routes the floats).
 *  - point_block: a block's points, a growable array (point_block_reserve).
 *    points_configure puts its create, destroy, save, evict and load
 *    callbacks into a master's config; out-of-core, evict hands over the
 *    points (save copies them, for a checkpoint) and load takes them back
 *    (the points in flight sit in blk's queues, which blk swaps with their
 *    block).
 *  - points_setup: the problem (decomposer, seed, points per block) and its
 *    serial reference, computed on every rank by points_setup_init: how many
 *    points each block must end with, and the sums of the ids and of a hash
 *    of the ids.
 *  - make_points: the foreach that fills each block with its own points
 *    (block g makes ids g * P .. g * P + P - 1), before they move.
 *  - check_points: the foreach that checks each block after the move: only
 *    points inside its bounds, unchanged, exactly as many as the serial count
 *    says; it posts the count, the errors and the two sums as all-reduces,
 *    and points_results reads them after the exchange that completes them.
 *
 * Each callback takes the points_setup as its user pointer.
 */
#ifndef BLK_EXAMPLE_POINTS_H
#define BLK_EXAMPLE_POINTS_H

#include <blk/blk.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

#define DIM 3

/* Single precision and a 32-bit id, as simulations' particles often are:
 * half the bytes of an id and three doubles, so every round moves half as
 * much (DIY's examples move three floats and no id, 12 bytes). */
typedef struct point {
  uint32_t id; /* block g makes ids g * P .. g * P + P - 1 */
  float x[DIM];
} point;

/* Ids are 32 bits: at most this many points in all. */
#define POINTS_MAX ((uint64_t)UINT32_MAX + 1)

/* The point with a given id: the same on every rank. A coordinate is a
 * multiple of 2^-24 in [0, 1), which a float holds exactly. */
static inline point point_make(uint64_t seed, uint64_t id) {
  point pt = {(uint32_t)id, {0}};
  for (int a = 0; a < DIM; a++)
    pt.x[a] = (float)(ex_random(seed, id, (uint64_t)a) >> 40) * 0x1p-24f;
  return pt;
}

/* The point's position in doubles (exactly), for the decomposer's calls. */
static inline void point_coords(const point *pt, double x[DIM]) {
  for (int a = 0; a < DIM; a++) x[a] = pt->x[a];
}

/* The unit cube, where point_make puts every point: the domain to cut. */
static inline int points_domain(blk_cbounds *cube) {
  double lo[DIM] = {0, 0, 0}, hi[DIM] = {1, 1, 1};
  return blk_cbounds_set(cube, DIM, lo, hi);
}

/* What the sums of hashes add up: < 2^31, so sums over < 2^32 points fit. */
static inline int64_t point_hash(uint64_t id) {
  return (int64_t)(ex_mix64(id) >> 33);
}

/* ---- a block of points -------------------------------------------------- */

typedef struct point_block {
  point *pts;
  size_t n, cap;
  point *sent; /* redistribute_a2a: sent by reference, kept until the call returns */
} point_block;

/* Room for n points (the first b->n are kept); 0 or BLK_ENOMEM. */
static inline int point_block_reserve(point_block *b, size_t n) {
  if (n <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < n) cap *= 2;
  point *grown = realloc(b->pts, cap * sizeof *grown);
  if (!grown) return BLK_ENOMEM;
  b->pts = grown;
  b->cap = cap;
  return 0;
}

static inline int point_block_create(void **out, int gid, void *user) {
  (void)gid;
  (void)user;
  *out = calloc(1, sizeof(point_block));
  return *out ? 0 : BLK_ENOMEM;
}

static inline void point_block_destroy(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  point_block *b = block;
  if (b) {
    free(b->pts);
    free(b->sent);
  }
  free(b);
}

/* Out-of-core: the block's points, as they are (their count is the size;
 * the capacity is not state). Load takes the buffer's memory, where the
 * points already are, rather than copy 6 MB into fresh memory: blk allows
 * that (master.h), as long as load does not fail after taking it. */
static inline int point_block_save(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  const point_block *b = block;
  return blk_buffer_write(out, b->pts, b->n * sizeof(point));
}

/* ... and when the block goes out (destroy follows), the points' memory
 * itself, which load then takes back: a block crosses storage with no copy
 * of its own. */
static inline int point_block_evict(blk_buffer *out, void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  point_block *b = block;
  if (!b->pts) return 0;
  blk_buffer_adopt(out, b->pts, b->n * sizeof(point), b->cap * sizeof(point));
  b->pts = NULL;
  b->n = b->cap = 0;
  return 0;
}

static inline int point_block_load(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  point_block *b = block;
  size_t bytes = blk_buffer_remaining(in), cap = 0;
  if (bytes % sizeof(point) != 0) return BLK_ECORRUPT;
  point *mem = in->pos == 0 && bytes > 0 ? blk_buffer_detach(in, &cap) : NULL;
  if (mem) {
    free(b->pts);
    b->pts = mem;
    b->cap = cap / sizeof(point);
  } else {
    if (point_block_reserve(b, bytes / sizeof(point))) return BLK_ENOMEM;
    if (bytes && blk_buffer_read(in, b->pts, bytes)) return blk_buffer_error(in);
  }
  b->n = bytes / sizeof(point);
  return 0;
}

/* A master's blocks are point_blocks: their callbacks, and the shuffle that
 * suits a point's bytes when blk compresses them out-of-core. */
static inline void points_configure(blk_master_config *mc) {
  mc->create = point_block_create;
  mc->destroy = point_block_destroy;
  mc->save = point_block_save;
  mc->load = point_block_load;
  mc->evict = point_block_evict;
  mc->shuffle = sizeof(float); /* a point is a uint32_t and floats */
}

/* ---- the problem and its serial reference ------------------------------- */

typedef struct points_setup {
  const blk_decomposer *d; /* says which block owns a position */
  uint64_t seed;
  uint64_t per_block; /* points made by each block */
  uint64_t total;     /* of all blocks */
  int64_t *expected;  /* serial: points owned by each gid */
  int64_t id_sum;     /* serial: the sum of all ids */
  int64_t hash_sum;   /* serial: the sum of point_hash over all ids */
} points_setup;

/* The serial reference: the owner of every point, on this rank alone.
 * Exits with a message if the points are more than 32-bit ids number, or
 * there is no memory for the counts; points_setup_free frees them. */
static inline void points_setup_init(points_setup *ps, const blk_decomposer *d, int nblocks,
                                     uint64_t seed, uint64_t per_block) {
  ps->d = d;
  ps->seed = seed;
  ps->per_block = per_block;
  ps->total = (uint64_t)nblocks * per_block;
  if (ps->total > POINTS_MAX)
    ex_fail(__FILE__, __LINE__, "points_setup_init", BLK_EINVAL,
            "--blocks times --points is more than the 2^32 ids a point can have");
  ps->expected = calloc((size_t)nblocks, sizeof *ps->expected);
  if (!ps->expected) ex_fail(__FILE__, __LINE__, "calloc", BLK_ENOMEM, "the serial counts");
  ps->hash_sum = 0;
  for (uint64_t id = 0; id < ps->total; id++) {
    point pt = point_make(seed, id);
    double x[DIM];
    point_coords(&pt, x);
    ps->expected[blk_decomposer_cpoint_to_gid(d, x)]++;
    ps->hash_sum += point_hash(id);
  }
  ps->id_sum = (int64_t)(ps->total * (ps->total - 1) / 2);
}

static inline void points_setup_free(points_setup *ps) {
  free(ps->expected);
  ps->expected = NULL;
}

/* ---- before and after the move ------------------------------------------ */

/* foreach: make this block's points. */
static inline int make_points(void *block, blk_proxy *p, void *user) {
  const points_setup *ps = user;
  point_block *b = block;
  uint64_t first = (uint64_t)blk_proxy_gid(p) * ps->per_block;
  if (point_block_reserve(b, ps->per_block)) return BLK_ENOMEM;
  for (uint64_t i = 0; i < ps->per_block; i++) b->pts[i] = point_make(ps->seed, first + i);
  b->n = ps->per_block;
  return 0;
}

/* foreach: check this block's points and post the global sums. */
static inline int check_points(void *block, blk_proxy *p, void *user) {
  const points_setup *ps = user;
  point_block *b = block;
  int gid = blk_proxy_gid(p);
  blk_cbounds core;
  int rc = blk_decomposer_block_cbounds(ps->d, gid, &core, NULL);
  if (rc) return rc;
  int64_t errors = (int64_t)b->n != ps->expected[gid];
  int64_t id_sum = 0, hash_sum = 0;
  for (size_t j = 0; j < b->n; j++) {
    const point *pt = &b->pts[j];
    point want = point_make(ps->seed, pt->id);
    double x[DIM];
    point_coords(pt, x);
    if (blk_decomposer_cpoint_to_gid(ps->d, x) != gid || !blk_cbounds_contains(&core, x) ||
        memcmp(pt, &want, sizeof want) != 0)
      errors++;
    id_sum += (int64_t)pt->id;
    hash_sum += point_hash(pt->id);
  }
  int64_t post[4] = {(int64_t)b->n, errors, id_sum, hash_sum};
  for (int i = 0; i < 4 && !rc; i++) rc = blk_proxy_all_reduce_i64(p, post[i], BLK_OP_SUM);
  return rc;
}

/* What check_points found over all blocks. */
typedef struct points_result {
  int64_t arrived; /* points held by all blocks */
  int64_t errors;  /* misplaced, changed, or a block's count off the serial one */
  int sums_ok;     /* the id and hash sums equal the serial ones */
} points_result;

/* Reads check_points' posts, once the exchange after it completed them. */
static inline points_result points_results(const blk_master *m, const points_setup *ps) {
  points_result res;
  res.arrived = blk_master_result_i64(m, 0);
  res.errors = blk_master_result_i64(m, 1);
  res.sums_ok =
      blk_master_result_i64(m, 2) == ps->id_sum && blk_master_result_i64(m, 3) == ps->hash_sum;
  return res;
}

/* Every point arrived once, at its owner, unchanged. */
static inline int points_ok(const points_result *res, const points_setup *ps) {
  return res->arrived == (int64_t)ps->total && res->errors == 0 && res->sums_ok;
}

#endif
