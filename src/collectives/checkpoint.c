/*
 * checkpoint.c: blk_checkpoint_write and blk_checkpoint_read, every block
 * of every rank into one file with MPI-IO, and back on any rank count.
 * The format is checkpoint_format.h's (docs/checkpoint.md).
 *
 * Each call is one operation of the master (runtime/operation.h): a
 * failure is recorded where it happens with blk__op_fail, the protocol
 * goes on, and the closing agreement makes the earliest one every rank's.
 * Between the steps the ranks take together, small all-reduces carry a
 * "something failed" flag, so that no rank starts a collective step the
 * others skip: every buffer a later collective step needs is allocated
 * before a flag that says whether the step happens.
 *
 * Write. Rank 0 broadcasts its path and the extra blob's size; an
 * all-reduce of (failed, local blocks) gives the block count N. Rank 0
 * removes a stale <path>.tmp before that, and all open it after (ROMIO's
 * open agrees its outcome over the communicator: every rank opens, or
 * none). Then rounds: each rank stages records (meta, links, saved bytes)
 * of its next blocks into one buffer until it holds blk__ckpt_round_bytes()
 * (the blocks come in through the scheduler, runtime/schedule.h, so
 * out-of-core blocks are loaded within the budget; save runs in the task's
 * prepare, on this thread, as it does out of core); an exclusive scan of
 * the staged bytes gives each rank its offset and an all-reduce of (bytes,
 * blocks left, failed) the round's length and whether to go on; every rank
 * writes its part with MPI_File_write_at_all, one call per GiB of the
 * round. A failure anywhere stops every rank after that round's
 * all-reduce. Rank 0 then gathers the index entries (32 bytes a block),
 * checks that every gid is there once, and writes the index, the extra
 * bytes and the header; all sync and close the file; an all-reduce says
 * whether anything failed, and rank 0 renames the file to path, or
 * removes it.
 *
 * Read. Rank 0 reads and checks the header, the extra bytes and the index
 * and broadcasts them (after an all-reduce that every rank has room for
 * them). Each rank then reads only its own blocks' records with
 * independent MPI_File_read_at: the meta (checked against the index's
 * checksum), then the saved bytes (against the meta's) straight into the
 * memory load gets. A block that fails is named and skipped; the others
 * are read.
 *
 * MPI failing in one of these collectives (not in a file's I/O) stops the
 * job, as MPI failing mid-message does elsewhere (docs/errors.md): the
 * other ranks would wait in the next one.
 *
 * Cost (p ranks, N blocks, B bytes saved): write: B / p bytes per rank
 * through MPI-IO, one memcpy of each block's saved bytes into its round,
 * per round an exclusive scan and an all-reduce (2 alpha log p) and the
 * collective write; 32 N bytes gathered to rank 0; eight more small
 * collectives (the open, sync and close among them) and the agreement.
 * Read: the index (32 N bytes) broadcast, each rank's own records, eight
 * small collectives (the open and close among them) and the agreement.
 *
 * The driver thread only; MPI collectives and MPI-IO, never point-to-point
 * (runtime/comm.c does that).
 */
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/copy.h"
#include "base/fail.h"
#include "base/memory_limit.h"
#include "blk/checkpoint.h"
#include "collectives/checkpoint_format.h"
#include "master/master_state.h"
#include "runtime/callback.h"
#include "runtime/schedule.h"

#define PATH_MAX_BYTES 4096 /* with the terminating NUL */
#define TMP_SUFFIX ".tmp"

/* What rank 0 tells every rank first. */
typedef struct shared {
  int64_t path_bytes; /* < 0: rank 0 has no usable path */
  int64_t extra_bytes;
  char path[PATH_MAX_BYTES];
} shared;

typedef struct ckpt {
  blk_master *m;
  blk__op *o;
  MPI_Comm comm;
  int rank, size;
  shared sh;
  char tmp[PATH_MAX_BYTES + sizeof TMP_SUFFIX];
  MPI_File fh;
  int open;
} ckpt;

static void ckpt_init(ckpt *c, blk_master *m) {
  memset(c, 0, sizeof *c);
  c->m = m;
  c->o = &m->op;
  c->comm = blk_master_comm(m);
  c->rank = blk_master_rank(m);
  c->size = blk_master_size(m);
  c->fh = MPI_FILE_NULL;
}

static int failed_here(const ckpt *c) {
  return c->o->failure.code != 0;
}

/* MPI's text for a return code. */
static void mpi_text(int mpi_rc, char *text) {
  int len = 0;
  if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS)
    snprintf(text, MPI_MAX_ERROR_STRING, "MPI error %d", mpi_rc);
}

/* A collective step of the ranks failed in MPI: stop the job (the other
 * ranks would wait in the next step). */
