/*
 * master.c: a rank's blocks, their links and queues, the pool, and the
 * collective calls that need no messages between blocks (create, destroy,
 * decompose, foreach).
 *
 * Invariants: blocks[lid] for lid in 0..nblocks-1, in the order added;
 * lids maps gid -> lid. Each block has one in and one out buffer per link.
 * Only the creating thread touches the master's fields; a callback on a pool
 * thread touches only its own block's record (queues, posts), so foreach
 * needs no lock.
 *
 * Create agrees with MPI_Allreduce on the caller's communicator (the
 * duplicate may be what failed); every later collective call is an
 * operation that ends with blk's own agreement (operation.h).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "logger.h"
#include "master_state.h"
#include "memory_limit.h"
#include "reduce_run.h"
#include "schedule.h"

/* Spare message storage kept for reuse (buffer_cache.h): enough for the
 * messages of a large round; under a byte budget, a quarter of it, since
 * memory is what the budget is short of. */
#define CACHE_SLOTS 32
#define CACHE_MAX_BYTES ((size_t)256 << 20)

static size_t cache_bytes(const blk_master_config *cfg) {
  size_t quarter = cfg->mem_bytes / 4;
  return cfg->mem_bytes && quarter < CACHE_MAX_BYTES ? quarter : CACHE_MAX_BYTES;
}

/* The out-of-core settings are checked by budget.c; these are the rest. */
static void check_config(const blk_master_config *cfg, blk__failure *f, int rank) {
  if (cfg->threads < 1) {
    blk__failure_note(f, BLK_EINVAL, rank, -1, -1, "threads = %d, need at least 1", cfg->threads);
    return;
  }
  if (cfg->threads > 1) {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_FUNNELED)
      blk__failure_note(
          f, BLK_ETHREADLEVEL, rank, -1, -1,
          "threads = %d needs MPI_THREAD_FUNNELED or higher, but MPI gives level %d; initialise "
          "MPI with MPI_Init_thread(..., MPI_THREAD_FUNNELED, ...) or use threads = 1",
          cfg->threads, level);
  }
}

/* Notes a setup step's failure (its detail is in blk_last_error()). */
static int step(blk__failure *f, int rank, int rc) {
  if (rc) blk__failure_note(f, rc, rank, -1, -1, "%s", blk_last_error());
  return rc;
}

/* Frees what create set up; the communicator is freed collectively, and
 * every rank comes here together (the failure was agreed). */
static void teardown(blk_master *m, MPI_Comm *dup) {
  int adopted = m && m->comm; /* the comm frees the duplicate it took over */
  if (m) {
    blk__budget_free(&m->budget);
    blk__pool_destroy(m->pool);
    blk__comm_destroy(m->comm);
    blk__buffer_cache_destroy(m->cache);
    free(m);
  }
  if (*dup != MPI_COMM_NULL && !adopted) MPI_Comm_free(dup);
}

