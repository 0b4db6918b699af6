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
 * Without copies: send_fn may enqueue by reference (blk_proxy_enqueue_ref_gid:
 * the bytes stay in the caller's memory, which must stay valid and
 * unchanged until blk_all_to_all returns), and receive_fn may read its in
 * queues in place (blk_proxy_dequeue_view, blk_proxy_dequeue_array_view):
 * without a memory budget, a message that stays on one rank is then never
 * copied by blk, and one that crosses ranks is copied once per round that
 * crosses (packed into that round's message), besides MPI's own transfer.
 * With several rounds, bytes enqueued by copy are copied once more, into
 * one buffer per block, at the end of the send phase.
 * With one round (n <= k, or n prime) nothing is packed: the message is sent
 * as it was enqueued, so a by-reference send and an in-place receive copy
 * no more than MPI_Alltoall does (MPI's transfer; a block's message to
 * itself is not copied at all). Under a memory budget (blk_master_config's
 * mem_blocks or mem_bytes) a reference cannot be spilled, so
 * blk_proxy_enqueue_ref copies, and with several rounds every byte is
 * copied once per round.
 *
 * In receive_fn an in queue may refer to bytes blk keeps elsewhere (another
 * block's send queue, the caller's memory, a message from another rank);
 * blk_proxy_incoming gives such a queue storage of its own first, with a
 * copy, so its storage may still be taken with blk_buffer_swap (proxy.h).
 *
 * Cost: R rounds (log_k n when n is a power of k; see partners.h for other
 * counts), in round e k_e - 1 messages per block (sent even when empty) plus
 * a hand-over to itself; the copies above. Memory without a budget: what
 * send_fn enqueued by copy and what arrived from other ranks before the last
 * round stay until the call returns.
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
 * 0..nblocks-1 is a valid destination for blk_proxy_enqueue_gid and
 * blk_proxy_enqueue_ref_gid (the out queues list the gids enqueued to so
 * far). In receive_fn the in queues are
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
