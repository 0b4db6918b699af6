/*
 * router.c: which group member a point goes to in each round of a built-in
 * pattern over a decomposer's grid (blk_router, partners.h).
 *
 * Exchange round r of a built-in pattern groups blocks by one digit of their
 * grid coordinate c along the round's axis: position (c / step) % radix
 * (partners_regular.c). The router keeps, per round, an axis finder
 * (geometry/decomposer_axis.h) that counts the point's owner along that
 * axis in groups of step blocks, q = c / step, with one multiplication and
 * a floor (exact comparisons settle a point within rounding error of a
 * block boundary). The position q mod radix comes from a table of the
 * round's groups when there are at most TABLE_MAX of them, else from a
 * multiplication by 1/radix: for 0 <= q < 2^31, (q + 0.5) / radix is at
 * least 0.5 / radix from an integer, farther than the 2^-52 relative error
 * of the product, so its floor is exact. Every coordinate is compared with
 * the domain first, so the answer equals
 * blk_partners_round_position(cpoint_to_gid(pt)), including BLK_ENOTFOUND
 * for a point outside.
 *
 * The router holds a copy of the decomposer (for the exact comparisons) and
 * per round its finder, radix and table: O(R + table entries) memory, built
 * at create from the partners' public round queries, which also check that
 * the partners were made for the decomposer's grid. Read-only after create;
 * any thread. Cost per point: the domain test (two coordinates a comparison
 * with GCC's vector extension), one multiplication and floor, a table load
 * and a store; no division. About 3 ns a 3D point on this project's test
 * machine against 14 ns for round_position(cpoint_to_gid) (docs/
 * performance.md).
 *
 * Points come in three types: cells (int64), doubles and floats. A float
 * is widened to a double as it is read, so the float path is the double
 * path with a different load; the type is a constant in each public
 * wrapper, and the inlined loops are typed copies.
 *
 * A folded pattern (blk_partners_create_folded) has no grid digit: its
 * positions depend on the gid (whether it is an extra, which virtual block
 * it stands as). Its router finds the owner's gid from the owner along
 * each axis (a finder per axis, groups of one block) and takes the
 * position from the gid with the same arithmetic as partners_folded.c, from
 * what it kept of each round at create.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "blk/decomposer.h"
#include "blk/partners.h"
#include "geometry/coord.h"
#include "geometry/decomposer_axis.h"
#include "patterns/partners_folded.h"

/* Positions are looked up in a table when a round has at most this many
 * groups (a load instead of a multiplication, a conversion and a product). */
enum { TABLE_MAX = 4096 };

/* A folded pattern's round: its fold, its unfold, or one over the virtual
 * blocks (step and radix along their line). */
enum { FOLD_NONE, FOLD_IN, FOLD_OUT, FOLD_INNER };

typedef struct route {
  blk__axis_finder f; /* the owner along the round's axis, in groups of step blocks */
  int fold;           /* FOLD_NONE but for a folded pattern */
  int step;           /* FOLD_INNER */
  int radix;
  int wraps;             /* more groups than radix: the position is the group mod radix */
  double inv_radix;      /* 1 / radix */
  const uint16_t *table; /* NULL, or the position of each group */
} route;

struct blk_router {
  blk_decomposer *d; /* a copy: the finders point into it */
  int dim;
  int rounds;
  int extras; /* a folded pattern's, or -1 */
  blk__box domain;
  /* A folded pattern's: the owner's coordinate on each axis (groups of one
   * block) and the gid strides (axis 0 fastest). */
  blk__axis_finder owner[BLK_MAX_DIM];
  int stride[BLK_MAX_DIM];
  route round[]; /* rounds of them */
};