static void coll(int mpi_rc, const char *what) {
  if (mpi_rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  mpi_text(mpi_rc, text);
  blk__panic("checkpoint: %s failed: %s", what, text);
}

/* Records a failure of the file's I/O: MPI's text ends the detail. */
static void fail_io(ckpt *c, int gid, int mpi_rc, const char *fmt, ...) BLK__PRINTF(4, 5);
static void fail_io(ckpt *c, int gid, int mpi_rc, const char *fmt, ...) {
  char what[BLK__FAILURE_WHAT], text[MPI_MAX_ERROR_STRING];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  mpi_text(mpi_rc, text);
  blk__op_fail(c->o, BLK_EIO, gid, -1, "%s: %s", what, text);
}

/* Whether any rank has failed so far (this one included). Collective. */
static int any_failed(ckpt *c) {
  int mine = failed_here(c), any = 1;
  coll(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, c->comm), "MPI_Allreduce");
  return any;
}

/* Rank 0's path (and extra size) to every rank. Collective. */
static void share_path(ckpt *c, const char *path, size_t extra_bytes) {
  if (c->rank == 0) {
    c->sh.path_bytes = -1;
    c->sh.extra_bytes = (int64_t)extra_bytes;
    size_t n = path ? strlen(path) : 0;
    if (!path || n == 0)
      blk__op_fail(c->o, BLK_EINVAL, -1, -1, "the path is %s", path ? "empty" : "NULL");
    else if (n >= PATH_MAX_BYTES)
      blk__op_fail(c->o, BLK_EINVAL, -1, -1, "the path is %zu bytes long; at most %d", n,
                   PATH_MAX_BYTES - 1);
    else if ((uint64_t)extra_bytes > (uint64_t)INT64_MAX / 2)
      blk__op_fail(c->o, BLK_EINVAL, -1, -1, "%zu extra bytes", extra_bytes);
    else {
      memcpy(c->sh.path, path, n + 1);
      c->sh.path_bytes = (int64_t)n;
    }
  }
  coll(MPI_Bcast(&c->sh, (int)sizeof c->sh, MPI_BYTE, 0, c->comm), "MPI_Bcast of the path");
  c->sh.path[PATH_MAX_BYTES - 1] = '\0';
  snprintf(c->tmp, sizeof c->tmp, "%s%s", c->sh.path, TMP_SUFFIX);
}

/* MPI_File_open with its errors returned whatever the program's default
 * for files is, and the file's calls' errors returned too. */
static int open_file(ckpt *c, const char *name, int amode) {
  MPI_Errhandler old = MPI_ERRHANDLER_NULL;
  MPI_File_get_errhandler(MPI_FILE_NULL, &old);
  MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
  int rc = MPI_File_open(c->comm, name, amode, MPI_INFO_NULL, &c->fh);
  MPI_File_set_errhandler(MPI_FILE_NULL, old);
  MPI_Errhandler_free(&old);
  if (rc == MPI_SUCCESS) {
    c->open = 1;
    MPI_File_set_errhandler(c->fh, MPI_ERRORS_RETURN);
  }
  return rc;
}

/* Collective. */
static void close_file(ckpt *c, const char *name) {
  if (!c->open) return;
  int rc = MPI_File_close(&c->fh);
  c->open = 0;
  if (rc != MPI_SUCCESS) fail_io(c, -1, rc, "closing %s", name);
}

/* n bytes at offset, by this rank alone, in calls of at most
 * BLK__CKPT_CHUNK bytes: 0 or MPI's code; *done gets the bytes read (fewer
 * than n at the end of the file). */
static int read_at(ckpt *c, uint64_t offset, void *data, uint64_t n, uint64_t *done) {
  *done = 0;
  while (*done < n) {
    uint64_t left = n - *done;
    int count = (int)(left < BLK__CKPT_CHUNK ? left : BLK__CKPT_CHUNK), got = 0;
    MPI_Status st;
    int rc = MPI_File_read_at(c->fh, (MPI_Offset)(offset + *done), (char *)data + *done, count,
                              MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) return rc;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got <= 0) break; /* the end of the file */
    *done += (uint64_t)got;
  }
  return MPI_SUCCESS;
}

static int write_at(ckpt *c, uint64_t offset, const void *data, uint64_t n) {
  for (uint64_t at = 0; at < n;) {
    uint64_t left = n - at;
    int count = (int)(left < BLK__CKPT_CHUNK ? left : BLK__CKPT_CHUNK);
    MPI_Status st;
    int rc = MPI_File_write_at(c->fh, (MPI_Offset)(offset + at), (const char *)data + at, count,
                               MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) return rc;
    at += (uint64_t)count;
  }
  return MPI_SUCCESS;
}

/* n bytes at data from rank 0 to every rank, in pieces of at most 1 GiB.
 * Collective. */
static void bcast_bytes(ckpt *c, void *data, uint64_t n) {
  for (uint64_t at = 0; at < n; at += BLK__CKPT_CHUNK) {
    uint64_t left = n - at;
    int count = (int)(left < BLK__CKPT_CHUNK ? left : BLK__CKPT_CHUNK);
    coll(MPI_Bcast((char *)data + at, count, MPI_BYTE, 0, c->comm), "MPI_Bcast");
  }
}

/* ---- write -------------------------------------------------------------- */

typedef struct writer writer;

typedef struct stage_arg {
  writer *w;
  int lid;
} stage_arg;

