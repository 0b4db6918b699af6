/*
 * exchange.h: what blk_master_exchange and blk_master_iexchange share:
 * sending a block's out queues (to its links, or to any gid through an
 * assigner) and emptying its in queues.
 *
 * A message to a link carries the link's direction code and occurrence, so
 * the receiver finds the link that points back; a message to any gid
 * carries BLK__REMOTE_KEY and lands in the receiver's queue from that gid.
 *
 * The driver thread only, on blocks whose callback is not running.
 */
#ifndef BLK_EXCHANGE_H
#define BLK_EXCHANGE_H

#include <stdint.h>

#include "blk/assigner.h"
#include "master/master_state.h"

/* The key of a message to any gid (a link's key is a direction code >= 0). */
#define BLK__REMOTE_KEY INT32_MIN

/* Empties b's in queues (and their records) and drops those from any gid. */
void blk__exchange_clear_in(blk_master *m, blk__block *b);

/* Sends (or hands over, through the running operation's router) out queue
 * q of block b, or records why it cannot, naming round; empties it. A
 * queue to any gid (q >= nlinks) goes to the rank a says, and fails with
 * BLK_EINVAL when a is NULL or does not know the gid. Returns 1 when a
 * message went out (to a block here or to another rank), else 0. */
int blk__exchange_send(blk_master *m, blk__block *b, int q, const blk_assigner *a, int round);

/* Drops b's queues to any gid once they are sent. */
void blk__exchange_close_out(blk_master *m, blk__block *b);

/* The in queue of dst for msg (the link that points back, or the queue
 * from its sender), made if new; BLK_EINVAL for a link message no link
 * matches (with a detail), BLK_ENOMEM. */
int blk__exchange_in_slot(blk__block *dst, const blk__msg *msg);

#endif
