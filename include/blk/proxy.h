/*
 * blk/proxy.h: what a callback sees of the world around its block.
 *
 * A proxy is handed to every callback. It names the block (gid), the round,
 * and two ordered lists of queues: "out" queues to enqueue into and "in"
 * queues to dequeue from. In blk_master_foreach both lists start with the
 * block's links, in link order; in a reduction they are the round's out-
 * and in-partners (reduce.h). Queue i of a list is addressed by its index;
 * the *_gid variants find the first queue whose partner has that gid.
 *
 * Any gid: a foreach (or iexchange) callback may also send to blocks that
 * are not its links, on any rank (blk_proxy_enqueue_to; DIY's remote
 * exchange). Such a queue is added to the out list after the links, one
 * per destination gid; the exchange that delivers it is
 * blk_master_exchange_remote (or the iexchange itself), and the receiver
 * finds it in its in list after its links: one queue per sending gid, in
 * ascending order of gid, apart from any link queue from the same gid.
 *
 * What a callback dequeues is ordered by queue, never by arrival, so results
 * do not depend on threads, ranks or timing. Each in queue holds exactly the
 * one message its partner sent this round (possibly empty). (Not so in
 * blk_master_iexchange, where messages are read as they come: master.h.)
 *
 * Misuse inside a collective phase (an index out of range, a gid that is not
 * a partner, a read past the end of a message) is a programming error: blk
 * prints rank, gid, round and what was wrong and stops the job, because
 * returning would leave other ranks waiting. Running out of memory is
 * returned (BLK_ENOMEM) and also marks the queue: if the callback goes on
 * and returns 0, its message still goes out as failed and the operation
 * fails on every rank, so nothing is lost without a word.
 *
 * Threads: a proxy belongs to the callback it was passed to and is valid only
 * during that call.
 */
#ifndef BLK_PROXY_H
#define BLK_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "blk/buffer.h"
#include "blk/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct blk_proxy blk_proxy;

/* The block's global id. */
int blk_proxy_gid(const blk_proxy *p);

/* The round: 0..R in a reduction; the number of exchanges so far in foreach. */
int blk_proxy_round(const blk_proxy *p);

/* In a reduction (blk_reduce and what is built on it): the pattern being
 * run, to ask it about other rounds or blocks (partners.h); the object
 * blk_reduce was given. NULL in blk_master_foreach. */
struct blk_partners;
const struct blk_partners *blk_proxy_partners(const blk_proxy *p);

/* Number of out queues and the gid of out queue i. */
int blk_proxy_out_count(const blk_proxy *p);
int blk_proxy_out_gid(const blk_proxy *p, int i);

/* Number of in queues and the gid of in queue i. */
int blk_proxy_in_count(const blk_proxy *p);
int blk_proxy_in_gid(const blk_proxy *p, int i);

/* In blk_master_foreach and blk_master_iexchange: the number of the
 * block's links, whose queues come first in both lists (those to and from
 * any gid follow). 0 in a reduction. */
int blk_proxy_link_count(const blk_proxy *p);

/* In blk_master_foreach: link i of the block (out queue i and in queue i
 * both belong to it), owned by the master. NULL in a reduction, and for a
 * queue to or from any gid (after the links). */
struct blk_link;
const struct blk_link *blk_proxy_link(const blk_proxy *p, int i);

/* Appends n bytes to out queue i. Returns 0 or BLK_ENOMEM (the queue keeps
 * the error: see above). */
int blk_proxy_enqueue(blk_proxy *p, int i, const void *data, size_t n);

/* Appends to the first out queue whose partner is gid. */
int blk_proxy_enqueue_gid(blk_proxy *p, int gid, const void *data, size_t n);

/* Appends the n bytes at data to out queue i by reference, without copying
 * them, where the collective can carry a reference: in blk_all_to_all's send
 * phase without a memory budget (all_to_all.h). The bytes are read while the
 * collective runs, so the caller keeps them valid and unchanged until the
 * collective call that ran this callback returns; they are the caller's
 * again after that. Elsewhere (blk_master_foreach, blk_reduce, any
 * collective under a memory budget, since a reference cannot be spilled)
 * and when the queue already holds bytes, the bytes are copied now, as
 * blk_proxy_enqueue does. A queue holds at most one reference: a later
 * enqueue to it, or blk_proxy_outgoing, first copies the referenced bytes
 * into the queue. Returns 0 or BLK_ENOMEM (the queue keeps the error). */
int blk_proxy_enqueue_ref(blk_proxy *p, int i, const void *data, size_t n);

/* blk_proxy_enqueue_ref to the first out queue whose partner is gid. */
int blk_proxy_enqueue_ref_gid(blk_proxy *p, int gid, const void *data, size_t n);

