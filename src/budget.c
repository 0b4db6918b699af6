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
#include "budget.h"

#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fail.h"
#include "logger.h"
#include "master_state.h"

int blk__budget_init(blk__budget *b, const blk_master_config *cfg, int rank) {
  memset(b, 0, sizeof *b);
  if (cfg->mem_blocks < 0)
    return blk__fail(BLK_EINVAL, "master: mem_blocks = %d, must be >= 0 (0: no limit)",
                     cfg->mem_blocks);
  b->max_blocks = cfg->mem_blocks;
  b->max_bytes = cfg->mem_bytes;
  b->queue_bytes = cfg->queue_spill_bytes;
  b->shuffle = cfg->shuffle;
  if (!blk__budget_active(b)) return BLK_OK;
  if (b->max_bytes && !cfg->size)
    return blk__fail(BLK_EINVAL, "master: mem_bytes = %zu needs a size callback", b->max_bytes);
  if (!cfg->create || !cfg->destroy || !cfg->save || !cfg->load)
    return blk__fail(BLK_EINVAL,
                     "master: a memory budget (mem_blocks = %d, mem_bytes = %zu) needs the create, "
                     "destroy, save and load callbacks; missing:%s%s%s%s",
                     cfg->mem_blocks, cfg->mem_bytes, cfg->create ? "" : " create",
                     cfg->destroy ? "" : " destroy", cfg->save ? "" : " save",
                     cfg->load ? "" : " load");
  const char *dir = cfg->spill_in_memory ? NULL : cfg->spill_dir;
  if (!cfg->spill_in_memory && !dir) {
    dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
  }
  /* 0 (a config not from BLK_MASTER_CONFIG_INIT) means the default; the
   * public BLK_COMPRESSION_NONE is the codec's store-only level. */
  int level = cfg->compression_level == 0 ? BLK__CODEC_DEFAULT_LEVEL : cfg->compression_level;
  return blk__storage_create(&b->storage, dir, rank, level);
}

void blk__budget_free(blk__budget *b) {
  blk__storage_destroy(b->storage);
  b->storage = NULL;
}

int blk__budget_active(const blk__budget *b) { return b->max_blocks > 0 || b->max_bytes > 0; }

int blk__budget_resident(const blk_master *m, int lid) { return m->blocks[lid].resident; }

static int over_budget(const blk_master *m, int extra_blocks, size_t extra_bytes) {
  const blk__budget *b = &m->budget;
  if (b->max_blocks && b->resident + extra_blocks > b->max_blocks) return 1;
  if (b->max_bytes && b->resident > 0 && b->resident_bytes + extra_bytes > b->max_bytes) return 1;
  return 0;
}

int blk__budget_spill_queue(blk_master *m, int gid, blk_buffer *q, blk__record *rec) {
  blk__budget *b = &m->budget;
  if (!b->storage || q->size == 0 || q->size < b->queue_bytes || rec->stored) return BLK_OK;
  int rc = blk__storage_put(b->storage, gid, BLK__RECORD_QUEUE, q->data, q->size, 0, rec);
  if (rc) return rc;
  blk_buffer_free(q);
  b->queues_spilled++;
  return BLK_OK;
}

int blk__budget_restore_queue(blk_master *m, blk_buffer *q, blk__record *rec) {
  blk__budget *b = &m->budget;
  if (!rec->stored) return BLK_OK;
  int rc = blk__storage_get(b->storage, rec, q);
  if (rc) return rc;
  blk__storage_release(b->storage, rec);
  memset(rec, 0, sizeof *rec);
  b->queues_restored++;
  return BLK_OK;
}

void blk__budget_drop_queue(blk_master *m, blk__record *rec) {
  if (!rec->stored) return;
  blk__storage_release(m->budget.storage, rec);
  memset(rec, 0, sizeof *rec);
}

/* Saves, encodes and writes block lid, then destroys it. Nothing is lost on
 * failure: the block stays resident and the error names gid and path. */
