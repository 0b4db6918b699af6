/*
 * decomposer.c: a regular grid of blocks over a discrete or continuous domain.
 *
 * The object holds the domain, the divisions and the per-axis settings, and
 * nothing that grows with the block count: block bounds are computed on
 * demand, so create never allocates more than the struct and any block count
 * up to INT_MAX works. It is immutable after create; queries only read it and
 * may run on any number of threads at once.
 *
 * Discrete arithmetic is done on uint64 offsets from min (max - min fits in
 * uint64 for every int64 domain). Block i of an axis with n = span + 1 cells
 * and d divisions starts at offset floor(n * i / d); with span = q * d + r
 * that is q * i + floor((r + 1) * i / d), where (r + 1) * i < 2^62, so nothing
 * overflows and no 128-bit type is needed. On a wrapped axis create checks
 * that min - ghosts and max + ghosts fit in int64, so ghosted bounds and the
 * periodic images of a point (p +- n) are plain int64 values.
 *
 * Two kinds, one set of queries: what differs between a discrete and a
 * continuous decomposer is the arithmetic of an axis (where block i starts
 * and ends, core and ghosted, and where a point's periodic images fall),
 * which each kind supplies as a grid_ops table. Block bounds, ownership, the
 * searches and the gid walk are written once over blk__coord (coord.h) and
 * instantiated per kind by inlining, as fast as typed copies.
 *
 * Lookups: the owner of a point along an axis is the largest i whose start is
 * <= the point. A guess (one multiplication) is taken as it is unless it
 * falls within its proven error bound of a block boundary; then exact
 * comparisons of the kind's coordinates settle it (decomposer_axis.h,
 * prepare_lookups), so lookups agree bit for bit with block_bounds. The
 * same finder, counting groups of blocks, routes points for a swap round
 * (patterns/router.c). point_to_gids finds, per axis, the blocks whose
 * ghosted interval holds the point or one of its images by binary search
 * over the monotone ghosted starts and ends (O(log d)), unions at most three
 * ranges, and walks their product with axis 0 fastest, which is ascending
 * gid order.
 *
 * Chosen divisions (rule in decomposer.h): a depth-first search over the
 * prime factors, largest first, trying axes longest-block first; block
 * lengths are compared as exact fractions (cells / divisions). Branches are
 * cut when the primes left cannot fit in the cells left, and an axis in the
 * same state as one already tried is skipped, so when the greedy order fits
 * it is the first leaf and costs O(primes * dim^2); a node budget bounds the
 * rest. Create cost: O(sqrt(nblocks)) for the factoring, plus that search.
 */
#include "blk/decomposer.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "base/settings.h"
#include "geometry/coord.h"
#include "geometry/decomposer_axis.h"

typedef struct grid_ops grid_ops;

struct blk_decomposer {
  const grid_ops *ops; /* the kind's arithmetic: discrete_ops or continuous_ops */
  int dim;
  int nblocks;
  int continuous; /* ops == &continuous_ops */
  int div[BLK_MAX_DIM];
  int stride[BLK_MAX_DIM]; /* product of div[0..a) */
  int share[BLK_MAX_DIM];  /* 0/1 */
  int wrap[BLK_MAX_DIM];   /* 0/1 */
  int64_t ghosts[BLK_MAX_DIM];
  double width[BLK_MAX_DIM];
  blk__box domain;            /* .i discrete, .x continuous */
  uint64_t span[BLK_MAX_DIM]; /* discrete: max - min */
  uint64_t q[BLK_MAX_DIM];    /* span / div */
  uint64_t r[BLK_MAX_DIM];    /* span % div */
  double len[BLK_MAX_DIM];    /* continuous: max - min */
  /* Owner lookups (decomposer_axis.h): each axis's finder of single blocks,
   * and eta, the bound on its guess's error in blocks; a guess is within
   * one block of the owner when eta <= 1/4. */
  blk__axis_finder find[BLK_MAX_DIM];
  double eta[BLK_MAX_DIM];
};

/* What the queries need of a kind besides coord.h's comparisons: where
 * block i (0 <= i < div[a]) of axis a lies, and where a point lies. */
struct grid_ops {
  const blk__kind *k;
  blk__coord (*from)(const blk_decomposer *d, int a, int i); /* its first core coordinate */
  blk__coord (*to)(const blk_decomposer *d, int a, int i);   /* its last, with the shared face */
  blk__coord (*glo)(const blk_decomposer *d, int a, int i);  /* its ghosted start; monotone in i */
  blk__coord (*ghi)(const blk_decomposer *d, int a, int i);  /* its ghosted end; monotone in i */
  /* Where a p in the domain lies along the axis, as a double that the
   * axis finder's scale turns into blocks (decomposer_axis.h). */
  double (*offset)(const blk__axis_finder *f, blk__coord p);
  /* The coordinates to search for block i with glo(i) <= q <= ghi(i) when
   * looking for p on axis a: p brought into the domain and, on a wrapped
   * axis, those of its periodic images that the ghosts can reach. Returns
   * how many it wrote to q (0: p is in no block), or EVERY_BLOCK when the
   * ghosts span the axis. */
  int (*images)(const blk_decomposer *d, int a, blk__coord p, blk__coord q[3]);
};

enum { EVERY_BLOCK = -1 };

/* ---- discrete axis arithmetic ---------------------------------------- */

/* base + off for an off that keeps the result inside int64 (the caller
 * knows it does); avoids converting an out-of-range uint64 to int64. */
static int64_t add_off(int64_t base, uint64_t off) {
  if (off <= (uint64_t)INT64_MAX) return base + (int64_t)off;
  /* off > INT64_MAX, so base < 0; step in pieces that each fit. */
  int64_t t = base + INT64_MAX;
  uint64_t rest = off - (uint64_t)INT64_MAX;
  if (rest > (uint64_t)INT64_MAX) {
    t += INT64_MAX;
    rest -= (uint64_t)INT64_MAX;
  }
  return t + (int64_t)rest;
}