int blk_router_create(blk_router **out, const blk_partners *p, const blk_decomposer *d) {
  if (!out) return blk__fail(BLK_EINVAL, "router: out is NULL");
  *out = NULL;
  if (!p || !d)
    return blk__fail(BLK_EINVAL, "router: the %s is NULL", p ? "decomposer" : "partners");
  int dim = blk_decomposer_dim(d), nblocks = blk_decomposer_nblocks(d),
      rounds = blk_partners_rounds(p);
  if (blk_partners_nblocks(p) != nblocks)
    return blk__fail(BLK_EINVAL, "router: the partners run over %d blocks, the decomposer has %d",
                     blk_partners_nblocks(p), nblocks);
  int div[BLK_MAX_DIM], extras = blk__partners_fold_extras(p);
  blk_decomposer_divisions(d, div);
  for (int r = 0; r < rounds && extras < 0; r++) {
    int a = blk_partners_round_axis(p, r);
    if (a < 0) return blk__fail(BLK_EINVAL, "router: a custom pattern has no axes to route along");
    /* The partners' divisions on this axis are where their positions end. */
    if (a >= dim || blk_partners_round_coord_position(p, r, div[a] - 1) < 0 ||
        blk_partners_round_coord_position(p, r, div[a]) >= 0)
      return blk__fail(BLK_EINVAL,
                       "router: round %d of the partners works along axis %d, which has %d "
                       "divisions in the decomposer but not in the partners' grid",
                       r, a, a < dim ? div[a] : 0);
  }
  size_t entries = 0; /* of the tables: a round has ceil(divisions / step) groups */
  for (int r = 0; r < rounds && extras < 0; r++) {
    int groups = (div[blk_partners_round_axis(p, r)] - 1) / blk_partners_round_step(p, r) + 1;
    if (groups <= TABLE_MAX) entries += (size_t)groups;
  }
  blk_router *rt =
      blk__malloc(sizeof *rt + (size_t)rounds * sizeof(route) + entries * sizeof(uint16_t));
  if (!rt) return blk__fail(BLK_ENOMEM, "router: no memory for %d rounds", rounds);
  uint16_t *table = (uint16_t *)(rt->round + rounds);
  int rc = blk__decomposer_copy(d, &rt->d);
  if (rc) {
    free(rt);
    return rc;
  }
  rt->dim = dim;
  rt->rounds = rounds;
  rt->extras = extras;
  if (blk_decomposer_is_continuous(d)) {
    blk_cbounds b;
    blk_decomposer_cdomain(d, &b);
    blk__continuous.load(&rt->domain, &b);
  } else {
    blk_bounds b;
    blk_decomposer_domain(d, &b);
    blk__discrete.load(&rt->domain, &b);
  }
  for (int a = 0, stride = 1; a < dim && extras >= 0; stride *= div[a], a++) {
    blk__decomposer_axis_finder(rt->d, a, 1, &rt->owner[a]);
    rt->stride[a] = stride;
  }
  for (int r = 0; r < rounds && extras >= 0; r++) {
    route *ro = &rt->round[r];
    memset(ro, 0, sizeof *ro);
    int radix = blk_partners_round_radix(p, r);
    /* The fold rounds have no radix: the fold is round 0 (a folded
     * pattern's first inner round has rounds after it), the unfold the last. */
    ro->fold = radix > 0 ? FOLD_INNER : r == 0 ? FOLD_IN : FOLD_OUT;
    ro->radix = radix > 0 ? radix : ro->fold == FOLD_IN ? 1 : 2;
    ro->step = radix > 0 ? blk_partners_round_step(p, r) : 1;
  }
  for (int r = 0; r < rounds && extras < 0; r++) {
    route *ro = &rt->round[r];
    ro->fold = FOLD_NONE;
    ro->step = 0;
    int radix = blk_partners_round_radix(p, r);
    blk__decomposer_axis_finder(rt->d, blk_partners_round_axis(p, r), blk_partners_round_step(p, r),
                                &ro->f);
    ro->radix = radix;
    ro->wraps = ro->f.groups > radix;
    ro->inv_radix = 1.0 / radix;
    ro->table = NULL;
    int groups = (int)ro->f.groups;
    if (groups <= TABLE_MAX) {
      for (int q = 0; q < groups; q++) table[q] = (uint16_t)(q % radix);
      ro->table = table;
      table += groups;
    }
  }
  *out = rt;
  return 0;
}

