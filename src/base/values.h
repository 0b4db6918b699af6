/*
 * values.h: the value all-reduce that blocks post during a callback.
 *
 * Each block posts a short list of (type, op, value) through its proxy. At
 * the next exchange the lists of the local blocks are combined on this rank
 * (they must agree in type and op, position by position), and the ranks
 * combine theirs along the agreement that ends the exchange (operation.h).
 * A rank with no blocks contributes "nothing" (the identity), so it needs
 * to know nothing about what the blocks posted; a block that posted no
 * value contributes an empty list, which disagrees with a list of values.
 */
#ifndef BLK_VALUES_H
#define BLK_VALUES_H

#include <stdint.h>

#include "blk/types.h"

/* The most values a block posts between exchanges (BLK_PROXY_MAX_REDUCTIONS). */
#define BLK__VALUES_MAX 32

enum { BLK__VALUE_F64 = 0, BLK__VALUE_I64 = 1 };

typedef struct blk__value {
  int32_t kind; /* type * 4 + op */
  int32_t pad;
  union {
    double f64;
    int64_t i64;
  } v;
} blk__value;

typedef struct blk__values {
  int32_t count;
  int32_t flags; /* VALUES_NOTHING, VALUES_MISMATCH (values.c) */
  blk__value items[BLK__VALUES_MAX];
} blk__values;

/* Nothing: the identity of the combination (a rank without blocks). */
void blk__values_clear(blk__values *v);
/* An empty list: what a block that posted no value contributes. */
void blk__values_none_posted(blk__values *v);
/* Copies the list (only its items in use). */
void blk__values_copy(blk__values *dst, const blk__values *src);
/* Appends one posted value; BLK_EINVAL for an unknown op or a full list. */
int blk__values_post(blk__values *v, int type, blk_op op, double f, int64_t i);
/* Combines the list of a local block into acc; returns 0, or -1 if the two
 * disagree (different count, or type or op at some position). */
int blk__values_combine(blk__values *acc, const blk__values *in);
/* Whether a combined list came out as a mismatch. */
int blk__values_mismatch(const blk__values *v);

#endif
