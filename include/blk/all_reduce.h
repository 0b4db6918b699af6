/*
 * blk/all_reduce.h: one value from every block, combined by the program's
 * own op into one result that every rank gets (DIY's cp.all_reduce for any
 * type and op).
 *
 * Each block gives a value of the same size, any size (a struct, a small
 * matrix, a histogram); op folds them in ascending gid order, acc = v(0),
 * then acc = op(acc, v(1)), ... So op needs to be associative only when
 * the caller wants to reason about it, not commutative (a matrix product
 * works), and the result is the same bits at any rank count and thread
 * count: floating-point sums included. (For element-wise arrays, where the
 * work is in the arithmetic, blk_arrays_all_reduce is the fast path; for
 * posts of a few doubles or integers inside a foreach, blk_proxy_all_reduce_*.)
 *
 * Underneath: a foreach that runs give on every block (out of core, blocks
 * are loaded for it as for any foreach), then every rank's (gid, value)
 * records gathered to every rank (MPI_Allgatherv) and folded there.
 * Cost: the foreach and its agreement, two small all-reduces and an
 * all-gather of n (4 + size) bytes, n the number of blocks; the fold is
 * n - 1 calls of op on each rank. Meant for values of bytes to kilobytes:
 * n (4 + size) must stay below 2 GiB.
 */
#ifndef BLK_ALL_REDUCE_H
#define BLK_ALL_REDUCE_H

#include <stddef.h>

#include "blk/master.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes block gid's value (size bytes) to value. On a pool thread or the
 * master's, one call per block; it must not call MPI or blk_master_*.
 * Returns 0, or a code of the program's own, which fails the call
 * (BLK_ECALLBACK on every rank, naming it). */
typedef int (*blk_value_fn)(void *value, const void *block, int gid, void *user);

/* acc = acc op in, for two values of the call's size; on the master's
 * thread; must not fail, nor call MPI or blk. */
typedef void (*blk_value_op_fn)(void *acc, const void *in, void *user);

/* Every block's value, folded by op in ascending gid order, into result
 * (size bytes) on every rank. Collective over the master's communicator,
 * with the same size on every rank; a rank without blocks takes part.
 * Returns 0, or on every rank alike: BLK_EINVAL (a NULL give, op or
 * result, size 0, sizes that differ between ranks, no block anywhere, or
 * more than 2 GiB of records), BLK_ECALLBACK (give failed; the detail
 * names the lowest failing rank, its earliest gid and the code),
 * BLK_ENOMEM, BLK_EIO or BLK_ECORRUPT (out of core). On failure result is
 * left as it was. A NULL m is BLK_EINVAL where it is found. */
int blk_all_reduce(blk_master *m, size_t size, blk_value_fn give, blk_value_op_fn op, void *result,
                   void *user);

#ifdef __cplusplus
}
#endif
#endif