void blk_router_destroy(blk_router *r) {
  if (!r) return;
  blk_decomposer_destroy(r->d);
  free(r);
}

/* How a point's coordinates are stored: the callers' three arrays. A float
 * converts to a double exactly, so a float point routes as the double point
 * with the same value would. */
enum { CELLS, DOUBLES, FLOATS };

/* The bytes of one coordinate of the type. */
static size_t coord_size(int type) {
  return type == FLOATS ? sizeof(float) : sizeof(blk__coord);
}

/* Coordinate a of the point at pt, at any alignment. */
BLK__TEMPLATE blk__coord load(const unsigned char *pt, int a, int type) {
  blk__coord c;
  if (type == FLOATS) {
    float f;
    memcpy(&f, pt + (size_t)a * sizeof f, sizeof f);
    c.x = f;
  } else if (type == DOUBLES)
    memcpy(&c.x, pt + (size_t)a * sizeof c.x, sizeof c.x);
  else
    memcpy(&c.i, pt + (size_t)a * sizeof c.i, sizeof c.i);
  return c;
}

/* Whether the point at pt lies in the domain (every coordinate within
 * [min, max]; a NaN is not), without a branch per axis. */
BLK__TEMPLATE int inside(const blk__box *box, const unsigned char *pt, int dim, int type) {
  const blk__kind *k = type != CELLS ? &blk__continuous : &blk__discrete;
  int in = 1;
  for (int a = 0; a < dim; a++) {
    blk__coord c = load(pt, a, type);
    in &= k->le(box->min[a], c) & k->le(c, box->max[a]);
  }
  return in;
}

/* The domain test of a batch, set up once per call. Cells: (uint64)(p -
 * min) <= max - min, one subtraction and one comparison an axis. Doubles:
 * with GCC's vector extension (GCC and Clang), the coordinates are compared
 * two at a time, axes (0, 1), (2, 3), ..., the last pair overlapping the one
 * before when dim is odd; scalar comparisons took 1.5 ns a point more, 70%
 * of the rest of the routing (3D, measured). */
#if defined(__GNUC__)
#define PAIRS 1
typedef double pair __attribute__((vector_size(16)));
typedef long long pair_mask __attribute__((vector_size(16)));
#else
#define PAIRS 0
#endif

typedef struct domain_test {
  blk__box box;
  uint64_t span[BLK_MAX_DIM]; /* cells: max - min */
#if PAIRS
  pair lo[(BLK_MAX_DIM + 1) / 2], hi[(BLK_MAX_DIM + 1) / 2];
#endif
} domain_test;

/* The first axis of pair q (of (dim + 1) / 2). */
BLK__TEMPLATE int pair_axis(int q, int dim) {
  return 2 * q + 1 < dim ? 2 * q : dim - 2;
}

BLK__TEMPLATE void domain_test_init(domain_test *t, const blk__box *box, int dim) {
  t->box = *box;
  for (int a = 0; a < dim; a++) t->span[a] = (uint64_t)box->max[a].i - (uint64_t)box->min[a].i;
#if PAIRS
  for (int q = 0; q < (dim + 1) / 2 && dim >= 2; q++) {
    int a = pair_axis(q, dim);
    t->lo[q] = (pair){box->min[a].x, box->min[a + 1].x};
    t->hi[q] = (pair){box->max[a].x, box->max[a + 1].x};
  }
#endif
}

BLK__TEMPLATE int domain_test_run(const domain_test *t, const unsigned char *pt, int dim,
                                  int type) {
  if (type == CELLS) {
    int in = 1;
    for (int a = 0; a < dim; a++)
      in &= (uint64_t)load(pt, a, CELLS).i - (uint64_t)t->box.min[a].i <= t->span[a];
    return in;
  }
#if PAIRS
  if (dim >= 2) {
    pair_mask ok = {-1, -1};
    for (int q = 0; q < (dim + 1) / 2; q++) {
      int a = pair_axis(q, dim);
      pair v;
      if (type == FLOATS)
        v = (pair){load(pt, a, FLOATS).x, load(pt, a + 1, FLOATS).x};
      else
        memcpy(&v, pt + (size_t)a * sizeof(double), sizeof v);
      ok &= (v >= t->lo[q]) & (v <= t->hi[q]);
    }
    return (int)(ok[0] & ok[1] & 1);
  }
#endif
  return inside(&t->box, pt, dim, type);
}

