/*
 * test_router: the owner along one axis (blk_decomposer_axis_owner,
 * caxis_owner), the position of a grid coordinate in a round
 * (blk_partners_round_coord_position, round_step) and the router built on
 * them, against brute force.
 *
 * The reference owner along an axis scans the blocks' starts, read from
 * blk_decomposer_block_bounds/cbounds (the largest block whose start is <= x),
 * and the reference gid puts those coordinates together with coords_to_gid;
 * the reference position in round r is blk_partners_round_position(p, r, that
 * gid). Decompositions: block counts that are not powers of k (12, 44, 1009,
 * and 512 = 8x8x8 of the redistribute benchmark), continuous and discrete,
 * wrapped axes, a domain far from 0 for its length, one so short that no
 * guess is trusted (also one with more blocks than doubles, where a guess is
 * off by many blocks), and int64 cells across the whole range. Points: every
 * block start and the doubles (or cells) on both sides of it, the domain's
 * min and max faces, a fine uniform grid and random points, combined at
 * random over the axes, in one to five dimensions; outside points (one
 * step past a face, NaN, +-inf) must give BLK_ENOTFOUND. Partners: swap
 * with k = 2..8 in both orders, and merge, broadcast and all-reduce, all
 * made for the decomposer's grid. Each round's answer must equal the
 * reference, what round_position(cpoint_to_gid) gives, the one-point and
 * the batch calls (aligned and not, with their counts) alike; the float
 * batch call over the points rounded to floats equals the reference for
 * the rounded points widened back. Over 1009
 * blocks the same for the folded patterns (blk_partners_create_folded),
 * which route through the gid.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blk/blk.h"
#include "check.h"

enum { NPOINTS = 3000, MAXDIV = 1100 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t rand64(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static double rand_unit(void) {
  return (double)(rand64() >> 11) * 0x1p-53;
}

/* ---- one axis: its block starts and its sample coordinates ------------- */

typedef struct axis_ref {
  int div;
  double start[MAXDIV]; /* continuous: block starts; discrete: as doubles (unused) */
  int64_t istart[MAXDIV];
  int nsample;
  double sample[8 * MAXDIV];
  int64_t isample[8 * MAXDIV];
} axis_ref;

typedef struct problem {
  blk_decomposer *d;
  int continuous, dim, nblocks;
  double lo[BLK_MAX_DIM], hi[BLK_MAX_DIM];
  int64_t ilo[BLK_MAX_DIM], ihi[BLK_MAX_DIM];
  axis_ref ax[BLK_MAX_DIM];
} problem;

/* Reference owner along axis a: a scan of the starts, -1 outside. */
static int ref_cowner(const problem *pr, int a, double x) {
  if (!(x >= pr->lo[a] && x <= pr->hi[a])) return -1;
  int i = 0;
  for (int j = 1; j < pr->ax[a].div; j++)
    if (pr->ax[a].start[j] <= x) i = j;
  return i;
}

static int ref_owner(const problem *pr, int a, int64_t x) {
  if (x < pr->ilo[a] || x > pr->ihi[a]) return -1;
  int i = 0;
  for (int j = 1; j < pr->ax[a].div; j++)
    if (pr->ax[a].istart[j] <= x) i = j;
  return i;
}

