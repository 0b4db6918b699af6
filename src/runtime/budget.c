/*
 * budget.c: residency of blocks under a memory budget; see budget.h.
 *
 * Invariants: budget.resident counts blocks with resident == 1; with a
 * block limit it never exceeds max_blocks after an acquire returns 0 (a
 * failed save is the one way past it: the block stays in memory rather
 * than be lost, and the error is returned). A non-resident block's bytes
 * are in exactly one place: a write under way (job, a put), held in memory
 * (has_held), or its record (rec.stored > 0; a read ahead may be under
 * way, or done and held, while the record stays until the load). behind
 * counts puts under way, ahead the gets under way plus the blocks holding
 * what one read (held_ahead). A queue record is valid iff its stored > 0.
 * A resident block keeps the record it was loaded from (with a spill
 * file): its bytes as they were loaded, with their checksum. Its next
 * eviction writes over it (blk__storage_put_over), which writes nothing
 * when the block saves the same bytes: a block that a round only read (a
 * merge's sender, a foreach that checks) goes out at the cost of its save
 * and one checksum pass, not the codec and the write. In memory mode the
 * record is memory, which is what runs out, so it goes at the load.
 *
 * Eviction order: the largest future (future, set by the operation), then
 * the least recently used, among unpinned resident blocks. Cost of an
 * eviction on the driver: the user's save and destroy (copies); the
 * encode (zstd at ~1 GB/s on this machine) and the write run on the I/O
 * thread. Of a load: create and load, after a read and decode on the I/O
 * thread when it was read ahead, else here.
 */
#include "runtime/budget.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "base/logger.h"

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
  b->cache = set->cache;
  /* (Set in core too: a checkpoint stages as many blocks at once.) */
  int io = set->io_threads < 1 ? 1 : set->io_threads;
  b->ahead_max = 2 * io < BLK__BUDGET_AHEAD_MAX ? 2 * io : BLK__BUDGET_AHEAD_MAX;
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
  int rc = blk__storage_create(&b->storage, dir, rank, set->compression_level);
  /* Queues are read back once, mostly within the operation: time is all
   * their compression could buy. */
  if (!rc) blk__storage_transient(b->storage, BLK__RECORD_QUEUE);
  if (!rc) rc = blk__io_create(&b->io, b->storage, set->io_threads, set->context);
  return rc;
}

void blk__budget_free(blk__budget *b) {
  blk__io_destroy(b->io); /* (nothing is under way: every operation flushes) */
  b->io = NULL;
  blk__storage_destroy(b->storage);
  b->storage = NULL;
}

int blk__budget_active(const blk__budget *b) {
  return b->max_blocks > 0 || b->max_bytes > 0;
}

int blk__budget_may_swap(const blk__budget *b) {
  const int count = blk__table_count(b->table);
  if (b->max_bytes > 0) return 1;
  return b->max_blocks > 0 && (b->max_blocks < count || b->resident < count);
}

static int over_budget(const blk__budget *b, int extra_blocks, size_t extra_bytes) {
  if (b->max_blocks && b->resident + b->lent + extra_blocks > b->max_blocks) return 1;
  if (b->max_bytes && b->resident > 0 && b->resident_bytes + extra_bytes > b->max_bytes) return 1;
  return 0;
}

int blk__budget_keep_queue(blk__budget *b, size_t bytes) {
  if (!b->storage || bytes == 0 || bytes < b->queue_bytes) return 0;
  if (b->queues_kept + bytes > (size_t)BLK__BUDGET_KEPT * b->saved_max) return 0;
  b->queues_kept += bytes;
  return 1;
}

int blk__budget_spill_queue(blk__budget *b, int gid, blk_buffer *q, blk__record *rec) {
  if (!b->storage || q->size == 0 || q->size < b->queue_bytes || rec->stored) return BLK_OK;
  int rc = blk__storage_put(b->storage, gid, BLK__RECORD_QUEUE, q->data, q->size, 0, rec);
  if (rc) return rc;
  blk__buffer_cache_give(b->cache, q); /* (the cache holds at most its cap) */
  b->queues_spilled++;
  return BLK_OK;
}

