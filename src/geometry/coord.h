/*
 * coord.h: a coordinate of either kind, for the geometry code that is the
 * same for discrete cells and continuous points.
 *
 * Geometry comes in two kinds: int64 cells (blk_bounds, a discrete
 * decomposer) and doubles (blk_cbounds, a continuous one). Much of it only
 * reads, compares and copies coordinates, and that part is written once,
 * over blk__coord (a union that holds a coordinate of either kind exactly)
 * and a blk__kind (the table of what differs: reading pt[a] from a typed
 * array, comparing two coordinates, printing one, converting a typed box to
 * and from a blk__box). Generic code never reads a blk__coord's members;
 * only the kind's functions do, each its own member. Arithmetic on
 * coordinates (where block boundaries fall) differs in substance and stays
 * with each kind (decomposer.c).
 *
 * The two kinds' sections at the end mirror each other on purpose: each is
 * the one place that knows its type, a few lines per operation.
 *
 * Comparisons are false when either side is NaN, as C's are, so a generic
 * `!le(min, p) || !le(p, max)` rejects a NaN point and `!le(x, x)` holds
 * only for a NaN.
 *
 * Speed: a generic routine is declared BLK__TEMPLATE and called only from
 * thin typed wrappers, each passing its kind's table as a constant (zstd's
 * FORCE_INLINE_TEMPLATE idiom). Inlined there, the table's loads fold to
 * its functions, which are then called directly and inlined too: each
 * wrapper compiles to what a typed copy would, with no call through a
 * pointer (decomposer.c's lookups rely on it). The inlining is forced
 * where the compiler allows, because GCC's -O2 heuristics otherwise keep
 * one shared copy that calls through the table, at half the speed.
 * Pure; any thread.
 */
#ifndef BLK_COORD_H
#define BLK_COORD_H

#include <stdint.h>
#include <stdio.h>

#include "blk/bounds.h"

/* BLK__COLD marks the error path such a routine leaves by: placed out of
 * line, so that the fast path falls straight through. */
#if defined(__GNUC__)
#define BLK__TEMPLATE static inline __attribute__((always_inline))
#define BLK__COLD __attribute__((cold))
#else
#define BLK__TEMPLATE static inline
#define BLK__COLD
#endif

typedef union blk__coord {
  int64_t i; /* discrete */
  double x;  /* continuous */
} blk__coord;

/* A box of either kind: a blk_bounds or blk_cbounds in common form. */
typedef struct blk__box {
  int dim;
  blk__coord min[BLK_MAX_DIM];
  blk__coord max[BLK_MAX_DIM];
} blk__box;

/* Longest text of a coordinate: "%lld" takes 20 characters, "%.17g" 24. */
enum { BLK__COORD_TEXT = 32 };

typedef struct blk__kind {
  const char *name;     /* "discrete" or "continuous" */
  const char *box_name; /* "bounds" or "cbounds", the prefix of bounds.c's messages */
  blk__coord (*get)(const void *pt, int a); /* pt[a] of an int64_t or double array */
  int (*le)(blk__coord p, blk__coord q);    /* p <= q */
  int (*lt)(blk__coord p, blk__coord q);    /* p < q */
  /* p as text ("%lld" or "%.17g") in buf; returns buf. */
  const char *(*format)(char buf[BLK__COORD_TEXT], blk__coord p);
  /* A blk_bounds or blk_cbounds to a blk__box: dim as it is, entries past
   * it (or past BLK_MAX_DIM) zero. */
  void (*load)(blk__box *out, const void *box);
  /* A blk__box (1 <= dim <= BLK_MAX_DIM) to the typed box, entries past dim
   * zero, as blk_bounds_set leaves them. */
  void (*store)(void *box, const blk__box *in);
} blk__kind;

/* ---- discrete: int64 cells, blk_bounds ----------------------------------- */

static inline blk__coord blk__discrete_get(const void *pt, int a) {
  return (blk__coord){.i = ((const int64_t *)pt)[a]};
}

static inline int blk__discrete_le(blk__coord p, blk__coord q) {
  return p.i <= q.i;
}

static inline int blk__discrete_lt(blk__coord p, blk__coord q) {
  return p.i < q.i;
}

static inline const char *blk__discrete_format(char buf[BLK__COORD_TEXT], blk__coord p) {
  snprintf(buf, BLK__COORD_TEXT, "%lld", (long long)p.i);
  return buf;
}

static inline void blk__discrete_load(blk__box *out, const void *box) {
  const blk_bounds *b = box;
  *out = (blk__box){.dim = b->dim};
  for (int a = 0; a < b->dim && a < BLK_MAX_DIM; a++) {
    out->min[a].i = b->min[a];
    out->max[a].i = b->max[a];
  }
}

static inline void blk__discrete_store(void *box, const blk__box *in) {
  blk_bounds b = {.dim = in->dim};
  for (int a = 0; a < in->dim; a++) {
    b.min[a] = in->min[a].i;
    b.max[a] = in->max[a].i;
  }
  *(blk_bounds *)box = b;
}

static const blk__kind blk__discrete = {"discrete",         "bounds",
                                        blk__discrete_get,  blk__discrete_le,
                                        blk__discrete_lt,   blk__discrete_format,
                                        blk__discrete_load, blk__discrete_store};

/* ---- continuous: doubles, blk_cbounds ------------------------------------ */

static inline blk__coord blk__continuous_get(const void *pt, int a) {
  return (blk__coord){.x = ((const double *)pt)[a]};
}

static inline int blk__continuous_le(blk__coord p, blk__coord q) {
  return p.x <= q.x;
}

static inline int blk__continuous_lt(blk__coord p, blk__coord q) {
  return p.x < q.x;
}

static inline const char *blk__continuous_format(char buf[BLK__COORD_TEXT], blk__coord p) {
  snprintf(buf, BLK__COORD_TEXT, "%.17g", p.x);
  return buf;
}

static inline void blk__continuous_load(blk__box *out, const void *box) {
  const blk_cbounds *b = box;
  *out = (blk__box){.dim = b->dim};
  for (int a = 0; a < b->dim && a < BLK_MAX_DIM; a++) {
    out->min[a].x = b->min[a];
    out->max[a].x = b->max[a];
  }
}

static inline void blk__continuous_store(void *box, const blk__box *in) {
  blk_cbounds b = {.dim = in->dim};
  for (int a = 0; a < in->dim; a++) {
    b.min[a] = in->min[a].x;
    b.max[a] = in->max[a].x;
  }
  *(blk_cbounds *)box = b;
}

static const blk__kind blk__continuous = {"continuous",         "cbounds",
                                          blk__continuous_get,  blk__continuous_le,
                                          blk__continuous_lt,   blk__continuous_format,
                                          blk__continuous_load, blk__continuous_store};

#endif