static int evict(blk_master *m, int lid) {
  blk__budget *b = &m->budget;
  blk__block *blk = &m->blocks[lid];
  blk_buffer saved = BLK_BUFFER_INIT;
  int rc = m->cfg.save(&saved, blk->data, blk->gid, m->cfg.user);
  if (rc || saved.error) {
    rc = blk__fail(BLK_ECALLBACK, "budget: the save callback failed for gid %d (code %d)",
                   blk->gid, rc ? rc : saved.error);
    goto exit;
  }
  blk__record rec;
  if ((rc = blk__storage_put(b->storage, blk->gid, BLK__RECORD_BLOCK, saved.data, saved.size,
                             b->shuffle, &rec)))
    goto exit;
  /* Written: now the block may go. Its large queues go with it; a queue
   * that fails to write simply stays in memory. */
  for (int i = 0; i < blk->nlinks; i++) {
    blk__budget_spill_queue(m, blk->gid, &blk->in[i], &blk->in_rec[i]);
    blk__budget_spill_queue(m, blk->gid, &blk->out[i], &blk->out_rec[i]);
  }
  m->cfg.destroy(blk->data, blk->gid, m->cfg.user);
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
static int victim(const blk_master *m, int lid, const unsigned char *keep) {
  int best = -1;
  for (int i = 0; i < m->nblocks; i++) {
    const blk__block *c = &m->blocks[i];
    if (i == lid || !c->resident || c->pins || (keep && keep[i])) continue;
    if (best < 0 || c->last_use < m->blocks[best].last_use) best = i;
  }
  return best;
}

static size_t block_bytes(const blk_master *m, const blk__block *blk) {
  return m->cfg.size ? m->cfg.size(blk->data, blk->gid, m->cfg.user) : 0;
}

/* Evicts until one more block of extra bytes fits; BLK__BUDGET_FULL if
 * nothing (outside keep) can go. A failed eviction is returned at once: the
 * victim stays in memory, nothing is lost. */
static int make_room(blk_master *m, int lid, size_t extra, const unsigned char *keep) {
  while (over_budget(m, 1, extra)) {
    int v = victim(m, lid, keep);
    if (v < 0) return BLK__BUDGET_FULL;
    int rc = evict(m, v);
    if (rc) return rc;
  }
  return BLK_OK;
}

/* Reads, decodes, creates and loads block lid, and brings its queues back. */
static int load(blk_master *m, int lid) {
  blk__budget *b = &m->budget;
  blk__block *blk = &m->blocks[lid];
  blk_buffer saved = BLK_BUFFER_INIT;
  void *data = NULL;
  int rc = blk__storage_get(b->storage, &blk->rec, &saved);
  if (rc) goto exit;
  if ((rc = m->cfg.create(&data, blk->gid, m->cfg.user))) {
    rc = blk__fail(BLK_ECALLBACK, "budget: the create callback failed for gid %d (code %d)",
                   blk->gid, rc);
    goto exit;
  }
  if ((rc = m->cfg.load(data, &saved, blk->gid, m->cfg.user))) {
    m->cfg.destroy(data, blk->gid, m->cfg.user);
    rc = blk__fail(BLK_ECALLBACK, "budget: the load callback failed for gid %d (code %d)",
                   blk->gid, rc);
    goto exit;
  }
  for (int i = 0; i < blk->nlinks && !rc; i++) {
    rc = blk__budget_restore_queue(m, &blk->in[i], &blk->in_rec[i]);
    if (!rc) rc = blk__budget_restore_queue(m, &blk->out[i], &blk->out_rec[i]);
  }
  if (rc) {
    m->cfg.destroy(data, blk->gid, m->cfg.user);
    goto exit;
  }
  blk__storage_release(b->storage, &blk->rec);
  memset(&blk->rec, 0, sizeof blk->rec);
  blk->data = data;
  blk->resident = 1;
  blk->bytes = block_bytes(m, blk);
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
static void log_overrun(const blk_master *m, int lid) {
  BLK__LOG(BLK_LOG_DEBUG, "budget: loading gid %d over the budget of %d blocks: %s",
           m->blocks[lid].gid, m->budget.max_blocks, blk_last_error());
}

static int bring_in(blk_master *m, int lid, const unsigned char *keep) {
  blk__block *blk = &m->blocks[lid];
  if (blk->resident) return BLK_OK;
  int rc = make_room(m, lid, (size_t)blk->rec.raw, keep);
  return rc ? rc : load(m, lid);
}

int blk__budget_acquire(blk_master *m, int lid) {
  blk__block *blk = &m->blocks[lid];
  int rc = BLK_OK;
  if (!blk->resident) {
    rc = make_room(m, lid, (size_t)blk->rec.raw, NULL);
    if (rc == BLK__BUDGET_FULL) return rc;
    /* A failed write leaves no room: go over the budget rather than stop the
     * operation half-way on this rank; the caller still gets the error. */
    if (rc) log_overrun(m, lid);
    int lrc = load(m, lid);
    if (!rc) rc = lrc;
  }
  if (blk->resident) blk->pins++;
  return rc;
}

void blk__budget_release(blk_master *m, int lid) {
  blk__block *blk = &m->blocks[lid];
  blk->pins--;
  blk->last_use = ++m->budget.clock;
  if (blk__budget_active(&m->budget) && m->cfg.size) {
    size_t now = block_bytes(m, blk);
    m->budget.resident_bytes += now - blk->bytes;
    blk->bytes = now;
  }
}

int blk__budget_prefetch(blk_master *m, int lid, const unsigned char *want) {
  if (m->blocks[lid].resident) return 0;
  int rc = bring_in(m, lid, want);
  if (rc == BLK__BUDGET_FULL) return 0;
  return rc ? rc : 1;
}

int blk__budget_added(blk_master *m, int lid) {
  blk__budget *b = &m->budget;
  blk__block *blk = &m->blocks[lid];
  blk->resident = 1;
  blk->last_use = ++b->clock;
  blk->bytes = blk__budget_active(b) ? block_bytes(m, blk) : 0;
  b->resident++;
  b->resident_bytes += blk->bytes;
  if (!blk__budget_active(b)) return BLK_OK;
  /* The new block counts like any other: make room by evicting the others. */
  while (over_budget(m, 0, 0)) {
    int v = victim(m, -1, NULL);
    if (v < 0) break;
    int rc = evict(m, v);
    if (rc) return rc;
  }
  if (b->resident > b->resident_peak) b->resident_peak = b->resident;
  return BLK_OK;
}