/* Offset of the first core cell of block i (0 <= i < div). */
static uint64_t dfrom(const blk_decomposer *d, int a, int i) {
  uint64_t ui = (uint64_t)i;
  return d->q[a] * ui + ((d->r[a] + 1) * ui) / (uint64_t)d->div[a];
}

/* Offset of the last core cell of block i, the shared face included. */
static uint64_t dto(const blk_decomposer *d, int a, int i) {
  if (i == d->div[a] - 1) return d->span[a];
  return dfrom(d, a, i + 1) - 1 + (uint64_t)d->share[a];
}

static blk__coord discrete_from(const blk_decomposer *d, int a, int i) {
  return (blk__coord){.i = add_off(d->domain.min[a].i, dfrom(d, a, i))};
}

static blk__coord discrete_to(const blk_decomposer *d, int a, int i) {
  return (blk__coord){.i = add_off(d->domain.min[a].i, dto(d, a, i))};
}

/* Ghosted start and end of block i: clamped to the domain without wrap,
 * unclamped (and within int64, checked at create) with wrap. */
static blk__coord discrete_glo(const blk_decomposer *d, int a, int i) {
  int64_t min = d->domain.min[a].i;
  uint64_t f = dfrom(d, a, i), g = (uint64_t)d->ghosts[a];
  if (d->wrap[a]) return (blk__coord){.i = add_off(min, f) - d->ghosts[a]};
  return (blk__coord){.i = f >= g ? add_off(min, f - g) : min};
}

static blk__coord discrete_ghi(const blk_decomposer *d, int a, int i) {
  int64_t min = d->domain.min[a].i;
  uint64_t t = dto(d, a, i), g = (uint64_t)d->ghosts[a];
  if (d->wrap[a]) return (blk__coord){.i = add_off(min, t) + d->ghosts[a]};
  return (blk__coord){.i = d->span[a] - t >= g ? add_off(min, t + g) : d->domain.max[a].i};
}

static double discrete_offset(const blk__axis_finder *f, blk__coord p) {
  return blk__axis_offset(f, p.i);
}

static int discrete_images(const blk_decomposer *d, int a, blk__coord pc, blk__coord q[3]) {
  int64_t p = pc.i, min = d->domain.min[a].i, max = d->domain.max[a].i;
  uint64_t span = d->span[a], g = (uint64_t)d->ghosts[a], o;
  if (p >= min && p <= max) {
    o = (uint64_t)p - (uint64_t)min;
  } else if (!d->wrap[a]) {
    return 0;
  } else { /* span < UINT64_MAX here: a full-range axis holds every p */
    uint64_t n = span + 1;
    if (p > max) {
      o = ((uint64_t)p - (uint64_t)min) % n;
    } else {
      uint64_t m = ((uint64_t)min - (uint64_t)p) % n;
      o = m == 0 ? 0 : n - m;
    }
  }
  int k = 0;
  q[k++].i = add_off(min, o);
  if (!d->wrap[a]) return k;
  if (g > span) return EVERY_BLOCK; /* ghosts >= n cells: every block sees every cell */
  if (o > span - g)                 /* the image p - n reaches the ghosts above min - g */
    q[k++].i = (min - d->ghosts[a]) + (int64_t)(o - (span - g) - 1);
  if (o < g) /* the image p + n */
    q[k++].i = (max + d->ghosts[a]) - (int64_t)(g - 1 - o);
  return k;
}

/* ---- continuous axis arithmetic -------------------------------------- */

/* Start of block i (0 <= i <= div; i == div gives max). Monotone in i. */
static double cfrom(const blk_decomposer *d, int a, int i) {
  double min = d->domain.min[a].x, max = d->domain.max[a].x;
  if (i <= 0) return min;
  if (i >= d->div[a]) return max;
  double x = min + d->len[a] * (double)i / (double)d->div[a];
  return x > max ? max : x;
}

static blk__coord continuous_from(const blk_decomposer *d, int a, int i) {
  return (blk__coord){.x = cfrom(d, a, i)};
}

static blk__coord continuous_to(const blk_decomposer *d, int a, int i) {
  return (blk__coord){.x = cfrom(d, a, i + 1)};
}

static blk__coord continuous_glo(const blk_decomposer *d, int a, int i) {
  double x = cfrom(d, a, i) - d->width[a];
  if (!d->wrap[a] && x < d->domain.min[a].x) x = d->domain.min[a].x;
  return (blk__coord){.x = x};
}

static blk__coord continuous_ghi(const blk_decomposer *d, int a, int i) {
  double x = cfrom(d, a, i + 1) + d->width[a];
  if (!d->wrap[a] && x > d->domain.max[a].x) x = d->domain.max[a].x;
  return (blk__coord){.x = x};
}

static double continuous_offset(const blk__axis_finder *f, blk__coord p) {
  return blk__axis_coffset(f, p.x);
}

static int continuous_images(const blk_decomposer *d, int a, blk__coord pc, blk__coord q[3]) {
  double p = pc.x, min = d->domain.min[a].x, max = d->domain.max[a].x, len = d->len[a];
  if (isnan(p)) return 0;
  if (!(p >= min && p <= max)) {
    if (!d->wrap[a]) return 0;
    if (len > 0) {
      double o = fmod(p - min, len);
      if (isnan(o)) return 0; /* p infinite, or p - min overflowed */
      if (o < 0) o += len;
      p = min + o;
      if (p > max) p = max;
    } else {
      p = min;
    }
  }
  q[0].x = p;
  if (!d->wrap[a]) return 1;
  if (d->width[a] >= len) return EVERY_BLOCK; /* ghosts at least a period wide */
  q[1].x = p - len;
  q[2].x = p + len;
  return 3;
}

