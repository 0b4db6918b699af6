/*
 * reduce_run.h: the reduction driver with a say over which rounds need the
 * block in memory, for drivers built on it (all_to_all's forwarding rounds
 * touch only messages, so an out-of-core block is not loaded for them).
 */
#ifndef BLK_REDUCE_RUN_H
#define BLK_REDUCE_RUN_H

#include "blk/reduce.h"
#include "master_state.h"

/* blk_reduce, where needs_block(round, user) == 0 runs that round's callback
 * without loading the block (its block argument is then NULL). NULL: every
 * round needs it. */
int blk__reduce_run(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
                    void *user, int (*needs_block)(int round, void *user));

/* The driver's records kept between operations (reduce.c); the master
 * frees them at destroy. NULL does nothing. */
void blk__reduce_keep_free(blk__reduce_keep *k);

#endif
