/*
 * proxy_state.h: what a callback's proxy points at (blk/proxy.h), filled by
 * the driver that runs the callback (foreach, exchange's callers, the
 * reduction driver, all_to_all).
 *
 * A proxy only points into a block's queues, so making one per callback
 * costs nothing. It is used by the one pool thread running its callback.
 */
#ifndef BLK_PROXY_STATE_H
#define BLK_PROXY_STATE_H

#include "base/buffer_cache.h"
#include "base/fail.h"
#include "base/values.h"
#include "blk/link.h"
#include "blk/partners.h"
#include "blk/proxy.h"

struct blk_proxy {
  blk__buffer_cache *cache; /* storage for growing out queues */
  int rank;
  int gid;
  int round;
  const char *phase; /* "foreach", "reduce", ... for messages */
  int nin, nout;
  const int *in_gids, *out_gids;
  const blk_link *links; /* foreach and iexchange: queue i < nlinks is link i's */
  int nlinks;
  blk_buffer *in, *out;
  blk__values *posts;           /* NULL where posting is not allowed */
  const blk__values *results;   /* of the last exchange */
  const blk_partners *partners; /* a reduction's pattern; NULL elsewhere */
  /* all_to_all's send phase: the out queue for any gid, created on demand
   * (updates nout, out_gids, out); NULL elsewhere. */
  int (*open_out)(blk_proxy *p, int gid);
  void *hook;
  /* foreach and iexchange: the out queue for any gid, after the links,
   * opened on demand (updates nout, out_gids, out); BLK_ENOMEM with a
   * detail. NULL where a callback cannot send to any gid. */
  int (*open_remote)(blk_proxy *p, int gid);
  /* blk_proxy_enqueue_ref may make an empty out queue a reference (set by a
   * driver that keeps the memory's owner's promise: no budget, and the
   * references are done with before the call returns); otherwise it copies. */
  int refs;
  /* In queues may be references lent for the callback (all_to_all's
   * receive): blk_proxy_incoming first copies one into storage of the
   * queue's own, so the callback may keep it; in_lost is set when that copy
   * found no memory (the driver then fails the callback's block). */
  int in_lent;
  int in_lost;
};

/* Makes empty out queue i refer to data (n bytes) instead of copying it
 * (buffer_cache.h). For drivers that know the bytes stay valid and
 * unchanged until the operation ends, and only without a memory budget (a
 * reference cannot be spilled). */
void blk__proxy_enqueue_ref(blk_proxy *p, int i, const void *data, size_t n);

/* Points p's lists at block b's queues (its links', then those to and from
 * any gid) and lets the callback open more to any gid: a foreach's or an
 * iexchange's proxy. */
struct blk__block;
void blk__proxy_of_block(blk_proxy *p, struct blk__block *b);

/* Stops the job naming the rank, gid, phase and round. */
void blk__proxy_misuse(const blk_proxy *p, const char *fmt, ...) BLK__PRINTF(2, 3) BLK__NORETURN;

#endif