struct writer {
  ckpt c;
  int nblocks;            /* over all ranks */
  int nlocal;             /* this rank's */
  blk_buffer round;       /* the records this round stages */
  blk__ckpt_entry *mine;  /* this rank's index entries, as staged */
  unsigned char *encoded; /* the same, encoded, for the gather */
  int nmine, round_first; /* entries so far; the first of this round */
  stage_arg *args;        /* per lid */
  void **argp;            /* per lid: &args[lid] */
  /* Rank 0: the ranks' block counts and where their entries go, what they
   * sent, the index by gid, and each gid's rank. */
  int *counts, *displs;
  unsigned char *gathered, *index;
  int *owner;
  MPI_Datatype entry; /* BLK__CKPT_ENTRY_BYTES bytes */
  uint64_t data_offset, data_end;
};

/* The scheduler's task: the work was done in prepare (stage), on this
 * thread, where the user's save runs out of core too. */
static void staged(void *arg) {
  (void)arg;
}

/* Appends lid's record to the round; on the driver, with the block in
 * memory and pinned. */
static int stage(void *arg) {
  stage_arg *a = arg;
  writer *w = a->w;
  blk_master *m = w->c.m;
  const blk__block *b = blk__table_at(&m->table, a->lid);
  if (b->gid >= w->nblocks)
    return blk__fail(BLK_EINVAL,
                     "gid %d, but the ranks hold %d blocks: a checkpoint needs gids 0..%d", b->gid,
                     w->nblocks, w->nblocks - 1);
  for (int i = 0; i < b->nlinks; i++)
    if (b->links[i].gid < 0 || b->links[i].gid >= w->nblocks)
      return blk__fail(BLK_EINVAL, "its link %d names gid %d, outside the blocks 0..%d", i,
                       b->links[i].gid, w->nblocks - 1);
  blk_buffer saved = BLK_BUFFER_INIT;
  blk__clear_error();
  int rc = m->cfg.save(&saved, b->data, b->gid, m->cfg.user);
  if (rc || saved.error) {
    rc = blk__callback_error("save callback", rc ? rc : saved.error);
    blk_buffer_free(&saved);
    return rc;
  }
  size_t meta = blk__ckpt_meta_bytes(b->nlinks), at = w->round.size;
  unsigned char *dst = blk_buffer_append(&w->round, meta + saved.size);
  if (!dst) {
    blk_buffer_free(&saved);
    return blk__fail(BLK_ENOMEM, "no memory to stage %zu bytes of records", at + meta + saved.size);
  }
  blk__copy(dst + meta, saved.data, saved.size);
  uint64_t sum = blk__ckpt_checksum(BLK__CKPT_PART_DATA, b->gid, saved.data, saved.size);
  blk__ckpt_meta_encode(dst, b->gid, b->links, b->nlinks, saved.size, sum);
  w->mine[w->nmine++] =
      (blk__ckpt_entry){b->gid, b->nlinks, at, meta + saved.size,
                        blk__ckpt_checksum(BLK__CKPT_PART_META, b->gid, dst, meta)};
  blk_buffer_free(&saved);
  return BLK_OK;
}

/* A block that could not be staged (stage failed, or it could not be
 * loaded), or an eviction that failed: its failure, now. */
static void stage_failed(void *ctx, int lid, int code) {
  writer *w = ctx;
  blk__op_fail(w->c.o, code, blk__table_at(&w->c.m->table, lid)->gid, -1, "%s", blk_last_error());
}

/* Writes this round's records, every rank's after the ranks' before it.
 * Collective. Returns 1 when the writing stops (a failure anywhere), 0 to
 * go on; *more says whether any rank has blocks left. */
static int write_round(writer *w, int left, int *more) {
  ckpt *c = &w->c;
  int64_t mine[3] = {(int64_t)w->round.size, left, failed_here(c)}, sum[3], before = 0;
  coll(MPI_Exscan(&mine[0], &before, 1, MPI_INT64_T, MPI_SUM, c->comm), "MPI_Exscan");
  coll(MPI_Allreduce(mine, sum, 3, MPI_INT64_T, MPI_SUM, c->comm), "MPI_Allreduce");
  if (c->rank == 0) before = 0; /* (MPI leaves rank 0's undefined) */
  *more = sum[1] > 0;
  if (sum[2] > 0) return 1;
  uint64_t offset = w->data_end + (uint64_t)before, total = (uint64_t)sum[0];
  /* As many calls as the round's bytes need in all, so every rank makes
   * the same number whatever its own share. */
  uint64_t calls = (total + BLK__CKPT_CHUNK - 1) / BLK__CKPT_CHUNK;
  for (uint64_t k = 0; k < calls; k++) {
    uint64_t from = k * BLK__CKPT_CHUNK, n = 0;
    if (from < w->round.size) n = w->round.size - from;
    if (n > BLK__CKPT_CHUNK) n = BLK__CKPT_CHUNK;
    MPI_Status st;
    int rc = MPI_File_write_at_all(c->fh, (MPI_Offset)(offset + from),
                                   n ? w->round.data + from : NULL, (int)n, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS && !failed_here(c))
      fail_io(c, -1, rc, "writing %llu bytes of records at offset %llu of %s",
              (unsigned long long)n, (unsigned long long)(offset + from), c->tmp);
  }
  for (int i = w->round_first; i < w->nmine; i++) w->mine[i].offset += offset;
  w->round_first = w->nmine;
  w->data_end += total;
  blk_buffer_clear(&w->round);
  return 0;
}

