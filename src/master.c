/*
 * master.c: a rank's blocks, their links and queues, the pool, and the
 * delivery of messages to the running operation.
 *
 * Invariants: blocks[lid] for lid in 0..nblocks-1, in the order added;
 * lids maps gid -> lid. Each block has one in and one out buffer per link.
 * Only the creating thread touches the master's fields; a callback on a pool
 * thread touches only its own block's record (queues, posts), so foreach
 * needs no lock.
 */
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "logger.h"
#include "master_state.h"
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

int blk_master_create(blk_master **out, MPI_Comm comm, const blk_master_config *cfg) {
  static const blk_master_config defaults = BLK_MASTER_CONFIG_INIT;
  int rc = BLK_OK;
  *out = NULL;
  if (!cfg) cfg = &defaults;
  if (cfg->threads < 1)
    return blk__fail(BLK_EINVAL, "master: threads = %d, need at least 1", cfg->threads);
  if (comm == MPI_COMM_NULL)
    return blk__fail(BLK_EINVAL, "master: the communicator is MPI_COMM_NULL");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return blk__fail(BLK_ESTATE, "master: MPI is not initialised (call MPI_Init first)");
  if (cfg->threads > 1) {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_FUNNELED)
      return blk__fail(
          BLK_ETHREADLEVEL,
          "master: threads = %d needs MPI_THREAD_FUNNELED or higher, but MPI gives "
          "level %d; initialise MPI with MPI_Init_thread(..., MPI_THREAD_FUNNELED, ...) "
          "or use threads = 1",
          cfg->threads, level);
  }
  blk_master *m = calloc(1, sizeof *m);
  if (!m) return blk__fail(BLK_ENOMEM, "master: no memory");
  m->cfg = *cfg;
  m->values_mpi.type = MPI_DATATYPE_NULL;
  m->values_mpi.op = MPI_OP_NULL;
  blk__gid_map_init(&m->lids);
  blk__values_clear(&m->results);
  if (blk__buffer_cache_create(&m->cache, CACHE_SLOTS, cache_bytes(cfg))) {
    rc = blk__fail(BLK_ENOMEM, "master: no memory");
    goto fail;
  }
  if ((rc = blk__comm_create(&m->comm, comm, m->cache))) goto fail;
  if ((rc = blk__pool_create(&m->pool, cfg->threads))) goto fail;
  if ((rc = blk__values_mpi_create(&m->values_mpi))) goto fail;
  if ((rc = blk__budget_init(&m->budget, cfg, blk__comm_rank(m->comm)))) goto fail;
  blk__log_set_rank(blk__comm_rank(m->comm));
  *out = m;
  return BLK_OK;
fail:
  blk_master_destroy(m);
  return rc;
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

