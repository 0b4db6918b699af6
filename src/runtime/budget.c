/*
 * budget.c: residency of blocks under a memory budget; see budget.h.
 *
 * Invariants: budget.resident counts blocks with resident == 1; with a
 * block limit it never exceeds max_blocks after an acquire returns 0 (a
 * failed eviction is the one way past it: the block stays in memory rather
 * than be lost, and the error is returned). A non-resident block has a valid
 * record (rec.stored > 0). A queue record is valid iff its stored > 0.
 *
 * Eviction order: least recently used among unpinned resident blocks. Cost
 * of an eviction: the user's save, one encode (zstd at ~1 GB/s on this
 * machine) and one write; of a load: one read, one decode, create and load.
 */
#include "runtime/budget.h"

#include <stdlib.h>
#include <string.h>

#include "base/fail.h"
#include "base/logger.h"
#include "storage/codec.h"

int blk__budget_init(blk__budget *b, blk__table *t, const blk__budget_settings *set, int rank) {
  memset(b, 0, sizeof *b);
  b->table = t;
  if (set->mem_blocks < 0)
    return blk__fail(BLK_EINVAL, "master: mem_blocks = %d, must be >= 0 (0: no limit)",
                     set->mem_blocks);
  b->max_blocks = set->mem_blocks;
  b->max_bytes = set->mem_bytes;
  b->queue_bytes = set->queue_spill_bytes;
  b->shuffle = set->shuffle;
  if (!blk__budget_active(b)) return BLK_OK;
  const blk__block_fns *fns = &t->fns;
  if (b->max_bytes && !fns->size)
    return blk__fail(BLK_EINVAL, "master: mem_bytes = %zu needs a size callback", b->max_bytes);
  if (!fns->create || !fns->destroy || !fns->save || !fns->load)
    return blk__fail(BLK_EINVAL,
                     "master: a memory budget (mem_blocks = %d, mem_bytes = %zu) needs the create, "
                     "destroy, save and load callbacks; missing:%s%s%s%s",
                     set->mem_blocks, set->mem_bytes, fns->create ? "" : " create",
                     fns->destroy ? "" : " destroy", fns->save ? "" : " save",
                     fns->load ? "" : " load");
  const char *dir = set->spill_in_memory ? NULL : set->spill_dir;
  if (!set->spill_in_memory && !dir) {
    dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
  }
  /* 0 (a config not from BLK_MASTER_CONFIG_INIT) means the default; the
   * public BLK_COMPRESSION_NONE is the codec's store-only level. */
  int level = set->compression_level == 0 ? BLK__CODEC_DEFAULT_LEVEL : set->compression_level;
  return blk__storage_create(&b->storage, dir, rank, level);
}

void blk__budget_free(blk__budget *b) {
  blk__storage_destroy(b->storage);
  b->storage = NULL;
}

int blk__budget_active(const blk__budget *b) {
  return b->max_blocks > 0 || b->max_bytes > 0;
}

int blk__budget_resident(const blk__budget *b, int lid) {
  return blk__table_at(b->table, lid)->resident;
}

static int over_budget(const blk__budget *b, int extra_blocks, size_t extra_bytes) {
  if (b->max_blocks && b->resident + extra_blocks > b->max_blocks) return 1;
  if (b->max_bytes && b->resident > 0 && b->resident_bytes + extra_bytes > b->max_bytes) return 1;
  return 0;
}

int blk__budget_spill_queue(blk__budget *b, int gid, blk_buffer *q, blk__record *rec) {
  if (!b->storage || q->size == 0 || q->size < b->queue_bytes || rec->stored) return BLK_OK;
  int rc = blk__storage_put(b->storage, gid, BLK__RECORD_QUEUE, q->data, q->size, 0, rec);
  if (rc) return rc;
  blk_buffer_free(q);
  b->queues_spilled++;
  return BLK_OK;
}

