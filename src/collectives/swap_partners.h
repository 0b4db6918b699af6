/*
 * swap_partners.h: the folded swap partners a collective runs on every call
 * (all_to_all, all_gather), kept by the master between calls.
 *
 * Making them (blk__partners_create_folding) allocates, and a call of a
 * kilobyte's messages spent measurable time on it (docs/performance.md,
 * 13.12). So each caller keeps the last partners it used, under its own
 * key, and they are made again only when the block count, k or the order
 * changes. Driver thread only.
 */
#ifndef BLK_SWAP_PARTNERS_H
#define BLK_SWAP_PARTNERS_H

#include "blk/partners.h"
#include "master/master_state.h"

/* The swap partners of n blocks for radix k in the given order, kept by m
 * under owner (a static object of the caller's, one per caller); the
 * caller must not destroy them. *made says whether they were made by this
 * call (what the caller derived from earlier ones is then stale). On
 * failure (no memory, bad k) returns the code, with the detail set, and
 * *out is NULL. */
int blk__swap_partners_kept(blk_master *m, const void *owner, int n, int k, int contiguous,
                            const blk_partners **out, int *made);

#endif