/* Reads the starts from the blocks' bounds and makes the samples. */
static void problem_init(problem *pr, blk_decomposer *d) {
  memset(pr, 0, sizeof *pr);
  pr->d = d;
  pr->continuous = blk_decomposer_is_continuous(d);
  pr->dim = blk_decomposer_dim(d);
  pr->nblocks = blk_decomposer_nblocks(d);
  int div[BLK_MAX_DIM];
  blk_decomposer_divisions(d, div);
  blk_cbounds cdom;
  blk_bounds ddom;
  if (pr->continuous)
    CHECK_OK(blk_decomposer_cdomain(d, &cdom));
  else
    CHECK_OK(blk_decomposer_domain(d, &ddom));
  for (int a = 0; a < pr->dim; a++) {
    axis_ref *x = &pr->ax[a];
    CHECK(div[a] <= MAXDIV);
    x->div = div[a];
    for (int i = 0; i < div[a]; i++) {
      int c[BLK_MAX_DIM] = {0};
      c[a] = i;
      int gid = blk_decomposer_coords_to_gid(d, c);
      if (pr->continuous) {
        blk_cbounds core;
        CHECK_OK(blk_decomposer_block_cbounds(d, gid, &core, NULL));
        x->start[i] = core.min[a];
      } else {
        blk_bounds core;
        CHECK_OK(blk_decomposer_block_bounds(d, gid, &core, NULL));
        x->istart[i] = core.min[a];
      }
    }
    int n = 0;
    if (pr->continuous) {
      double lo = cdom.min[a], hi = cdom.max[a];
      pr->lo[a] = lo;
      pr->hi[a] = hi;
      for (int i = 0; i < div[a]; i++) { /* each start, and the doubles around it */
        x->sample[n++] = x->start[i];
        x->sample[n++] = nextafter(x->start[i], -INFINITY);
        x->sample[n++] = nextafter(x->start[i], INFINITY);
        double end = i + 1 < div[a] ? x->start[i + 1] : hi;
        x->sample[n++] = x->start[i] + (end - x->start[i]) / 2;
      }
      x->sample[n++] = hi; /* the max face */
      x->sample[n++] = nextafter(hi, -INFINITY);
      for (int i = 0; i <= 64; i++) x->sample[n++] = lo + (hi - lo) * i / 64; /* a fine grid */
      for (int i = 0; i < 64; i++) x->sample[n++] = lo + (hi - lo) * rand_unit();
      int m = 0; /* the doubles around a start may pass a face: keep those inside */
      for (int i = 0; i < n; i++)
        if (x->sample[i] >= lo && x->sample[i] <= hi) x->sample[m++] = x->sample[i];
      n = m;
    } else {
      int64_t lo = ddom.min[a], hi = ddom.max[a];
      pr->ilo[a] = lo;
      pr->ihi[a] = hi;
      for (int i = 0; i < div[a]; i++) {
        x->isample[n++] = x->istart[i];
        if (x->istart[i] > lo) x->isample[n++] = x->istart[i] - 1;
        if (x->istart[i] < hi) x->isample[n++] = x->istart[i] + 1;
      }
      x->isample[n++] = hi;
      uint64_t span = (uint64_t)hi - (uint64_t)lo;
      for (int i = 0; i <= 64; i++) /* a fine grid, and random cells */
        x->isample[n++] = (int64_t)((uint64_t)lo + (uint64_t)((double)span * i / 64 * 0.999));
      for (int i = 0; i < 64; i++)
        x->isample[n++] =
            (int64_t)((uint64_t)lo + (span == UINT64_MAX ? rand64() : rand64() % (span + 1)));
    }
    x->nsample = n;
  }
}

/* ---- the owner along an axis ------------------------------------------ */

static void check_axis_owner(const problem *pr) {
  for (int a = 0; a < pr->dim; a++) {
    const axis_ref *x = &pr->ax[a];
    for (int s = 0; s < x->nsample; s++) {
      if (pr->continuous) {
        double v = x->sample[s];
        int want = ref_cowner(pr, a, v);
        CHECK_MSG(blk_decomposer_caxis_owner(pr->d, a, v) == (want < 0 ? BLK_ENOTFOUND : want),
                  "axis %d x %.17g: %d, want %d", a, v, blk_decomposer_caxis_owner(pr->d, a, v),
                  want);
      } else {
        int64_t v = x->isample[s];
        int want = ref_owner(pr, a, v);
        CHECK_MSG(blk_decomposer_axis_owner(pr->d, a, v) == (want < 0 ? BLK_ENOTFOUND : want),
                  "axis %d x %lld: %d, want %d", a, (long long)v,
                  blk_decomposer_axis_owner(pr->d, a, v), want);
      }
    }
    /* Outside, and on the other kind. */
    if (pr->continuous) {
      double out[] = {nextafter(pr->lo[a], -INFINITY), nextafter(pr->hi[a], INFINITY), NAN,
                      INFINITY, -INFINITY};
      for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        CHECK_EQ_INT(blk_decomposer_caxis_owner(pr->d, a, out[i]), BLK_ENOTFOUND);
      CHECK_EQ_INT(blk_decomposer_axis_owner(pr->d, a, 0), BLK_EINVAL);
    } else {
      if (pr->ilo[a] > INT64_MIN)
        CHECK_EQ_INT(blk_decomposer_axis_owner(pr->d, a, pr->ilo[a] - 1), BLK_ENOTFOUND);
      if (pr->ihi[a] < INT64_MAX)
        CHECK_EQ_INT(blk_decomposer_axis_owner(pr->d, a, pr->ihi[a] + 1), BLK_ENOTFOUND);
      CHECK_EQ_INT(blk_decomposer_caxis_owner(pr->d, a, 0.5), BLK_EINVAL);
    }
  }
  CHECK_EQ_INT(blk_decomposer_caxis_owner(NULL, 0, 0.5), BLK_EINVAL);
  CHECK_EQ_INT(blk_decomposer_axis_owner(NULL, 0, 0), BLK_EINVAL);
  CHECK_EQ_INT(blk_decomposer_caxis_owner(pr->d, -1, 0.5), BLK_EINVAL);
  CHECK_EQ_INT(blk_decomposer_axis_owner(pr->d, pr->dim, 0), BLK_EINVAL);
}