/* The index in the out list of the queue to block gid, any block of any
 * rank, link or not (see the top): opened, empty, if this callback has
 * none to gid yet. Its messages are delivered by blk_master_exchange_remote
 * or within blk_master_iexchange; a gid no block has fails that exchange on
 * every rank (BLK_EINVAL). Use it with the index functions (enqueue,
 * enqueue_array, outgoing). In a foreach or iexchange callback only;
 * elsewhere, or for a negative gid, it stops the job (see the top). Returns
 * the index, or BLK_ENOMEM. */
int blk_proxy_open_to(blk_proxy *p, int gid);

/* Appends n bytes to the queue to any gid (blk_proxy_open_to). Returns 0 or
 * BLK_ENOMEM. */
int blk_proxy_enqueue_to(blk_proxy *p, int gid, const void *data, size_t n);

/* Appends count elements of elem_size bytes, preceded by their count, so the
 * receiver can read them with blk_proxy_dequeue_array*. */
int blk_proxy_enqueue_array(blk_proxy *p, int i, const void *data, size_t elem_size, size_t count);

/* The buffer behind out queue i, for serialising in place (blk_buffer_*).
 * A reference it holds (blk_proxy_enqueue_ref) is copied into it first; with
 * no memory for that copy the buffer is empty with its sticky error set. */
blk_buffer *blk_proxy_outgoing(blk_proxy *p, int i);

/* Reads the next n bytes of in queue i into data. Reading past the end
 * stops the job (see above). */
void blk_proxy_dequeue(blk_proxy *p, int i, void *data, size_t n);

/* Reads from the first in queue whose partner is gid. */
void blk_proxy_dequeue_gid(blk_proxy *p, int gid, void *data, size_t n);

/* Points at the next n bytes of in queue i without copying them and moves
 * past them: a receive view, valid during the callback, possibly unaligned
 * (memcpy out of it). For n == 0 it is non-NULL. Reading past the end
 * stops the job (see above). */
const void *blk_proxy_dequeue_view(blk_proxy *p, int i, size_t n);

/* Reads an array written by blk_proxy_enqueue_array into dst (room for
 * max_count elements) and returns its count; a count above max_count or a
 * different element size in bytes stops the job. */
size_t blk_proxy_dequeue_array(blk_proxy *p, int i, void *dst, size_t elem_size, size_t max_count);

/* Points *data at such an array inside the queue (no copy; valid during the
 * callback) and returns its count. */
size_t blk_proxy_dequeue_array_view(blk_proxy *p, int i, const void **data, size_t elem_size);

/* Bytes not yet read in in queue i. */
size_t blk_proxy_incoming_remaining(const blk_proxy *p, int i);

/* The buffer behind in queue i, for reading in place (blk_buffer_read_*). A
 * callback may also take its storage with blk_buffer_swap. In
 * blk_all_to_all's receive_fn an in queue may refer to bytes blk does not
 * let go of (another block's send queue or the caller's memory, through
 * blk_proxy_enqueue_ref): this call then first copies them, unread position
 * included, into storage of the queue's own, so the contract holds; the
 * reads of blk_proxy_dequeue*, blk_proxy_dequeue_view and
 * blk_proxy_incoming_remaining never copy. With no memory for that copy the
 * queue is returned empty with its sticky error set (BLK_ENOMEM), and the
 * operation fails even if the callback returns 0. */
blk_buffer *blk_proxy_incoming(blk_proxy *p, int i);

/* Posts one value to an all-reduce over every block of every rank, in a
 * blk_master_foreach callback (a reduction or all_to_all callback cannot post:
 * run a foreach after it). An int64 sum wraps modulo 2^64. To be
 * completed by the next blk_master_exchange; the result is read in a later
 * callback with blk_proxy_result_* by the index of the post (0, 1, ... in the
 * order the callback posted them). Every block of every rank must post the
 * same sequence of (type, op), or none at all; blocks that differ (also a
 * block that posts nothing while others post) make that exchange return
 * BLK_EINVAL on every rank, naming them. At most BLK_PROXY_MAX_REDUCTIONS
 * posts per block between exchanges. Returns 0, or BLK_EINVAL for an
 * unknown op or a post beyond the maximum. */
#define BLK_PROXY_MAX_REDUCTIONS 32
int blk_proxy_all_reduce_f64(blk_proxy *p, double value, blk_op op);
int blk_proxy_all_reduce_i64(blk_proxy *p, int64_t value, blk_op op);

/* The result of all-reduce number i of the last exchange. Asking for an index
 * that was not posted, or for the wrong type, stops the job. */
double blk_proxy_result_f64(const blk_proxy *p, int i);
int64_t blk_proxy_result_i64(const blk_proxy *p, int i);

#ifdef __cplusplus
}
#endif
#endif
