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
 * the pool, or on that thread where handing them over would not pay.
 *
 * Collectives: create, destroy, decompose, foreach, exchange (and the
 * reductions of reduce.h, all_to_all.h and arrays.h) are collective over the
 * master's communicator: every rank calls them in the same order, also a
 * rank that owns no blocks. A collective returns the same code on every
 * rank, with the same detail in blk_last_error() naming the failing rank,
 * gid and round and the cause, or it stops the job with a message; a rank
 * never returns 0 when another rank's failure changed its result
 * (docs/errors.md). After a failure the master stays usable: the next
 * collective starts clean. Calls that are not collective (add, the
 * accessors) return what they find on the calling rank.
 */
#ifndef BLK_MASTER_H
#define BLK_MASTER_H

#include <limits.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "blk/assigner.h"
#include "blk/buffer.h"
#include "blk/decomposer.h"
#include "blk/link.h"
#include "blk/log.h"
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
/* Out-of-core, optional: save for a block that blk destroys right after,
 * to swap it out. It writes into out what save would, but may move the
 * block's memory there with blk_buffer_adopt() instead of copying it (the
 * memory must come from malloc; destroy must then not free it: leave the
 * block without it). It must not fail after moving memory out of the block
 * (blk keeps a block whose save failed in memory, as it is). Checkpoints
 * and other saves still call save. NULL: save. */
typedef int (*blk_block_evict_fn)(blk_buffer *out, void *block, int gid, void *user);
/* Fills a block fresh from create with what save wrote. `in` owns its memory,
 * with the saved bytes at its start: load may take that memory with
 * blk_buffer_detach() instead of copying the bytes, but must not fail after
 * taking it (the bytes would be gone; blk then reports the block lost). */
typedef int (*blk_block_load_fn)(void *block, blk_buffer *in, int gid, void *user);

/* What blk_master_decompose knows of a block it asks create_at to make
 * (DIY's create gets the same). Set by blk for the call only; fields may
 * be added at the end. */
typedef struct blk_block_info {
  int gid;
  int dim;
  int continuous;        /* which bounds are set: ccore/cbounds (1), core/bounds (0) */
  blk_bounds core;       /* discrete: the block's cells (with the shared face, if any) */
  blk_bounds bounds;     /* discrete: core and ghosts */
  blk_cbounds ccore;     /* continuous: the block's box */
  blk_cbounds cbounds;   /* continuous: with ghosts */
  const blk_link *links; /* the links it is added with (ranks from the assigner) */
  int nlinks;
  const blk_decomposer *decomposer; /* the call's, to ask about other blocks */
  const blk_assigner *assigner;
} blk_block_info;

/* Makes a new block, knowing where it lies, and stores it in *block. */
typedef int (*blk_block_create_at_fn)(void **block, const blk_block_info *info, void *user);

/* Bytes a block holds in memory, for a byte budget (cfg.mem_bytes). */
typedef size_t (*blk_block_size_fn)(const void *block, int gid, void *user);

/* Told why blk is about to stop the job (a programming error inside a
 * callback, MPI failing mid-message: docs/errors.md), on the master's
 * driver thread, after the message was logged. It may flush, write what it
 * must, or end the process its own way; if it returns, blk calls MPI_Abort
 * on the master's communicator. It must not call into blk. */
typedef void (*blk_stop_fn)(const char *message, void *user);

/* Optional settings; start from BLK_MASTER_CONFIG_INIT (or
 * blk_master_config_init) and change fields.
 *
 * The struct can grow: version says which layout the program was built
 * with, and a newer blk reads only the fields of that layout (the ones it
 * adds get their defaults). New fields only ever go at the end.
 *
 * Out-of-core: set mem_blocks (and/or mem_bytes) and blk keeps at most that
 * many blocks in memory, swapping the others out to zstd-compressed,
 * checksummed records in a spill file per rank under spill_dir (or, with
 * spill_in_memory, compressed in memory) and back when their turn comes. The
 * same program runs in-core and out-of-core; only memory use differs. It
 * needs create, destroy, save and load (docs/out-of-core.md). */