int blk_master_create(blk_master **out, MPI_Comm comm, const blk_master_config *cfg) {
  static const blk_master_config defaults = BLK_MASTER_CONFIG_INIT;
  if (!out) return blk__fail(BLK_EINVAL, "master: create: out is NULL");
  *out = NULL;
  if (!cfg) cfg = &defaults;
  /* Nothing can be agreed without MPI and a communicator: these two are
   * returned where they are found (every rank finds the first alike). */
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return blk__fail(BLK_ESTATE, "master: MPI is not initialised (call MPI_Init first)");
  if (comm == MPI_COMM_NULL)
    return blk__fail(BLK_EINVAL, "master: the communicator is MPI_COMM_NULL");
  blk__log_init(); /* a bad BLK_LOG is reported now, even if nothing is ever logged */
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  blk__failure f;
  blk__failure_clear(&f);
  /* Every rank takes every collective step below, whatever failed before,
   * and the outcome is agreed at the end. */
  MPI_Comm dup = MPI_COMM_NULL;
  int mrc = MPI_Comm_dup(comm, &dup);
  if (mrc == MPI_SUCCESS) mrc = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  step(&f, rank, blk__comm_check(mrc, "master: duplicating the communicator"));
  check_config(cfg, &f, rank);
  step(&f, rank, blk__fault_from_env(rank));
  blk_master *m = f.code ? NULL : blk__calloc(1, sizeof *m);
  if (!f.code && !m) blk__failure_note(&f, BLK_ENOMEM, rank, -1, -1, "no memory for the master");
  if (m) {
    m->cfg = *cfg;
    blk__gid_map_init(&m->lids);
    blk__values_clear(&m->results);
    if (blk__buffer_cache_create(&m->cache, CACHE_SLOTS, cache_bytes(cfg)))
      blk__failure_note(&f, BLK_ENOMEM, rank, -1, -1, "no memory for the buffer cache");
    if (!f.code && !step(&f, rank, blk__comm_create(&m->comm, dup, m->cache)))
      blk__op_init(&m->op, m->comm, m->cache);
    if (!f.code) step(&f, rank, blk__pool_create(&m->pool, cfg->threads));
    if (!f.code) step(&f, rank, blk__budget_init(&m->budget, cfg, rank));
  }
  int rc = blk__op_agree_once(comm, &f, "master: create");
  if (rc) {
    teardown(m, &dup);
    return rc;
  }
  blk__log_set_rank(rank);
  *out = m;
  return BLK_OK;
}

static void free_block(blk_master *m, blk__block *b) {
  if (b->resident && b->data && m->cfg.destroy) m->cfg.destroy(b->data, b->gid, m->cfg.user);
  for (int i = 0; i < b->nlinks; i++) {
    if (b->in) blk_buffer_free(&b->in[i]);
    if (b->out) blk_buffer_free(&b->out[i]);
  }
  free(b->in);
  free(b->out);
  free(b->in_rec);
  free(b->out_rec);
  free(b->links);
  free(b->link_gids);
  free(b->keys);
}

/* Destroy's wait: every message this rank sent has left (a message of an
 * operation that failed may still be under way), and every rank got here. */
static int drained(blk__op *o, void *ctx) {
  blk_master *m = ctx;
  if (!o->agreements && blk__comm_sends_pending(m->comm) == 0) blk__op_agree_start(o, NULL);
  return blk__op_agree_done(o) && blk__comm_recvs_pending(m->comm) == 0;
}

void blk_master_destroy(blk_master *m) {
  if (!m) return;
  if (blk__budget_active(&m->budget)) blk_master_stats_log(m);
  /* Collective: no rank frees its communicator while a message to or from
   * it is under way (MPI would read or write freed memory). */
  blk__op_begin(&m->op, "destroy", NULL, NULL);
  blk__op_wait(&m->op, drained, m);
  blk__op_end(&m->op, NULL);
  for (int i = 0; i < m->nblocks; i++) free_block(m, &m->blocks[i]);
  free(m->blocks);
  blk__op_free(&m->op);
  blk__gid_map_free(&m->lids);
  blk__reduce_keep_free(m->reduce_keep);
  free(m->sched_mem);
  free(m->foreach_mem);
  blk__budget_free(&m->budget); /* closes the spill file */
  blk__pool_destroy(m->pool);
  blk__comm_destroy(m->comm);
  blk__buffer_cache_destroy(m->cache);
  free(m);
}

int blk_master_rank(const blk_master *m) {
  return blk__comm_rank(m->comm);
}
int blk_master_size(const blk_master *m) {
  return blk__comm_size(m->comm);
}
MPI_Comm blk_master_comm(const blk_master *m) {
  return blk__comm_mpi(m->comm);
}
uint32_t blk_master_epoch(const blk_master *m) {
  return m ? m->op.epoch : 0;
}
int blk_master_local_count(const blk_master *m) {
  return m->nblocks;
}

