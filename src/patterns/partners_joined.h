/*
 * partners_joined.h: two patterns over the same blocks run as one, the
 * second starting where the first ends, so that one reduction (one
 * operation, one closing agreement) runs both.
 *
 * With R1 and R2 the two patterns' rounds, the joined pattern has R1 + R2:
 * callback rounds 0..R1-1 are the first's, R1+1..R1+R2 the second's rounds
 * 1..R2, and round R1 is both the first's last (it receives what the first
 * sent in its round R1-1) and the second's round 0 (it sends the second's
 * first messages). A block is active in round R1 if either pattern has it
 * active there. Exchange round e (the messages sent in callback round e) is
 * the first's e below R1 and the second's e - R1 from there: its axis,
 * radix, step and a gid's position are that pattern's.
 *
 * SPLIT's all-reduce (arrays.c) is the reduce-scatter joined to the
 * all-gather: two rounds of messages under one agreement instead of two
 * operations.
 */
#ifndef BLK_PARTNERS_JOINED_H
#define BLK_PARTNERS_JOINED_H

#include "blk/partners.h"

/* first and second over the same block count. *ops is static; *state is
 * new and owns both patterns ((*ops)->destroy destroys them). On error both
 * are destroyed and *state is NULL. Errors: BLK_EINVAL for a NULL pattern,
 * different block counts or too many rounds; BLK_ENOMEM (through
 * blk__fail). */
int blk__joined_create(const blk_partners_ops **ops, void **state, blk_partners *first,
                       blk_partners *second);

/* The pattern exchange round e of the joined pattern belongs to, and its
 * round there (state from blk__joined_create; 0 <= e < R1 + R2). */
const blk_partners *blk__joined_part(const void *state, int e, int *round);

/* The first pattern (state from blk__joined_create). */
const blk_partners *blk__joined_first(const void *state);

/* The same, wrapped: *out owns a new object. Errors and ownership as
 * blk__joined_create. */
int blk__partners_create_joined(blk_partners **out, blk_partners *first, blk_partners *second);

/* The first pattern of a joined one (partners.c), NULL for any other. */
const blk_partners *blk__partners_joined_first(const blk_partners *p);

#endif