typedef struct blk_master_config {
  unsigned int version;         /* BLK_MASTER_CONFIG_VERSION, set by the initialisers */
  int threads;                  /* threads for callbacks; 1: the caller's; BLK_THREADS_AUTO */
  blk_block_create_fn create;   /* needed by blk_master_decompose and out-of-core */
  blk_block_destroy_fn destroy; /* NULL: blk never frees blocks (caller owns them) */
  blk_block_save_fn save;       /* out-of-core only */
  blk_block_load_fn load;       /* out-of-core only */
  void *user;                   /* passed to every block callback */
  int mem_blocks;               /* most blocks in memory at once; 0: no limit */
  size_t mem_bytes;             /* most bytes of blocks in memory (needs size); 0: no limit */
  blk_block_size_fn size;       /* a block's bytes, for mem_bytes */
  const char *spill_dir;        /* directory for spill files; NULL: $TMPDIR or /tmp */
  int spill_in_memory;          /* keep swapped-out blocks compressed in memory instead */
  int compression_level;        /* 0: blk's default (BLK_COMPRESSION_AUTO); zstd level; NONE */
  size_t shuffle;               /* byte-shuffle element size (4: float, 8: double); 0: off */
  size_t queue_spill_bytes;     /* queues at least this large go out with their block */
  blk_log_fn log;               /* this master's log lines; NULL: stderr */
  void *log_user;               /* passed to log */
  int log_level;                /* this master's level; BLK_LOG_DEFAULT: the process's */
  blk_stop_fn stop;             /* told why before blk stops the job; NULL: nothing */
  void *stop_user;              /* passed to stop */
  /* Version 2: */
  const char *tuning; /* a file blk-tune wrote, for AUTO's choices; NULL: $BLK_TUNING, or none */
  /* Version 3: */
  const char *trace; /* a timeline of the run, trace-event JSON; NULL: $BLK_TRACE, or none */
  /* Version 4: */
  blk_block_create_at_fn create_at; /* decompose's create, with the block's bounds and links */
  /* Version 5: */
  blk_block_evict_fn evict; /* out-of-core: save that may move the block's memory; NULL: save */
} blk_master_config;

/* The layout of blk_master_config in this header: 2 added tuning, 3 added
 * trace, 4 create_at, 5 evict (a config of an older version is read without
 * them, as NULL). */
#define BLK_MASTER_CONFIG_VERSION 5u

/* create_at: what blk_master_decompose calls, when set, instead of create,
 * with the block's gid, bounds and links (blk_block_info), so a block can
 * size its arrays without the program carrying the decomposer around.
 * create is still what out of core needs to rebuild a block for load (a
 * block is made before its saved bytes fill it), and what decompose calls
 * when create_at is NULL. */

/* trace: a file to write a timeline of the run into, as Chrome trace-event
 * JSON (Perfetto, chrome://tracing): a process per rank, a track per thread
 * (the driver, the pool's workers, the out-of-core I/O threads), and a span
 * for each collective call, each callback (its gid, round, phase, and the
 * bytes in its queues before and after), each wait of the driver for
 * messages or for its workers, each pass of MPI that moved messages, and
 * each out-of-core record stored or loaded (gid, raw and stored bytes, codec
 * and I/O time). Rank 0's setting (its cfg's trace, or its BLK_TRACE)
 * decides for all ranks, and rank 0 creates the file at create (one it
 * cannot create fails the create on every rank: BLK_EIO) and writes every
 * rank's spans into it at blk_master_destroy. Times are microseconds since
 * the create; ranks on one node share the clock. Off by default, and free
 * then; on, a span costs two clock reads and 72 bytes until destroy (at
 * most 2^20 spans a thread; the file counts those dropped).
 * docs/tracing.md shows how to read one. */

/* tuning: what blk-tune (bench/) measured on this machine, read when the
 * master is created. Rank 0 reads the file (its own cfg's path, or its
 * BLK_TUNING) and the others get its text, so every rank chooses alike;
 * a file that cannot be read or parsed fails the create on every rank
 * (BLK_EIO, BLK_EINVAL naming the line). With it, BLK_ARRAYS_AUTO picks the
 * all-reduce algorithm measured fastest for the job's ranks, blocks, k and
 * array size (blk/arrays.h); for a rank count the file has no measurement
 * of, the one its cost-model line (blk-tune's fitted blk_cost_model)
 * predicts fastest; without either, blk's built-in rules. Its eager-step
 * line (MPI's eager limit, as blk-tune finds it) sets PIPELINED_TREE's
 * default segment for small arrays (blk/arrays.h). */