int blk__budget_restore_stored(blk__budget *b, blk_buffer *q, blk__record *rec) {
  /* Into memory a spilled queue gave back, if the cache holds some: get
   * reads into q's capacity, and fresh memory would fault in while the
   * driver waits. (Without it get allocates, and says so if it cannot.) */
  (void)blk__buffer_cache_reserve(b->cache, q, (size_t)rec->raw);
  int rc = blk__storage_get(b->storage, rec, q);
  if (rc) return rc;
  blk__storage_release(b->storage, rec);
  memset(rec, 0, sizeof *rec);
  b->queues_restored++;
  return BLK_OK;
}

void blk__budget_drop_stored(blk__budget *b, blk__record *rec) {
  blk__storage_release(b->storage, rec);
  memset(rec, 0, sizeof *rec);
}

/* Raises a job's error again as this thread's (the detail was the I/O
 * thread's). */
static int job_error(const blk__io_job *job) {
  return blk__fail(job->rc, "%s", job->why);
}

/* Takes a finished job in. A write: the block's record from now on, or,
 * if it failed, its bytes stay held in memory (returned: the caller tells
 * it). A read ahead: the bytes held for the load; one that failed is
 * dropped, and the load reads again and says why. */
static int finish_job(blk__budget *b, blk__io_job *job) {
  blk__block *blk = blk__table_at(b->table, job->lid);
  int rc = BLK_OK;
  if (blk->job == job) blk->job = NULL;
  if (job->op == BLK__IO_PUT) {
    b->behind--;
    if (job->cancelled) { /* loaded again from its bytes meanwhile */
      /* The record holds those bytes: the block keeps it (see the top),
       * unless it went out again meanwhile or has one. */
      if (!job->rc && job->rec.summed && blk->resident && !blk->rec.stored)
        blk->rec = job->rec;
      else if (!job->rc)
        blk__storage_release(b->storage, &job->rec);
    } else if (job->rc) {
      blk_buffer_swap(&blk->held, &job->bytes);
      blk->has_held = 1;
      rc = job_error(job);
    } else {
      blk->rec = job->rec;
    }
  } else if (!job->rc) {
    blk_buffer_swap(&blk->held, &job->bytes);
    blk->has_held = blk->held_ahead = 1;
  } else {
    b->ahead--;
  }
  blk_buffer_free(&job->bytes);
  free(job);
  return rc;
}

/* Takes in finished jobs (with wait, at least one if any is under way);
 * a failed write is told, or returned when nobody is told. */
static int take_jobs(blk__budget *b, int wait) {
  int first = BLK_OK;
  blk__io_job *job;
  while ((job = blk__io_done(b->io, wait))) {
    int lid = job->lid;
    int rc = finish_job(b, job);
    if (rc && b->on_error)
      b->on_error(b->ctx, lid, rc);
    else if (rc && !first)
      first = rc;
    wait = 0;
  }
  return first;
}

void blk__budget_poll(blk__budget *b) {
  if (b->io) take_jobs(b, 0);
}

int blk__budget_flush(blk__budget *b) {
  int first = BLK_OK;
  while (blk__io_pending(b->io)) {
    int rc = take_jobs(b, 1);
    if (rc && !first) first = rc;
  }
  return first;
}

/* Writes saved (taking its bytes) as lid's record: behind, on the I/O
 * thread, or here when there is none (or no memory for the job). A
 * failure here keeps the bytes held: nothing is lost. */