/* Stages and writes every block, round by round. Collective. Returns 1 if
 * the writing stopped for a failure (on every rank alike). */
static int write_blocks(writer *w) {
  ckpt *c = &w->c;
  blk_master *m = c->m;
  int n = w->nlocal, sched = 0;
  blk__sched s;
  if (!failed_here(c)) {
    if (blk__sched_init(&s, &m->budget, m->pool, c->o, (blk__task_kind)staged, staged, stage,
                        w->argp)) {
      blk__op_fail(c->o, BLK_ENOMEM, -1, -1, "%s", blk_last_error());
    } else {
      sched = 1;
      s.on_error = stage_failed;
      s.on_error_ctx = w;
    }
  }
  size_t cap = blk__ckpt_round_bytes();
  int next = 0, pending = 0, more = 1, stop = 0, lids[64], ran[64];
  while (more && !stop) {
    while (sched) {
      /* Ready at once while a round stages: one at work and the ones the
       * budget reads ahead. */
      while (pending < 1 + m->budget.ahead_max && next < n && w->round.size < cap &&
             !failed_here(c)) {
        blk__sched_ready(&s, next++, 0, 1);
        pending++;
      }
      if (!pending) break;
      blk__sched_pump(&s);
      size_t got = blk__sched_collect(&s, lids, ran, 64, -1);
      for (size_t i = 0; i < got; i++)
        if (ran[i]) blk__op_count_callback(c->o);
      pending -= (int)got;
    }
    stop = write_round(w, next < n && !failed_here(c), &more);
  }
  if (sched) {
    blk__sched_drain(&s); /* its writes' failures are this operation's */
    blk__sched_free(&s);
  }
  return stop;
}

/* Rank 0: every rank's entries into the index (by gid, each once), then
 * the index, the extra bytes and the header into the file. */
static void write_index(writer *w, const void *extra) {
  ckpt *c = &w->c;
  int nb = w->nblocks;
  for (int g = 0; g < nb; g++) w->owner[g] = -1;
  for (int r = 0, at = 0; r < c->size; r++) {
    for (int i = 0; i < w->counts[r]; i++, at++) {
      const unsigned char *sent = w->gathered + (size_t)at * BLK__CKPT_ENTRY_BYTES;
      blk__ckpt_entry e;
      blk__ckpt_entry_decode(&e, sent);
      if (e.gid < 0 || e.gid >= nb) /* (each rank checked its own) */
        blk__panic("checkpoint: rank %d sent gid %d of %d", r, e.gid, nb);
      if (w->owner[e.gid] >= 0) {
        blk__op_fail(c->o, BLK_EINVAL, e.gid, -1,
                     "gid %d is on ranks %d and %d: a checkpoint needs each gid on one rank", e.gid,
                     w->owner[e.gid], r);
        return;
      }
      w->owner[e.gid] = r;
      memcpy(w->index + (size_t)e.gid * BLK__CKPT_ENTRY_BYTES, sent, BLK__CKPT_ENTRY_BYTES);
    }
  }
  /* nb entries each on one rank, and the counts add up to nb: every gid. */
  uint64_t index_bytes = (uint64_t)nb * BLK__CKPT_ENTRY_BYTES,
           extra_bytes = (uint64_t)c->sh.extra_bytes;
  blk__ckpt_header h = {
      .version = BLK__CKPT_VERSION,
      .writer_ranks = (uint32_t)c->size,
      .nblocks = (uint64_t)nb,
      .extra_offset = BLK__CKPT_HEADER_BYTES,
      .extra_bytes = extra_bytes,
      .extra_checksum = blk__ckpt_checksum(BLK__CKPT_PART_EXTRA, -1, extra, (size_t)extra_bytes),
      .index_offset = w->data_end,
      .index_bytes = index_bytes,
      .index_checksum = blk__ckpt_checksum(BLK__CKPT_PART_INDEX, -1, w->index, (size_t)index_bytes),
      .data_offset = w->data_offset,
      .file_bytes = w->data_end + index_bytes};
  unsigned char head[BLK__CKPT_HEADER_BYTES];
  blk__ckpt_header_encode(head, &h);
  int rc = write_at(c, h.index_offset, w->index, index_bytes);
  if (rc == MPI_SUCCESS) rc = write_at(c, h.extra_offset, extra, extra_bytes);
  if (rc == MPI_SUCCESS) rc = write_at(c, 0, head, sizeof head);
  if (rc != MPI_SUCCESS) fail_io(c, -1, rc, "writing the index and header of %s", c->tmp);
}

/* Every rank's entries to rank 0, which writes the index and header.
 * Collective; every buffer it needs was allocated before the rounds. */
