/*
 * blk/master.h: the master owns a rank's blocks and runs callbacks on them.
 *
 * A master is created on a communicator (which it duplicates, so blk's
 * messages never mix with the application's) and owns this rank's blocks,
 * their links and queues, and a pool of threads that lives as long as it
 * does. A program adds blocks (or lets a decomposer create them), then
 * alternates blk_master_foreach, which runs a callback on every local block in
 * parallel, with blk_master_exchange, which delivers what the callbacks
 * enqueued to their link neighbours on any rank.
 *
 * Threads: every blk_master_* function is called by the one thread that
 * created the master (the only thread that makes MPI calls); callbacks run on
 * the pool. The functions that communicate (exchange, and the reductions in
 * reduce.h) are collective over the master's communicator: every rank calls
 * them in the same order, also a rank that owns no blocks.
 */
#ifndef BLK_MASTER_H
#define BLK_MASTER_H

#include <mpi.h>

#include "blk/assigner.h"
#include "blk/buffer.h"
#include "blk/decomposer.h"
#include "blk/link.h"
#include "blk/proxy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct blk_master blk_master;

/* Block life-cycle callbacks. Out-parameters first, user data last. Each
 * returns 0 on success or a negative code (a blk code or the user's own). */

/* Makes a new block for gid and stores it in *block. */
typedef int (*blk_block_create_fn)(void **block, int gid, void *user);
/* Frees a block made by create (or handed to blk_master_add). */
typedef void (*blk_block_destroy_fn)(void *block, int gid, void *user);
/* Writes everything needed to rebuild the block into out (out-of-core). */
typedef int (*blk_block_save_fn)(blk_buffer *out, const void *block, int gid, void *user);
/* Fills a block fresh from create with what save wrote. */
typedef int (*blk_block_load_fn)(void *block, blk_buffer *in, int gid, void *user);

/* Optional settings; start from BLK_MASTER_CONFIG_INIT and change fields. */
typedef struct blk_master_config {
  int threads;                  /* callbacks at once; 1 runs them on the caller */
  blk_block_create_fn create;   /* needed by blk_master_decompose */
  blk_block_destroy_fn destroy; /* NULL: blk never frees blocks (caller owns them) */
  blk_block_save_fn save;       /* out-of-core only */
  blk_block_load_fn load;       /* out-of-core only */
  void *user;                   /* passed to every block callback */
} blk_master_config;

#define BLK_MASTER_CONFIG_INIT \
  { 1, NULL, NULL, NULL, NULL, NULL }

/* Creates a master on a duplicate of comm. cfg may be NULL for defaults.
 * Errors: BLK_EINVAL (threads < 1, comm is MPI_COMM_NULL), BLK_ETHREADLEVEL
 * (threads > 1 but MPI was initialised with less than MPI_THREAD_FUNNELED),
 * BLK_EMPI, BLK_ENOMEM. Collective over comm (it duplicates it). */
int blk_master_create(blk_master **out, MPI_Comm comm, const blk_master_config *cfg);

/* Destroys the blocks (through cfg.destroy), the threads and the duplicated
 * communicator. NULL does nothing. Collective over the communicator. */
void blk_master_destroy(blk_master *m);

/* This rank and the number of ranks in the master's communicator. */
int blk_master_rank(const blk_master *m);
int blk_master_size(const blk_master *m);

/* The master's own (duplicated) communicator, for an application that wants
 * to run its own collectives beside blk's. Do not free it. */
MPI_Comm blk_master_comm(const blk_master *m);

/* Adds a block with global id gid and its links (copied; may be NULL when
 * nlinks is 0). The master takes ownership of block and frees it with
 * cfg.destroy. Errors: BLK_EINVAL (gid < 0, gid already added, nlinks < 0, a
 * link with a negative gid or a rank outside the communicator), BLK_ENOMEM. */
int blk_master_add(blk_master *m, int gid, void *block, const blk_link *links, int nlinks);

/* Creates this rank's blocks (per the assigner) with cfg.create and adds them
 * with their decomposer links. The decomposer and assigner are only read
 * during the call. Errors: BLK_EINVAL (no create callback, assigner's block
 * or rank count differs from the decomposer's or the communicator's),
 * BLK_ECALLBACK or the callback's own code, BLK_ENOMEM. */
int blk_master_decompose(blk_master *m, const blk_decomposer *d, const blk_assigner *a);

/* Number of local blocks; gid and block of local index lid (0..count-1,
 * in the order they were added); the lid of a gid, or -1. */
int blk_master_local_count(const blk_master *m);
int blk_master_gid(const blk_master *m, int lid);
void *blk_master_block(const blk_master *m, int lid);
int blk_master_lid(const blk_master *m, int gid);

/* The links of local block lid; *count receives their number. The array
 * belongs to the master and stays valid until the block's links change. */
const blk_link *blk_master_links(const blk_master *m, int lid, int *count);

/* A callback run on one block. It may dequeue what the last exchange
 * delivered and enqueue for the next one through proxy. Return 0, or a
 * negative code to make foreach report BLK_ECALLBACK. */
typedef int (*blk_foreach_fn)(void *block, blk_proxy *proxy, void *user);

/* Runs fn once on every local block, in parallel on the pool (one block's
 * callbacks never run at once). Not collective. Returns 0, or BLK_ECALLBACK
 * when a callback failed (every block still ran; the detail names the first
 * failing gid and its code). */
int blk_master_foreach(blk_master *m, blk_foreach_fn fn, void *user);

/* Delivers what every block enqueued to its links since the last exchange,
 * and completes the value all-reduces blocks posted (blk_proxy_all_reduce_*).
 * Collective. What was delivered by the previous exchange and not dequeued
 * is dropped. Errors: BLK_EMPI, BLK_ENOMEM, BLK_EINVAL (ranks disagree on
 * the all-reduces posted). */
int blk_master_exchange(blk_master *m);

/* Results of the value all-reduces completed by the last exchange, for code
 * outside callbacks (inside, use blk_proxy_result_*): their number, and
 * result i as the type it was posted with (another index or type stops the
 * job, as in a callback). */
int blk_master_result_count(const blk_master *m);
double blk_master_result_f64(const blk_master *m, int i);
int64_t blk_master_result_i64(const blk_master *m, int i);

/* Number of exchanges and reductions run so far (the "round" a panic
 * message names for an exchange). */
int blk_master_epoch(const blk_master *m);

#ifdef __cplusplus
}
#endif
#endif
