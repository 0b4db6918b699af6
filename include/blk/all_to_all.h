/*
 * blk/all_to_all.h: every block may send to every block.
 *
 * blk_all_to_all looks like one exchange to the user: send_fn runs once on
 * every block and may enqueue to any gid (blk_proxy_enqueue_gid, any number
 * of bytes, to as many gids as it likes); then receive_fn runs once on every
 * block, whose in queues are the gids that sent it something, ascending by
 * gid. Underneath, the messages travel through the k-ary swap rounds of
 * partners.h (radix k, contiguous or halving order): in each round a block
 * forwards each message to the group member that agrees with the
 * destination in that round's digit, so after all rounds every message is at
 * its destination. The user's callbacks do not run in the intermediate
 * rounds. What a block carries per round is proportional to the messages it
 * holds, not to the number of blocks.
 *
 * Cost: R rounds (log_k n when n is a power of k; see partners.h for other
 * counts), in round e k_e - 1 messages per block (sent even when empty) plus
 * a hand-over to itself; every byte is copied R + 1 times: packed in the
 * first round, repacked in each forwarding round, and unpacked into the
 * receiver's queues.
 *
 * Threads and collectives as for blk_reduce.
 */
#ifndef BLK_ALL_TO_ALL_H
#define BLK_ALL_TO_ALL_H

#include "blk/assigner.h"
#include "blk/master.h"
#include "blk/proxy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs send_fn on every block, moves what it enqueued, then runs receive_fn
 * on every block. In send_fn the proxy has no in queues and every gid of
 * 0..nblocks-1 is a valid destination for blk_proxy_enqueue_gid (the out
 * queues list the gids enqueued to so far). In receive_fn the in queues are
 * the sources that sent a non-empty message, by gid; the round is the last.
 * Collective, with the same arguments on every rank.
 * Failure is as in blk_reduce: a block whose send phase fails (send_fn
 * returned non-zero, or an enqueue found no memory, even if send_fn went
 * on) sends nothing, and the blocks its messages would have reached do not
 * run receive_fn; every other block does. Every rank returns the same code.
 * Errors: BLK_EINVAL (m, a or a callback NULL, k < 2, contiguous not 0 or
 * 1, the assigner for another communicator size; a block missing or placed
 * elsewhere, as in blk_reduce), BLK_ECALLBACK (send_fn or receive_fn
 * returned non-zero; the detail says which and the code), BLK_ENOMEM,
 * BLK_EMPI, BLK_EIO, BLK_ECORRUPT.
 * Enqueueing to a gid outside 0..nblocks-1 stops the job with the rank, gid
 * and value (as in blk_reduce). */
int blk_all_to_all(blk_master *m, const blk_assigner *a, int k, int contiguous,
                   blk_foreach_fn send_fn, blk_foreach_fn receive_fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
