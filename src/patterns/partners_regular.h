/*
 * partners_regular.h: the built-in regular patterns (merge, broadcast, swap,
 * all-reduce) as ops tables over an immutable state; partners.c wraps them in a
 * blk_partners object. See partners_regular.c for the arithmetic.
 */
#ifndef BLK_PARTNERS_REGULAR_H
#define BLK_PARTNERS_REGULAR_H

#include "blk/partners.h"

typedef struct blk__regular blk__regular;

/* Validate and build a regular pattern with radix k (factoring each axis) or with
 * explicit rounds. On success *ops is the pattern's table (static storage) and *state
 * a new blk__regular that (*ops)->destroy frees. Errors through blk__fail, naming the
 * wrong value; on error *state is NULL. */
int blk__regular_create_k(const blk_partners_ops **ops, blk__regular **state, blk_pattern pattern,
                          int dim, const int *divisions, int k, int contiguous);
int blk__regular_create_rounds(const blk_partners_ops **ops, blk__regular **state,
                               blk_pattern pattern, int dim, const int *divisions, int nrounds,
                               const int *axes, const int *radices, int contiguous);

/* The largest radix (0 without rounds). state is a blk__regular. */
int blk__regular_max_group(const void *state);

/* Exchange round round of a regular pattern (0..rounds-1) as a digit of the
 * grid coordinate c along its axis: the groups are the blocks whose c
 * differ only in the digit (c / step) % radix, and a block's position in
 * its group is that digit. divisions and stride are the axis's (gid / stride
 * % divisions is a gid's c). */
typedef struct blk__round_digit {
  int axis, radix, step, divisions, stride;
} blk__round_digit;

/* Fills *out for exchange round round of the pattern; returns 0, or -1 for
 * a round outside 0..rounds-1. state is a blk__regular; the signature fits
 * blk_partners' optional query. */
int blk__regular_round_digit(const void *state, int round, blk__round_digit *out);

#endif
