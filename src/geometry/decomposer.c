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
 * Lookups: the owner of a point along an axis is the largest i whose start is
 * <= the point; a floating guess lands within a step or two and exact integer
 * (or the same double) comparisons settle it, so lookups agree bit for bit
 * with block_bounds. point_to_gids finds, per axis, the blocks whose ghosted
 * interval holds the point or one of its images by binary search over the
 * monotone ghosted starts and ends (O(log d)), unions at most three ranges,
 * and walks their product with axis 0 fastest, which is ascending gid order.
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

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"

struct blk_decomposer {
  int dim;
  int nblocks;
  int continuous;
  int div[BLK_MAX_DIM];
  int stride[BLK_MAX_DIM]; /* product of div[0..a) */
  int share[BLK_MAX_DIM];  /* 0/1 */
  int wrap[BLK_MAX_DIM];   /* 0/1 */
  int64_t ghosts[BLK_MAX_DIM];
  double width[BLK_MAX_DIM];
  blk_bounds domain;          /* discrete */
  blk_cbounds cdomain;        /* continuous */
  uint64_t span[BLK_MAX_DIM]; /* discrete: max - min */
  uint64_t q[BLK_MAX_DIM];    /* span / div */
  uint64_t r[BLK_MAX_DIM];    /* span % div */
  double len[BLK_MAX_DIM];    /* continuous: max - min */
};

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

/* The largest i with dfrom(i) <= o, for an offset o <= span. */
static int downer(const blk_decomposer *d, int a, uint64_t o) {
  int n = d->div[a];
  long double g = (long double)o * (long double)n / ((long double)d->span[a] + 1.0L);
  int i = g >= (long double)(n - 1) ? n - 1 : (g > 0 ? (int)g : 0);
  while (i > 0 && dfrom(d, a, i) > o) i--;
  while (i < n - 1 && dfrom(d, a, i + 1) <= o) i++;
  return i;
}

/* Ghosted start and end of block i: clamped to the domain without wrap,
 * unclamped (and within int64, checked at create) with wrap. */
static int64_t dglo(const blk_decomposer *d, int a, int i) {
  uint64_t f = dfrom(d, a, i), g = (uint64_t)d->ghosts[a];
  if (d->wrap[a]) return add_off(d->domain.min[a], f) - d->ghosts[a];
  return f >= g ? add_off(d->domain.min[a], f - g) : d->domain.min[a];
}

static int64_t dghi(const blk_decomposer *d, int a, int i) {
  uint64_t t = dto(d, a, i), g = (uint64_t)d->ghosts[a];
  if (d->wrap[a]) return add_off(d->domain.min[a], t) + d->ghosts[a];
  return d->span[a] - t >= g ? add_off(d->domain.min[a], t + g) : d->domain.max[a];
}

/* ---- continuous axis arithmetic -------------------------------------- */

/* Start of block i (0 <= i <= div; i == div gives max). Monotone in i. */
static double cfrom(const blk_decomposer *d, int a, int i) {
  if (i <= 0) return d->cdomain.min[a];
  if (i >= d->div[a]) return d->cdomain.max[a];
  double x = d->cdomain.min[a] + d->len[a] * (double)i / (double)d->div[a];
  return x > d->cdomain.max[a] ? d->cdomain.max[a] : x;
}

/* The largest i < div with cfrom(i) <= x, for min <= x <= max. */
static int cowner(const blk_decomposer *d, int a, double x) {
  int n = d->div[a];
  int i = 0;
  if (d->len[a] > 0) {
    double g = (x - d->cdomain.min[a]) / d->len[a] * (double)n;
    i = g >= (double)(n - 1) ? n - 1 : (g > 0 ? (int)g : 0);
  }
  while (i > 0 && cfrom(d, a, i) > x) i--;
  while (i < n - 1 && cfrom(d, a, i + 1) <= x) i++;
  return i;
}

static double cglo(const blk_decomposer *d, int a, int i) {
  double x = cfrom(d, a, i) - d->width[a];
  if (!d->wrap[a] && x < d->cdomain.min[a]) x = d->cdomain.min[a];
  return x;
}