int blk__budget_restore_queue(blk__budget *b, blk_buffer *q, blk__record *rec) {
  if (!rec->stored) return BLK_OK;
  int rc = blk__storage_get(b->storage, rec, q);
  if (rc) return rc;
  blk__storage_release(b->storage, rec);
  memset(rec, 0, sizeof *rec);
  b->queues_restored++;
  return BLK_OK;
}

void blk__budget_drop_queue(blk__budget *b, blk__record *rec) {
  if (!rec->stored) return;
  blk__storage_release(b->storage, rec);
  memset(rec, 0, sizeof *rec);
}

/* Saves, encodes and writes block lid, then destroys it. Nothing is lost on
 * failure: the block stays resident and the error names gid and path. */
static int evict(blk__budget *b, int lid) {
  const blk__block_fns *fns = &b->table->fns;
  blk__block *blk = blk__table_at(b->table, lid);
  blk_buffer saved = BLK_BUFFER_INIT;
  int rc = fns->save(&saved, blk->data, blk->gid, fns->user);
  if (rc || saved.error) {
    rc = blk__fail(BLK_ECALLBACK, "budget: the save callback failed for gid %d (code %d)", blk->gid,
                   rc ? rc : saved.error);
    goto exit;
  }
  blk__record rec;
  if ((rc = blk__storage_put(b->storage, blk->gid, BLK__RECORD_BLOCK, saved.data, saved.size,
                             b->shuffle, &rec)))
    goto exit;
  /* Written: now the block may go. Its large queues go with it; a queue
   * that fails to write simply stays in memory. */
  for (int i = 0; i < blk->nlinks; i++) {
    blk__budget_spill_queue(b, blk->gid, &blk->in[i], &blk->in_rec[i]);
    blk__budget_spill_queue(b, blk->gid, &blk->out[i], &blk->out_rec[i]);
  }
  fns->destroy(blk->data, blk->gid, fns->user);
  blk->data = NULL;
  blk->rec = rec;
  blk->resident = 0;
  b->resident--;
  b->resident_bytes -= blk->bytes;
  blk->bytes = 0;
  b->evictions++;
  BLK__LOG(BLK_LOG_DEBUG, "budget: evicted gid %d (%llu bytes, %llu stored)", blk->gid,
           (unsigned long long)rec.raw, (unsigned long long)rec.stored);
exit:
  blk_buffer_free(&saved);
  return rc;
}

/* The least recently used unpinned resident block other than lid, skipping
 * blocks marked in keep (may be NULL); -1 if none. */
static int victim(const blk__budget *b, int lid, const unsigned char *keep) {
  const blk__table *t = b->table;
  int best = -1;
  for (int i = 0; i < t->count; i++) {
    const blk__block *c = blk__table_at(t, i);
    if (i == lid || !c->resident || c->pins || (keep && keep[i])) continue;
    if (best < 0 || c->last_use < blk__table_at(t, best)->last_use) best = i;
  }
  return best;
}

static size_t block_bytes(const blk__budget *b, const blk__block *blk) {
  const blk__block_fns *fns = &b->table->fns;
  return fns->size ? fns->size(blk->data, blk->gid, fns->user) : 0;
}

/* Evicts until one more block of extra bytes fits; BLK__BUDGET_FULL if
 * nothing (outside keep) can go. A failed eviction is returned at once: the
 * victim stays in memory, nothing is lost. */
static int make_room(blk__budget *b, int lid, size_t extra, const unsigned char *keep) {
  while (over_budget(b, 1, extra)) {
    int v = victim(b, lid, keep);
    if (v < 0) return BLK__BUDGET_FULL;
    int rc = evict(b, v);
    if (rc) return rc;
  }
  return BLK_OK;
}