/* threads = BLK_THREADS_AUTO (the default): as many threads as this rank has
 * processors to itself, counted when the master is created: each processor
 * the rank may run on (its affinity) counts 1 / the number of ranks on its
 * node (MPI_COMM_TYPE_SHARED) that may run on it too, and the sum is rounded
 * down, at least 1. So one rank on a node uses every core, ranks bound to
 * cores of their own use theirs, and 2 ranks sharing 2 cores use 1 thread
 * each. If that is more than 1 but MPI was initialised with less than
 * MPI_THREAD_FUNNELED, it is 1 (an explicit threads > 1 fails instead).
 * blk_master_threads() says what it came to. With threads > 1 the driver
 * still runs short callbacks itself and hands them to the pool only where
 * that pays (docs/architecture.md), so more threads never cost the short
 * operations a hand-off each. Out of core (a memory budget), the master
 * also runs as many threads (at most 8, and at most what BLK_THREADS_AUTO
 * comes to) for blk's own compression and file I/O; they never call the
 * user (docs/out-of-core.md). */
#define BLK_THREADS_AUTO (-1)

/* The defaults: BLK_THREADS_AUTO threads, in-core; out-of-core settings
 * chosen from the measurements in docs/compression.md: compression level 0,
 * blk's default, which is BLK_COMPRESSION_AUTO (zstd level 1 where it
 * pays, raw where it does not), after an 8-byte shuffle (right for doubles,
 * and within 2% of the best for floats), queues of 4 KiB and more go out
 * with their block. */
#define BLK_MASTER_CONFIG_INIT                                                                   \
  {                                                                                              \
    BLK_MASTER_CONFIG_VERSION, BLK_THREADS_AUTO, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, \
        0, 0, 8, 4096, NULL, NULL, BLK_LOG_DEFAULT, NULL, NULL, NULL, NULL, NULL, NULL           \
  }

/* Sets *cfg to the defaults of layout version (BLK_MASTER_CONFIG_VERSION
 * for this header), as BLK_MASTER_CONFIG_INIT does; for bindings that
 * cannot use the macro. Returns 0, or BLK_EINVAL for a NULL cfg or a
 * version this blk does not know. Any thread. */
int blk_master_config_init(blk_master_config *cfg, unsigned int version);

/* compression_level that stores swapped-out data uncompressed (still
 * checksummed). */
#define BLK_COMPRESSION_NONE INT_MIN

/* compression_level that lets blk choose per record between zstd level 1
 * (after the shuffle) and raw, from what it measures on this rank: the
 * codec's speed, the ratio the data gets, and the spill file's write and
 * read speed. It compresses when encoding, decoding and moving the smaller
 * record take less time than moving the raw one, and checks the other
 * choice now and then; with spill_in_memory, where memory is what runs out,
 * it compresses whenever that makes a record at least 1.1 times smaller.
 * The default (compression_level 0). At any level, a record that zstd does
 * not make 1.1 times smaller is stored raw, and the messages written out
 * for blocks that are out, which are read back once and soon, are chosen
 * for as auto chooses (with the level's zstd), since time is all their
 * compression could buy (docs/compression.md). */
#define BLK_COMPRESSION_AUTO (INT_MIN + 1)

/* Creates a master on a duplicate of comm. cfg may be NULL for defaults; each
 * rank may pass its own (a spill directory per node), and a setting that fails
 * on one rank fails the create on every rank (*out is NULL on all of them).
 * Collective over comm (BLK_THREADS_AUTO is counted with the other ranks of
 * the node, whatever each rank's own setting). Errors: BLK_EINVAL (out is
 * NULL, a config version this blk does not know (a config not made by
 * BLK_MASTER_CONFIG_INIT or blk_master_config_init has version 0), threads < 1
 * other than BLK_THREADS_AUTO, log_level not BLK_LOG_DEFAULT or a level, a
 * budget without the create/destroy/save/load callbacks, mem_bytes without
 * size, a BLK_FAULT value that cannot be read, a tuning file that does not
 * parse), BLK_EIO (rank 0's tuning file cannot be read; the spill directory
 * does not exist or is not writable; the detail names it and the rank),
 * BLK_ETHREADLEVEL (threads > 1 but MPI was initialised with less than
 * MPI_THREAD_FUNNELED), BLK_EMPI, BLK_ENOMEM. Two are returned only where they
 * are found, since nothing can be agreed without them: BLK_ESTATE when MPI is
 * not initialised and BLK_EINVAL when comm is MPI_COMM_NULL. */