int blk_master_gid(const blk_master *m, int lid) {
  return lid >= 0 && lid < m->nblocks ? m->blocks[lid].gid : -1;
}

void *blk_master_block(const blk_master *m, int lid) {
  return lid >= 0 && lid < m->nblocks && m->blocks[lid].resident ? m->blocks[lid].data : NULL;
}

int blk_master_lid(const blk_master *m, int gid) {
  return blk__gid_map_get(&m->lids, gid);
}

const blk_link *blk_master_links(const blk_master *m, int lid, int *count) {
  if (lid < 0 || lid >= m->nblocks) {
    *count = 0;
    return NULL;
  }
  *count = m->blocks[lid].nlinks;
  return m->blocks[lid].links;
}

static int32_t direction_code(const int *dir, int sign) {
  int32_t code = 0;
  for (int i = BLK_MAX_DIM - 1; i >= 0; i--) code = code * 3 + (sign * dir[i] + 1);
  return code;
}

static int set_links(blk_master *m, blk__block *b, const blk_link *links, int nlinks) {
  int size = blk__comm_size(m->comm);
  for (int i = 0; i < nlinks; i++) {
    if (links[i].gid < 0)
      return blk__fail(BLK_EINVAL, "master: block %d, link %d has gid %d", b->gid, i, links[i].gid);
    if (links[i].rank < 0 || links[i].rank >= size)
      return blk__fail(BLK_EINVAL,
                       "master: block %d, link %d (to gid %d) has rank %d, not in 0..%d", b->gid, i,
                       links[i].gid, links[i].rank, size - 1);
    for (int d = 0; d < BLK_MAX_DIM; d++)
      if (links[i].dir[d] < -1 || links[i].dir[d] > 1)
        return blk__fail(BLK_EINVAL, "master: block %d, link %d has dir[%d] = %d, not -1, 0 or 1",
                         b->gid, i, d, links[i].dir[d]);
  }
  size_t n = (size_t)nlinks;
  b->nlinks = nlinks;
  if (nlinks == 0) return BLK_OK;
  b->links = blk__malloc(n * sizeof *b->links);
  b->link_gids = blk__malloc(n * sizeof *b->link_gids);
  b->keys = blk__malloc(n * sizeof *b->keys);
  b->in = blk__calloc(n, sizeof *b->in);
  b->out = blk__calloc(n, sizeof *b->out);
  b->in_rec = blk__calloc(n, sizeof *b->in_rec);
  b->out_rec = blk__calloc(n, sizeof *b->out_rec);
  if (!b->links || !b->link_gids || !b->keys || !b->in || !b->out || !b->in_rec || !b->out_rec)
    return blk__fail(BLK_ENOMEM, "master: no memory for %d links of block %d", nlinks, b->gid);
  memcpy(b->links, links, n * sizeof *links);
  for (int i = 0; i < nlinks; i++) {
    b->link_gids[i] = links[i].gid;
    b->keys[i].code = direction_code(links[i].dir, 1);
    b->keys[i].rev_code = direction_code(links[i].dir, -1);
    b->keys[i].occ = 0;
    for (int j = 0; j < i; j++)
      if (links[j].gid == links[i].gid && b->keys[j].code == b->keys[i].code) b->keys[i].occ++;
  }
  return BLK_OK;
}