static const grid_ops discrete_ops = {&blk__discrete, discrete_from,   discrete_to,    discrete_glo,
                                      discrete_ghi,   discrete_offset, discrete_images};

static const grid_ops continuous_ops = {&blk__continuous, continuous_from, continuous_to,
                                        continuous_glo,   continuous_ghi,  continuous_offset,
                                        continuous_images};

/* ---- choosing divisions ---------------------------------------------- */

/* Compares a/b with c/e exactly (b, e > 0): -1, 0 or 1. Euclid-style: equal
 * integer parts reduce to comparing the reciprocals of the remainders. */
static int frac_cmp(uint64_t a, uint64_t b, uint64_t c, uint64_t e) {
  int sign = 1;
  for (;;) {
    uint64_t qa = a / b, qc = c / e;
    if (qa != qc) return qa < qc ? -sign : sign;
    uint64_t ra = a % b, rc = c % e;
    if (ra == 0 || rc == 0) {
      if (ra == rc) return 0;
      return ra == 0 ? -sign : sign;
    }
    a = b;
    b = ra;
    c = e;
    e = rc;
    sign = -sign;
  }
}

enum { MAX_PRIMES = 32, MAX_NODES = 1 << 20 };

typedef struct chooser {
  const blk_decomposer *d; /* dim, continuous, span, len filled */
  int nfree;
  int axes[BLK_MAX_DIM]; /* the free axes */
  int div[BLK_MAX_DIM];
  int nprimes;
  int primes[MAX_PRIMES]; /* descending */
  long nodes;
} chooser;

static uint64_t cells(const blk_decomposer *d, int a) {
  return d->span[a] == UINT64_MAX ? UINT64_MAX : d->span[a] + 1;
}

/* 1 if axis a's blocks are longer than axis b's (ties: not longer). */
static int longer(const chooser *c, int a, int b) {
  const blk_decomposer *d = c->d;
  if (d->continuous) {
    double ea = d->len[a] / (double)c->div[a], eb = d->len[b] / (double)c->div[b];
    return ea > eb;
  }
  return frac_cmp(cells(d, a), (uint64_t)c->div[a], cells(d, b), (uint64_t)c->div[b]) > 0;
}

/* Whether axis a may take factor p: a discrete axis needs a cell per block. */
static int fits(const chooser *c, int a, int p) {
  if (c->d->continuous) return 1;
  return (uint64_t)c->div[a] * (uint64_t)p - 1 <= c->d->span[a];
}

/* Necessary condition: the primes from k on fit in the room left. */
static int room_for(const chooser *c, int k) {
  if (c->d->continuous) return 1;
  uint64_t need = 1;
  for (int j = k; j < c->nprimes; j++) need *= (uint64_t)c->primes[j];
  uint64_t room = 1;
  for (int j = 0; j < c->nfree && room < need; j++) {
    int a = c->axes[j];
    uint64_t cap = cells(c->d, a) / (uint64_t)c->div[a];
    room = cap >= need ? need : room * cap; /* room < need <= 2^31, cap < need */
  }
  return room >= need;
}

/* Places primes k.. onto the free axes, trying axes longest first (ties:
 * lowest axis). Returns 1 when all are placed, 0 if no placement fits, -1 if
 * the search ran out of its node budget. */
static int place(chooser *c, int k) {
  if (k == c->nprimes) return 1;
  if (++c->nodes > MAX_NODES) return -1;
  if (!room_for(c, k)) return 0;
  int order[BLK_MAX_DIM];
  for (int j = 0; j < c->nfree; j++) { /* insertion sort: stable, longest first */
    int a = c->axes[j], m = j;
    while (m > 0 && longer(c, a, order[m - 1])) {
      order[m] = order[m - 1];
      m--;
    }
    order[m] = a;
  }
  int p = c->primes[k];
  for (int j = 0; j < c->nfree; j++) {
    int a = order[j];
    if (!fits(c, a, p)) continue;
    /* An axis in the same state as one tried already gives the same subtree. */
    int seen = 0;
    for (int m = 0; m < j && !seen; m++) {
      int b = order[m];
      if (c->div[b] == c->div[a] &&
          (c->d->continuous ? c->d->len[b] == c->d->len[a] : c->d->span[b] == c->d->span[a]))
        seen = 1;
    }
    if (seen) continue;
    c->div[a] *= p;
    int rc = place(c, k + 1);
    if (rc != 0) return rc;
    c->div[a] /= p;
  }
  return 0;
}