static double cghi(const blk_decomposer *d, int a, int i) {
  double x = cfrom(d, a, i + 1) + d->width[a];
  if (!d->wrap[a] && x > d->cdomain.max[a]) x = d->cdomain.max[a];
  return x;
}

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
      d->domain.min[a] = db->min[a];
      d->domain.max[a] = db->max[a];
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
      d->cdomain.min[a] = lo;
      d->cdomain.max[a] = hi;
      d->len[a] = hi - lo;
    }
  }
  d->domain.dim = db ? dim : 0;
  d->cdomain.dim = cb ? dim : 0;
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
      if (!isfinite(d->cdomain.min[a] - w) || !isfinite(d->cdomain.max[a] + w) ||
          !isfinite(d->len[a] + 2 * w))
        return blk__fail(BLK_EINVAL,
                         "decomposer: ghost_width[%d] = %g on wrapped axis %d takes the ghosted "
                         "bounds out of the finite doubles",
                         a, w, a);
    } else {
      int64_t g = d->ghosts[a];
      if (d->domain.min[a] < INT64_MIN + g || d->domain.max[a] > INT64_MAX - g)
        return blk__fail(BLK_EINVAL,
                         "decomposer: ghosts[%d] = %lld on wrapped axis %d take the ghosted bounds "
                         "of [%lld, %lld] past the int64 range",
                         a, (long long)g, a, (long long)d->domain.min[a],
                         (long long)d->domain.max[a]);
    }
  }
  return 0;
}

static int create(blk_decomposer **out, const blk_bounds *db, const blk_cbounds *cb, int nblocks,
                  const blk_decomposer_config *cfg) {
  static const blk_decomposer_config defaults = BLK_DECOMPOSER_CONFIG_INIT;
  blk_decomposer *d = NULL;
  int rc = 0, left = 1;
  if (!out) return blk__fail(BLK_EINVAL, "decomposer: out is NULL");
  *out = NULL;
  if (!db && !cb) return blk__fail(BLK_EINVAL, "decomposer: domain is NULL");
  d = calloc(1, sizeof *d);
  if (!d) return blk__fail(BLK_ENOMEM, "decomposer: no memory for %zu bytes", sizeof *d);
  d->continuous = cb != NULL;
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
  }
  *out = d;
  return 0;
fail:
  free(d);
  return rc;
}

int blk_decomposer_create(blk_decomposer **out, const blk_bounds *domain, int nblocks,
                          const blk_decomposer_config *cfg) {
  if (!domain) {
    if (out) *out = NULL;
    return blk__fail(BLK_EINVAL, "decomposer: domain is NULL");
  }
  return create(out, domain, NULL, nblocks, cfg);
}

int blk_decomposer_create_continuous(blk_decomposer **out, const blk_cbounds *domain, int nblocks,
                                     const blk_decomposer_config *cfg) {
  if (!domain) {
    if (out) *out = NULL;
    return blk__fail(BLK_EINVAL, "decomposer: domain is NULL");
  }
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
  for (int a = 0; a < d->dim; a++) {
    cfg->divisions[a] = d->div[a];
    cfg->share_face[a] = d->share[a];
    cfg->wrap[a] = d->wrap[a];
    cfg->ghosts[a] = d->ghosts[a];
    cfg->ghost_width[a] = d->width[a];
  }
}

int blk_decomposer_domain(const blk_decomposer *d, blk_bounds *domain) {
  if (!d || !domain) return blk__fail(BLK_EINVAL, "decomposer: NULL argument");
  if (d->continuous)
    return blk__fail(BLK_EINVAL, "decomposer: domain asked of a continuous decomposer");
  *domain = d->domain;
  return 0;
}

int blk_decomposer_cdomain(const blk_decomposer *d, blk_cbounds *domain) {
  if (!d || !domain) return blk__fail(BLK_EINVAL, "decomposer: NULL argument");
  if (!d->continuous)
    return blk__fail(BLK_EINVAL, "decomposer: cdomain asked of a discrete decomposer");
  *domain = d->cdomain;
  return 0;
}

void blk_decomposer_gid_to_coords(const blk_decomposer *d, int gid, int *coords) {
  if (!d || !coords) return;
  int ok = gid >= 0 && gid < d->nblocks;
  for (int a = 0; a < d->dim; a++) coords[a] = ok ? (gid / d->stride[a]) % d->div[a] : -1;
}