static void gather_index(writer *w, const void *extra) {
  ckpt *c = &w->c;
  for (int i = 0; i < w->nmine; i++)
    blk__ckpt_entry_encode(w->encoded + (size_t)i * BLK__CKPT_ENTRY_BYTES, &w->mine[i]);
  coll(MPI_Gather(&w->nmine, 1, MPI_INT, w->counts, 1, MPI_INT, 0, c->comm), "MPI_Gather");
  if (c->rank == 0)
    for (int r = 0, at = 0; r < c->size; r++) {
      w->displs[r] = at;
      at += w->counts[r];
    }
  coll(MPI_Gatherv(w->encoded, w->nmine, w->entry, w->gathered, w->counts, w->displs, w->entry, 0,
                   c->comm),
       "MPI_Gatherv of the index");
  if (c->rank == 0) write_index(w, extra);
}

/* What the rounds and the gather need, allocated before the rounds, whose
 * first all-reduce stops every rank if this failed on one. */
static void writer_setup(writer *w) {
  ckpt *c = &w->c;
  size_t n = (size_t)(w->nlocal ? w->nlocal : 1);
  if (blk__memory_check(n,
                        sizeof *w->args + sizeof *w->argp + sizeof *w->mine + BLK__CKPT_ENTRY_BYTES,
                        "records of %d blocks", w->nlocal) ||
      !(w->args = blk__malloc(
            n * (sizeof *w->args + sizeof *w->argp + sizeof *w->mine + BLK__CKPT_ENTRY_BYTES)))) {
    blk__op_fail(c->o, BLK_ENOMEM, -1, -1, "no memory for the records of %d blocks", w->nlocal);
    return;
  }
  w->mine = (blk__ckpt_entry *)(w->args + n);
  w->argp = (void **)(w->mine + n);
  w->encoded = (unsigned char *)(w->argp + n);
  for (int i = 0; i < w->nlocal; i++) {
    w->args[i] = (stage_arg){w, i};
    w->argp[i] = &w->args[i];
  }
  int rc = MPI_Type_contiguous(BLK__CKPT_ENTRY_BYTES, MPI_BYTE, &w->entry);
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&w->entry);
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    mpi_text(rc, text);
    blk__op_fail(c->o, BLK_EMPI, -1, -1, "an MPI datatype for the index: %s", text);
    return;
  }
  if (c->rank != 0) return;
  /* Rank 0: what it gathers, the index, and the owner of each gid. */
  size_t nb = (size_t)(w->nblocks ? w->nblocks : 1);
  size_t each = 2 * BLK__CKPT_ENTRY_BYTES + sizeof(int);
  if (blk__memory_check(nb, each, "the index of %d blocks", w->nblocks) ||
      !(w->gathered = blk__malloc(nb * each))) {
    blk__op_fail(c->o, BLK_ENOMEM, -1, -1, "no memory for the index of %d blocks", w->nblocks);
    return;
  }
  w->index = w->gathered + nb * BLK__CKPT_ENTRY_BYTES;
  w->owner = (int *)(w->index + nb * BLK__CKPT_ENTRY_BYTES);
}

static void run_write(writer *w, const char *path, const void *extra, size_t extra_bytes) {
  ckpt *c = &w->c;
  blk_master *m = c->m;
  w->nlocal = blk__table_count(&m->table);
  if (!m->cfg.save)
    blk__op_fail(c->o, BLK_EINVAL, -1, -1,
                 "writing a checkpoint needs a save callback in the config");
  if (c->rank == 0) {
    if (!extra && extra_bytes > 0)
      blk__op_fail(c->o, BLK_EINVAL, -1, -1, "extra is NULL but extra_bytes is %zu", extra_bytes);
    if (!(w->counts = blk__malloc((size_t)c->size * 2 * sizeof(int))))
      blk__op_fail(c->o, BLK_ENOMEM, -1, -1, "no memory for %d ranks' block counts", c->size);
    w->displs = w->counts ? w->counts + c->size : NULL;
  }
  share_path(c, path, extra_bytes);
  /* Rank 0 removes a temporary file a killed write may have left, before
   * anyone opens it (the all-reduce below orders the two). */
  if (c->rank == 0 && c->sh.path_bytes > 0) remove(c->tmp);
  int64_t mine[2] = {failed_here(c), w->nlocal}, sum[2];
  coll(MPI_Allreduce(mine, sum, 2, MPI_INT64_T, MPI_SUM, c->comm), "MPI_Allreduce");
  if (sum[0] > 0) return;
  if (sum[1] > INT32_MAX) { /* (every rank finds it; rank 0 says it) */
    if (c->rank == 0)
      blk__op_fail(c->o, BLK_EINVAL, -1, -1, "the ranks hold %lld blocks; at most %d",
                   (long long)sum[1], INT32_MAX);
    return;
  }
  w->nblocks = (int)sum[1];
  w->data_offset = w->data_end = BLK__CKPT_HEADER_BYTES + (uint64_t)c->sh.extra_bytes;
  writer_setup(w);
  int rc = open_file(c, c->tmp, MPI_MODE_CREATE | MPI_MODE_WRONLY);
  if (rc != MPI_SUCCESS) {
    fail_io(c, -1, rc, "cannot create %s", c->tmp);
    return;
  }
  if (!write_blocks(w)) gather_index(w, extra);
  /* Collective: every rank syncs, whatever failed. */
  rc = MPI_File_sync(c->fh);
  if (rc != MPI_SUCCESS && !failed_here(c)) fail_io(c, -1, rc, "syncing %s", c->tmp);
  close_file(c, c->tmp);
  int failed = any_failed(c);
  if (c->rank != 0) return;
  if (!failed && rename(c->tmp, c->sh.path) != 0)
    blk__op_fail(c->o, BLK_EIO, -1, -1, "cannot rename %s to %s: %s", c->tmp, c->sh.path,
                 strerror(errno));
  if (failed || failed_here(c)) remove(c->tmp);
}