int blk_master_add(blk_master *m, int gid, void *block, const blk_link *links, int nlinks) {
  if (!m) return blk__fail(BLK_EINVAL, "master: add: the master is NULL");
  if (gid < 0) return blk__fail(BLK_EINVAL, "master: add: gid = %d is negative", gid);
  if (nlinks < 0 || (nlinks > 0 && !links))
    return blk__fail(BLK_EINVAL, "master: add: block %d has nlinks = %d and links %s", gid, nlinks,
                     links ? "given" : "NULL");
  if (blk__gid_map_get(&m->lids, gid) >= 0)
    return blk__fail(BLK_EINVAL, "master: add: gid %d is already on this rank", gid);
  if (m->nblocks == m->cap_blocks) {
    if (m->cap_blocks > INT_MAX / 2)
      return blk__fail(BLK_ENOMEM, "master: add: %d blocks on one rank are too many",
                       m->nblocks);
    int ncap = m->cap_blocks ? 2 * m->cap_blocks : 8;
    blk__block *grown = blk__realloc(m->blocks, (size_t)ncap * sizeof *grown);
    if (!grown) return blk__fail(BLK_ENOMEM, "master: no memory for %d blocks", ncap);
    m->blocks = grown;
    m->cap_blocks = ncap;
  }
  blk__block *b = &m->blocks[m->nblocks];
  memset(b, 0, sizeof *b);
  b->gid = gid;
  blk__values_none_posted(&b->posts);
  int rc = set_links(m, b, links, nlinks);
  if (!rc) rc = blk__gid_map_put(&m->lids, gid, m->nblocks);
  if (rc) {
    b->data = NULL; /* the caller keeps the block on failure */
    free_block(m, b);
    return rc;
  }
  b->data = block;
  m->nblocks++;
  /* Out-of-core, adding may push an older block out; if that write fails the
   * block stays in memory and the error says why. */
  return blk__budget_added(m, m->nblocks - 1);
}

/* Creates and adds this rank's blocks; a failure is recorded in the
 * running operation (the blocks added before it stay). */
static void create_blocks(blk_master *m, const blk_decomposer *d, const blk_assigner *a) {
  blk__op *o = &m->op;
  int *gids = NULL;
  blk_link *links = NULL;
  int rank = blk__comm_rank(m->comm);
  int count = blk_assigner_local_count(a, rank);
  /* Each local block costs at least its record, its gid-map slots (the map
   * is at most half full) and its gid here, before its links and its data:
   * refuse a count that can never fit rather than be killed adding it. */
  if (blk__memory_check((uint64_t)count, sizeof(blk__block) + 5 * sizeof(int),
                        "%d local blocks on rank %d", count, rank)) {
    blk__op_fail(o, BLK_ENOMEM, -1, -1, "%s", blk_last_error());
    return;
  }
  if (count > 0 && !(gids = blk__malloc((size_t)count * sizeof *gids))) {
    blk__op_fail(o, BLK_ENOMEM, -1, -1, "no memory for %d gids", count);
    return;
  }
  blk_assigner_local_gids(a, rank, gids, count);
  for (int i = 0; i < count; i++) {
    int nlinks = 0, rc;
    void *block = NULL;
    if ((rc = blk_decomposer_links(d, a, gids[i], &links, &nlinks))) {
      blk__op_fail(o, rc, gids[i], -1, "%s", blk_last_error());
      break;
    }
    blk__clear_error();
    int crc = m->cfg.create(&block, gids[i], m->cfg.user);
    if (crc) {
      blk__op_fail(o, blk__callback_error("create callback", crc), gids[i], -1, "%s",
                   blk_last_error());
      break;
    }
    if ((rc = blk_master_add(m, gids[i], block, links, nlinks))) {
      blk__op_fail(o, rc, gids[i], -1, "%s", blk_last_error());
      /* After a failed eviction the block is in, over the budget: go on. */
      if (blk_master_lid(m, gids[i]) < 0) {
        if (m->cfg.destroy) m->cfg.destroy(block, gids[i], m->cfg.user);
        break;
      }
    }
    blk_links_free(links);
    links = NULL;
  }
  blk_links_free(links);
  free(gids);
}

