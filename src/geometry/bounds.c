/*
 * bounds.c: discrete and continuous boxes.
 *
 * Invariant of a box made by a setter: 1 <= dim <= BLK_MAX_DIM, min <= max on
 * every axis (no NaN for continuous boxes), entries past dim zero. Extents
 * are computed in uint64 with modular subtraction, which is exact whenever
 * min <= max, so no int64 range overflows. No state, no locking.
 */
#include "blk/bounds.h"

#include <math.h>
#include <string.h>

#include "base/fail.h"

int blk_bounds_set(blk_bounds *b, int dim, const int64_t *min, const int64_t *max) {
  if (!b || !min || !max) return blk__fail(BLK_EINVAL, "bounds: NULL argument");
  if (dim < 1 || dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "bounds: dim = %d is outside 1..%d", dim, BLK_MAX_DIM);
  for (int a = 0; a < dim; a++) {
    if (min[a] > max[a])
      return blk__fail(BLK_EINVAL, "bounds: min[%d] = %lld > max[%d] = %lld", a, (long long)min[a],
                       a, (long long)max[a]);
  }
  blk_bounds out;
  memset(&out, 0, sizeof out);
  out.dim = dim;
  for (int a = 0; a < dim; a++) {
    out.min[a] = min[a];
    out.max[a] = max[a];
  }
  *b = out;
  return 0;
}

int blk_cbounds_set(blk_cbounds *b, int dim, const double *min, const double *max) {
  if (!b || !min || !max) return blk__fail(BLK_EINVAL, "cbounds: NULL argument");
  if (dim < 1 || dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "cbounds: dim = %d is outside 1..%d", dim, BLK_MAX_DIM);
  for (int a = 0; a < dim; a++) {
    if (isnan(min[a]) || isnan(max[a]))
      return blk__fail(BLK_EINVAL, "cbounds: min[%d] = %g, max[%d] = %g: NaN is not a bound", a,
                       min[a], a, max[a]);
    if (min[a] > max[a])
      return blk__fail(BLK_EINVAL, "cbounds: min[%d] = %.17g > max[%d] = %.17g", a, min[a], a,
                       max[a]);
  }
  blk_cbounds out;
  memset(&out, 0, sizeof out);
  out.dim = dim;
  for (int a = 0; a < dim; a++) {
    out.min[a] = min[a];
    out.max[a] = max[a];
  }
  *b = out;
  return 0;
}

int blk_bounds_contains(const blk_bounds *b, const int64_t *pt) {
  if (!b || !pt) return 0;
  for (int a = 0; a < b->dim && a < BLK_MAX_DIM; a++)
    if (pt[a] < b->min[a] || pt[a] > b->max[a]) return 0;
  return 1;
}

int blk_cbounds_contains(const blk_cbounds *b, const double *pt) {
  if (!b || !pt) return 0;
  for (int a = 0; a < b->dim && a < BLK_MAX_DIM; a++)
    if (!(pt[a] >= b->min[a] && pt[a] <= b->max[a])) return 0; /* NaN fails too */
  return 1;
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

int blk_bounds_intersect(blk_bounds *out, const blk_bounds *a, const blk_bounds *b) {
  if (!out || !a || !b) return blk__fail(BLK_EINVAL, "bounds: NULL argument");
  if (a->dim != b->dim || a->dim < 1 || a->dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "bounds: intersecting boxes of dim %d and %d", a->dim, b->dim);
  blk_bounds r;
  memset(&r, 0, sizeof r);
  r.dim = a->dim;
  for (int i = 0; i < a->dim; i++) {
    r.min[i] = a->min[i] > b->min[i] ? a->min[i] : b->min[i];
    r.max[i] = a->max[i] < b->max[i] ? a->max[i] : b->max[i];
    if (r.min[i] > r.max[i]) return 0;
  }
  *out = r;
  return 1;
}

int blk_cbounds_intersect(blk_cbounds *out, const blk_cbounds *a, const blk_cbounds *b) {
  if (!out || !a || !b) return blk__fail(BLK_EINVAL, "cbounds: NULL argument");
  if (a->dim != b->dim || a->dim < 1 || a->dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "cbounds: intersecting boxes of dim %d and %d", a->dim, b->dim);
  blk_cbounds r;
  memset(&r, 0, sizeof r);
  r.dim = a->dim;
  for (int i = 0; i < a->dim; i++) {
    r.min[i] = a->min[i] > b->min[i] ? a->min[i] : b->min[i];
    r.max[i] = a->max[i] < b->max[i] ? a->max[i] : b->max[i];
    if (!(r.min[i] <= r.max[i])) return 0;
  }
  *out = r;
  return 1;
}