int blk_checkpoint_write(blk_master *m, const char *path, const void *extra, size_t extra_bytes) {
  if (!m) return blk__fail(BLK_EINVAL, "checkpoint: write: the master is NULL");
  BLK__ENTER(m);
  blk__op_begin(&m->op, "checkpoint write", NULL, NULL);
  writer w;
  memset(&w, 0, sizeof w);
  ckpt_init(&w.c, m);
  w.entry = MPI_DATATYPE_NULL;
  run_write(&w, path, extra, extra_bytes);
  blk_buffer_free(&w.round);
  free(w.args);
  free(w.counts);
  free(w.gathered);
  if (w.entry != MPI_DATATYPE_NULL) MPI_Type_free(&w.entry);
  int rc = blk__op_close(&m->op);
  BLK__LEAVE();
  return rc;
}

/* ---- read --------------------------------------------------------------- */

typedef struct reader {
  ckpt c;
  const blk_assigner *a;
  blk__ckpt_header h;
  unsigned char *index; /* nblocks entries, by gid */
  blk_buffer extra;
} reader;

/* Reads n bytes at offset for what (a part of the file, named in the
 * detail): 0, or a failure recorded (BLK_EIO, also for bytes missing). */
static int read_part(ckpt *c, int gid, uint64_t offset, void *data, uint64_t n, const char *what) {
  uint64_t got = 0;
  int rc = read_at(c, offset, data, n, &got);
  if (rc != MPI_SUCCESS) {
    fail_io(c, gid, rc, "reading %s at offset %llu of %s", what, (unsigned long long)offset,
            c->sh.path);
    return BLK_EIO;
  }
  if (got != n) {
    blk__op_fail(c->o, BLK_EIO, gid, -1, "%s: reading %s at offset %llu, %llu of %llu bytes came",
                 c->sh.path, what, (unsigned long long)offset, (unsigned long long)got,
                 (unsigned long long)n);
    return BLK_EIO;
  }
  return BLK_OK;
}

/* Rank 0: the header, the extra bytes and the index, checked. */
static void read_head(reader *r) {
  ckpt *c = &r->c;
  const char *label = c->sh.path;
  MPI_Offset size = 0;
  int rc = MPI_File_get_size(c->fh, &size);
  if (rc != MPI_SUCCESS) {
    fail_io(c, -1, rc, "the size of %s", label);
    return;
  }
  unsigned char head[BLK__CKPT_HEADER_MAX];
  size_t hbytes = 0;
  uint64_t fbytes = (uint64_t)size;
  if (fbytes < BLK__CKPT_PREFIX_BYTES) {
    blk__op_fail(c->o, BLK_ECORRUPT, -1, -1, "%s is %llu bytes: too short to be a checkpoint",
                 label, (unsigned long long)fbytes);
    return;
  }
  if (read_part(c, -1, 0, head, BLK__CKPT_PREFIX_BYTES, "the header")) return;
  if (blk__ckpt_header_size(&hbytes, head, label)) {
    blk__op_fail(c->o, BLK_ECORRUPT, -1, -1, "%s", blk_last_error());
    return;
  }
  if (fbytes < hbytes) {
    blk__op_fail(c->o, BLK_ECORRUPT, -1, -1, "%s is %llu bytes, shorter than its header (%zu)",
                 label, (unsigned long long)fbytes, hbytes);
    return;
  }
  if (read_part(c, -1, 0, head, hbytes, "the header")) return;
  if ((rc = blk__ckpt_header_decode(&r->h, head, hbytes, fbytes, label))) {
    blk__op_fail(c->o, rc, -1, -1, "%s", blk_last_error());
    return;
  }
}

/* Rank 0, after read_head: the extra bytes and the index, checked. */
static void read_tables(reader *r) {
  ckpt *c = &r->c;
  const char *label = c->sh.path;
  if (read_part(c, -1, r->h.extra_offset, r->extra.data, r->h.extra_bytes, "the extra bytes") ||
      read_part(c, -1, r->h.index_offset, r->index, r->h.index_bytes, "the index"))
    return;
  if (blk__ckpt_checksum(BLK__CKPT_PART_EXTRA, -1, r->extra.data, r->h.extra_bytes) !=
      r->h.extra_checksum)
    blk__op_fail(c->o, BLK_ECORRUPT, -1, -1, "%s: the extra bytes fail their checksum", label);
  else if (blk__ckpt_checksum(BLK__CKPT_PART_INDEX, -1, r->index, r->h.index_bytes) !=
           r->h.index_checksum)
    blk__op_fail(c->o, BLK_ECORRUPT, -1, -1, "%s: the index fails its checksum", label);
}