/* ---- points ------------------------------------------------------------ */

/* A point as an application keeps it: an id before the coordinates, so the
 * batch calls see a stride and an offset. */
typedef struct cpoint {
  uint64_t id;
  double x[BLK_MAX_DIM];
} cpoint;

typedef struct dpoint {
  uint64_t id;
  int64_t x[BLK_MAX_DIM];
} dpoint;

typedef struct points {
  int n;
  cpoint c[NPOINTS];
  dpoint i[NPOINTS];
  int gid[NPOINTS]; /* the reference owner */
} points;

/* Points inside the domain: each coordinate a sample of its axis. */
static void make_points(const problem *pr, points *ps) {
  ps->n = NPOINTS;
  for (int k = 0; k < NPOINTS; k++) {
    int c[BLK_MAX_DIM] = {0};
    ps->c[k].id = ps->i[k].id = (uint64_t)k;
    for (int a = 0; a < pr->dim; a++) {
      int s = (int)(rand64() % (uint64_t)pr->ax[a].nsample);
      if (pr->continuous) {
        ps->c[k].x[a] = pr->ax[a].sample[s];
        c[a] = ref_cowner(pr, a, ps->c[k].x[a]);
      } else {
        ps->i[k].x[a] = pr->ax[a].isample[s];
        c[a] = ref_owner(pr, a, ps->i[k].x[a]);
      }
      CHECK(c[a] >= 0);
    }
    ps->gid[k] = blk_decomposer_coords_to_gid(pr->d, c);
    CHECK(ps->gid[k] >= 0);
    /* The whole point's lookup agrees with the reference too. */
    int gid = pr->continuous ? blk_decomposer_cpoint_to_gid(pr->d, ps->c[k].x)
                             : blk_decomposer_point_to_gid(pr->d, ps->i[k].x);
    CHECK_EQ_INT(gid, ps->gid[k]);
  }
}

static int route1(const blk_router *r, const problem *pr, int round, const points *ps, int k) {
  return pr->continuous ? blk_router_cpoint_out(r, round, ps->c[k].x)
                        : blk_router_point_out(r, round, ps->i[k].x);
}

static int route_batch(const blk_router *r, const problem *pr, int round, const void *pts,
                       size_t stride, size_t n, int *to, size_t *counts) {
  return pr->continuous ? blk_router_cpoints_out(r, round, pts, stride, n, to, counts)
                        : blk_router_points_out(r, round, pts, stride, n, to, counts);
}

/* ---- the router against the reference ---------------------------------- */

static int to[NPOINTS], to2[NPOINTS];
static unsigned char packed[NPOINTS * (BLK_MAX_DIM * 8 + 1) + 1];

/* The same points packed at odd addresses: coordinates only, one byte apart. */
static void pack_points(const problem *pr, const points *ps) {
  size_t psize = (size_t)pr->dim * 8;
  for (int k = 0; k < ps->n; k++)
    memcpy(packed + 1 + (size_t)k * (psize + 1),
           pr->continuous ? (const void *)ps->c[k].x : (const void *)ps->i[k].x, psize);
}

/* Both batch calls, over the points in place and packed (pack_points),
 * give each point the position round_position gives its gid, and count
 * want[j] points at each position j < npos. */
static void check_batches(const blk_router *r, const problem *pr, const points *ps,
                          const blk_partners *p, int round, const size_t *want, int npos) {
  size_t psize = (size_t)pr->dim * 8, stride = pr->continuous ? sizeof(cpoint) : sizeof(dpoint);
  const void *first = pr->continuous ? (const void *)ps->c[0].x : (const void *)ps->i[0].x;
  size_t counts[MAXDIV] = {0}, counts2[MAXDIV] = {0};
  CHECK_OK(route_batch(r, pr, round, first, stride, (size_t)ps->n, to, counts));
  CHECK_OK(route_batch(r, pr, round, packed + 1, psize + 1, (size_t)ps->n, to2, counts2));
  for (int k = 0; k < ps->n; k++) {
    CHECK_EQ_INT(to[k], blk_partners_round_position(p, round, ps->gid[k]));
    CHECK_EQ_INT(to2[k], to[k]);
  }
  for (int j = 0; j < npos; j++) {
    CHECK_EQ_INT(counts[j], want[j]);
    CHECK_EQ_INT(counts2[j], want[j]);
  }
}

/* blk_router_cpoints_out_float over the continuous points rounded to
 * floats, in an array and packed at odd addresses: each position must be
 * the reference's for the float point widened back to doubles (rounding
 * may move a point across a boundary, or out of the domain: such a point
 * is left out). */
