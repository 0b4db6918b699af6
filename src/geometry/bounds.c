/*
 * bounds.c: discrete and continuous boxes.
 *
 * Invariant of a box made by a setter: 1 <= dim <= BLK_MAX_DIM, min <= max on
 * every axis (no NaN for continuous boxes), entries past dim zero. Extents
 * are computed in uint64 with modular subtraction, which is exact whenever
 * min <= max, so no int64 range overflows. No state, no locking.
 *
 * Setting, containment and intersection only compare and copy coordinates:
 * each is one routine over both kinds (coord.h), called by the typed public
 * functions with the kind's table.
 */
#include "blk/bounds.h"

#include "base/fail.h"
#include "geometry/coord.h"

/* Validates min[0..dim) <= max[0..dim) (no NaN) and writes the box to *b. */
BLK__TEMPLATE int set(const blk__kind *k, void *b, int dim, const void *min, const void *max) {
  const char *what = k->box_name;
  if (!b || !min || !max) return blk__fail(BLK_EINVAL, "%s: NULL argument", what);
  if (dim < 1 || dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "%s: dim = %d is outside 1..%d", what, dim, BLK_MAX_DIM);
  blk__box r = {.dim = dim};
  for (int a = 0; a < dim; a++) {
    blk__coord lo = k->get(min, a), hi = k->get(max, a);
    char s[2][BLK__COORD_TEXT];
    if (!k->le(lo, lo) || !k->le(hi, hi)) /* only a NaN is not <= itself */
      return blk__fail(BLK_EINVAL, "%s: min[%d] = %s, max[%d] = %s: NaN is not a bound", what, a,
                       k->format(s[0], lo), a, k->format(s[1], hi));
    if (!k->le(lo, hi))
      return blk__fail(BLK_EINVAL, "%s: min[%d] = %s > max[%d] = %s", what, a, k->format(s[0], lo),
                       a, k->format(s[1], hi));
    r.min[a] = lo;
    r.max[a] = hi;
  }
  k->store(b, &r);
  return 0;
}

int blk_bounds_set(blk_bounds *b, int dim, const int64_t *min, const int64_t *max) {
  return set(&blk__discrete, b, dim, min, max);
}

int blk_cbounds_set(blk_cbounds *b, int dim, const double *min, const double *max) {
  return set(&blk__continuous, b, dim, min, max);
}

/* 1 if min[a] <= pt[a] <= max[a] for a < dim (a NaN fails), else 0. */
BLK__TEMPLATE int contains(const blk__kind *k, int dim, const void *min, const void *max,
                           const void *pt) {
  for (int a = 0; a < dim && a < BLK_MAX_DIM; a++) {
    blk__coord p = k->get(pt, a);
    if (!k->le(k->get(min, a), p) || !k->le(p, k->get(max, a))) return 0;
  }
  return 1;
}

int blk_bounds_contains(const blk_bounds *b, const int64_t *pt) {
  return b && pt && contains(&blk__discrete, b->dim, b->min, b->max, pt);
}

int blk_cbounds_contains(const blk_cbounds *b, const double *pt) {
  return b && pt && contains(&blk__continuous, b->dim, b->min, b->max, pt);
}

uint64_t blk_bounds_extent(const blk_bounds *b, int axis) {
  if (!b || axis < 0 || axis >= b->dim || axis >= BLK_MAX_DIM) return 0;
  if (b->min[axis] > b->max[axis]) return 0;
  uint64_t span = (uint64_t)b->max[axis] - (uint64_t)b->min[axis];
  return span == UINT64_MAX ? UINT64_MAX : span + 1;
}

double blk_cbounds_extent(const blk_cbounds *b, int axis) {
  if (!b || axis < 0 || axis >= b->dim || axis >= BLK_MAX_DIM) return 0.0;
  return b->max[axis] - b->min[axis];
}

int blk_bounds_count(const blk_bounds *b, uint64_t *count) {
  if (!b || !count) return blk__fail(BLK_EINVAL, "bounds: NULL argument");
  if (b->dim < 1 || b->dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "bounds: dim = %d is outside 1..%d", b->dim, BLK_MAX_DIM);
  uint64_t c = 1;
  for (int a = 0; a < b->dim; a++) {
    if (b->min[a] > b->max[a])
      return blk__fail(BLK_EINVAL, "bounds: min[%d] = %lld > max[%d] = %lld", a,
                       (long long)b->min[a], a, (long long)b->max[a]);
    uint64_t span = (uint64_t)b->max[a] - (uint64_t)b->min[a];
    /* c * (span + 1) <= UINT64_MAX  <=>  c * span <= UINT64_MAX - c */
    if (span != 0 && c > (UINT64_MAX - c) / span)
      return blk__fail(BLK_EINVAL,
                       "bounds: the cell count overflows uint64 at axis %d (%llu cells so far, "
                       "max - min = %llu)",
                       a, (unsigned long long)c, (unsigned long long)span);
    c += c * span;
  }
  *count = c;
  return 0;
}

/* The intersection of two boxes of one kind; see blk_bounds_intersect. */
BLK__TEMPLATE int intersect(const blk__kind *k, void *out, const void *a, const void *b) {
  if (!out || !a || !b) return blk__fail(BLK_EINVAL, "%s: NULL argument", k->box_name);
  blk__box x, y;
  k->load(&x, a);
  k->load(&y, b);
  if (x.dim != y.dim || x.dim < 1 || x.dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "%s: intersecting boxes of dim %d and %d", k->box_name, x.dim,
                     y.dim);
  blk__box r = {.dim = x.dim};
  for (int i = 0; i < r.dim; i++) {
    r.min[i] = k->lt(y.min[i], x.min[i]) ? x.min[i] : y.min[i]; /* the larger min */
    r.max[i] = k->lt(x.max[i], y.max[i]) ? x.max[i] : y.max[i]; /* the smaller max */
    if (!k->le(r.min[i], r.max[i])) return 0;                   /* disjoint */
  }
  k->store(out, &r);
  return 1;
}

int blk_bounds_intersect(blk_bounds *out, const blk_bounds *a, const blk_bounds *b) {
  return intersect(&blk__discrete, out, a, b);
}

int blk_cbounds_intersect(blk_cbounds *out, const blk_cbounds *a, const blk_cbounds *b) {
  return intersect(&blk__continuous, out, a, b);
}
