/*
 * blk/bounds.h: axis-aligned boxes, discrete and continuous.
 *
 * A blk_bounds is a box of integer cells in 1..BLK_MAX_DIM dimensions; min and
 * max are both inclusive, so a box with min == max holds one cell per axis.
 * A blk_cbounds is a closed box of real coordinates, [min, max] on every axis.
 * Both are plain values: copy them freely. Entries past dim are ignored (the
 * setters zero them).
 *
 * Discrete boxes may span any int64 range; the number of cells along one axis
 * (max - min + 1) is counted in uint64, so a domain from -2^62 to 2^62 works.
 *
 * Every function here only reads its inputs (apart from the out-parameter), so
 * any thread may call them on shared boxes.
 */
#ifndef BLK_BOUNDS_H
#define BLK_BOUNDS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest number of dimensions a box, and so a decomposer, may have. */
#define BLK_MAX_DIM 8

/* A box of discrete cells: min[a]..max[a] inclusive for a < dim. */
typedef struct blk_bounds {
  int dim;
  int64_t min[BLK_MAX_DIM];
  int64_t max[BLK_MAX_DIM];
} blk_bounds;

/* A closed box of real coordinates: [min[a], max[a]] for a < dim. */
typedef struct blk_cbounds {
  int dim;
  double min[BLK_MAX_DIM];
  double max[BLK_MAX_DIM];
} blk_cbounds;

/* Fills *b with dim, min[0..dim) and max[0..dim), zeroing the entries past dim.
 * Returns 0, or BLK_EINVAL (with a detail naming the value, *b untouched) if
 * b, min or max is NULL, dim is outside 1..BLK_MAX_DIM, or min[a] > max[a]. */
int blk_bounds_set(blk_bounds *b, int dim, const int64_t *min, const int64_t *max);

/* The same for a continuous box; also BLK_EINVAL if any bound is NaN.
 * Infinite bounds are accepted here (a decomposer rejects them). */
int blk_cbounds_set(blk_cbounds *b, int dim, const double *min, const double *max);

/* 1 if the cell pt[0..dim) lies in *b, else 0 (also 0 if b or pt is NULL). */
int blk_bounds_contains(const blk_bounds *b, const int64_t *pt);

/* 1 if pt[0..dim) lies in the closed box *b (min <= pt <= max on every axis),
 * else 0 (also for NaN coordinates and NULL arguments). */
int blk_cbounds_contains(const blk_cbounds *b, const double *pt);

/* The number of cells along an axis, max - min + 1. The one count that does
 * not fit in uint64, 2^64 for min = INT64_MIN and max = INT64_MAX, saturates
 * to UINT64_MAX. Returns 0 for an axis outside 0..dim-1 or a NULL box. */
uint64_t blk_bounds_extent(const blk_bounds *b, int axis);

/* The length max - min along an axis; 0 for an axis outside 0..dim-1 or a
 * NULL box. */
double blk_cbounds_extent(const blk_cbounds *b, int axis);

/* The number of cells in the box (the product of the extents) in *count.
 * Returns 0, or BLK_EINVAL if the product does not fit in uint64 (the detail
 * names the axis where it overflowed) or an argument is NULL. */
int blk_bounds_count(const blk_bounds *b, uint64_t *count);

/* The intersection of two boxes of the same dim. Returns 1 and writes *out if
 * they share at least one cell, 0 if they are disjoint (*out untouched), or
 * BLK_EINVAL if their dims differ or an argument is NULL. out may alias a or b. */
int blk_bounds_intersect(blk_bounds *out, const blk_bounds *a, const blk_bounds *b);

/* The same for closed continuous boxes: boxes that touch in a face intersect
 * in that face (returns 1 with a zero-width *out). */
int blk_cbounds_intersect(blk_cbounds *out, const blk_cbounds *a, const blk_cbounds *b);

#ifdef __cplusplus
}
#endif
#endif