static float fpts[NPOINTS][BLK_MAX_DIM];

static void check_floats(const blk_router *r, const problem *pr, const points *ps,
                         const blk_partners *p, int round) {
  static int want[NPOINTS];
  size_t fsize = (size_t)pr->dim * sizeof(float), counts[MAXDIV] = {0}, counts2[MAXDIV] = {0},
         wcounts[MAXDIV] = {0};
  int n = 0;
  for (int k = 0; k < ps->n; k++) {
    double x[BLK_MAX_DIM];
    for (int a = 0; a < pr->dim; a++) x[a] = fpts[n][a] = (float)ps->c[k].x[a];
    int gid = blk_decomposer_cpoint_to_gid(pr->d, x);
    if (gid < 0) continue;
    want[n] = blk_partners_round_position(p, round, gid);
    wcounts[want[n]]++;
    memcpy(packed + 1 + (size_t)n * (fsize + 1), fpts[n], fsize);
    n++;
  }
  CHECK(n >= ps->n / 2);
  CHECK_OK(blk_router_cpoints_out_float(r, round, fpts, sizeof fpts[0], (size_t)n, to, counts));
  CHECK_OK(blk_router_cpoints_out_float(r, round, packed + 1, fsize + 1, (size_t)n, to2, counts2));
  for (int k = 0; k < n; k++) {
    CHECK_EQ_INT(to[k], want[k]);
    CHECK_EQ_INT(to2[k], want[k]);
  }
  for (int j = 0; j < MAXDIV; j++) {
    CHECK_EQ_INT(counts[j], wcounts[j]);
    CHECK_EQ_INT(counts2[j], wcounts[j]);
  }
  CHECK_EQ_INT(blk_router_cpoints_out_float(r, round, fpts, fsize - 1, 1, to, NULL), BLK_EINVAL);
  pack_points(pr, ps); /* as check_batches expects it */
}

static void check_router(const problem *pr, const points *ps, const blk_partners *p) {
  blk_router *r = NULL;
  CHECK_OK(blk_router_create(&r, p, pr->d));
  int R = blk_partners_rounds(p);
  size_t psize = (size_t)pr->dim * 8, stride = pr->continuous ? sizeof(cpoint) : sizeof(dpoint);
  const void *first = pr->continuous ? (const void *)ps->c[0].x : (const void *)ps->i[0].x;
  pack_points(pr, ps);
  for (int round = 0; round < R; round++) {
    int radix = blk_partners_round_radix(p, round), axis = blk_partners_round_axis(p, round);
    int step = blk_partners_round_step(p, round);
    CHECK(radix >= 2 && axis >= 0 && axis < pr->dim && step >= 1);
    CHECK(step * radix <= pr->ax[axis].div);
    size_t want[MAXDIV] = {0};
    for (int k = 0; k < ps->n; k++) {
      int pos = blk_partners_round_position(p, round, ps->gid[k]);
      int c[BLK_MAX_DIM];
      blk_decomposer_gid_to_coords(pr->d, ps->gid[k], c);
      CHECK_EQ_INT(blk_partners_round_coord_position(p, round, c[axis]), pos);
      CHECK_EQ_INT(c[axis] / step % radix, pos);
      CHECK_MSG(route1(r, pr, round, ps, k) == pos, "round %d point %d: %d, want %d", round, k,
                route1(r, pr, round, ps, k), pos);
      want[pos]++;
    }
    check_batches(r, pr, ps, p, round, want, radix);
    if (pr->continuous) check_floats(r, pr, ps, p, round);
    CHECK_EQ_INT(route_batch(r, pr, round, first, stride, 0, NULL, NULL), 0);
  }
  /* Rounds that do not send, and calls made wrong. */
  CHECK_EQ_INT(route1(r, pr, -1, ps, 0), BLK_EINVAL);
  CHECK_EQ_INT(route1(r, pr, R, ps, 0), BLK_EINVAL);
  if (R > 0) {
    CHECK_EQ_INT(route_batch(r, pr, 0, first, psize - 1, 1, to, NULL), BLK_EINVAL);
    CHECK_EQ_INT(route_batch(r, pr, 0, NULL, stride, 1, to, NULL), BLK_EINVAL);
    CHECK_EQ_INT(route_batch(r, pr, 0, first, stride, 1, NULL, NULL), BLK_EINVAL);
    double x[BLK_MAX_DIM] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    int64_t ix[BLK_MAX_DIM] = {0};
    if (pr->continuous) {
      CHECK_EQ_INT(blk_router_point_out(r, 0, ix), BLK_EINVAL);
      CHECK_EQ_INT(blk_router_points_out(r, 0, ix, sizeof ix, 1, to, NULL), BLK_EINVAL);
      CHECK_EQ_INT(blk_router_cpoint_out(r, 0, NULL), BLK_EINVAL);
    } else {
      CHECK_EQ_INT(blk_router_cpoint_out(r, 0, x), BLK_EINVAL);
      CHECK_EQ_INT(blk_router_cpoints_out(r, 0, x, sizeof x, 1, to, NULL), BLK_EINVAL);
      float fx[BLK_MAX_DIM] = {0};
      CHECK_EQ_INT(blk_router_cpoints_out_float(r, 0, fx, sizeof fx, 1, to, NULL), BLK_EINVAL);
      CHECK_EQ_INT(blk_router_point_out(r, 0, NULL), BLK_EINVAL);
    }
    CHECK_EQ_INT(blk_router_cpoint_out(NULL, 0, x), BLK_EINVAL);
  }
  blk_router_destroy(r);
}