int blk_decomposer_coords_to_gid(const blk_decomposer *d, const int *coords) {
  if (!d || !coords) return -1;
  int gid = 0;
  for (int a = 0; a < d->dim; a++) {
    if (coords[a] < 0 || coords[a] >= d->div[a]) return -1;
    gid += coords[a] * d->stride[a];
  }
  return gid;
}

/* ---- block bounds ---------------------------------------------------- */

static int check_gid(const blk_decomposer *d, int gid, int want_continuous, const char *what) {
  if (!d) return blk__fail(BLK_EINVAL, "decomposer: %s of a NULL decomposer", what);
  if (d->continuous != want_continuous)
    return blk__fail(BLK_EINVAL, "decomposer: %s asked of a %s decomposer", what,
                     d->continuous ? "continuous" : "discrete");
  if (gid < 0 || gid >= d->nblocks)
    return blk__fail(BLK_EINVAL, "decomposer: %s: gid %d is outside 0..%d", what, gid,
                     d->nblocks - 1);
  return 0;
}

int blk_decomposer_block_bounds(const blk_decomposer *d, int gid, blk_bounds *core,
                                blk_bounds *ghosted) {
  int rc = check_gid(d, gid, 0, "block_bounds");
  if (rc) return rc;
  blk_bounds c, g;
  memset(&c, 0, sizeof c);
  memset(&g, 0, sizeof g);
  c.dim = g.dim = d->dim;
  for (int a = 0; a < d->dim; a++) {
    int i = (gid / d->stride[a]) % d->div[a];
    c.min[a] = add_off(d->domain.min[a], dfrom(d, a, i));
    c.max[a] = add_off(d->domain.min[a], dto(d, a, i));
    g.min[a] = dglo(d, a, i);
    g.max[a] = dghi(d, a, i);
  }
  if (core) *core = c;
  if (ghosted) *ghosted = g;
  return 0;
}

int blk_decomposer_block_cbounds(const blk_decomposer *d, int gid, blk_cbounds *core,
                                 blk_cbounds *ghosted) {
  int rc = check_gid(d, gid, 1, "block_cbounds");
  if (rc) return rc;
  blk_cbounds c, g;
  memset(&c, 0, sizeof c);
  memset(&g, 0, sizeof g);
  c.dim = g.dim = d->dim;
  for (int a = 0; a < d->dim; a++) {
    int i = (gid / d->stride[a]) % d->div[a];
    c.min[a] = cfrom(d, a, i);
    c.max[a] = cfrom(d, a, i + 1);
    g.min[a] = cglo(d, a, i);
    g.max[a] = cghi(d, a, i);
  }
  if (core) *core = c;
  if (ghosted) *ghosted = g;
  return 0;
}

/* ---- point lookups --------------------------------------------------- */

int blk_decomposer_point_to_gid(const blk_decomposer *d, const int64_t *pt) {
  if (!d || !pt) return blk__fail(BLK_EINVAL, "decomposer: point_to_gid with a NULL argument");
  if (d->continuous)
    return blk__fail(BLK_EINVAL, "decomposer: point_to_gid asked of a continuous decomposer");
  int gid = 0;
  for (int a = 0; a < d->dim; a++) {
    if (pt[a] < d->domain.min[a] || pt[a] > d->domain.max[a]) return -1;
    uint64_t o = (uint64_t)pt[a] - (uint64_t)d->domain.min[a];
    gid += downer(d, a, o) * d->stride[a];
  }
  return gid;
}