int blk_master_create(blk_master **out, MPI_Comm comm, const blk_master_config *cfg);

/* Destroys the blocks (through cfg.destroy), the threads and the duplicated
 * communicator, after every message of this master, on every rank, has
 * arrived or been dropped (a failed operation may leave some under way).
 * NULL does nothing. Collective over the communicator. */
void blk_master_destroy(blk_master *m);

/* This rank and the number of ranks in the master's communicator. */
int blk_master_rank(const blk_master *m);
int blk_master_size(const blk_master *m);

/* The callbacks this rank's master runs at once: cfg.threads, or what
 * BLK_THREADS_AUTO came to. Any time on the master's thread. */
int blk_master_threads(const blk_master *m);

/* The master's own (duplicated) communicator, for an application that wants
 * to run its own collectives beside blk's. Do not free it. */
MPI_Comm blk_master_comm(const blk_master *m);

/* Adds a block with global id gid and its links (copied; may be NULL when
 * nlinks is 0). The master takes ownership of block and frees it with
 * cfg.destroy. Not collective: every block the assigner puts on this rank
 * must be added before the next reduction (one that finds a block missing,
 * or one placed elsewhere, returns BLK_EINVAL on every rank).
 * Errors: BLK_EINVAL (m is NULL, gid < 0, gid already added, nlinks < 0, a
 * link with a negative gid or a rank outside the communicator), BLK_ENOMEM
 * (the caller keeps the block), BLK_EIO or BLK_ECALLBACK when a budget made
 * room by evicting another block and that failed: the block is added, and
 * memory is over the budget. */
int blk_master_add(blk_master *m, int gid, void *block, const blk_link *links, int nlinks);

/* Creates this rank's blocks (per the assigner) with cfg.create_at (or
 * cfg.create) and adds them with their decomposer links. The decomposer and assigner are only read
 * during the call. Collective: every rank returns the same code. On failure
 * the blocks created before it stay.
 * Errors: BLK_EINVAL (m, d or a NULL, neither create_at nor create, the assigner's
 * block or rank count differs from the decomposer's or the communicator's),
 * BLK_ECALLBACK (the create callback failed; the detail names its code),
 * BLK_ENOMEM (also, before any block is made, a local block count whose
 * records alone cannot fit in this process), BLK_EIO (out-of-core). */
int blk_master_decompose(blk_master *m, const blk_decomposer *d, const blk_assigner *a);

/* Number of local blocks; gid and block of local index lid (0..count-1,
 * in the order they were added); the lid of a gid, or -1. Out-of-core,
 * blk_master_block returns NULL for a block that is swapped out: use
 * blk_master_foreach to work on blocks. */
int blk_master_local_count(const blk_master *m);
int blk_master_gid(const blk_master *m, int lid);
void *blk_master_block(const blk_master *m, int lid);
int blk_master_lid(const blk_master *m, int gid);

/* The links of local block lid; *count receives their number. The array
 * belongs to the master and stays valid until the block's links change. */
const blk_link *blk_master_links(const blk_master *m, int lid, int *count);

/* A callback run on one block. It may dequeue what the last exchange
 * delivered and enqueue for the next one through proxy. Return 0, or a
 * negative code (a blk code or the user's own) to make foreach report
 * BLK_ECALLBACK naming it. */
typedef int (*blk_foreach_fn)(void *block, blk_proxy *proxy, void *user);