/* A folded pattern (blk_partners_create_folded) over the decomposer's
 * gids: the same reference, round_position(cpoint_to_gid), in every round,
 * fold and unfold included, and the counts of each position. */
static int folded_checked;

static void check_folded_router(const problem *pr, const points *ps, const blk_partners *p) {
  folded_checked++;
  blk_router *r = NULL;
  CHECK_OK(blk_router_create(&r, p, pr->d));
  int R = blk_partners_rounds(p), mg = blk_partners_max_group(p);
  pack_points(pr, ps);
  for (int round = 0; round < R; round++) {
    size_t want[MAXDIV] = {0};
    for (int k = 0; k < ps->n; k++) {
      int pos = blk_partners_round_position(p, round, ps->gid[k]);
      CHECK(pos >= 0 && pos < mg);
      CHECK_MSG(route1(r, pr, round, ps, k) == pos, "folded: round %d point %d: %d, want %d", round,
                k, route1(r, pr, round, ps, k), pos);
      want[pos]++;
    }
    check_batches(r, pr, ps, p, round, want, mg);
    if (pr->continuous) check_floats(r, pr, ps, p, round);
  }
  CHECK_EQ_INT(route1(r, pr, R, ps, 0), BLK_EINVAL);
  blk_router_destroy(r);
}

/* The float batch's part of check_outside: point 2 of 3 has coordinate a
 * one float past a face (or NaN or infinite); the two before it are the
 * first two points rounded to floats, where those stay in the domain. */
static void check_float_outside(const blk_router *r, const problem *pr, const points *ps, int a,
                                int side, int round) {
  float f[3][BLK_MAX_DIM];
  double x[BLK_MAX_DIM];
  for (int k = 0; k < 3; k++)
    for (int b = 0; b < pr->dim; b++) f[k][b] = (float)ps->c[k < 2 ? k : side].x[b];
  float bad[] = {nextafterf((float)pr->lo[a], -INFINITY), nextafterf((float)pr->hi[a], INFINITY),
                 NAN, INFINITY, -INFINITY};
  f[2][a] = bad[side];
  for (int b = 0; b < pr->dim; b++) x[b] = f[2][b];
  CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(pr->d, x), BLK_ENOTFOUND);
  for (int k = 0; k < 2; k++) {
    for (int b = 0; b < pr->dim; b++) x[b] = f[k][b];
    if (blk_decomposer_cpoint_to_gid(pr->d, x) < 0) return; /* rounded out: no good points */
  }
  int t[3] = {-7, -7, -7}, one[1];
  CHECK_EQ_INT(blk_router_cpoints_out_float(r, round, f, sizeof f[0], 3, t, NULL), BLK_ENOTFOUND);
  CHECK(strstr(blk_last_error(), "point 2 of 3") != NULL);
  for (int k = 0; k < 2; k++) {
    CHECK_OK(blk_router_cpoints_out_float(r, round, f[k], sizeof f[0], 1, one, NULL));
    CHECK_EQ_INT(t[k], one[0]);
  }
}

/* Points outside the domain: one coordinate one step past a face (or NaN
 * or infinite), the others inside. Every round says BLK_ENOTFOUND, as
 * cpoint_to_gid does, and a batch stops at the first with a detail. */