int blk_decomposer_cpoint_to_gid(const blk_decomposer *d, const double *pt) {
  if (!d || !pt) return blk__fail(BLK_EINVAL, "decomposer: cpoint_to_gid with a NULL argument");
  if (!d->continuous)
    return blk__fail(BLK_EINVAL, "decomposer: cpoint_to_gid asked of a discrete decomposer");
  int gid = 0;
  for (int a = 0; a < d->dim; a++) {
    if (!(pt[a] >= d->cdomain.min[a] && pt[a] <= d->cdomain.max[a])) return -1;
    gid += cowner(d, a, pt[a]) * d->stride[a];
  }
  return gid;
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

/* Blocks i of a discrete axis with dglo(i) <= q <= dghi(i). Both ends are
 * monotone in i, so the set is one range found by two binary searches. */
static void dsearch(const blk_decomposer *d, int a, int64_t q, ranges *s) {
  int lo = 0, hi = d->div[a] - 1, last = -1, first = d->div[a];
  while (lo <= hi) { /* last i with dglo(i) <= q */
    int mid = lo + (hi - lo) / 2;
    if (dglo(d, a, mid) <= q) {
      last = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  lo = 0;
  hi = d->div[a] - 1;
  while (lo <= hi) { /* first i with dghi(i) >= q */
    int mid = lo + (hi - lo) / 2;
    if (dghi(d, a, mid) >= q) {
      first = mid;
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  ranges_add(s, first, last);
}

static void csearch(const blk_decomposer *d, int a, double q, ranges *s) {
  int lo = 0, hi = d->div[a] - 1, last = -1, first = d->div[a];
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (cglo(d, a, mid) <= q) {
      last = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  lo = 0;
  hi = d->div[a] - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (cghi(d, a, mid) >= q) {
      first = mid;
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  ranges_add(s, first, last);
}

/* The blocks along discrete axis a whose ghosted interval holds p or, on a
 * wrapped axis, one of its images. Returns 0 if there are none. */
static int daxis(const blk_decomposer *d, int a, int64_t p, ranges *s) {
  int64_t min = d->domain.min[a], max = d->domain.max[a];
  uint64_t span = d->span[a], o;
  s->n = 0;
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
  uint64_t g = (uint64_t)d->ghosts[a];
  if (d->wrap[a] && g > span) { /* ghosts >= n cells: every block sees every cell */
    ranges_add(s, 0, d->div[a] - 1);
    return 1;
  }
  dsearch(d, a, add_off(min, o), s);
  if (d->wrap[a]) {
    if (o > span - g) /* the image p - n reaches the ghosts above min - g */
      dsearch(d, a, (min - d->ghosts[a]) + (int64_t)(o - (span - g) - 1), s);
    if (o < g) /* the image p + n */
      dsearch(d, a, (max + d->ghosts[a]) - (int64_t)(g - 1 - o), s);
  }
  ranges_merge(s);
  return s->n > 0;
}

static int caxis(const blk_decomposer *d, int a, double p, ranges *s) {
  double min = d->cdomain.min[a], max = d->cdomain.max[a], len = d->len[a];
  s->n = 0;
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
  if (d->wrap[a] && d->width[a] >= len) { /* ghosts at least a period wide */
    ranges_add(s, 0, d->div[a] - 1);
    return 1;
  }
  csearch(d, a, p, s);
  if (d->wrap[a]) {
    csearch(d, a, p - len, s);
    csearch(d, a, p + len, s);
  }
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

static int check_gids_args(const blk_decomposer *d, const void *pt, const int *gids, int max,
                           int want_continuous, const char *what) {
  if (!d || !pt) return blk__fail(BLK_EINVAL, "decomposer: %s with a NULL argument", what);
  if (d->continuous != want_continuous)
    return blk__fail(BLK_EINVAL, "decomposer: %s asked of a %s decomposer", what,
                     d->continuous ? "continuous" : "discrete");
  if (max < 0) return blk__fail(BLK_EINVAL, "decomposer: %s: max = %d is negative", what, max);
  if (max > 0 && !gids)
    return blk__fail(BLK_EINVAL, "decomposer: %s: gids is NULL but max = %d", what, max);
  return 0;
}

int blk_decomposer_point_to_gids(const blk_decomposer *d, const int64_t *pt, int *gids, int max) {
  int rc = check_gids_args(d, pt, gids, max, 0, "point_to_gids");
  if (rc) return rc;
  ranges s[BLK_MAX_DIM];
  for (int a = 0; a < d->dim; a++)
    if (!daxis(d, a, pt[a], &s[a])) return 0;
  return emit(d, s, gids, max);
}

int blk_decomposer_cpoint_to_gids(const blk_decomposer *d, const double *pt, int *gids, int max) {
  int rc = check_gids_args(d, pt, gids, max, 1, "cpoint_to_gids");
  if (rc) return rc;
  ranges s[BLK_MAX_DIM];
  for (int a = 0; a < d->dim; a++)
    if (!caxis(d, a, pt[a], &s[a])) return 0;
  return emit(d, s, gids, max);
}