static int write_out(blk__budget *b, int lid, blk_buffer *saved) {
  blk__block *blk = blk__table_at(b->table, lid);
  blk__io_job *job = b->io ? blk__calloc(1, sizeof *job) : NULL;
  const int over = !blk__storage_in_memory(b->storage); /* (over the record it kept) */
  if (job) {
    *job = (blk__io_job){.op = BLK__IO_PUT,
                         .lid = lid,
                         .gid = blk->gid,
                         .kind = BLK__RECORD_BLOCK,
                         .shuffle = b->shuffle,
                         .rec = blk->rec,
                         .over = over};
    memset(&blk->rec, 0, sizeof blk->rec); /* (the job's until it is done) */
    blk_buffer_swap(&job->bytes, saved);
    blk->job = job;
    blk__io_submit(b->io, job);
    b->behind++;
    /* Bounded: the bytes under way are memory the budget does not count. */
    int rc = BLK_OK;
    while (b->behind > BLK__BUDGET_BEHIND && !rc) rc = take_jobs(b, 1);
    return rc;
  }
  int rc = over ? blk__storage_put_over(b->storage, blk->gid, BLK__RECORD_BLOCK, saved->data,
                                        saved->size, b->shuffle, &blk->rec, NULL)
                : blk__storage_put(b->storage, blk->gid, BLK__RECORD_BLOCK, saved->data,
                                   saved->size, b->shuffle, &blk->rec);
  if (rc) {
    blk_buffer_swap(&blk->held, saved);
    blk->has_held = 1;
  }
  return rc;
}

/* Saves block lid and destroys it; its bytes go to storage (write_out).
 * A save that fails leaves the block as it was. */
static int evict(blk__budget *b, int lid) {
  const blk__block_fns *fns = &b->table->fns;
  blk__block *blk = blk__table_at(b->table, lid);
  blk_buffer saved = BLK_BUFFER_INIT;
  /* evict may move the block's memory into saved: destroy follows. */
  int rc = fns->evict ? fns->evict(&saved, blk->data, blk->gid, fns->user)
                      : fns->save(&saved, blk->data, blk->gid, fns->user);
  if (rc || saved.error) {
    rc = blk__fail(BLK_ECALLBACK, "budget: the %s callback failed for gid %d (code %d)",
                   fns->evict ? "evict" : "save", blk->gid, rc ? rc : saved.error);
    blk_buffer_free(&saved);
    return rc;
  }
  /* Its large queues go with it; a queue that fails to write simply stays
   * in memory. */
  for (int i = 0; i < blk->nin; i++)
    blk__budget_spill_queue(b, blk->gid, &blk->in[i], &blk->in_rec[i]);
  for (int i = 0; i < blk->nout; i++)
    blk__budget_spill_queue(b, blk->gid, &blk->out[i], &blk->out_rec[i]);
  size_t raw = saved.size;
  if (raw > b->saved_max) b->saved_max = raw;
  fns->destroy(blk->data, blk->gid, fns->user);
  blk->data = NULL;
  blk->resident = 0;
  b->resident--;
  b->resident_bytes -= blk->bytes;
  blk->bytes = 0;
  b->evictions++;
  BLK__LOG(BLK_LOG_DEBUG, "budget: evicted gid %d (%zu bytes)", blk->gid, raw);
  rc = write_out(b, lid, &saved);
  blk_buffer_free(&saved);
  return rc;
}

/* The unpinned resident block other than lid to evict, skipping blocks
 * marked in keep (may be NULL): the one needed furthest in the future,
 * the least recently used of those; -1 if none. */
static int victim(const blk__budget *b, int lid, const unsigned char *keep) {
  const blk__table *t = b->table;
  int best = -1;
  uint64_t best_next = 0;
  for (int i = 0; i < t->count; i++) {
    const blk__block *c = blk__table_at(t, i);
    if (i == lid || !c->resident || c->pins || (keep && keep[i])) continue;
    uint64_t next = b->future ? b->future(b->ctx, i) : 0;
    if (best < 0 || next > best_next ||
        (next == best_next && c->last_use < blk__table_at(t, best)->last_use)) {
      best = i;
      best_next = next;
    }
  }
  return best;
}

int blk__budget_sooner_victim(const blk__budget *b, int lid, uint64_t lid_next) {
  if (!b->future || blk__table_at(b->table, lid)->resident || !over_budget(b, 1, 0)) return -1;
  int v = victim(b, lid, NULL);
  return v >= 0 && b->future(b->ctx, v) < lid_next ? v : -1;
}

