/*
 * master_state.h: the master's and the proxy's insides, shared by the files
 * of the runtime layer (master.c, proxy.c, exchange.c, reduce.c).
 *
 * Every operation that moves messages between blocks (an exchange, a
 * reduction) gets the next epoch number; messages carry it. A message that
 * arrives for a later epoch than the one running (a fast rank is ahead) is
 * kept in the stash and replayed when this rank reaches that epoch.
 */
#ifndef BLK_MASTER_STATE_H
#define BLK_MASTER_STATE_H

#include "blk/master.h"
#include "budget.h"
#include "buffer_cache.h"
#include "comm.h"
#include "fail.h"
#include "gid_map.h"
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

typedef struct blk__stashed {
  blk__msg msg;
  blk_buffer payload;
} blk__stashed;

/* The router of the running operation: puts a message where it belongs. */
typedef void (*blk__route_fn)(blk_master *m, const blk__msg *msg, blk_buffer *payload, void *ctx);

struct blk_master {
  blk__comm *comm;
  blk__pool *pool;
  blk__buffer_cache *cache; /* spare message storage, shared with comm */
  blk_master_config cfg;
  blk__block *blocks;
  int nblocks, cap_blocks;
  blk__gid_map lids;
  int epoch;
  blk__route_fn route;
  void *route_ctx;
  blk__stashed *stash;
  size_t nstash, cap_stash;
  blk__values results; /* of the last exchange */
  blk__values_mpi values_mpi;
  blk__budget budget;
  blk__reduce_keep *reduce_keep; /* the reduction driver's records, reused */
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

/* Starts operation `epoch` with its router and replays what was stashed for
 * it. */
void blk__master_begin(blk_master *m, blk__route_fn route, void *ctx);
/* Delivery callback for blk__comm_progress: routes or stashes. */
void blk__master_deliver(const blk__msg *msg, blk_buffer *payload, void *ctx);
/* Progresses MPI until done(ctx) returns nonzero, waiting without spinning
 * against worker threads. */
int blk__master_progress_until(blk_master *m, int (*done)(blk_master *m, void *ctx), void *ctx);

/* Makes empty out queue i refer to data (n bytes) instead of copying it
 * (buffer_cache.h). For drivers that know the bytes stay valid and
 * unchanged until the operation ends, and only without a memory budget (a
 * reference cannot be spilled). */
void blk__proxy_enqueue_ref(blk_proxy *p, int i, const void *data, size_t n);

/* Stops the job naming the rank, gid, phase and round. */
void blk__proxy_misuse(const blk_proxy *p, const char *fmt, ...) BLK__PRINTF(2, 3) BLK__NORETURN;

#endif