/* Runs fn once on every local block, in parallel on the pool where that
 * pays, else on the calling thread (one block's callbacks never run at
 * once; docs/architecture.md says how blk chooses). Collective (every rank calls it, also one
 * without blocks), so that a failure anywhere is every rank's: it costs one
 * agreement, 2 log2(ranks) small messages (docs/performance.md has the
 * figures).
 * Errors, the same on every rank: BLK_EINVAL (fn is NULL), BLK_ECALLBACK (a
 * callback failed: every other block still ran; the detail names the
 * lowest failing rank, its earliest failing gid and the code it returned),
 * BLK_ENOMEM, BLK_EIO or BLK_ECORRUPT out-of-core (a block that could not be
 * loaded did not run; after a failed eviction every block ran, over the
 * budget). */
int blk_master_foreach(blk_master *m, blk_foreach_fn fn, void *user);

/* Chooses the blocks a foreach runs, without the block itself (out of core
 * it is not loaded to be asked): gid, and the bytes waiting in its in
 * queues (what the last exchange delivered; of a queue in memory, the part
 * no callback has read). Nonzero: run it. Called on the calling thread,
 * before any callback. */
typedef int (*blk_select_fn)(int gid, size_t queued, void *user);

/* A select that takes the blocks with something in their in queues: a
 * foreach over the blocks a step of message passing reached. */
int blk_select_incoming(int gid, size_t queued, void *user);

/* blk_master_foreach over the blocks select takes (select NULL: every
 * block). The others are skipped: not run and, out of core, not loaded.
 * Collective, with the errors of blk_master_foreach; a rank that selects
 * nothing still takes part. */
int blk_master_foreach_some(blk_master *m, blk_foreach_fn fn, blk_select_fn select, void *user);

/* Delivers what every block enqueued to its links since the last exchange,
 * and completes the value all-reduces blocks posted (blk_proxy_all_reduce_*).
 * Collective. What was delivered by the previous exchange and not dequeued
 * is dropped.
 * Errors, the same on every rank: BLK_EINVAL (blocks or ranks posted
 * different all-reduce sequences, including blocks that posted nothing
 * while others posted: the results are then empty), BLK_ENOMEM (a queue
 * failed to fill, or a message found no memory where it arrived),
 * BLK_EMPI (MPI refused to start a send), BLK_EIO or BLK_ECORRUPT
 * out-of-core (a spilled queue could not be read back: it is dropped, not
 * sent later). A queue that failed is not delivered; everything else is. */
int blk_master_exchange(blk_master *m);

/* blk_master_exchange, and also delivers what callbacks enqueued to any gid
 * (blk_proxy_enqueue_to, blk_proxy_open_to: DIY's remote exchange), each
 * to the rank assigner a says owns its gid; the receiver reads it from its
 * queue from the sender's gid, after its link queues (proxy.h). A message
 * for a block that is out of core is stored with it. Collective, with the
 * errors of blk_master_exchange, and BLK_EINVAL on every rank when a is
 * NULL or for another rank count, or when a queue went to a gid a does not
 * have or that the rank it names has no block of (that queue is dropped,
 * and named). blk_master_exchange, given queues to any gid, fails them in
 * the same way: it has no assigner. */
int blk_master_exchange_remote(blk_master *m, const blk_assigner *a);

/* A callback of blk_master_iexchange: works on the block with what has
 * arrived (its proxy's in queues) and enqueues to links or to any gid.
 * Returns 0 when the block has nothing more to do until messages come,
 * 1 (any positive value) to be run again even if none do, or a negative
 * code (a blk code or the user's own) to fail the iexchange: the block is
 * not run again and what comes for it is dropped. */
typedef int (*blk_iexchange_fn)(void *block, blk_proxy *proxy, void *user);