static void check_outside(const problem *pr, const points *ps, const blk_partners *p) {
  blk_router *r = NULL;
  CHECK_OK(blk_router_create(&r, p, pr->d));
  int R = blk_partners_rounds(p);
  for (int a = 0; a < pr->dim; a++)
    for (int side = 0; side < 5; side++) {
      cpoint c = ps->c[side];
      dpoint i = ps->i[side];
      if (pr->continuous) {
        double bad[] = {nextafter(pr->lo[a], -INFINITY), nextafter(pr->hi[a], INFINITY), NAN,
                        INFINITY, -INFINITY};
        c.x[a] = bad[side];
        CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(pr->d, c.x), BLK_ENOTFOUND);
      } else {
        if (side >= 2) continue;
        if (side == 0 && pr->ilo[a] == INT64_MIN) continue;
        if (side == 1 && pr->ihi[a] == INT64_MAX) continue;
        i.x[a] = side == 0 ? pr->ilo[a] - 1 : pr->ihi[a] + 1;
        CHECK_EQ_INT(blk_decomposer_point_to_gid(pr->d, i.x), BLK_ENOTFOUND);
      }
      for (int round = 0; round < R; round++) {
        int got = pr->continuous ? blk_router_cpoint_out(r, round, c.x)
                                 : blk_router_point_out(r, round, i.x);
        CHECK_EQ_INT(got, BLK_ENOTFOUND);
        /* In a batch, after two good points. */
        cpoint cs[3] = {ps->c[0], ps->c[1], c};
        dpoint is[3] = {ps->i[0], ps->i[1], i};
        int t[3] = {-7, -7, -7};
        int rc = pr->continuous ? blk_router_cpoints_out(r, round, cs[0].x, sizeof c, 3, t, NULL)
                                : blk_router_points_out(r, round, is[0].x, sizeof i, 3, t, NULL);
        CHECK_EQ_INT(rc, BLK_ENOTFOUND);
        CHECK(strstr(blk_last_error(), "point 2 of 3") != NULL);
        CHECK_EQ_INT(t[0], route1(r, pr, round, ps, 0));
        CHECK_EQ_INT(t[1], route1(r, pr, round, ps, 1));
        if (pr->continuous) check_float_outside(r, pr, ps, a, side, round);
      }
    }
  blk_router_destroy(r);
}

static void check_problem(blk_decomposer *d) {
  static problem pr;
  static points ps;
  problem_init(&pr, d);
  check_axis_owner(&pr);
  make_points(&pr, &ps);
  int div[BLK_MAX_DIM];
  blk_decomposer_divisions(d, div);
  for (int contiguous = 0; contiguous <= 1; contiguous++) {
    for (int k = 2; k <= 8; k++) {
      blk_partners *p = NULL;
      CHECK_OK(blk_partners_create_for(&p, BLK_SWAP, d, k, contiguous));
      check_router(&pr, &ps, p);
      if (k == 2) check_outside(&pr, &ps, p);
      blk_partners_destroy(p);
    }
    blk_pattern others[] = {BLK_MERGE, BLK_BROADCAST, BLK_ALLREDUCE};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
      blk_partners *p = NULL;
      CHECK_OK(blk_partners_create(&p, others[i], pr.dim, div, 3, contiguous));
      check_router(&pr, &ps, p);
      blk_partners_destroy(p);
    }
    /* Folded, where the count has a prime factor above 16 (1009). */
    for (int pat = 0; pat < 4; pat++)
      for (int k = 2; k <= 4; k += 2) {
        blk_partners *p = NULL;
        int n = blk_decomposer_nblocks(d);
        CHECK_OK(blk_partners_create_folded(&p, (blk_pattern)pat, n, k, contiguous));
        if (blk_partners_round_coord_position(p, 0, 0) < 0) {
          check_folded_router(&pr, &ps, p);
          if (pat == BLK_SWAP && k == 2) check_outside(&pr, &ps, p);
        }
        blk_partners_destroy(p);
      }
  }
}

/* A decomposer config; any of the arrays may be NULL (all zero). */
static blk_decomposer_config settings(int dim, const int *divisions, const int *share,
                                      const int *wrap) {
  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
  for (int a = 0; a < dim; a++) {
    cfg.divisions[a] = divisions ? divisions[a] : 0;
    cfg.share_face[a] = share ? share[a] : 0;
    cfg.wrap[a] = wrap ? wrap[a] : 0;
  }
  return cfg;
}

/* A decomposer of the box lo..hi: doubles when continuous, else int64 cells. */
static blk_decomposer *decompose(int continuous, int dim, const void *lo, const void *hi,
                                 int nblocks, blk_decomposer_config cfg) {
  blk_decomposer *d = NULL;
  if (continuous) {
    blk_cbounds dom;
    CHECK_OK(blk_cbounds_set(&dom, dim, lo, hi));
    CHECK_OK(blk_decomposer_create_continuous(&d, &dom, nblocks, &cfg));
  } else {
    blk_bounds dom;
    CHECK_OK(blk_bounds_set(&dom, dim, lo, hi));
    CHECK_OK(blk_decomposer_create(&d, &dom, nblocks, &cfg));
  }
  return d;
}