int blk_master_decompose(blk_master *m, const blk_decomposer *d, const blk_assigner *a) {
  if (!m) return blk__fail(BLK_EINVAL, "master: decompose: the master is NULL");
  blk__op *o = &m->op;
  blk__op_begin(o, "decompose", NULL, NULL);
  int nb = d ? blk_decomposer_nblocks(d) : 0;
  if (!d || !a)
    blk__op_fail(o, BLK_EINVAL, -1, -1, "the decomposer or the assigner is NULL");
  else if (!m->cfg.create)
    blk__op_fail(o, BLK_EINVAL, -1, -1, "decompose needs a create callback in the config");
  else if (blk_assigner_nblocks(a) != nb)
    blk__op_fail(o, BLK_EINVAL, -1, -1, "the assigner has %d blocks but the decomposer has %d",
                 blk_assigner_nblocks(a), nb);
  else if (blk_assigner_nranks(a) != blk__comm_size(m->comm))
    blk__op_fail(o, BLK_EINVAL, -1, -1, "the assigner has %d ranks but the communicator has %d",
                 blk_assigner_nranks(a), blk__comm_size(m->comm));
  else
    create_blocks(m, d, a);
  return blk__op_close(o);
}

/* foreach: one task per local block, through the scheduler so that
 * out-of-core blocks are loaded (and others evicted) around their turn. */
typedef struct foreach_ctx {
  blk_master *m;
  blk_foreach_fn fn;
  void *user;
  int *codes;  /* per block: the callback's return */
  char **whys; /* per block: blk's reason, when the code was blk's */
} foreach_ctx;

typedef struct foreach_arg {
  foreach_ctx *f;
  int lid;
} foreach_arg;

static void foreach_one(void *arg) {
  foreach_arg *a = arg;
  blk_master *m = a->f->m;
  blk__block *b = &m->blocks[a->lid];
  blk_proxy p = {
      .master = m,
      .gid = b->gid,
      .round = m->exchanges,
      .phase = "foreach",
      .nin = b->nlinks,
      .nout = b->nlinks,
      .in_gids = b->link_gids,
      .out_gids = b->link_gids,
      .links = b->links,
      .in = b->in,
      .out = b->out,
      .posts = &b->posts,
      .results = &m->results,
  };
  a->f->codes[a->lid] =
      blk__run_callback(a->f->fn, b->data, &p, a->f->user, 0, &a->f->whys[a->lid]);
}

/* The scheduler could not load a block (or evict one): its error, now. */
static void foreach_load_failed(void *ctx, int lid, int code) {
  blk_master *m = ctx;
  blk__op_fail(&m->op, code, m->blocks[lid].gid, m->exchanges, "%s", blk_last_error());
}

static void run_foreach(blk_master *m, blk_foreach_fn fn, void *user) {
  /* Per block: the code, blk's reason, the task's argument and a pointer to
   * it, in storage kept for the next foreach. */
  size_t n = (size_t)m->nblocks;
  size_t bytes = n * (sizeof(foreach_arg) + sizeof(void *) + sizeof(char *) + sizeof(int));
  if (m->foreach_bytes < bytes) {
    void *grown = blk__realloc(m->foreach_mem, bytes);
    if (!grown) {
      blk__op_fail(&m->op, BLK_ENOMEM, -1, m->exchanges, "no memory to run %d blocks",
                   m->nblocks);
      return;
    }
    m->foreach_mem = grown;
    m->foreach_bytes = bytes;
  }
  foreach_arg *args = m->foreach_mem;
  void **argp = (void **)(args + n);
  foreach_ctx f = {m, fn, user, NULL, (char **)(argp + n)};
  f.codes = (int *)(f.whys + n);
  blk__sched s;
  int sched = 0, lids[64], ran[64];
  for (int i = 0; i < m->nblocks; i++) {
    args[i] = (foreach_arg){&f, i};
    argp[i] = &args[i];
    f.codes[i] = 0;
    f.whys[i] = NULL;
  }
  if (blk__sched_init(&s, m, foreach_one, NULL, argp)) {
    blk__op_fail(&m->op, BLK_ENOMEM, -1, m->exchanges, "%s", blk_last_error());
    goto exit;
  }
  sched = 1;
  s.on_error = foreach_load_failed;
  s.on_error_ctx = m;
  for (int i = 0; i < m->nblocks; i++) blk__sched_ready(&s, i, 1);
  int left = m->nblocks;
  while (left > 0) {
    blk__sched_pump(&s);
    size_t got = blk__sched_collect(&s, lids, ran, 64, -1);
    for (size_t i = 0; i < got; i++)
      if (ran[i]) blk__op_count_callback(&m->op);
    left -= (int)got;
  }
  for (int i = 0; i < m->nblocks; i++)
    if (f.codes[i])
      blk__note_callback_failure(m, m->blocks[i].gid, m->exchanges, f.codes[i], &f.whys[i]);
exit:
  if (sched) blk__sched_free(&s);
}