/* "AxBxC" of the free axes' extents, for messages. */
static void format_extents(const chooser *c, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int j = 0; j < c->nfree && used < size; j++) {
    int a = c->axes[j];
    int w = c->d->continuous ? snprintf(buf + used, size - used, "%s%g", j ? "x" : "", c->d->len[a])
                             : snprintf(buf + used, size - used, "%s%llu", j ? "x" : "",
                                        (unsigned long long)cells(c->d, a));
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* Fills the zero entries of d->div: see "Chosen divisions" in decomposer.h. */
static int choose_divisions(blk_decomposer *d, int left) {
  chooser c;
  memset(&c, 0, sizeof c);
  c.d = d;
  for (int a = 0; a < d->dim; a++) {
    c.div[a] = d->div[a] ? d->div[a] : 1;
    if (!d->div[a]) c.axes[c.nfree++] = a;
  }
  int rest = left;
  for (int p = 2; (long long)p * p <= rest; p++)
    while (rest % p == 0) {
      c.primes[c.nprimes++] = p;
      rest /= p;
    }
  if (rest > 1) c.primes[c.nprimes++] = rest;
  for (int i = 0, j = c.nprimes - 1; i < j; i++, j--) { /* descending */
    int t = c.primes[i];
    c.primes[i] = c.primes[j];
    c.primes[j] = t;
  }
  int rc = place(&c, 0);
  if (rc != 1) {
    char ext[160];
    format_extents(&c, ext, sizeof ext);
    if (rc < 0)
      return blk__fail(BLK_EINVAL,
                       "decomposer: gave up searching for divisions of %d blocks over free axes "
                       "of %s cells; give divisions",
                       left, ext);
    return blk__fail(BLK_EINVAL,
                     "decomposer: %d blocks do not fit free axes of %s cells with at least one "
                     "cell per block on every axis",
                     left, ext);
  }
  /* Equal free axes: the larger count goes to the lower axis. */
  for (int i = 0; i < c.nfree; i++)
    for (int j = i + 1; j < c.nfree; j++) {
      int a = c.axes[i], b = c.axes[j];
      int same = d->continuous ? d->len[a] == d->len[b] : d->span[a] == d->span[b];
      if (same && c.div[b] > c.div[a]) {
        int t = c.div[a];
        c.div[a] = c.div[b];
        c.div[b] = t;
      }
    }
  for (int j = 0; j < c.nfree; j++) d->div[c.axes[j]] = c.div[c.axes[j]];
  return 0;
}

/* ---- owner lookups: the guess and how far to trust it ---------------- */

/* Sets axis a's finder of single blocks and eta (decomposer_axis.h), with
 * u = 2^-53 the unit roundoff and n = div[a]. Both bounds hold with a
 * factor 8 to spare, which covers the roundings of a finder's scale and
 * eta (and of dividing them by a group).
 *
 * Continuous, with M = max(|min|, |max|): block i > 0 starts at
 * b_i = fl(min + fl(fl(len * i) / n)), within u (M + 4.1 len) of
 * min + len i / n when len / n is normal (no subnormal rounding) and
 * len * n finite (no overflow; past it the boundaries collapse). In units
 * of blocks, T(x) = (x - min) n / len, that is u n (M / len + 4.1) from i.
 * The guess t = fl(fl(x - min) * fl(n / len)) is within 3.01 u n of T(x).
 * So eta = 2^-50 n (M / len + 10). Without those two conditions eta is
 * infinite (no guess is trusted); a zero len gives NaN, trusted neither.
 *
 * Discrete, with c = p - min and N = span + 1 cells: block i starts at cell
 * floor(N i / n), so the owner is ceil(V) - 1 for V = (c + 1) n / N. The
 * guess t = fl(fl(c + 1) * fl(n / N)) carries at most six roundings:
 * |t - V| <= 6.01 u V <= 6.01 u n; eta = 2^-47 n (at most 2^-16). When t
 * is not within eta of an integer, V is in (floor(t), floor(t) + 1) and
 * the owner is floor(t). */
static void prepare_lookups(blk_decomposer *d, int a) {
  double n = (double)d->div[a], scale, eta;
  if (d->continuous) {
    double min = d->domain.min[a].x, max = d->domain.max[a].x, len = d->len[a];
    double m = fabs(min) > fabs(max) ? fabs(min) : fabs(max);
    scale = n / len;
    if (len / n >= DBL_MIN && len * n <= DBL_MAX)
      eta = 0x1p-50 * n * (m / len + 10);
    else
      eta = len > 0 ? INFINITY : NAN;
  } else {
    scale = n / ((double)d->span[a] + 1.0);
    eta = 0x1p-47 * n;
  }
  d->eta[a] = eta;
  d->find[a] = (blk__axis_finder){.d = d,
                                  .axis = a,
                                  .group = 1,
                                  .min = d->domain.min[a],
                                  .scale = scale,
                                  .groups = n,
                                  .lo = eta,
                                  .hi = 1 - eta};
}

void blk__decomposer_axis_finder(const blk_decomposer *d, int axis, int group,
                                 blk__axis_finder *f) {
  double eta = d->eta[axis] / group;
  *f = d->find[axis];
  f->group = group;
  f->scale /= group;
  f->groups = (double)((d->div[axis] - 1) / group + 1);
  f->lo = eta;
  f->hi = 1 - eta;
}

int blk__decomposer_copy(const blk_decomposer *d, blk_decomposer **out) {
  *out = blk__malloc(sizeof **out);
  if (!*out)
    return blk__fail(BLK_ENOMEM, "decomposer: no memory for a %zu-byte copy", sizeof **out);
  **out = *d;
  for (int a = 0; a < d->dim; a++) (*out)->find[a].d = *out;
  return 0;
}

/* ---- create / destroy ------------------------------------------------ */

static int check_config(blk_decomposer *d, const blk_decomposer_config *cfg) {
  for (int a = 0; a < d->dim; a++) {
    if (cfg->divisions[a] < 0)
      return blk__fail(BLK_EINVAL, "decomposer: divisions[%d] = %d is negative", a,
                       cfg->divisions[a]);
    if (cfg->ghosts[a] < 0)
      return blk__fail(BLK_EINVAL, "decomposer: ghosts[%d] = %lld is negative", a,
                       (long long)cfg->ghosts[a]);
    double w = cfg->ghost_width[a];
    if (d->continuous) {
      if (cfg->ghosts[a] != 0)
        return blk__fail(BLK_EINVAL,
                         "decomposer: ghosts[%d] = %lld set on a continuous domain (use "
                         "ghost_width)",
                         a, (long long)cfg->ghosts[a]);
      if (cfg->share_face[a])
        return blk__fail(BLK_EINVAL,
                         "decomposer: share_face[%d] = %d set on a continuous domain (it is for "
                         "discrete cells)",
                         a, cfg->share_face[a]);
      if (!isfinite(w))
        return blk__fail(BLK_EINVAL, "decomposer: ghost_width[%d] = %g is not finite", a, w);
      if (w < 0) return blk__fail(BLK_EINVAL, "decomposer: ghost_width[%d] = %g is negative", a, w);
    } else if (w != 0 || isnan(w)) {
      return blk__fail(BLK_EINVAL,
                       "decomposer: ghost_width[%d] = %g set on a discrete domain (use ghosts)", a,
                       w);
    }
    d->div[a] = cfg->divisions[a];
    d->share[a] = cfg->share_face[a] ? 1 : 0;
    d->wrap[a] = cfg->wrap[a] ? 1 : 0;
    d->ghosts[a] = cfg->ghosts[a];
    d->width[a] = d->continuous ? w : 0.0;
  }
  return 0;
}

static int check_domain(blk_decomposer *d, const blk_bounds *db, const blk_cbounds *cb) {
  int dim = db ? db->dim : cb->dim;
  if (dim < 1 || dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "decomposer: domain dim = %d is outside 1..%d", dim, BLK_MAX_DIM);
  d->dim = dim;
  for (int a = 0; a < dim; a++) {
    if (db) {
      if (db->min[a] > db->max[a])
        return blk__fail(BLK_EINVAL, "decomposer: domain min[%d] = %lld > max[%d] = %lld", a,
                         (long long)db->min[a], a, (long long)db->max[a]);
      d->domain.min[a].i = db->min[a];
      d->domain.max[a].i = db->max[a];
      d->span[a] = (uint64_t)db->max[a] - (uint64_t)db->min[a];
    } else {
      double lo = cb->min[a], hi = cb->max[a];
      if (!isfinite(lo) || !isfinite(hi))
        return blk__fail(BLK_EINVAL,
                         "decomposer: domain min[%d] = %g, max[%d] = %g: bounds must be finite", a,
                         lo, a, hi);
      if (lo > hi)
        return blk__fail(BLK_EINVAL, "decomposer: domain min[%d] = %.17g > max[%d] = %.17g", a, lo,
                         a, hi);
      if (!isfinite(hi - lo))
        return blk__fail(BLK_EINVAL,
                         "decomposer: domain extent max[%d] - min[%d] = %g - %g is not finite", a,
                         a, hi, lo);
      d->domain.min[a].x = lo;
      d->domain.max[a].x = hi;
      d->len[a] = hi - lo;
    }
  }
  d->domain.dim = dim;
  return 0;
}

/* "AxBx0" of the divisions as given, for messages. */
static void format_divisions(const blk_decomposer *d, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int a = 0; a < d->dim && used < size; a++) {
    int w = snprintf(buf + used, size - used, "%s%d", a ? "x" : "", d->div[a]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* Given divisions: each must fit its axis and divide what is left. */
static int check_given(const blk_decomposer *d, int *left) {
  int nfree = 0;
  *left = d->nblocks;
  /* Divisions whose product passes INT_MAX are said to, rather than as one
   * that fails to divide the blocks left (which names no overflow). */
  uint64_t product = 1;
  for (int a = 0; a < d->dim && product <= INT_MAX; a++)
    if (d->div[a] > 0) product *= (uint64_t)d->div[a]; /* < 2^31 * 2^31 */
  if (product > INT_MAX) {
    char buf[128];
    format_divisions(d, buf, sizeof buf);
    return blk__fail(BLK_EINVAL,
                     "decomposer: divisions %s multiply to more than INT_MAX = %d blocks "
                     "(nblocks = %d)",
                     buf, INT_MAX, d->nblocks);
  }
  for (int a = 0; a < d->dim; a++) {
    int v = d->div[a];
    if (v == 0) {
      nfree++;
      continue;
    }
    if (!d->continuous && (uint64_t)v - 1 > d->span[a])
      return blk__fail(BLK_EINVAL, "decomposer: divisions[%d] = %d but axis %d has only %llu cells",
                       a, v, a, (unsigned long long)(d->span[a] + 1));
    if (*left % v != 0)
      return blk__fail(BLK_EINVAL,
                       "decomposer: divisions[%d] = %d does not divide the %d blocks left", a, v,
                       *left);
    *left /= v;
  }
  if (nfree == 0 && *left != 1) {
    char buf[128];
    format_divisions(d, buf, sizeof buf);
    return blk__fail(BLK_EINVAL, "decomposer: divisions %s make %d blocks, not nblocks = %d", buf,
                     d->nblocks / *left, d->nblocks);
  }
  return 0;
}

/* Ghosted bounds on a wrapped axis are not clamped: they must stay finite. */
static int check_wrap_room(const blk_decomposer *d) {
  for (int a = 0; a < d->dim; a++) {
    if (!d->wrap[a]) continue;
    if (d->continuous) {
      double w = d->width[a];
      if (!isfinite(d->domain.min[a].x - w) || !isfinite(d->domain.max[a].x + w) ||
          !isfinite(d->len[a] + 2 * w))
        return blk__fail(BLK_EINVAL,
                         "decomposer: ghost_width[%d] = %g on wrapped axis %d takes the ghosted "
                         "bounds out of the finite doubles",
                         a, w, a);
    } else {
      int64_t g = d->ghosts[a];
      int64_t min = d->domain.min[a].i, max = d->domain.max[a].i;
      if (min < INT64_MIN + g || max > INT64_MAX - g)
        return blk__fail(BLK_EINVAL,
                         "decomposer: ghosts[%d] = %lld on wrapped axis %d take the ghosted bounds "
                         "of [%lld, %lld] past the int64 range",
                         a, (long long)g, a, (long long)min, (long long)max);
    }
  }
  return 0;
}

int blk_decomposer_config_init(blk_decomposer_config *cfg, unsigned int version) {
  static const blk_decomposer_config defaults = BLK_DECOMPOSER_CONFIG_INIT;
  return blk__settings_init(cfg, &defaults, sizeof defaults, NULL, version,
                            BLK_DECOMPOSER_CONFIG_VERSION, "decomposer: config init");
}

static int create(blk_decomposer **out, const blk_bounds *db, const blk_cbounds *cb, int nblocks,
                  const blk_decomposer_config *cfg) {
  static const blk_decomposer_config defaults = BLK_DECOMPOSER_CONFIG_INIT;
  blk_decomposer *d = NULL;
  int rc = 0, left = 1;
  if (!out) return blk__fail(BLK_EINVAL, "decomposer: out is NULL");
  *out = NULL;
  if (!db && !cb) return blk__fail(BLK_EINVAL, "decomposer: domain is NULL");
  if (cfg && (cfg->version < 1 || cfg->version > BLK_DECOMPOSER_CONFIG_VERSION))
    return blk__fail(BLK_EINVAL,
                     "decomposer: the config has version %u; this blk knows 1..%u (initialise it "
                     "with BLK_DECOMPOSER_CONFIG_INIT or blk_decomposer_config_init)",
                     cfg->version, BLK_DECOMPOSER_CONFIG_VERSION);
  d = blk__calloc(1, sizeof *d);
  if (!d) return blk__fail(BLK_ENOMEM, "decomposer: no memory for %zu bytes", sizeof *d);
  d->continuous = cb != NULL;
  d->ops = cb ? &continuous_ops : &discrete_ops;
  if ((rc = check_domain(d, db, cb)) != 0) goto fail;
  if (nblocks < 1) {
    rc = blk__fail(BLK_EINVAL, "decomposer: nblocks = %d must be at least 1", nblocks);
    goto fail;
  }
  d->nblocks = nblocks;
  if ((rc = check_config(d, cfg ? cfg : &defaults)) != 0) goto fail;
  if ((rc = check_given(d, &left)) != 0) goto fail;
  for (int a = 0; a < d->dim; a++)
    if (d->div[a] == 0) {
      if ((rc = choose_divisions(d, left)) != 0) goto fail;
      break;
    }
  if ((rc = check_wrap_room(d)) != 0) goto fail;
  for (int a = 0, s = 1; a < d->dim; a++) {
    d->stride[a] = s;
    s *= d->div[a];
    if (!d->continuous) {
      d->q[a] = d->span[a] / (uint64_t)d->div[a];
      d->r[a] = d->span[a] % (uint64_t)d->div[a];
    }
    prepare_lookups(d, a);
  }
  *out = d;
  return 0;
fail:
  free(d);
  return rc;
}

int blk_decomposer_create(blk_decomposer **out, const blk_bounds *domain, int nblocks,
                          const blk_decomposer_config *cfg) {
  return create(out, domain, NULL, nblocks, cfg);
}

int blk_decomposer_create_continuous(blk_decomposer **out, const blk_cbounds *domain, int nblocks,
                                     const blk_decomposer_config *cfg) {
  return create(out, NULL, domain, nblocks, cfg);
}

void blk_decomposer_destroy(blk_decomposer *d) {
  free(d);
}

/* ---- simple queries -------------------------------------------------- */

int blk_decomposer_dim(const blk_decomposer *d) {
  return d ? d->dim : 0;
}

int blk_decomposer_nblocks(const blk_decomposer *d) {
  return d ? d->nblocks : 0;
}

int blk_decomposer_is_continuous(const blk_decomposer *d) {
  return d ? d->continuous : 0;
}

void blk_decomposer_divisions(const blk_decomposer *d, int *divisions) {
  if (!d || !divisions) return;
  for (int a = 0; a < d->dim; a++) divisions[a] = d->div[a];
}

int blk_decomposer_wrap(const blk_decomposer *d, int axis) {
  if (!d || axis < 0 || axis >= d->dim) return 0;
  return d->wrap[axis];
}

void blk_decomposer_get_config(const blk_decomposer *d, blk_decomposer_config *cfg) {
  if (!d || !cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->version = BLK_DECOMPOSER_CONFIG_VERSION;
  for (int a = 0; a < d->dim; a++) {
    cfg->divisions[a] = d->div[a];
    cfg->share_face[a] = d->share[a];
    cfg->wrap[a] = d->wrap[a];
    cfg->ghosts[a] = d->ghosts[a];
    cfg->ghost_width[a] = d->width[a];
  }
}

/* Whether d is a decomposer of ops' kind: the check every typed query
 * makes first. */
BLK__TEMPLATE int is_kind(const blk_decomposer *d, const grid_ops *ops) {
  return d && d->ops == ops;
}

/* The BLK_EINVAL of a query called wrong: a NULL d, a d of the other kind
 * than ops, or else a NULL argument, named by arg. Cold, and reached by a
 * tail call, so that a lookup's fast path has no call to return from (which
 * cost it a stack frame) and no taken branch around the error path. */
BLK__COLD static int call_error(const blk_decomposer *d, const grid_ops *ops, const char *what,
                                const char *arg) {
  if (!d) return blk__fail(BLK_EINVAL, "decomposer: %s of a NULL decomposer", what);
  if (d->ops != ops)
    return blk__fail(BLK_EINVAL, "decomposer: %s asked of a %s decomposer", what, d->ops->k->name);
  return blk__fail(BLK_EINVAL, "decomposer: %s with a NULL %s", what, arg);
}

BLK__TEMPLATE int get_domain(const blk_decomposer *d, const grid_ops *ops, void *out,
                             const char *what) {
  if (!is_kind(d, ops) || !out) return call_error(d, ops, what, "argument");
  ops->k->store(out, &d->domain);
  return 0;
}

int blk_decomposer_domain(const blk_decomposer *d, blk_bounds *out) {
  return get_domain(d, &discrete_ops, out, "domain");
}

int blk_decomposer_cdomain(const blk_decomposer *d, blk_cbounds *out) {
  return get_domain(d, &continuous_ops, out, "cdomain");
}

void blk_decomposer_gid_to_coords(const blk_decomposer *d, int gid, int *coords) {
  if (!d || !coords) return;
  int ok = gid >= 0 && gid < d->nblocks;
  for (int a = 0; a < d->dim; a++) coords[a] = ok ? (gid / d->stride[a]) % d->div[a] : -1;
}

int blk_decomposer_coords_to_gid(const blk_decomposer *d, const int *coords) {
  if (!d || !coords) return blk__fail(BLK_EINVAL, "decomposer: coords_to_gid with a NULL argument");
  int gid = 0;
  for (int a = 0; a < d->dim; a++) {
    if (coords[a] < 0 || coords[a] >= d->div[a]) return BLK_ENOTFOUND; /* no detail, as above */
    gid += coords[a] * d->stride[a];
  }
  return gid;
}

/* ---- block bounds ---------------------------------------------------- */

/* Each typed public query below calls one routine written over blk__coord
 * (a BLK__TEMPLATE, see coord.h) with its kind's table as a constant. */

BLK__TEMPLATE int block_box(const blk_decomposer *d, const grid_ops *ops, int gid, void *core,
                            void *ghosted, const char *what) {
  if (!is_kind(d, ops)) return call_error(d, ops, what, "argument");
  if (gid < 0 || gid >= d->nblocks)
    return blk__fail(BLK_ENOTFOUND, "decomposer: %s: gid %d is outside 0..%d", what, gid,
                     d->nblocks - 1);
  blk__box c = {.dim = d->dim}, g = {.dim = d->dim};
  for (int a = 0; a < d->dim; a++) {
    int i = (gid / d->stride[a]) % d->div[a];
    c.min[a] = ops->from(d, a, i);
    c.max[a] = ops->to(d, a, i);
    g.min[a] = ops->glo(d, a, i);
    g.max[a] = ops->ghi(d, a, i);
  }
  if (core) ops->k->store(core, &c);
  if (ghosted) ops->k->store(ghosted, &g);
  return 0;
}

int blk_decomposer_block_bounds(const blk_decomposer *d, int gid, blk_bounds *core,
                                blk_bounds *ghosted) {
  return block_box(d, &discrete_ops, gid, core, ghosted, "block_bounds");
}

int blk_decomposer_block_cbounds(const blk_decomposer *d, int gid, blk_cbounds *core,
                                 blk_cbounds *ghosted) {
  return block_box(d, &continuous_ops, gid, core, ghosted, "block_cbounds");
}

/* ---- point lookups --------------------------------------------------- */

/* The owner along axis a of a p in the domain by exact comparisons: the
 * largest i with from(i) <= p, so the answer agrees with block_bounds bit
 * for bit. When eta <= 1/4 the guess is within one block of it, and one
 * comparison on each side settles it; otherwise a binary search does. */
BLK__TEMPLATE int owner_exact(const blk_decomposer *d, const grid_ops *ops, int a, blk__coord p) {
  int n = d->div[a];
  if (d->eta[a] <= 0.25) {
    double t = ops->offset(&d->find[a], p) * d->find[a].scale;
    int i = t >= (double)(n - 1) ? n - 1 : (t > 0 ? (int)t : 0);
    if (!ops->k->le(ops->from(d, a, i), p)) return i - 1; /* i > 0: from(0) = min <= p */
    if (i < n - 1 && ops->k->le(ops->from(d, a, i + 1), p)) return i + 1;
    return i;
  }
  int lo = 0, hi = n - 1; /* from(lo) <= p */
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (ops->k->le(ops->from(d, a, mid), p))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* The owner along axis a of a p in the domain: the guess when it is
 * trusted (a multiplication), else the exact search. */
BLK__TEMPLATE int owner(const blk_decomposer *d, const grid_ops *ops, int a, blk__coord p) {
  int g = blk__axis_guess(&d->find[a], ops->offset(&d->find[a], p));
  return g >= 0 ? g : owner_exact(d, ops, a, p);
}

int blk__axis_find_exact(const blk__axis_finder *f, blk__coord p) {
  const blk_decomposer *d = f->d;
  int i = d->continuous ? owner_exact(d, &continuous_ops, f->axis, p)
                        : owner_exact(d, &discrete_ops, f->axis, p);
  return i / f->group;
}

BLK__TEMPLATE int point_owner(const blk_decomposer *d, const grid_ops *ops, const void *pt,
                              const char *what) {
  if (!is_kind(d, ops) || !pt) return call_error(d, ops, what, "point");
  const blk__kind *k = ops->k;
  int gid = 0;
  for (int a = 0; a < d->dim; a++) {
    blk__coord p = k->get(pt, a);
    /* A miss is an answer, not a failure: no detail, so it costs what a hit does. */
    if (!k->le(d->domain.min[a], p) || !k->le(p, d->domain.max[a])) return BLK_ENOTFOUND;
    gid += owner(d, ops, a, p) * d->stride[a];
  }
  return gid;
}

BLK__TEMPLATE int axis_owner(const blk_decomposer *d, const grid_ops *ops, int axis, blk__coord p,
                             const char *what) {
  if (!is_kind(d, ops)) return call_error(d, ops, what, "argument");
  if (axis < 0 || axis >= d->dim)
    return blk__fail(BLK_EINVAL, "decomposer: %s: axis %d is outside 0..%d", what, axis,
                     d->dim - 1);
  const blk__kind *k = ops->k;
  if (!k->le(d->domain.min[axis], p) || !k->le(p, d->domain.max[axis])) return BLK_ENOTFOUND;
  return owner(d, ops, axis, p);
}

int blk_decomposer_axis_owner(const blk_decomposer *d, int axis, int64_t x) {
  return axis_owner(d, &discrete_ops, axis, (blk__coord){.i = x}, "axis_owner");
}

int blk_decomposer_caxis_owner(const blk_decomposer *d, int axis, double x) {
  return axis_owner(d, &continuous_ops, axis, (blk__coord){.x = x}, "caxis_owner");
}

int blk_decomposer_point_to_gid(const blk_decomposer *d, const int64_t *pt) {
  return point_owner(d, &discrete_ops, pt, "point_to_gid");
}

int blk_decomposer_cpoint_to_gid(const blk_decomposer *d, const double *pt) {
  return point_owner(d, &continuous_ops, pt, "cpoint_to_gid");
}

/* The block indices along one axis: sorted, disjoint, non-adjacent ranges. */
typedef struct ranges {
  int n;
  int lo[3], hi[3];
} ranges;

static void ranges_add(ranges *s, int lo, int hi) {
  if (lo > hi) return;
  int k = s->n++;
  while (k > 0 && s->lo[k - 1] > lo) { /* keep sorted by lo */
    s->lo[k] = s->lo[k - 1];
    s->hi[k] = s->hi[k - 1];
    k--;
  }
  s->lo[k] = lo;
  s->hi[k] = hi;
}

static void ranges_merge(ranges *s) {
  int m = 0;
  for (int k = 0; k < s->n; k++) {
    if (m > 0 && s->lo[k] <= s->hi[m - 1] + 1) {
      if (s->hi[k] > s->hi[m - 1]) s->hi[m - 1] = s->hi[k];
    } else {
      s->lo[m] = s->lo[k];
      s->hi[m] = s->hi[k];
      m++;
    }
  }
  s->n = m;
}

/* Blocks i of axis a with glo(i) <= q <= ghi(i). Both ends are monotone in
 * i, so the set is one range found by two binary searches. */
BLK__TEMPLATE void search(const blk_decomposer *d, const grid_ops *ops, int a, blk__coord q,
                          ranges *s) {
  int lo = 0, hi = d->div[a] - 1, last = -1, first = d->div[a];
  while (lo <= hi) { /* last i with glo(i) <= q */
    int mid = lo + (hi - lo) / 2;
    if (ops->k->le(ops->glo(d, a, mid), q)) {
      last = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  lo = 0;
  hi = d->div[a] - 1;
  while (lo <= hi) { /* first i with ghi(i) >= q */
    int mid = lo + (hi - lo) / 2;
    if (ops->k->le(q, ops->ghi(d, a, mid))) {
      first = mid;
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  ranges_add(s, first, last);
}

/* The blocks along axis a whose ghosted interval holds p or, on a wrapped
 * axis, one of its images. Returns 0 if there are none. */
BLK__TEMPLATE int axis_blocks(const blk_decomposer *d, const grid_ops *ops, int a, blk__coord p,
                              ranges *s) {
  blk__coord q[3];
  int n = ops->images(d, a, p, q);
  s->n = 0;
  if (n == EVERY_BLOCK) {
    ranges_add(s, 0, d->div[a] - 1);
    return 1;
  }
  for (int j = 0; j < n; j++) search(d, ops, a, q[j], s);
  ranges_merge(s);
  return s->n > 0;
}

/* Writes the product of the per-axis ranges in ascending gid order. */
static int emit(const blk_decomposer *d, const ranges *s, int *gids, int max) {
  int count = 1;
  for (int a = 0; a < d->dim; a++) {
    int n = 0;
    for (int k = 0; k < s[a].n; k++) n += s[a].hi[k] - s[a].lo[k] + 1;
    count *= n; /* distinct gids, so at most nblocks */
  }
  if (max <= 0) return count;
  int k[BLK_MAX_DIM], v[BLK_MAX_DIM];
  for (int a = 0; a < d->dim; a++) {
    k[a] = 0;
    v[a] = s[a].lo[0];
  }
  for (int w = 0; w < max && w < count; w++) {
    int gid = 0;
    for (int a = 0; a < d->dim; a++) gid += v[a] * d->stride[a];
    gids[w] = gid;
    for (int a = 0; a < d->dim; a++) { /* odometer, axis 0 fastest */
      if (v[a] < s[a].hi[k[a]]) {
        v[a]++;
        break;
      }
      if (k[a] + 1 < s[a].n) {
        k[a]++;
        v[a] = s[a].lo[k[a]];
        break;
      }
      k[a] = 0;
      v[a] = s[a].lo[0];
    }
  }
  return count;
}

BLK__TEMPLATE int point_blocks(const blk_decomposer *d, const grid_ops *ops, const void *pt,
                               int *gids, int max, const char *what) {
  if (!is_kind(d, ops) || !pt) return call_error(d, ops, what, "point");
  if (max < 0) return blk__fail(BLK_EINVAL, "decomposer: %s: max = %d is negative", what, max);
  if (max > 0 && !gids)
    return blk__fail(BLK_EINVAL, "decomposer: %s: gids is NULL but max = %d", what, max);
  ranges s[BLK_MAX_DIM];
  for (int a = 0; a < d->dim; a++)
    if (!axis_blocks(d, ops, a, ops->k->get(pt, a), &s[a])) return 0;
  return emit(d, s, gids, max);
}

int blk_decomposer_point_to_gids(const blk_decomposer *d, const int64_t *pt, int *gids, int max) {
  return point_blocks(d, &discrete_ops, pt, gids, max, "point_to_gids");
}

int blk_decomposer_cpoint_to_gids(const blk_decomposer *d, const double *pt, int *gids, int max) {
  return point_blocks(d, &continuous_ops, pt, gids, max, "cpoint_to_gids");
}
