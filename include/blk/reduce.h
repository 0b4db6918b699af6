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
 * thread on every rank, callbacks on the pool or, where handing them over
 * does not pay, on the master's thread; one block at a time.
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
 * and partners are read through the proxy. Return 0, or a negative code (a
 * blk code or the user's own) to make blk_reduce report BLK_ECALLBACK. */
typedef int (*blk_reduce_fn)(void *block, blk_proxy *proxy, void *user);

/* Runs the pattern over every block of every rank. Collective: every rank
 * calls it with the same assigner and partners (equal, not the same
 * objects). The assigner says where each gid lives; the partners must be
 * built for the same number of blocks, and every block the assigner puts on
 * a rank must have been added there.
 *
 * Failure: a block whose callback fails (or that cannot be loaded, or whose
 * message cannot be sent or kept) runs no more rounds; each of its
 * out-partners gets a message marked failed instead of its data, and fails
 * the same way, so exactly the blocks whose result depends on the failure
 * stop, each holding what it held before the round it could not run. Every
 * other block finishes normally. No callback ever sees an incomplete
 * message. Then every rank returns the same code, with the same detail
 * naming the lowest failing rank, its earliest failing (round, gid) and
 * the cause.
 * Errors: BLK_EINVAL (m, fn, a or p NULL, the partners are for another
 * block count than the assigner, or the assigner for another communicator
 * size; or, found by one rank and returned by all: a local block the
 * assigner puts on another rank or beyond the partners, a block the
 * assigner puts here that was never added), BLK_ECALLBACK (a callback
 * failed; the detail names the code it returned, and blk's reason when
 * the code came from blk, e.g. an enqueue without memory), BLK_ENOMEM,
 * BLK_EMPI, BLK_EIO and BLK_ECORRUPT (out-of-core: a block or queue that
 * could not be read back fails like a callback).
 * Stops the job, with a message naming the rank, gid and round: enqueueing
 * to a gid that is not an out-partner of the round, or reading past the end
 * of a message (proxy.h). */
int blk_reduce(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
               void *user);

#ifdef __cplusplus
}
#endif
#endif
