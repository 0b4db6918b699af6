/*
 * partners_top.h: a tree all-reduce whose top is one exchange.
 *
 * A tree all-reduce (BLK_ALLREDUCE, folded or not: T = 2R rounds) sends
 * up to the root in its first half and back down in its second. Its
 * middle callback round M = T/2 is the root's: in round M - 1 the members
 * of the top group send to the root, which combines them in round M and
 * sends the result back to the same group, which receives it in round
 * M + 1. Here the top group's members instead send to each other in
 * round M - 1 and each combines the group's arrays in round M, so each
 * ends the round holding the root's result and sends it down its own
 * subtree at once: T - 1 rounds, one latency less. With two members it is
 * the same two messages, sent at the same time instead of one after the
 * other; with w members, w (w - 1) messages instead of 2 (w - 1).
 *
 * The pattern, with P the tree all-reduce: callback round r < M is P's
 * round r, but for round M - 1's out-partners (the whole top group, the
 * block itself included, where P sends to the root); round M's
 * in-partners are that group (P's root has them as its round M
 * in-partners), its activity and out-partners are P's round M + 1; a
 * round r > M is P's round r + 1. Exchange round e (the messages sent in
 * callback round e) is P's e below M (round M - 1 is P's top group) and
 * P's e + 1 from there: its axis, radix, step and a gid's position are
 * P's.
 */
#ifndef BLK_PARTNERS_TOP_H
#define BLK_PARTNERS_TOP_H

#include "blk/partners.h"

/* The pattern above from tree, a tree all-reduce with an even number of
 * rounds, at least 2. *ops is static; *state is new and owns tree
 * ((*ops)->destroy destroys it). On error tree is destroyed and *state is
 * NULL. Errors: BLK_EINVAL for a NULL pattern or an odd or zero round
 * count; BLK_ENOMEM (through blk__fail). */
int blk__top_create(const blk_partners_ops **ops, void **state, blk_partners *tree);

/* The tree pattern's exchange round that exchange round e of the new one
 * is (state from blk__top_create), and the tree pattern. */
const blk_partners *blk__top_part(const void *state, int e, int *round);

/* The same, wrapped: *out owns a new object. Errors and ownership as
 * blk__top_create. */
int blk__partners_create_top(blk_partners **out, blk_partners *tree);

#endif
