/*
 * blk/reduce.h: running a reduction pattern round by round.
 *
 * blk_reduce runs a callback for every block in every round in which the
 * partners (partners.h) say it is active. In round r the proxy's in queues
 * hold, in in-partner order, the one message each in-partner sent in round
 * r-1 (possibly empty), and its out queues go to the round's out-partners.
 * A block's round starts as soon as its own inputs have arrived: there is
 * no barrier between rounds, so a block can be rounds ahead of another.
 * What a block enqueues leaves when its callback returns.
 *
 * Threads and collectives as for blk_master_exchange: called by the master's
 * thread on every rank, callbacks on the pool, one block at a time.
 */
#ifndef BLK_REDUCE_H
#define BLK_REDUCE_H

#include "blk/assigner.h"
#include "blk/master.h"
#include "blk/partners.h"
#include "blk/proxy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A reduction callback: called once per active round of the block; the round
 * and partners are read through the proxy. Return 0, or a negative code to
 * make blk_reduce report BLK_ECALLBACK (the reduction still completes, so no
 * rank waits forever). */
typedef int (*blk_reduce_fn)(void *block, blk_proxy *proxy, void *user);

/* Runs the pattern over every block of every rank. Collective: every rank
 * calls it with the same assigner and partners (equal, not the same
 * objects). The assigner says where each gid lives; the partners must be
 * built for the same number of blocks.
 * Errors: BLK_EINVAL (the partners are for another block count than the
 * assigner, or the assigner for another communicator size: every rank
 * returns it), BLK_EMPI, BLK_ENOMEM, BLK_ECALLBACK (a callback failed; the
 * detail names the first gid and round).
 * Stops the job, with a message naming the rank, gid and what is wrong: a
 * local block that the assigner puts on another rank or whose gid is beyond
 * the partners (only that rank can see it, and returning would leave the
 * others waiting); enqueueing to a gid that is not an out-partner of the
 * round. */
int blk_reduce(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
               void *user);

#ifdef __cplusplus
}
#endif
#endif
