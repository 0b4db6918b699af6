/*
 * combine.h: element-wise sum, min and max of two arrays, the inner loop of
 * every array reduction (arrays.c).
 *
 * Its own file because it is compiled for speed (src/CMakeLists.txt): GCC's
 * -O2 does not vectorize a loop whose arrays might overlap, and scalar code
 * made the combines 56% of a merge inside one rank, 7 times a copy of the
 * same bytes (docs/performance.md).
 */
#ifndef BLK_COMBINE_H
#define BLK_COMBINE_H

#include <stddef.h>

#include "blk/types.h"

/* acc[i] = acc[i] op in[i] for i < n. The arrays must not overlap. Integer
 * sums wrap (done in unsigned arithmetic), as blk_proxy_all_reduce_i64's do. */
void blk__combine(blk_type t, blk_op op, void *restrict acc, const void *restrict in, size_t n);

/* a[i] = the identity of op for i < n, the value x with x op y == y for
 * every y: 0 for a sum; for MIN the type's largest value (+infinity for
 * floats), for MAX its smallest (-infinity). What an exclusive scan gives
 * the first block. */
void blk__identity(blk_type t, blk_op op, void *a, size_t n);

#endif