int64_t blk__budget_load_ns(const blk__budget *b) {
  if (!b->storage) return 0;
  blk__storage_stats st;
  blk__storage_stats_get(b->storage, &st);
  if (!st.records_read) return 0;
  return (int64_t)(1e9 * (st.seconds_read + st.seconds_decompress) / (double)st.records_read);
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

/* lid's saved bytes, in *saved: taken from memory when they are there (a
 * write under way is copied: its bytes are the I/O threads'), else read
 * and decoded here. A read ahead under way is waited for. */
static int saved_bytes(blk__budget *b, blk__block *blk, blk_buffer *saved) {
  while (blk->job && blk->job->op == BLK__IO_GET) take_jobs(b, 1);
  if (blk->job) { /* a write under way: its result is not wanted now */
    blk__io_job *job = blk->job;
    if (blk_buffer_write(saved, job->bytes.data, job->bytes.size))
      return blk__fail(BLK_ENOMEM, "budget: no memory to load gid %d (%zu bytes)", blk->gid,
                       job->bytes.size);
    job->cancelled = 1;
    blk->job = NULL;
    return BLK_OK;
  }
  if (blk->has_held) {
    blk_buffer_swap(saved, &blk->held);
    blk_buffer_rewind(saved);
    blk->has_held = 0;
    if (blk->held_ahead) b->ahead--;
    blk->held_ahead = 0;
    return BLK_OK;
  }
  return blk__storage_get(b->storage, &blk->rec, saved);
}

/* Creates and loads block lid from its saved bytes, and brings its queues
 * back. On failure the bytes stay where they were (held, or the record). */
static int load(blk__budget *b, int lid) {
  const blk__block_fns *fns = &b->table->fns;
  blk__block *blk = blk__table_at(b->table, lid);
  blk_buffer saved = BLK_BUFFER_INIT;
  void *data = NULL;
  int rc = saved_bytes(b, blk, &saved);
  if (rc) goto exit;
  if ((rc = fns->create(&data, blk->gid, fns->user))) {
    rc = blk__fail(BLK_ECALLBACK, "budget: the create callback failed for gid %d (code %d)",
                   blk->gid, rc);
    goto exit;
  }
  /* load may take the bytes' memory (master.h); then only a record keeps them. */
  const size_t saved_size = saved.size;
  if ((rc = fns->load(data, &saved, blk->gid, fns->user))) {
    fns->destroy(data, blk->gid, fns->user);
    const int lost = saved_size > 0 && saved.size == 0 && !blk->rec.stored;
    rc = blk__fail(BLK_ECALLBACK, "budget: the load callback failed for gid %d (code %d)%s",
                   blk->gid, rc, lost ? " after taking its saved bytes: the block is lost" : "");
    goto exit;
  }
  for (int i = 0; i < blk->nin && !rc; i++)
    rc = blk__budget_restore_queue(b, &blk->in[i], &blk->in_rec[i]);
  for (int i = 0; i < blk->nout && !rc; i++)
    rc = blk__budget_restore_queue(b, &blk->out[i], &blk->out_rec[i]);
  if (rc) {
    /* Bytes load took, and no record has: save them again before the
     * block goes, so that they are held (exit) for a later load. */
    if (saved_size > 0 && saved.size == 0 && !blk->rec.stored) {
      int src = fns->save(&saved, data, blk->gid, fns->user);
      if (src || saved.error) {
        blk_buffer_clear(&saved);
        BLK__LOG(BLK_LOG_ERROR, "budget: gid %d is lost: saving it again failed (code %d)",
                 blk->gid, src);
      }
    }
    fns->destroy(data, blk->gid, fns->user);
    goto exit;
  }
  if (!blk->rec.summed || blk__storage_in_memory(b->storage)) { /* (kept otherwise: the top) */
    blk__storage_release(b->storage, &blk->rec);
    memset(&blk->rec, 0, sizeof blk->rec);
  }
  blk->data = data;
  blk->resident = 1;
  blk->bytes = block_bytes(b, blk);
  b->resident++;
  b->resident_bytes += blk->bytes;
  if (b->resident > b->resident_peak) b->resident_peak = b->resident;
  b->loads++;
  BLK__LOG(BLK_LOG_DEBUG, "budget: loaded gid %d", blk->gid);
exit:
  /* Not loaded: bytes taken from memory go back there. */
  if (rc && saved.size && !blk->rec.stored && !blk->has_held) {
    blk_buffer_swap(&blk->held, &saved);
    blk->has_held = 1;
  }
  blk_buffer_free(&saved);
  return rc;
}

/* The size of lid's saved bytes, wherever they are. */
static size_t saved_size(const blk__block *blk) {
  if (blk->job && blk->job->op == BLK__IO_PUT) return blk->job->bytes.size;
  if (blk->has_held) return blk->held.size;
  return (size_t)blk->rec.raw;
}

/* At debug level: the failed write that caused it is returned, on every
 * rank, by the operation (a warning per load printed it dozens of times). */
static void log_overrun(const blk__budget *b, int lid) {
  BLK__LOG(BLK_LOG_DEBUG, "budget: loading gid %d over the budget of %d blocks: %s",
           blk__table_at(b->table, lid)->gid, b->max_blocks, blk_last_error());
}

int blk__budget_acquire(blk__budget *b, int lid) {
  blk__block *blk = blk__table_at(b->table, lid);
  int rc = BLK_OK;
  if (!blk->resident) {
    blk__budget_unlend(b, lid); /* the places its messages held are its own now */
    rc = make_room(b, lid, saved_size(blk), NULL);
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

int blk__budget_lend(blk__budget *b, int lid, size_t bytes) {
  /* One place stays the blocks': a ready block can always come in, so
   * lending never stops the operation (the places come back as the
   * blocks the messages wait for are loaded). */
  if (!b->storage || !b->future || b->max_blocks <= 0 || b->max_bytes > 0 ||
      2 * bytes < b->saved_max || b->lent + 1 >= b->max_blocks)
    return 0;
  if (over_budget(b, 1, 0)) {
    int v = victim(b, lid, NULL);
    if (v < 0 || b->future(b->ctx, v) != UINT64_MAX) return 0;
    int rc = evict(b, v);
    if (rc) return rc;
  }
  blk__table_at(b->table, lid)->lent++;
  b->lent++;
  return 1;
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

int blk__budget_prefetch(blk__budget *b, int lid) {
  blk__block *blk = blk__table_at(b->table, lid);
  if (!b->io || blk->resident || blk->has_held || blk->job || !blk->rec.stored ||
      b->ahead >= b->ahead_max)
    return 0;
  blk__io_job *job = blk__calloc(1, sizeof *job);
  if (!job) return 0; /* the load reads it then */
  *job = (blk__io_job){.op = BLK__IO_GET, .lid = lid, .gid = blk->gid, .rec = blk->rec};
  blk->job = job;
  blk__io_submit(b->io, job);
  b->ahead++;
  return 1;
}

int blk__budget_added(blk__budget *b, int lid) {
  blk__block *blk = blk__table_at(b->table, lid);
  blk->last_use = ++b->clock;
  blk->bytes = blk__budget_active(b) ? block_bytes(b, blk) : 0;
  b->resident++;
  b->resident_bytes += blk->bytes;
  if (!blk__budget_active(b)) return BLK_OK;
  /* The new block counts like any other: make room by evicting the others. */
  int rc = BLK_OK;
  while (over_budget(b, 0, 0) && !rc) {
    int v = victim(b, -1, NULL);
    if (v < 0) break;
    rc = evict(b, v);
  }
  if (b->resident > b->resident_peak) b->resident_peak = b->resident;
  /* Its writes are this call's: their errors are returned here. */
  int frc = blk__budget_flush(b);
  return rc ? rc : frc;
}