void blk_master_destroy(blk_master *m) {
  if (!m) return;
  if (blk__budget_active(&m->budget)) blk_master_stats_log(m);
  for (int i = 0; i < m->nblocks; i++) free_block(m, &m->blocks[i]);
  free(m->blocks);
  for (size_t i = 0; i < m->nstash; i++) blk_buffer_free(&m->stash[i].payload);
  free(m->stash);
  blk__gid_map_free(&m->lids);
  blk__reduce_keep_free(m->reduce_keep);
  blk__budget_free(&m->budget); /* removes the spill file */
  blk__pool_destroy(m->pool);
  blk__values_mpi_free(&m->values_mpi);
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
int blk_master_epoch(const blk_master *m) {
  return m->epoch;
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
  b->links = malloc(n * sizeof *b->links);
  b->link_gids = malloc(n * sizeof *b->link_gids);
  b->keys = malloc(n * sizeof *b->keys);
  b->in = calloc(n, sizeof *b->in);
  b->out = calloc(n, sizeof *b->out);
  b->in_rec = calloc(n, sizeof *b->in_rec);
  b->out_rec = calloc(n, sizeof *b->out_rec);
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
  if (gid < 0) return blk__fail(BLK_EINVAL, "master: add: gid = %d is negative", gid);
  if (nlinks < 0 || (nlinks > 0 && !links))
    return blk__fail(BLK_EINVAL, "master: add: block %d has nlinks = %d and links %s", gid, nlinks,
                     links ? "given" : "NULL");
  if (blk__gid_map_get(&m->lids, gid) >= 0)
    return blk__fail(BLK_EINVAL, "master: add: gid %d is already on this rank", gid);
  if (m->nblocks == m->cap_blocks) {
    int ncap = m->cap_blocks ? 2 * m->cap_blocks : 8;
    blk__block *grown = realloc(m->blocks, (size_t)ncap * sizeof *grown);
    if (!grown) return blk__fail(BLK_ENOMEM, "master: no memory for %d blocks", ncap);
    m->blocks = grown;
    m->cap_blocks = ncap;
  }
  blk__block *b = &m->blocks[m->nblocks];
  memset(b, 0, sizeof *b);
  b->gid = gid;
  blk__values_clear(&b->posts);
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

int blk_master_decompose(blk_master *m, const blk_decomposer *d, const blk_assigner *a) {
  int rc = BLK_OK;
  int *gids = NULL;
  blk_link *links = NULL;
  if (!m->cfg.create)
    return blk__fail(BLK_EINVAL, "master: decompose needs a create callback in the config");
  int nb = blk_decomposer_nblocks(d);
  if (blk_assigner_nblocks(a) != nb)
    return blk__fail(BLK_EINVAL, "master: the assigner has %d blocks but the decomposer has %d",
                     blk_assigner_nblocks(a), nb);
  if (blk_assigner_nranks(a) != blk__comm_size(m->comm))
    return blk__fail(BLK_EINVAL, "master: the assigner has %d ranks but the communicator has %d",
                     blk_assigner_nranks(a), blk__comm_size(m->comm));
  int rank = blk__comm_rank(m->comm);
  int count = blk_assigner_local_count(a, rank);
  if (count > 0 && !(gids = malloc((size_t)count * sizeof *gids))) {
    rc = blk__fail(BLK_ENOMEM, "master: no memory for %d gids", count);
    goto exit;
  }
  blk_assigner_local_gids(a, rank, gids, count);
  for (int i = 0; i < count; i++) {
    int nlinks = 0;
    void *block = NULL;
    if ((rc = blk_decomposer_links(d, a, gids[i], &links, &nlinks))) goto exit;
    int crc = m->cfg.create(&block, gids[i], m->cfg.user);
    if (crc) {
      rc = blk__fail(BLK_ECALLBACK, "master: the create callback failed for gid %d with code %d",
                     gids[i], crc);
      goto exit;
    }
    if ((rc = blk_master_add(m, gids[i], block, links, nlinks))) {
      if (m->cfg.destroy) m->cfg.destroy(block, gids[i], m->cfg.user);
      goto exit;
    }
    free(links);
    links = NULL;
  }
exit:
  free(links);
  free(gids);
  return rc;
}

/* foreach: one task per local block, through the scheduler so that
 * out-of-core blocks are loaded (and others evicted) around their turn. */
typedef struct foreach_ctx {
  blk_master *m;
  blk_foreach_fn fn;
  void *user;
  int *codes; /* per block: the callback's return */
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
      .round = m->epoch,
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
  a->f->codes[a->lid] = a->f->fn(b->data, &p, a->f->user);
}

int blk_master_foreach(blk_master *m, blk_foreach_fn fn, void *user) {
  if (!fn) return blk__fail(BLK_EINVAL, "master: foreach: the callback is NULL");
  if (m->nblocks == 0) return BLK_OK;
  size_t n = (size_t)m->nblocks;
  foreach_ctx f = {m, fn, user, calloc(n, sizeof(int))};
  foreach_arg *args = malloc(n * sizeof *args);
  void **argp = malloc(n * sizeof *argp);
  blk__sched s;
  int rc = BLK_OK, sched = 0, lids[64], ran[64];
  if (!f.codes || !args || !argp) {
    rc = blk__fail(BLK_ENOMEM, "master: foreach: no memory for %d blocks", m->nblocks);
    goto exit;
  }
  for (int i = 0; i < m->nblocks; i++) {
    args[i] = (foreach_arg){&f, i};
    argp[i] = &args[i];
  }
  if ((rc = blk__sched_init(&s, m, foreach_one, NULL, argp))) goto exit;
  sched = 1;
  for (int i = 0; i < m->nblocks; i++) blk__sched_ready(&s, i, 1);
  int left = m->nblocks;
  while (left > 0) {
    if ((rc = blk__sched_pump(&s))) break;
    size_t got = blk__sched_collect(&s, lids, ran, 64, -1);
    left -= (int)got;
  }
  if (!rc) rc = s.error;
  for (int i = 0; i < m->nblocks && !rc; i++)
    if (f.codes[i])
      rc = blk__fail(BLK_ECALLBACK, "master: foreach: the callback returned %d (%s) for gid %d",
                     f.codes[i], blk_strerror(f.codes[i]), m->blocks[i].gid);
exit:
  if (sched) {
    /* An error from the pool can leave tasks running on these arguments. */
    while (blk__sched_busy(&s)) blk__sched_collect(&s, lids, ran, 64, -1);
    blk__sched_free(&s);
  }
  free(argp);
  free(args);
  free(f.codes);
  return rc;
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

/* Delivery: messages of the running epoch go to its router, later ones wait
 * in the stash; an earlier epoch cannot happen (every operation waits for
 * all its messages) and means a corrupted header. */
void blk__master_deliver(const blk__msg *msg, blk_buffer *payload, void *ctx) {
  blk_master *m = ctx;
  if (msg->op == m->epoch && m->route) {
    m->route(m, msg, payload, m->route_ctx);
    return;
  }
  if (msg->op <= m->epoch)
    blk__panic(
        "master: a message from gid %d to gid %d for operation %d arrived during operation %d",
        msg->src_gid, msg->dst_gid, msg->op, m->epoch);
  if (m->nstash == m->cap_stash) {
    size_t ncap = m->cap_stash ? 2 * m->cap_stash : 16;
    blk__stashed *grown = realloc(m->stash, ncap * sizeof *grown);
    if (!grown) blk__panic("master: no memory to keep an early message from gid %d", msg->src_gid);
    m->stash = grown;
    m->cap_stash = ncap;
  }
  blk__stashed *s = &m->stash[m->nstash++];
  s->msg = *msg;
  blk_buffer_init(&s->payload);
  blk_buffer_swap(&s->payload, payload);
}

void blk__master_begin(blk_master *m, blk__route_fn route, void *ctx) {
  m->epoch++;
  m->route = route;
  m->route_ctx = ctx;
  size_t kept = 0;
  for (size_t i = 0; i < m->nstash; i++) {
    blk__stashed *s = &m->stash[i];
    if (s->msg.op == m->epoch) {
      route(m, &s->msg, &s->payload, ctx);
      blk_buffer_free(&s->payload);
    } else {
      m->stash[kept++] = *s;
    }
  }
  m->nstash = kept;
}

int blk__master_progress_until(blk_master *m, int (*done)(blk_master *m, void *ctx), void *ctx) {
  blk__backoff wait = {0};
  while (!done(m, ctx)) {
    int progressed = 0;
    int rc = blk__comm_progress(m->comm, blk__master_deliver, m, 1, &progressed);
    if (rc) return rc;
    if (progressed)
      blk__backoff_reset(&wait);
    else
      blk__backoff_idle(&wait);
  }
  return BLK_OK;
}