/* Reads, decodes, creates and loads block lid, and brings its queues back. */
static int load(blk__budget *b, int lid) {
  const blk__block_fns *fns = &b->table->fns;
  blk__block *blk = blk__table_at(b->table, lid);
  blk_buffer saved = BLK_BUFFER_INIT;
  void *data = NULL;
  int rc = blk__storage_get(b->storage, &blk->rec, &saved);
  if (rc) goto exit;
  if ((rc = fns->create(&data, blk->gid, fns->user))) {
    rc = blk__fail(BLK_ECALLBACK, "budget: the create callback failed for gid %d (code %d)",
                   blk->gid, rc);
    goto exit;
  }
  if ((rc = fns->load(data, &saved, blk->gid, fns->user))) {
    fns->destroy(data, blk->gid, fns->user);
    rc = blk__fail(BLK_ECALLBACK, "budget: the load callback failed for gid %d (code %d)", blk->gid,
                   rc);
    goto exit;
  }
  for (int i = 0; i < blk->nlinks && !rc; i++) {
    rc = blk__budget_restore_queue(b, &blk->in[i], &blk->in_rec[i]);
    if (!rc) rc = blk__budget_restore_queue(b, &blk->out[i], &blk->out_rec[i]);
  }
  if (rc) {
    fns->destroy(data, blk->gid, fns->user);
    goto exit;
  }
  blk__storage_release(b->storage, &blk->rec);
  memset(&blk->rec, 0, sizeof blk->rec);
  blk->data = data;
  blk->resident = 1;
  blk->bytes = block_bytes(b, blk);
  b->resident++;
  b->resident_bytes += blk->bytes;
  if (b->resident > b->resident_peak) b->resident_peak = b->resident;
  b->loads++;
exit:
  blk_buffer_free(&saved);
  return rc;
}

/* At debug level: the failed write that caused it is returned, on every
 * rank, by the operation (a warning per load printed it dozens of times). */
static void log_overrun(const blk__budget *b, int lid) {
  BLK__LOG(BLK_LOG_DEBUG, "budget: loading gid %d over the budget of %d blocks: %s",
           blk__table_at(b->table, lid)->gid, b->max_blocks, blk_last_error());
}

static int bring_in(blk__budget *b, int lid, const unsigned char *keep) {
  blk__block *blk = blk__table_at(b->table, lid);
  if (blk->resident) return BLK_OK;
  int rc = make_room(b, lid, (size_t)blk->rec.raw, keep);
  return rc ? rc : load(b, lid);
}

int blk__budget_acquire(blk__budget *b, int lid) {
  blk__block *blk = blk__table_at(b->table, lid);
  int rc = BLK_OK;
  if (!blk->resident) {
    rc = make_room(b, lid, (size_t)blk->rec.raw, NULL);
    if (rc == BLK__BUDGET_FULL) return rc;
    /* A failed write leaves no room: go over the budget rather than stop the
     * operation half-way on this rank; the caller still gets the error. */
    if (rc) log_overrun(b, lid);
    int lrc = load(b, lid);
    if (!rc) rc = lrc;
  }
  if (blk->resident) blk->pins++;
  return rc;
}

void blk__budget_release(blk__budget *b, int lid) {
  blk__block *blk = blk__table_at(b->table, lid);
  blk->pins--;
  blk->last_use = ++b->clock;
  if (blk__budget_active(b) && b->table->fns.size) {
    size_t now = block_bytes(b, blk);
    b->resident_bytes += now - blk->bytes;
    blk->bytes = now;
  }
}

int blk__budget_prefetch(blk__budget *b, int lid, const unsigned char *want) {
  if (blk__table_at(b->table, lid)->resident) return 0;
  int rc = bring_in(b, lid, want);
  if (rc == BLK__BUDGET_FULL) return 0;
  return rc ? rc : 1;
}

int blk__budget_added(blk__budget *b, int lid) {
  blk__block *blk = blk__table_at(b->table, lid);
  blk->last_use = ++b->clock;
  blk->bytes = blk__budget_active(b) ? block_bytes(b, blk) : 0;
  b->resident++;
  b->resident_bytes += blk->bytes;
  if (!blk__budget_active(b)) return BLK_OK;
  /* The new block counts like any other: make room by evicting the others. */
  while (over_budget(b, 0, 0)) {
    int v = victim(b, -1, NULL);
    if (v < 0) break;
    int rc = evict(b, v);
    if (rc) return rc;
  }
  if (b->resident > b->resident_peak) b->resident_peak = b->resident;
  return BLK_OK;
}