/* Asynchronous exchange (DIY's iexchange): runs fn on every local block,
 * then again on a block whenever messages have come for it (or its last
 * run returned 1), sending what each run enqueued as soon as it returns,
 * until no block anywhere has work and no message is on its way. For
 * message passing whose rounds nobody knows in advance: particles that
 * cross blocks until they stop, a search that spreads.
 *
 * What a run sees: its in queues hold every message that came for the
 * block since its previous run, a queue per link (from that neighbour)
 * and per other sending gid (ascending), each message whole, several from
 * one sender in the order they arrived (which depends on timing, as the
 * order of the runs does: a result that must not depend on it should not
 * depend on the order of messages). Bytes a run does not read are
 * dropped, and so is what the last exchange delivered that no callback
 * read; what blocks enqueued before the call goes out with their first
 * run's messages. blk_proxy_round is the block's number of runs so far.
 * Messages to any gid go to the rank a says owns it.
 *
 * The end is found by counting: each rank counts the messages it sent to
 * and received from other ranks, and when it has no work it joins a
 * non-blocking all-reduce of the counts (a wave); the run ends when two
 * waves in a row found the same sums, with as many received as sent
 * (Mattern's four-counter method; docs/exchange.md). Each rank's blocks run
 * on its pool, as in a foreach; out of core, blocks are loaded when
 * messages come for them and messages for a block that is out wait for
 * it. Collective: every rank calls it, also one without blocks, and every
 * rank returns the same code: BLK_EINVAL (fn or a NULL, an assigner for
 * another rank count, a message to a gid nobody has: dropped, named),
 * BLK_ECALLBACK (a run failed; the detail names the lowest failing rank,
 * its earliest failing gid and its code; the other blocks ran on), or
 * those of blk_master_exchange. Blocks' posted all-reduce values are
 * not allowed in its callbacks (a post stops the job). */
int blk_master_iexchange(blk_master *m, const blk_assigner *a, blk_iexchange_fn fn, void *user);

/* Results of the value all-reduces completed by the last exchange, for code
 * outside callbacks (inside, use blk_proxy_result_*): their number, and
 * result i as the type it was posted with (another index or type stops the
 * job, as in a callback). */
int blk_master_result_count(const blk_master *m);
double blk_master_result_f64(const blk_master *m, int i);
int64_t blk_master_result_i64(const blk_master *m, int i);

/* What out-of-core storage has done so far on this rank. */
typedef struct blk_master_stats {
  int blocks_in_memory;      /* now */
  int blocks_in_memory_peak; /* the most at any time */
  uint64_t loads, evictions; /* blocks read back, blocks that left memory (one that had not
                                 changed since it came in is not written again) */
  uint64_t queues_spilled, queues_restored;
  uint64_t records_written, records_read;
  uint64_t bytes_raw_written, bytes_stored_written; /* before and after compression */
  uint64_t bytes_raw_read, bytes_stored_read;
  double seconds_compress, seconds_decompress, seconds_write, seconds_read;
  uint64_t spill_file_bytes, spill_file_bytes_peak;
  /* How the records written were stored: zstd frames, and raw. Of the raw
   * ones: stored raw because compression did not pay (the frame was not 1.1
   * times smaller, or zstd was skipped because the block's last attempt was
   * not), and their raw bytes; stored raw because BLK_COMPRESSION_AUTO
   * (or, at any level, the rule for messages written out) measured the
   * spill file faster than compressing. */
  uint64_t records_compressed, records_raw;
  uint64_t records_raw_poor_ratio, bytes_raw_poor_ratio;
  uint64_t records_raw_fast_device;
} blk_master_stats;

/* Fills *out with this rank's figures (all 0 but the block counts in-core).
 * Any time on the master's thread. */
void blk_master_stats_get(const blk_master *m, blk_master_stats *out);

/* Logs the figures at info level, one line per rank. */
void blk_master_stats_log(const blk_master *m);

/* A label for this rank's spill file, for messages ("" in-core or with
 * spill_in_memory): "<spill_dir>/blk-r<rank>-<12 hex digits>.spill
 * (unlinked)". It is not a path to open: the file has no name in spill_dir
 * (created with O_TMPFILE, or under that name and unlinked at once), so
 * nothing is left behind however the process ends; blk_master_destroy
 * closes it, which frees it. Errors about the file name this label. Valid
 * until blk_master_destroy. */
const char *blk_master_spill_path(const blk_master *m);

/* Number of collective operations run so far on this master (every
 * foreach, exchange, decompose, reduction and destroy counts one; an array
 * all-reduce may count two), modulo 2^32: the number error messages give
 * an operation ("exchange 12 failed on rank 1 ..."). */
uint32_t blk_master_epoch(const blk_master *m);

#ifdef __cplusplus
}
#endif
#endif