/* The group of a point inside the domain in round ro: its owner along the
 * round's axis, in groups of step blocks. */
BLK__TEMPLATE int group(const route *ro, const unsigned char *pt, int type) {
  blk__coord c = load(pt, ro->f.axis, type);
  return type != CELLS ? blk__axis_cfind(&ro->f, c.x) : blk__axis_find(&ro->f, c.i);
}

/* The position of a point inside the domain in round ro. */
BLK__TEMPLATE int position(const route *ro, const unsigned char *pt, int type) {
  int q = group(ro, pt, type);
  if (ro->table) return ro->table[q];
  if (ro->wraps) q -= ro->radix * (int)(((double)q + 0.5) * ro->inv_radix);
  return q;
}

/* A folded pattern's position of gid in round ro (partners_folded.c). */
static int folded_position(const blk_router *r, const route *ro, int gid) {
  int paired = gid < 2 * r->extras;
  if (ro->fold == FOLD_IN) return 0;
  if (ro->fold == FOLD_OUT) return paired && (gid & 1);
  int v = paired ? gid / 2 : gid - r->extras; /* the virtual block */
  return v / ro->step % ro->radix;
}

/* The same for the point at pt, which lies in the domain: its owner's gid
 * from its owner along each axis. */
BLK__TEMPLATE int folded_point(const blk_router *r, const route *ro, const unsigned char *pt,
                               int type) {
  int gid = 0;
  for (int a = 0; a < r->dim; a++) {
    blk__coord c = load(pt, a, type);
    gid += r->stride[a] *
           (type != CELLS ? blk__axis_cfind(&r->owner[a], c.x) : blk__axis_find(&r->owner[a], c.i));
  }
  return folded_position(r, ro, gid);
}

/* The position of the point at pt in round ro, or BLK_ENOTFOUND. */
BLK__TEMPLATE int route_point(const blk_router *r, const route *ro, const unsigned char *pt,
                              int type) {
  if (!inside(&r->domain, pt, r->dim, type)) return BLK_ENOTFOUND;
  return r->extras >= 0 ? folded_point(r, ro, pt, type) : position(ro, pt, type);
}

/* The BLK_EINVAL of a call made wrong, or 0. */
static int check_call(const blk_router *r, int round, int type, const char *what) {
  int continuous = type != CELLS;
  if (!r) return blk__fail(BLK_EINVAL, "router: %s of a NULL router", what);
  if (blk_decomposer_is_continuous(r->d) != continuous)
    return blk__fail(BLK_EINVAL, "router: %s of a router over a %s decomposer", what,
                     continuous ? "discrete" : "continuous");
  if (round < 0 || round >= r->rounds)
    return blk__fail(BLK_EINVAL, "router: %s in round %d; rounds 0..%d send", what, round,
                     r->rounds - 1);
  return 0;
}

BLK__TEMPLATE int route_one(const blk_router *r, int round, const void *pt, int type,
                            const char *what) {
  int rc = check_call(r, round, type, what);
  if (rc) return rc;
  if (!pt) return blk__fail(BLK_EINVAL, "router: %s with a NULL point", what);
  return route_point(r, &r->round[round], pt, type);
}

int blk_router_cpoint_out(const blk_router *r, int round, const double *pt) {
  return route_one(r, round, pt, DOUBLES, "cpoint_out");
}

int blk_router_point_out(const blk_router *r, int round, const int64_t *pt) {
  return route_one(r, round, pt, CELLS, "point_out");
}

/* Adds the n positions in to to counts. Positions below LOCAL_COUNTS are
 * counted in four local arrays, the position of point i in array i % 4, so
 * that a run of equal positions does not wait on each increment in memory. */
enum { LOCAL_COUNTS = 32 };