static blk_decomposer *continuous(int dim, const double *lo, const double *hi, int nblocks,
                                  const int *divisions, const int *wrap) {
  return decompose(1, dim, lo, hi, nblocks, settings(dim, divisions, NULL, wrap));
}

static blk_decomposer *discrete(int dim, const int64_t *lo, const int64_t *hi, int nblocks,
                                const int *share, const int *wrap) {
  return decompose(0, dim, lo, hi, nblocks, settings(dim, NULL, share, wrap));
}

static void test_continuous(void) {
  double cube_lo[] = {0, 0, 0}, cube_hi[] = {1, 1, 1};
  int counts[] = {12, 44, 1009, 512};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    blk_decomposer *d = continuous(3, cube_lo, cube_hi, counts[i], NULL, NULL);
    check_problem(d);
    blk_decomposer_destroy(d);
  }
  /* Not round, wrapped on axis 0, given divisions. */
  double lo[] = {-3.7, 0.1, -1e-3}, hi[] = {11.3, 0.7, 2e-3};
  int wrap[] = {1, 0, 1}, div[] = {12, 1, 11}, div2[] = {0, 0, 0};
  blk_decomposer *d = continuous(3, lo, hi, 132, div, wrap);
  check_problem(d);
  blk_decomposer_destroy(d);
  d = continuous(2, lo, hi, 44, div2, wrap);
  check_problem(d);
  blk_decomposer_destroy(d);
  /* Far from 0 for its length: guesses are trusted only away from faces. */
  double far_lo[] = {1e6 + 0.3}, far_hi[] = {1e6 + 7.9};
  d = continuous(1, far_lo, far_hi, 1009, NULL, NULL);
  check_problem(d);
  blk_decomposer_destroy(d);
  /* So short for its distance from 0 that no guess is trusted. */
  double short_lo[] = {1, 0}, short_hi[] = {1 + 64 * 2.220446049250313e-16, 1};
  int short_div[] = {12, 1};
  d = continuous(2, short_lo, short_hi, 12, short_div, NULL);
  check_problem(d);
  blk_decomposer_destroy(d);
  /* Four and five axes: the domain test's pairs (0, 1), (2, 3), and (3, 4). */
  double lo4[] = {0, -1, 2, 0.5, -8}, hi4[] = {1, 1, 3, 0.75, 8};
  d = continuous(4, lo4, hi4, 24, NULL, NULL);
  check_problem(d);
  blk_decomposer_destroy(d);
  d = continuous(5, lo4, hi4, 60, NULL, NULL);
  check_problem(d);
  blk_decomposer_destroy(d);
  /* More blocks than doubles (some empty): a guess is off by many blocks. */
  d = continuous(1, short_lo, short_hi, 1000, NULL, NULL);
  check_problem(d);
  blk_decomposer_destroy(d);
}

static void test_discrete(void) {
  int64_t lo[] = {0, -5, 3}, hi[] = {99, 2000, 40};
  int share[] = {1, 0, 1}, wrap[] = {0, 1, 0};
  int counts[] = {12, 44, 1009};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    blk_decomposer *d = discrete(3, lo, hi, counts[i], share, wrap);
    check_problem(d);
    blk_decomposer_destroy(d);
  }
  int64_t big_lo[] = {INT64_MIN + 1, -(INT64_C(1) << 62)};
  int64_t big_hi[] = {INT64_MAX, INT64_C(1) << 62};
  blk_decomposer *d = discrete(2, big_lo, big_hi, 1009, NULL, NULL);
  check_problem(d);
  blk_decomposer_destroy(d);
  int64_t lo5[] = {0, -10, 5, 0, 7}, hi5[] = {9, 9, 34, 39, 56};
  d = discrete(5, lo5, hi5, 120, NULL, NULL);
  check_problem(d);
  blk_decomposer_destroy(d);
  int64_t all_lo[] = {INT64_MIN}, all_hi[] = {INT64_MAX};
  d = discrete(1, all_lo, all_hi, 44, NULL, NULL);
  check_problem(d);
  blk_decomposer_destroy(d);
}

/* create refuses what it cannot route by. */
static int ring_rounds(const void *s) {
  (void)s;
  return 1;
}
static int ring_nblocks(const void *s) {
  (void)s;
  return 2;
}
static int ring_active(const void *s, int r, int g) {
  (void)s, (void)r, (void)g;
  return 1;
}
static int ring_in(const void *s, int r, int g, int *gids, int max) {
  (void)s;
  if (r == 0) return 0;
  if (max > 0) gids[0] = 1 - g;
  return 1;
}
static int ring_out(const void *s, int r, int g, int *gids, int max) {
  (void)s;
  if (r == 1) return 0;
  if (max > 0) gids[0] = 1 - g;
  return 1;
}