/* Reads gid's record, makes the block and adds it. A failure is recorded
 * with the gid; the block is then not added. */
static void read_block(reader *r, int gid) {
  ckpt *c = &r->c;
  blk_master *m = c->m;
  const char *label = c->sh.path;
  unsigned char *meta = NULL;
  blk_link *links = NULL;
  void *data = NULL, *block = NULL;
  blk_buffer in = BLK_BUFFER_INIT;
  blk__ckpt_entry e;
  blk__ckpt_entry_decode(&e, r->index + (size_t)gid * BLK__CKPT_ENTRY_BYTES);
  uint64_t most_links =
      e.bytes >= BLK__CKPT_META_BYTES ? (e.bytes - BLK__CKPT_META_BYTES) / BLK__CKPT_LINK_BYTES : 0;
  if (e.gid != gid || e.nlinks < 0 || (uint64_t)e.nlinks > most_links ||
      e.bytes < BLK__CKPT_META_BYTES || e.offset < r->h.data_offset ||
      e.offset > r->h.index_offset || e.bytes > r->h.index_offset - e.offset) {
    blk__op_fail(c->o, BLK_ECORRUPT, gid, -1,
                 "%s: the index entry of gid %d is not possible (gid %d, %d links, %llu bytes at "
                 "offset %llu)",
                 label, gid, e.gid, e.nlinks, (unsigned long long)e.bytes,
                 (unsigned long long)e.offset);
    return;
  }
  size_t mbytes = blk__ckpt_meta_bytes(e.nlinks);
  uint64_t dbytes = e.bytes - mbytes, dsum = 0;
  int rc;
  if (blk__memory_check(1, e.bytes, "gid %d's record", gid) || !(meta = blk__malloc(mbytes)) ||
      (e.nlinks && !(links = blk__malloc((size_t)e.nlinks * sizeof *links))) ||
      !(data = blk__malloc(dbytes ? (size_t)dbytes : 1))) {
    blk__op_fail(c->o, BLK_ENOMEM, gid, -1, "no memory for gid %d's record (%llu bytes)", gid,
                 (unsigned long long)e.bytes);
    goto exit;
  }
  if (read_part(c, gid, e.offset, meta, mbytes, "a record's meta") ||
      read_part(c, gid, e.offset + mbytes, data, dbytes, "a record's saved bytes"))
    goto exit;
  if (blk__ckpt_checksum(BLK__CKPT_PART_META, gid, meta, mbytes) != e.checksum) {
    blk__op_fail(c->o, BLK_ECORRUPT, gid, -1,
                 "%s: the record of gid %d (offset %llu) fails its checksum", label, gid,
                 (unsigned long long)e.offset);
    goto exit;
  }
  if (blk__ckpt_meta_decode(meta, gid, e.nlinks, e.bytes, links, &dsum, label)) {
    blk__op_fail(c->o, BLK_ECORRUPT, gid, -1, "%s", blk_last_error());
    goto exit;
  }
  if (blk__ckpt_checksum(BLK__CKPT_PART_DATA, gid, data, (size_t)dbytes) != dsum) {
    blk__op_fail(c->o, BLK_ECORRUPT, gid, -1,
                 "%s: the saved bytes of gid %d (%llu bytes at offset %llu) fail their checksum",
                 label, gid, (unsigned long long)dbytes, (unsigned long long)(e.offset + mbytes));
    goto exit;
  }
  for (int i = 0; i < e.nlinks; i++) {
    if (links[i].gid < 0 || (uint64_t)links[i].gid >= r->h.nblocks) {
      blk__op_fail(c->o, BLK_ECORRUPT, gid, -1, "%s: gid %d's link %d names gid %d of %llu", label,
                   gid, i, links[i].gid, (unsigned long long)r->h.nblocks);
      goto exit;
    }
    links[i].rank = blk_assigner_rank(r->a, links[i].gid);
  }
  blk__clear_error();
  if ((rc = m->cfg.create(&block, gid, m->cfg.user))) {
    blk__op_fail(c->o, blk__callback_error("create callback", rc), gid, -1, "%s", blk_last_error());
    block = NULL;
    goto exit;
  }
  if (dbytes) {
    blk_buffer_adopt(&in, data, (size_t)dbytes, (size_t)dbytes);
    data = NULL;
  }
  blk__clear_error();
  if ((rc = m->cfg.load(block, &in, gid, m->cfg.user))) {
    blk__op_fail(c->o, blk__callback_error("load callback", rc), gid, -1, "%s", blk_last_error());
    goto exit;
  }
  if ((rc = blk_master_add(m, gid, block, links, e.nlinks))) {
    blk__op_fail(c->o, rc, gid, -1, "%s", blk_last_error());
    /* After a failed eviction the block is in, over the budget. */
  }
  if (blk_master_lid(m, gid) >= 0) block = NULL; /* the master's now */
exit:
  if (block && m->cfg.destroy) m->cfg.destroy(block, gid, m->cfg.user);
  blk_buffer_free(&in);
  free(data);
  free(links);
  free(meta);
}

