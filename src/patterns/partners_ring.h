/*
 * partners_ring.h: a ring over the blocks in gid order, as an ops table over
 * an immutable state (partners_ring.c); blk__partners_create_ring (partners.c)
 * wraps it in a blk_partners object without the custom patterns' check,
 * since it is right by construction.
 *
 * In every exchange round each block sends one message to gid + 1 and
 * receives one from gid - 1 (mod n): the ring all-reduce and its segmented
 * form run their steps over it (arrays.c). One block, or no rounds: nobody
 * talks.
 */
#ifndef BLK_PARTNERS_RING_H
#define BLK_PARTNERS_RING_H

#include "blk/partners.h"

/* A ring of nblocks (>= 1) over `rounds` exchange rounds (>= 0; 0 when
 * nblocks is 1). *ops is static; *state is new, freed by (*ops)->destroy.
 * Returns 0, BLK_EINVAL or BLK_ENOMEM (through blk__fail). */
int blk__ring_create(const blk_partners_ops **ops, void **state, int nblocks, int rounds);

/* The same, wrapped: *out owns a new object (blk_partners_destroy frees
 * it). Errors as blk__ring_create; on error *out is NULL. */
int blk__partners_create_ring(blk_partners **out, int nblocks, int rounds);

#endif
