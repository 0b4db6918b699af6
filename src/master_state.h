/*
 * master_state.h: the master's and the proxy's insides, shared by the files
 * of the runtime layer (master.c, proxy.c, exchange.c, reduce.c).
 *
 * Every collective call is one operation (operation.h): it gets the next
 * epoch, its messages carry it, and it ends with the agreement that makes
 * a failure on any rank every rank's.
 */
#ifndef BLK_MASTER_STATE_H
#define BLK_MASTER_STATE_H

#include "blk/master.h"
#include "budget.h"
#include "buffer_cache.h"
#include "comm.h"
#include "fail.h"
#include "gid_map.h"
#include "operation.h"
#include "pool.h"
#include "values.h"

/* Where a link's messages land: precomputed when the block is added. */
typedef struct blk__link_key {
  int32_t code;     /* this link's direction, base-3 digits (dir + 1) */
  int32_t rev_code; /* the code of the reverse direction */
  int32_t occ;      /* earlier links with the same gid and direction */
} blk__link_key;

typedef struct blk__block {
  int gid;
  void *data;
  int nlinks;
  blk_link *links;
  int *link_gids;
  blk__link_key *keys;
  blk_buffer *in;  /* one per link: delivered by the last exchange */
  blk_buffer *out; /* one per link: enqueued for the next exchange */
  blk__values posts;
  /* Out-of-core (budget.c): data is valid iff resident; otherwise the block
   * is in rec. A queue whose record has stored > 0 is in storage. */
  int resident;
  int pins; /* tasks using the block now */
  uint64_t last_use;
  size_t bytes;
  blk__record rec;
  blk__record *in_rec, *out_rec;
} blk__block;

typedef struct blk__reduce_keep blk__reduce_keep; /* reduce.c */

struct blk_master {
  blk__comm *comm;
  blk__op op; /* the running (or last) collective operation */
  blk__pool *pool;
  blk__buffer_cache *cache; /* spare message storage, shared with comm */
  blk_master_config cfg;
  blk__block *blocks;
  int nblocks, cap_blocks;
  blk__gid_map lids;
  int exchanges;       /* exchanges so far: a foreach callback's round */
  blk__values results; /* of the last exchange */
  blk__budget budget;
  blk__reduce_keep *reduce_keep; /* the reduction driver's records, reused */
  /* Storage the scheduler and foreach reuse from one operation to the next
   * (an operation of small messages must not spend its time in malloc). */
  void *sched_mem, *foreach_mem;
  size_t sched_bytes, foreach_bytes;
};

struct blk_proxy {
  blk_master *master;
  int gid;
  int round;
  const char *phase; /* "foreach", "reduce", ... for messages */
  int nin, nout;
  const int *in_gids, *out_gids;
  const blk_link *links; /* foreach only */
  blk_buffer *in, *out;
  blk__values *posts;         /* NULL where posting is not allowed */
  const blk__values *results; /* of the last exchange */
  /* all_to_all's send phase: the out queue for any gid, created on demand
   * (updates nout, out_gids, out); NULL elsewhere. */
  int (*open_out)(blk_proxy *p, int gid);
  void *hook;
};

/* Runs a callback (on a pool thread) and returns 0 or its failure: a user's
 * code becomes BLK_ECALLBACK naming it (own_codes: the callback is blk's
 * own driver, whose codes are returned as they are). *why gets the
 * failure's detail (malloc'd; NULL without memory). */
int blk__run_callback(int (*fn)(void *, blk_proxy *, void *), void *block, blk_proxy *p,
                      void *user, int own_codes, char **why);

/* BLK_ECALLBACK with a detail naming which callback returned what, and
 * blk's reason when the code is one blk gave it on this thread (an enqueue
 * that found no memory). Call on the callback's thread, right after it. */
int blk__callback_error(const char *which, int code);

/* Records a failed callback in the running operation and frees why. */
void blk__note_callback_failure(blk_master *m, int gid, int round, int code, char **why);

/* Makes empty out queue i refer to data (n bytes) instead of copying it
 * (buffer_cache.h). For drivers that know the bytes stay valid and
 * unchanged until the operation ends, and only without a memory budget (a
 * reference cannot be spilled). */
void blk__proxy_enqueue_ref(blk_proxy *p, int i, const void *data, size_t n);

/* Stops the job naming the rank, gid, phase and round. */
void blk__proxy_misuse(const blk_proxy *p, const char *fmt, ...) BLK__PRINTF(2, 3) BLK__NORETURN;

#endif
