/*
 * blk/types.h: the element types and reduction operators that blk combines.
 *
 * Shared by the value all-reduce of a foreach (proxy.h) and the array
 * collectives (arrays.h). Plain enums: no MPI, so code that only combines
 * values needs nothing else of blk.
 */
#ifndef BLK_TYPES_H
#define BLK_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of the array collectives. */
typedef enum blk_type { BLK_FLOAT = 0, BLK_DOUBLE = 1, BLK_INT32 = 2, BLK_INT64 = 3 } blk_type;

/* Reduction operators. Integer sums wrap modulo 2^bits. */
typedef enum blk_op { BLK_OP_SUM = 0, BLK_OP_MIN = 1, BLK_OP_MAX = 2 } blk_op;

#ifdef __cplusplus
}
#endif
#endif