static void test_create_errors(void) {
  double lo[] = {0, 0}, hi[] = {1, 1};
  blk_decomposer *d = continuous(2, lo, hi, 12, NULL, NULL); /* 4x3 */
  int div[2];
  blk_decomposer_divisions(d, div);
  CHECK(div[0] == 4 && div[1] == 3);
  blk_router *r = (blk_router *)&r;
  blk_partners *p = NULL;
  CHECK_OK(blk_partners_create_for(&p, BLK_SWAP, d, 2, 1));
  CHECK_EQ_INT(blk_router_create(NULL, p, d), BLK_EINVAL);
  CHECK_EQ_INT(blk_router_create(&r, NULL, d), BLK_EINVAL);
  CHECK(r == NULL);
  CHECK_EQ_INT(blk_router_create(&r, p, NULL), BLK_EINVAL);
  blk_partners_destroy(p);
  int swapped[] = {3, 4}, flat[] = {12}, wide[] = {4, 3, 2};
  CHECK_OK(blk_partners_create(&p, BLK_SWAP, 2, swapped, 2, 1)); /* 3x4: the other grid */
  CHECK_EQ_INT(blk_router_create(&r, p, d), BLK_EINVAL);
  CHECK(strstr(blk_last_error(), "axis") != NULL);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_SWAP, 1, flat, 2, 1)); /* 12 blocks in a row */
  CHECK_EQ_INT(blk_router_create(&r, p, d), BLK_EINVAL);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_SWAP, 3, wide, 2, 1)); /* 24 blocks */
  CHECK_EQ_INT(blk_router_create(&r, p, d), BLK_EINVAL);
  blk_partners_destroy(p);
  static const blk_partners_ops ring = {
      BLK_PARTNERS_OPS_VERSION, ring_rounds, ring_nblocks, ring_active, ring_in, ring_out, NULL};
  CHECK_OK(blk_partners_create_custom(&p, &ring, NULL));
  blk_decomposer *d2 = continuous(1, lo, hi, 2, NULL, NULL);
  CHECK_EQ_INT(blk_router_create(&r, p, d2), BLK_EINVAL);
  CHECK(strstr(blk_last_error(), "custom") != NULL);
  CHECK_EQ_INT(blk_partners_round_step(p, 0), -1);
  CHECK_EQ_INT(blk_partners_round_coord_position(p, 0, 0), -1);
  blk_partners_destroy(p);
  /* The same grid with a trailing axis of one division routes the same. */
  int three[] = {4, 3, 1};
  CHECK_OK(blk_partners_create(&p, BLK_SWAP, 3, three, 2, 0));
  CHECK_OK(blk_router_create(&r, p, d));
  double pt[2] = {0.6, 0.9};
  for (int round = 0; round < blk_partners_rounds(p); round++)
    CHECK_EQ_INT(blk_router_cpoint_out(r, round, pt),
                 blk_partners_round_position(p, round, blk_decomposer_cpoint_to_gid(d, pt)));
  /* The router keeps its own copies: it outlives p and d. */
  blk_partners_destroy(p);
  blk_decomposer_destroy(d);
  CHECK(blk_router_cpoint_out(r, 0, pt) >= 0);
  blk_router_destroy(r);
  blk_router_destroy(NULL);
  blk_decomposer_destroy(d2);
  /* coord_position's range: the partners' own divisions. */
  CHECK_OK(blk_partners_create(&p, BLK_SWAP, 2, swapped, 3, 0));
  CHECK_EQ_INT(blk_partners_round_axis(p, 0), 0);
  CHECK_EQ_INT(blk_partners_round_step(p, 0), 1);
  CHECK_EQ_INT(blk_partners_round_coord_position(p, 0, 2), 2);
  CHECK_EQ_INT(blk_partners_round_coord_position(p, 0, 3), -1);
  CHECK_EQ_INT(blk_partners_round_coord_position(p, 0, -1), -1);
  CHECK_EQ_INT(blk_partners_round_coord_position(p, 0, BLK_ENOTFOUND), -1);
  CHECK_EQ_INT(blk_partners_round_coord_position(p, blk_partners_rounds(p), 0), -1);
  CHECK_EQ_INT(blk_partners_round_step(p, -1), -1);
  CHECK_EQ_INT(blk_partners_round_step(NULL, 0), -1);
  blk_partners_destroy(p);
}

int main(void) {
  test_continuous();
  test_discrete();
  test_create_errors();
  CHECK_EQ_INT(folded_checked, 4 * 4 * 2 * 2); /* four problems of 1009 blocks */
  printf("test_router: ok (%d folded patterns)\n", folded_checked);
  return 0;
}