int blk_master_foreach(blk_master *m, blk_foreach_fn fn, void *user) {
  if (!m) return blk__fail(BLK_EINVAL, "master: foreach: the master is NULL");
  blk__op_begin(&m->op, "foreach", NULL, NULL);
  if (!fn)
    blk__op_fail(&m->op, BLK_EINVAL, -1, -1, "the callback is NULL");
  else if (m->nblocks > 0)
    run_foreach(m, fn, user);
  return blk__op_close(&m->op);
}

void blk_master_stats_get(const blk_master *m, blk_master_stats *out) {
  memset(out, 0, sizeof *out);
  const blk__budget *b = &m->budget;
  out->blocks_in_memory = b->resident;
  out->blocks_in_memory_peak = b->resident_peak > b->resident ? b->resident_peak : b->resident;
  out->loads = b->loads;
  out->evictions = b->evictions;
  out->queues_spilled = b->queues_spilled;
  out->queues_restored = b->queues_restored;
  if (!b->storage) return;
  blk__storage_stats st;
  blk__storage_stats_get(b->storage, &st);
  out->records_written = st.records_written;
  out->records_read = st.records_read;
  out->bytes_raw_written = st.bytes_raw_written;
  out->bytes_stored_written = st.bytes_stored_written;
  out->bytes_raw_read = st.bytes_raw_read;
  out->bytes_stored_read = st.bytes_stored_read;
  out->seconds_compress = st.seconds_compress;
  out->seconds_decompress = st.seconds_decompress;
  out->seconds_write = st.seconds_write;
  out->seconds_read = st.seconds_read;
  out->spill_file_bytes = st.file_bytes;
  out->spill_file_bytes_peak = st.file_bytes_peak;
}

const char *blk_master_spill_path(const blk_master *m) {
  return m->budget.storage ? blk__storage_path(m->budget.storage) : "";
}

void blk_master_stats_log(const blk_master *m) {
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  double ratio = st.bytes_stored_written
                     ? (double)st.bytes_raw_written / (double)st.bytes_stored_written
                     : 0.0;
  blk_log(BLK_LOG_INFO,
          "out-of-core: %d blocks in memory (peak %d), %llu loads, %llu evictions, %llu queues "
          "spilled; wrote %llu bytes as %llu (ratio %.2f), read %llu; compress %.3f s, "
          "decompress %.3f s, write %.3f s, read %.3f s; spill file %llu bytes (peak %llu)",
          st.blocks_in_memory, st.blocks_in_memory_peak, (unsigned long long)st.loads,
          (unsigned long long)st.evictions, (unsigned long long)st.queues_spilled,
          (unsigned long long)st.bytes_raw_written, (unsigned long long)st.bytes_stored_written,
          ratio, (unsigned long long)st.bytes_raw_read, st.seconds_compress, st.seconds_decompress,
          st.seconds_write, st.seconds_read, (unsigned long long)st.spill_file_bytes,
          (unsigned long long)st.spill_file_bytes_peak);
}
