/*
 * decomposer_axis.h: the owner of a coordinate along one axis of a
 * decomposer, at the cost of a multiplication, for loops over many points.
 *
 * An axis finder answers floor(i / group) for the grid coordinate i of the
 * block that owns a coordinate along its axis (group = 1: the owner's
 * coordinate itself; group = a round's step: what a swap round needs). It
 * guesses t = offset * scale, the owner's group as a real number, and takes
 * floor(t) when t is at least eta away from both ends of its unit interval:
 * eta bounds the rounding error of the guess plus that of the block
 * boundaries (decomposer.c works the bound out), so the guess cannot then
 * lie on the other side of a boundary from the coordinate. Near a boundary,
 * or when eta is too large to trust any guess (domains far from the origin
 * for their length, subnormal lengths), blk__axis_find_exact settles it by
 * exact comparisons with the boundaries, so every answer agrees with
 * blk_decomposer_block_bounds bit for bit. The offset is p - min + 1 (cells)
 * on a discrete axis and x - min on a continuous one.
 *
 * A finder is plain data filled once (blk__decomposer_axis_finder) and read
 * only after; it points to its decomposer, which must outlive it. Any
 * thread.
 */
#ifndef BLK_DECOMPOSER_AXIS_H
#define BLK_DECOMPOSER_AXIS_H

#include <stdint.h>

#include "blk/decomposer.h"
#include "geometry/coord.h"

typedef struct blk__axis_finder {
  const blk_decomposer *d;
  int axis;
  int group;      /* blocks per group: the finder answers owner / group */
  blk__coord min; /* the domain's bounds on the axis (.i discrete, .x continuous) */
  blk__coord max; /*   */
  double scale;   /* groups per unit of offset */
  double groups;  /* the number of groups, ceil(divisions / group) */
  double lo, hi;  /* a guess t is taken when lo <= t - floor(t) <= hi */
} blk__axis_finder;

/* Fills *f for axis (0..dim-1) of d with group >= 1 consecutive blocks per
 * group. The caller checks the arguments. */
void blk__decomposer_axis_finder(const blk_decomposer *d, int axis, int group, blk__axis_finder *f);

/* The group of the block that owns p, for a p inside [min, max] on the axis
 * (discrete: .i, continuous: .x), by exact comparisons. */
int blk__axis_find_exact(const blk__axis_finder *f, blk__coord p);

/* The guessed group, or -1 when the guess is not to be trusted. */
static inline int blk__axis_guess(const blk__axis_finder *f, double offset) {
  double t = offset * f->scale;
  if (!(t < f->groups)) return -1; /* also NaN, and keeps (int)t defined */
  int g = (int)t;
  double r = t - (double)g; /* exact: 0 <= t < 2^31 */
  return r >= f->lo && r <= f->hi ? g : -1;
}

/* The offsets the guess scales: x - min, and p - min + 1 for a cell. */
static inline double blk__axis_coffset(const blk__axis_finder *f, double x) {
  return x - f->min.x;
}

static inline double blk__axis_offset(const blk__axis_finder *f, int64_t p) {
  return (double)((uint64_t)p - (uint64_t)f->min.i) + 1.0;
}

/* The group of the block owning the continuous coordinate x, which must
 * lie in [min, max] on the axis. */
static inline int blk__axis_cfind(const blk__axis_finder *f, double x) {
  int g = blk__axis_guess(f, blk__axis_coffset(f, x));
  return g >= 0 ? g : blk__axis_find_exact(f, (blk__coord){.x = x});
}

/* The same for the discrete cell p. */
static inline int blk__axis_find(const blk__axis_finder *f, int64_t p) {
  int g = blk__axis_guess(f, blk__axis_offset(f, p));
  return g >= 0 ? g : blk__axis_find_exact(f, (blk__coord){.i = p});
}

/* A copy of d that the caller frees with blk_decomposer_destroy: for
 * objects that keep finders and must not depend on the caller's d.
 * Returns 0 or BLK_ENOMEM. */
int blk__decomposer_copy(const blk_decomposer *d, blk_decomposer **out);

#endif
