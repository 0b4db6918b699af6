/*
 * budget.h: which blocks are in memory, and moving them out and back.
 *
 * With a budget (cfg.mem_blocks and/or cfg.mem_bytes) at most that many
 * blocks are in memory at once. Making a block resident evicts a block
 * that no task is using (pins == 0): the one needed furthest in the future
 * when the running operation says (future, below), else the least
 * recently used. The victim is saved with the user's save callback and
 * destroyed; its bytes are encoded, checksummed and written behind, on the
 * I/O threads (spill_io.h), while the driver goes on. Loads ahead of use
 * (prefetch) are read and decoded there too; the user's create and load
 * then only copy the bytes in. A block's exchange queues of at least
 * cfg.queue_spill_bytes go out with it and come back with it. Without a
 * budget every block stays resident and nothing here does any work.
 *
 * Nothing is lost: a block's saved bytes are freed only once the record
 * holding them is written; a write that fails leaves them in memory (held)
 * and the block is loaded from there. Besides the blocks, memory holds at
 * most BLK__BUDGET_BEHIND blocks' bytes being written, two per I/O thread
 * read ahead (at most BLK__BUDGET_AHEAD_MAX), and messages for blocks that
 * are out worth BLK__BUDGET_KEPT blocks (blk__budget_keep_queue); larger
 * messages that wait in memory hold a block's place each
 * (blk__budget_lend), so blocks and such messages together stay within the
 * block budget. (A reduction also keeps the last input of a round that runs
 * without its block, an all_to_all forwarding round, until the next pass
 * runs the task: reduce.c's fill.) A spilled message's memory goes to the
 * master's buffer cache, which holds at most its cap (a quarter of
 * mem_bytes under a byte budget) and lends it to the next large message or
 * read back.
 *
 * Everything here runs on the master's driver thread; a pinned block is
 * never evicted, so a callback running on the pool keeps its block.
 */
#ifndef BLK_BUDGET_H
#define BLK_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "base/buffer_cache.h"
#include "base/context.h"
#include "runtime/block_table.h"
#include "runtime/spill_io.h"
#include "storage/storage.h"

/* Writes under way at once, and blocks read ahead at once: each holds one
 * block's saved bytes. Two a thread keep an I/O thread busy while the
 * driver takes the one it finished: reads ahead are two per I/O thread, up
 * to BLK__BUDGET_AHEAD_MAX (with two I/O threads, four read ahead instead
 * of two took 64 x 4 MiB with 8 in memory at 1 rank from 0.56 to 0.52 s
 * in a TREE all_reduce, where the driver had read 43 of its 112 loads
 * itself, and from 0.70 to 0.60 s in an all_to_all). */
#define BLK__BUDGET_BEHIND 2
#define BLK__BUDGET_AHEAD_MAX 4
/* Messages worth this many blocks may wait in memory for blocks that are
 * out (blk__budget_keep_queue). */
#define BLK__BUDGET_KEPT 2

/* Record kinds in storage. */
enum { BLK__RECORD_BLOCK = 1, BLK__RECORD_QUEUE = 2 };

/* Returned by blk__budget_acquire when every resident block is pinned: wait
 * for a task to finish and try again. Not an error. */
#define BLK__BUDGET_FULL 1

/* The out-of-core settings (blk_master_config's). */
typedef struct blk__budget_settings {
  int mem_blocks;           /* 0: no limit */
  size_t mem_bytes;         /* 0: no limit */
  size_t queue_spill_bytes; /* queues at least this large go out with their block */
  size_t shuffle;           /* byte-shuffle element size, 0 = none */
  const char *spill_dir;    /* NULL: $TMPDIR or /tmp */
  int spill_in_memory;
  int compression_level;       /* the storage's level (the master maps 0 to auto) */
  int io_threads;              /* the codec and I/O threads (spill_io.h) */
  const blk__context *context; /* the I/O threads' */
  blk__buffer_cache *cache;    /* the master's: spilled messages' storage goes and comes here */
} blk__budget_settings;

typedef struct blk__budget {
  blk__table *table;  /* the blocks it keeps within the budget */
  int max_blocks;     /* 0: no limit */
  size_t max_bytes;   /* 0: no limit */
  size_t queue_bytes; /* queues at least this large are spilled */
  size_t shuffle;     /* element size for the byte-shuffle filter, 0 = none */
  blk__storage *storage;
  blk__io *io;              /* the codec and I/O threads (with storage) */
  blk__buffer_cache *cache; /* the master's (buffer_cache.h) */
  int behind;               /* writes under way */
  int ahead;                /* blocks read ahead: being read, or held */
  int ahead_max;            /* two per I/O thread, at most BLK__BUDGET_AHEAD_MAX */
  /* Set by the operation running, NULL between operations:
   * future(ctx, lid) says when lid is needed next, smaller sooner;
   * UINT64_MAX: not again in this operation. */
  uint64_t (*future)(void *ctx, int lid);
  /* Told of a write behind that failed (lid is the block it was for; the
   * code's detail is in blk_last_error()); without it, flush returns it. */
  void (*on_error)(void *ctx, int lid, int code);
  void *ctx;
  int resident, resident_peak;
  size_t resident_bytes;
  size_t saved_max;   /* the most bytes a block saved so far */
  size_t queues_kept; /* messages for blocks that are out, kept in memory */
  int lent;           /* block places messages hold (blk__budget_lend) */
  uint64_t clock;
  uint64_t loads, evictions, queues_spilled, queues_restored;
} blk__budget;

