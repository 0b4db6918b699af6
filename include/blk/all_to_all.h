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
 * holds, not to the number of blocks. Rounds inside a rank are merged:
 * inside a rank a round saves no latency and costs a pass over the
 * messages (under a memory budget, a trip through storage). At most 64
 * blocks, all on one rank or with a memory budget on some rank (where
 * every forward, across ranks too, would be written and read back): one
 * round, a direct exchange, whatever k is. Otherwise consecutive rounds
 * whose groups all lie on one rank (the first rounds of the contiguous
 * order under a contiguous assigner) run as one round of their merged
 * group, up to 16 members. k and the order shape the rounds that cross
 * ranks.
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
 * With one round (n <= k, n a prime up to 16, or n <= 64 with all blocks
 * on one rank or a budget on some rank) nothing is packed: the message is sent
 * as it was enqueued, so a by-reference send read by view is copied only
 * by MPI's transfer (a block's message to itself not at all); a
 * receive_fn that wants the bytes in its own array copies them once more,
 * unless they were received there (blk_all_to_all_with, below): then the
 * whole exchange copies what MPI_Alltoall does. Under a memory budget
 * (blk_master_config's mem_blocks or mem_bytes) a reference cannot be
 * spilled, so blk_proxy_enqueue_ref copies, and with several rounds every
 * byte is copied once per round.
 *
 * In receive_fn an in queue may refer to bytes blk keeps elsewhere (another
 * block's send queue, the caller's memory, a message from another rank);
 * blk_proxy_incoming gives such a queue storage of its own first, with a
 * copy, so its storage may still be taken with blk_buffer_swap (proxy.h).
 *
 * Cost: R rounds (log_k n when n is a power of k; see partners.h for other
 * counts; fewer when rounds inside a rank merge, above), in round e k_e - 1
 * messages per block (sent even when empty) plus
 * a hand-over to itself; the copies above. A count with a prime factor above
 * max(k, 16) is folded (docs/patterns.md; not in the one round of at most
 * 64 blocks above): two more rounds, in which gids
 * 2i+1 (i below the count folded) send all they have to gid 2i and get what
 * is theirs back, instead of one round in which every block sends a message
 * to each member of a group that wide. Memory without a budget: what
 * send_fn enqueued by copy and what arrived from other ranks before the last
 * round stay until the call returns.
 *
 * Receiving in place (blk_all_to_all_with and its place callback): the
 * caller says, for (block, source gid, bytes), where a message should land,
 * and blk has MPI receive it there, so with by-reference sends a direct
 * exchange copies each byte that crosses ranks once, in MPI, as
 * MPI_Alltoall does. blk asks only where it can place (see
 * blk_all_to_all_place_fn); every other message arrives as before, so
 * receive_fn handles both (see blk_all_to_all_with).
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

/* Where the message of bytes bytes from gid src to block (gid gid) should
 * be received: at least bytes bytes of the caller's memory, or NULL for
 * blk's own storage (the message then arrives as without this callback).
 * user is blk_all_to_all_with's.
 *
 * The region must stay valid until blk_all_to_all_with returns, and
 * nothing may read or write it (this block's send_fn included, and no byte
 * enqueued by reference may lie in it) from place's return until this
 * block's receive_fn runs (or, if a failure keeps it from running, until
 * the call returns); regions given for different messages must not
 * overlap. blk cannot check the length:
 * compare bytes with the room there is and return NULL when it does not
 * fit. It cannot fail either: to fail the operation, return NULL, note why
 * in the block, and have receive_fn return non-zero (every rank then
 * returns BLK_ECALLBACK).
 *
 * Asked at most once per message, on the thread that called
 * blk_all_to_all_with, never while a callback of this block runs (other
 * blocks' may run on the pool); it must only find the pointer (no blk
 * calls). blk asks only where one MPI transfer can land the bytes there:
 * a message from a block on another rank, in a direct exchange (one round:
 * nblocks <= k, or nblocks a prime up to 16), without a memory budget (the block
 * could leave memory under one), and only once this block's send phase is
 * done (a message whose header blk reads while send_fn runs or waits for
 * a thread lands in blk's storage: with many blocks per rank, or threads,
 * some will). Messages between blocks of one rank are handed over
 * without a copy anyway; with several rounds a message travels packed
 * with others and is never placed. */
typedef void *(*blk_all_to_all_place_fn)(void *block, int gid, int src, size_t bytes, void *user);

/* The optional settings of blk_all_to_all_with; start from
 * BLK_ALL_TO_ALL_CONFIG_INIT (or blk_all_to_all_config_init). It grows like
 * blk_master_config: version names the layout the program was built with,
 * and new fields only go at the end. */
typedef struct blk_all_to_all_config {
  unsigned int version;          /* BLK_ALL_TO_ALL_CONFIG_VERSION, set by the initialisers */
  blk_all_to_all_place_fn place; /* NULL: every message lands in blk's storage */
} blk_all_to_all_config;

/* The layout of blk_all_to_all_config in this header. */
#define BLK_ALL_TO_ALL_CONFIG_VERSION 1u

#define BLK_ALL_TO_ALL_CONFIG_INIT \
  { BLK_ALL_TO_ALL_CONFIG_VERSION, NULL }

/* Sets *cfg to the defaults of layout version, as BLK_ALL_TO_ALL_CONFIG_INIT
 * does. Returns 0, or BLK_EINVAL for a NULL cfg or a version this blk does
 * not know. Any thread. */
int blk_all_to_all_config_init(blk_all_to_all_config *cfg, unsigned int version);

/* blk_all_to_all with settings (cfg NULL: the defaults, which is
 * blk_all_to_all). With cfg->place, messages may be received in place:
 * receive_fn still sees every source that sent bytes as an in queue, in
 * the same order, placed or not; the in queue of a placed message refers
 * to the placed region, so blk_proxy_dequeue_view returns the pointer
 * place returned (and blk_proxy_incoming copies, as for any reference).
 * A receive_fn that wants the bytes at its region therefore copies only
 * when the view is elsewhere:
 *
 *     const void *v = blk_proxy_dequeue_view(p, i, n);
 *     if (v != where) memcpy(where, v, n);
 *
 * (not blk_proxy_dequeue into the placed region: that would copy the
 * bytes onto themselves). If the operation fails, a placed region may hold
 * part of a message or all of it, whether or not its receive_fn ran.
 * Collective, with the same version on every rank (place is each rank's
 * own, and may be NULL on some).
 * Errors as blk_all_to_all, and BLK_EINVAL (on every rank) for a cfg
 * version this blk does not know. */
int blk_all_to_all_with(blk_master *m, const blk_assigner *a, int k, int contiguous,
                        blk_foreach_fn send_fn, blk_foreach_fn receive_fn,
                        const blk_all_to_all_config *cfg, void *user);

#ifdef __cplusplus
}
#endif
#endif