/* This rank's blocks, by the assigner. */
static void read_blocks(reader *r) {
  ckpt *c = &r->c;
  int n = blk_assigner_local_count(r->a, c->rank);
  int *gids = blk__malloc((size_t)(n > 0 ? n : 1) * sizeof *gids);
  if (!gids) {
    blk__op_fail(c->o, BLK_ENOMEM, -1, -1, "no memory for %d gids", n);
    return;
  }
  blk_assigner_local_gids(r->a, c->rank, gids, n);
  for (int i = 0; i < n; i++) read_block(r, gids[i]);
  free(gids);
}

static void run_read(reader *r, const char *path) {
  ckpt *c = &r->c;
  blk_master *m = c->m;
  if (!r->a)
    blk__op_fail(c->o, BLK_EINVAL, -1, -1, "the assigner is NULL");
  else if (blk_assigner_nranks(r->a) != c->size)
    blk__op_fail(c->o, BLK_EINVAL, -1, -1, "the assigner has %d ranks but the communicator has %d",
                 blk_assigner_nranks(r->a), c->size);
  if (!m->cfg.create || !m->cfg.load)
    blk__op_fail(c->o, BLK_EINVAL, -1, -1,
                 "reading a checkpoint needs create and load callbacks in the config");
  if (blk__table_count(&m->table) > 0)
    blk__op_fail(c->o, BLK_EINVAL, -1, -1,
                 "the master holds %d blocks already: read into a master without blocks",
                 blk__table_count(&m->table));
  share_path(c, path, 0);
  if (any_failed(c)) return;
  const char *label = c->sh.path;
  int rc = open_file(c, label, MPI_MODE_RDONLY);
  if (rc != MPI_SUCCESS) {
    fail_io(c, -1, rc, "cannot open %s", label);
    return;
  }
  /* Rank 0 reads and checks the header, the extra bytes and the index. */
  struct {
    int64_t ok;
    blk__ckpt_header h;
  } head;
  memset(&head, 0, sizeof head);
  if (c->rank == 0) {
    read_head(r);
    int nb = blk_assigner_nblocks(r->a);
    if (!failed_here(c) && r->h.nblocks != (uint64_t)nb)
      blk__op_fail(c->o, BLK_EINVAL, -1, -1, "%s holds %llu blocks, but the assigner has %d", label,
                   (unsigned long long)r->h.nblocks, nb);
    head.ok = !failed_here(c);
    head.h = r->h;
  }
  coll(MPI_Bcast(&head, (int)sizeof head, MPI_BYTE, 0, c->comm), "MPI_Bcast of the header");
  if (!head.ok) {
    close_file(c, label);
    return;
  }
  r->h = head.h;
  /* Room for the extra bytes and the index, on every rank, before rank 0
   * reads them and broadcasts them. */
  int ok =
      !blk__memory_check(1, r->h.index_bytes + r->h.extra_bytes, "the index and extra bytes") &&
      (r->index = blk__malloc(r->h.index_bytes ? (size_t)r->h.index_bytes : 1)) &&
      blk_buffer_append(&r->extra, (size_t)r->h.extra_bytes);
  if (!ok)
    blk__op_fail(c->o, BLK_ENOMEM, -1, -1, "no memory for the index of %s (%llu bytes)", label,
                 (unsigned long long)(r->h.index_bytes + r->h.extra_bytes));
  if (c->rank == 0 && ok) read_tables(r);
  if (!any_failed(c)) {
    bcast_bytes(c, r->extra.data, r->h.extra_bytes);
    bcast_bytes(c, r->index, r->h.index_bytes);
    read_blocks(r);
  }
  close_file(c, label);
  /* Out of core, blocks read early went out behind: their writes are this
   * operation's. */
  if (blk__budget_flush(&m->budget)) blk__op_fail(c->o, BLK_EIO, -1, -1, "%s", blk_last_error());
}

int blk_checkpoint_read(blk_master *m, const char *path, const blk_assigner *a, blk_buffer *extra) {
  if (!m) return blk__fail(BLK_EINVAL, "checkpoint: read: the master is NULL");
  BLK__ENTER(m);
  blk__op_begin(&m->op, "checkpoint read", NULL, NULL);
  if (extra) blk_buffer_clear(extra);
  reader r;
  memset(&r, 0, sizeof r);
  ckpt_init(&r.c, m);
  r.a = a;
  run_read(&r, path);
  free(r.index);
  int rc = blk__op_close(&m->op);
  if (!rc && extra) {
    blk_buffer_free(extra);
    blk_buffer_swap(extra, &r.extra);
  }
  blk_buffer_free(&r.extra);
  BLK__LEAVE();
  return rc;
}
