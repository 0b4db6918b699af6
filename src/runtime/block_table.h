/*
 * block_table.h: a rank's blocks, found by local index (lid) or gid, with
 * their links and their exchange queues, and the user's callbacks that
 * make, free, save and load them.
 *
 * A block's record says where the block is: in memory (resident, data
 * valid) or in storage (rec). Moving blocks between the two is the
 * budget's job (budget.h), through the records here; the table itself
 * never evicts or loads.
 *
 * Invariants: blocks[lid] for lid in 0..count-1, in the order added; lids
 * maps gid -> lid. Each block has one in and one out queue per link (the
 * first nlinks of in and out), then queues to and from any gid (remote:
 * blk_proxy_enqueue_to), which live from a callback to the exchange that
 * delivers them, the in ones in ascending order of the sender's gid; per
 * queue a storage record that is valid iff its stored > 0.
 *
 * Threads: the master's driver thread changes the table. A callback on a
 * pool thread touches only its own block's queues and posts, and the
 * driver leaves them alone while it runs, so nothing here is locked.
 */
#ifndef BLK_BLOCK_TABLE_H
#define BLK_BLOCK_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/gid_map.h"
#include "base/values.h"
#include "blk/buffer.h"
#include "blk/link.h"
#include "storage/storage.h"

/* Where a link's messages land: worked out when the block is added. */
typedef struct blk__link_key {
  int32_t code;     /* this link's direction, base-3 digits (dir + 1) */
  int32_t rev_code; /* the code of the reverse direction */
  int32_t occ;      /* earlier links with the same gid and direction */
} blk__link_key;

typedef struct blk__block {
  int gid;
  void *data; /* valid iff resident */
  int nlinks;
  blk_link *links;
  int *link_gids;
  blk__link_key *keys;
  int nin, nout;       /* queues: nlinks link ones, then remote ones */
  int cap_in, cap_out; /* room in in, in_gids, in_rec (out, ...) */
  int *in_gids, *out_gids;
  blk_buffer *in;  /* delivered by the last exchange */
  blk_buffer *out; /* enqueued for the next exchange */
  blk__values posts;
  /* Out-of-core (budget.h). */
  int resident;
  int pins; /* tasks using the block now: never evicted while > 0 */
  uint64_t last_use;
  size_t bytes;    /* what the size callback said when it was last measured */
  blk__record rec; /* the block, while not resident */
  blk__record *in_rec, *out_rec;
  /* Not resident: its saved bytes, when they are in memory (read ahead of
   * use, or kept because writing them failed); has_held says so (a block
   * may save no bytes). */
  blk_buffer held;
  int has_held, held_ahead; /* held_ahead: the bytes were read ahead */
  int lent; /* places in the budget its messages hold while it is out (blk__budget_lend) */
  struct blk__io_job *job; /* the codec and I/O under way for it, or NULL */
} blk__block;

/* The user's block callbacks (blk_master_config's), as blk calls them. */
typedef struct blk__block_fns {
  int (*create)(void **block, int gid, void *user);
  void (*destroy)(void *block, int gid, void *user);
  int (*save)(blk_buffer *out, const void *block, int gid, void *user);
  int (*load)(void *block, blk_buffer *in, int gid, void *user);
  size_t (*size)(const void *block, int gid, void *user);
  void *user;
  int (*evict)(blk_buffer *out, void *block, int gid, void *user); /* NULL: save */
} blk__block_fns;

typedef struct blk__table {
  blk__block *blocks;
  int count, cap;
  blk__gid_map lids;
  blk__block_fns fns;
  int nranks; /* links must name ranks in 0..nranks-1 */
} blk__table;

void blk__table_init(blk__table *t, const blk__block_fns *fns, int nranks);

/* Destroys every resident block (fns.destroy, if set) and frees the
 * records, held bytes and queues (no I/O may be under way). Storage records are the budget's to
 * drop. */
void blk__table_free(blk__table *t);

/* Adds block data with gid and copies of its links, resident; returns its
 * lid, or BLK_EINVAL (gid < 0 or already here, a bad link) or BLK_ENOMEM,
 * with a detail, leaving the table and the block as they were. */
int blk__table_add(blk__table *t, int gid, void *data, const blk_link *links, int nlinks);

static inline int blk__table_count(const blk__table *t) {
  return t->count;
}

/* The record of lid (0 <= lid < count). */
static inline blk__block *blk__table_at(const blk__table *t, int lid) {
  return &t->blocks[lid];
}

/* The lid of gid, or -1 if it is not here. O(1). */
static inline int blk__table_lid(const blk__table *t, int gid) {
  return blk__gid_map_get(&t->lids, gid);
}

/* The index of b's remote out queue to gid (after its links), made empty if
 * b has none yet; BLK_ENOMEM (with a detail) if there is no room. For the
 * one thread that runs b's callback. */
int blk__block_open_out(blk__block *b, int gid);

/* The index of b's remote in queue from gid, made empty in its place (the
 * remote ones ascend by gid) if b has none yet; BLK_ENOMEM. */
int blk__block_open_in(blk__block *b, int gid);

/* Bytes not yet read in b's in queues, and in those stored away. */
size_t blk__block_queued(const blk__block *b);

#endif