static void count(const int *to, size_t n, size_t *counts, int radix) {
  if (radix > LOCAL_COUNTS || n < 4 * LOCAL_COUNTS) {
    for (size_t i = 0; i < n; i++) counts[to[i]]++;
    return;
  }
  size_t local[4][LOCAL_COUNTS] = {{0}};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    local[0][to[i]]++;
    local[1][to[i + 1]]++;
    local[2][to[i + 2]]++;
    local[3][to[i + 3]]++;
  }
  for (; i < n; i++) local[0][to[i]]++;
  for (int j = 0; j < radix; j++)
    counts[j] += local[0][j] + local[1][j] + local[2][j] + local[3][j];
}

/* Routes the n points at pts (see route_many); returns n, or the index of
 * the first point outside the domain (to and counts then hold the points
 * before it). dim is a constant in the common cases, so the loops over the
 * axes unroll; the round and the domain test are copied to locals, which
 * the stores to to cannot change. */
BLK__TEMPLATE size_t route_span(const blk_router *r, const route *rop, const unsigned char *pt,
                                size_t stride, size_t n, int *to, size_t *counts, int dim,
                                int type) {
  const route ro = *rop;
  domain_test test;
  domain_test_init(&test, &r->domain, dim);
  size_t i = 0;
  if (ro.table) /* the common case: no more than TABLE_MAX groups */
    for (; i < n && domain_test_run(&test, pt, dim, type); i++, pt += stride)
      to[i] = ro.table[group(&ro, pt, type)];
  else
    for (; i < n && domain_test_run(&test, pt, dim, type); i++, pt += stride)
      to[i] = position(&ro, pt, type);
  if (counts) count(to, i, counts, ro.radix);
  return i;
}

BLK__TEMPLATE int route_many(const blk_router *r, int round, const void *pts, size_t stride,
                             size_t n, int *to, size_t *counts, int type, const char *what) {
  int rc = check_call(r, round, type, what);
  if (rc) return rc;
  if (stride < (size_t)r->dim * coord_size(type))
    return blk__fail(BLK_EINVAL, "router: %s: stride %zu is below the %zu bytes of a point", what,
                     stride, (size_t)r->dim * coord_size(type));
  if (n > 0 && (!pts || !to))
    return blk__fail(BLK_EINVAL, "router: %s of %zu points with a NULL %s", what, n,
                     pts ? "to" : "pts");
  const route *ro = &r->round[round];
  size_t done;
  if (r->extras >= 0) { /* folded: through the gid, one point at a time */
    const unsigned char *pt = pts;
    for (done = 0; done < n; done++, pt += stride) {
      int pos = route_point(r, ro, pt, type);
      if (pos < 0) break;
      to[done] = pos;
    }
    if (counts) count(to, done, counts, ro->radix);
  } else
    switch (r->dim) { /* the common dimensions get their own loops */
      case 1:
        done = route_span(r, ro, pts, stride, n, to, counts, 1, type);
        break;
      case 2:
        done = route_span(r, ro, pts, stride, n, to, counts, 2, type);
        break;
      case 3:
        done = route_span(r, ro, pts, stride, n, to, counts, 3, type);
        break;
      default:
        done = route_span(r, ro, pts, stride, n, to, counts, r->dim, type);
        break;
    }
  if (done < n)
    return blk__fail(BLK_ENOTFOUND, "router: %s: point %zu of %zu is outside the domain", what,
                     done, n);
  return 0;
}

int blk_router_cpoints_out(const blk_router *r, int round, const void *pts, size_t stride, size_t n,
                           int *to, size_t *counts) {
  return route_many(r, round, pts, stride, n, to, counts, DOUBLES, "cpoints_out");
}

int blk_router_cpoints_out_float(const blk_router *r, int round, const void *pts, size_t stride,
                                 size_t n, int *to, size_t *counts) {
  return route_many(r, round, pts, stride, n, to, counts, FLOATS, "cpoints_out_float");
}

int blk_router_points_out(const blk_router *r, int round, const void *pts, size_t stride, size_t n,
                          int *to, size_t *counts) {
  return route_many(r, round, pts, stride, n, to, counts, CELLS, "points_out");
}