/* Validates the out-of-core settings against the table's callbacks and
 * opens storage. BLK_EINVAL (a budget without save/load/create/destroy,
 * mem_bytes without size, negative values), BLK_EIO (spill dir). */
int blk__budget_init(blk__budget *b, blk__table *t, const blk__budget_settings *set, int rank);
void blk__budget_free(blk__budget *b);
int blk__budget_active(const blk__budget *b);
/* Whether an operation starting now may see a block leave memory or find
 * one out: a budget that holds every block of the table (by count, with no
 * byte limit, and all of them in) never evicts, so what is safe in core is
 * safe under it (references to blocks' memory, receiving into a block). */
int blk__budget_may_swap(const blk__budget *b);

/* Makes block lid resident and pins it (loading it, and evicting others to
 * make room, if needed). Returns 0, BLK__BUDGET_FULL (nothing evictable now),
 * or an error (a failed eviction or load; the detail names gid and path). */
int blk__budget_acquire(blk__budget *b, int lid);
/* The block that making lid resident now would evict, if future says it is
 * needed sooner than lid_next (lid's own), else -1: then waiting (for a
 * running task to free a block that is done, or for the message the
 * victim waits for) may be the better trade. */
int blk__budget_sooner_victim(const blk__budget *b, int lid, uint64_t lid_next);
/* What reading and decoding a record back has cost on average so far (a
 * block's, or a spilled queue's), in ns; 0 before the first. */
int64_t blk__budget_load_ns(const blk__budget *b);
/* Unpins a block and marks it most recently used. */
void blk__budget_release(blk__budget *b, int lid);
/* Starts reading and decoding lid ahead of use, if it is out and fewer
 * than ahead_max blocks are read ahead; 1 if it started one. */
int blk__budget_prefetch(blk__budget *b, int lid);
/* Takes in the I/O that finished (a write that failed is told through
 * on_error, or returned by the next flush). Returns at once. */
void blk__budget_poll(blk__budget *b);
/* Waits for all I/O under way. Returns 0 or the first error of a write
 * behind not told through on_error (the detail names the gid). */
int blk__budget_flush(blk__budget *b);
/* Whether lid's block is in memory. (Inline, as the other queries on every
 * block's every round below: in core they find nothing to do.) */
static inline int blk__budget_resident(const blk__budget *b, int lid) {
  return blk__table_at(b->table, lid)->resident;
}
/* Counts a block just added to the table (resident, not pinned),
 * evicting others if the budget is exceeded. */
int blk__budget_added(blk__budget *b, int lid);

/* Whether a message of `bytes` for a block that is out may stay in memory
 * instead of going to storage, and if so counts it. It may while the
 * messages kept come to at most BLK__BUDGET_KEPT blocks' saved bytes: a
 * reduction loads the block a message is for soon after, mostly (the
 * message that fills the last slot makes it ready), and a message that
 * goes out and comes back costs as much as the block. Small messages
 * (below the spill threshold) stay anyway and are not counted. */
int blk__budget_keep_queue(blk__budget *b, size_t bytes);
/* The messages kept for a block that is now in memory (or gone): `bytes`
 * no longer count. */
static inline void blk__budget_unkeep_queue(blk__budget *b, size_t bytes) {
  b->queues_kept -= bytes < b->queues_kept ? bytes : b->queues_kept;
}

/* Whether a message of `bytes` for block lid, which is out, may stay in
 * memory in a block's place instead of going to storage: when there is a
 * free place, or a block in memory that the operation is done with (whose
 * write was due before its next use anyway), which is evicted now. lid
 * then holds the place until it is loaded (blk__budget_acquire, or
 * blk__budget_unlend when the message goes unread), and writing the
 * message out and reading it back is saved. Under a block budget only
 * (mem_blocks, no mem_bytes), for a message of at least half the largest
 * block saved, and never the last place: a ready block can always come
 * in. Returns 1 if so, 0 if not, or the failed eviction's error (then not;
 * the victim stays in memory, nothing is lost). */
int blk__budget_lend(blk__budget *b, int lid, size_t bytes);
/* The places lid's messages held (blk__budget_lend) are the budget's again. */
static inline void blk__budget_unlend(blk__budget *b, int lid) {
  blk__block *blk = blk__table_at(b->table, lid);
  b->lent -= blk->lent;
  blk->lent = 0;
}

/* Writes a queue buffer to storage and gives its memory to the buffer
 * cache, which keeps it for the next large message or frees it (no-op if
 * it is below the threshold or there is no storage). On failure the buffer
 * stays. Queue records are transient (blk__storage_transient): compressed
 * only where that saves time. */
int blk__budget_spill_queue(blk__budget *b, int gid, blk_buffer *q, blk__record *rec);
/* The out-of-line halves of the two below, for a queue that was spilled
 * (rec->stored set): read it back, or drop its record. */
int blk__budget_restore_stored(blk__budget *b, blk_buffer *q, blk__record *rec);
void blk__budget_drop_stored(blk__budget *b, blk__record *rec);
/* Reads a spilled queue back (no-op if it was not spilled). */
static inline int blk__budget_restore_queue(blk__budget *b, blk_buffer *q, blk__record *rec) {
  return rec->stored ? blk__budget_restore_stored(b, q, rec) : 0;
}
/* Drops a spilled queue's record (no-op if it was not spilled). */
static inline void blk__budget_drop_queue(blk__budget *b, blk__record *rec) {
  if (rec->stored) blk__budget_drop_stored(b, rec);
}

#endif
