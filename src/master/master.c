/*
 * master.c: the master's life (create, destroy), its blocks (add,
 * decompose, the accessors) and its out-of-core figures. The collectives
 * that run callbacks or move messages (foreach, exchange, the reductions)
 * are in collectives/, built on the parts the master holds together
 * (master_state.h).
 *
 * Create agrees with MPI_Allreduce on the caller's communicator (the
 * duplicate may be what failed); every later collective call is an
 * operation that ends with blk's own agreement (runtime/operation.h).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/cpus.h"
#include "base/logger.h"
#include "base/memory_limit.h"
#include "base/settings.h"
#include "base/thread.h"
#include "master/master_state.h"
#include "runtime/callback.h"
#include "storage/codec.h"
#include "storage/storage.h"

/* The public levels are the storage's. */
_Static_assert(BLK_COMPRESSION_NONE == BLK__CODEC_STORE, "BLK_COMPRESSION_NONE");
_Static_assert(BLK_COMPRESSION_AUTO == BLK__STORAGE_AUTO, "BLK_COMPRESSION_AUTO");

/* Spare message storage kept for reuse (buffer_cache.h): enough for the
 * messages of a large round; under a byte budget, a quarter of it, since
 * memory is what the budget is short of. */
#define CACHE_SLOTS 32
#define CACHE_MAX_BYTES ((size_t)256 << 20)

static size_t cache_bytes(const blk_master_config *cfg) {
  size_t quarter = cfg->mem_bytes / 4;
  return cfg->mem_bytes && quarter < CACHE_MAX_BYTES ? quarter : CACHE_MAX_BYTES;
}

/* The bytes of each layout version of blk_master_config: a program built
 * with version v passes a struct of config_bytes[v] bytes (new fields only
 * ever go at the end). */
static const size_t config_bytes[BLK_MASTER_CONFIG_VERSION + 1] = {
    0, offsetof(blk_master_config, tuning), offsetof(blk_master_config, trace),
    offsetof(blk_master_config, create_at), offsetof(blk_master_config, evict),
    sizeof(blk_master_config)};

/* The most bytes a tuning file may have (blk-tune writes a few hundred
 * lines). */
#define TUNING_MAX_BYTES ((long)16 << 20)

/* Rank 0's tuning file (its path, or $BLK_TUNING), read there and sent to
 * every rank with its name, parsed on each: every rank holds the same table
 * or none, and fails alike. Collective over comm; a failure goes into f. */
static void load_tuning(blk__tuning **out, const char *path, MPI_Comm comm, int rank,
                        blk__failure *f) {
  *out = NULL;
  /* Rank 0 sends "<path>\0<text>"; len -1: no file, -2: it failed. */
  long len = -1;
  char *msg = NULL;
  if (rank == 0) {
    if (!path) path = getenv("BLK_TUNING");
    if (path && *path) {
      len = -2;
      size_t plen = strlen(path) + 1;
      FILE *file = fopen(path, "rb");
      long flen = -1;
      int e = file ? 0 : errno;
      if (file && fseek(file, 0, SEEK_END) == 0) flen = ftell(file);
      if (file && flen > TUNING_MAX_BYTES) {
        blk__failure_note(f, BLK_EINVAL, rank, -1, -1, "tuning file %s: larger than 16 MiB", path);
      } else if (file && flen >= 0 && fseek(file, 0, SEEK_SET) == 0 &&
                 (msg = blk__malloc(plen + (size_t)flen + 1)) &&
                 fread(msg + plen, 1, (size_t)flen, file) == (size_t)flen) {
        memcpy(msg, path, plen);
        len = (long)plen + flen;
      } else {
        if (!e) e = errno;
        blk__failure_note(f, msg || !file ? BLK_EIO : BLK_ENOMEM, rank, -1, -1,
                          "tuning file %s: %s", path, e ? strerror(e) : "cannot be read");
        free(msg);
        msg = NULL;
      }
      if (file) fclose(file);
    }
  }
  MPI_Bcast(&len, 1, MPI_LONG, 0, comm);
  if (len < 0) return;
  if (rank != 0 && !(msg = blk__malloc((size_t)len + 1)))
    blk__failure_note(f, BLK_ENOMEM, rank, -1, -1, "no memory for the tuning file (%ld bytes)",
                      len);
  int have = msg != NULL, all = 0;
  MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, comm);
  for (long at = 0; all && at < len;) {
    int chunk = len - at > (1L << 30) ? 1 << 30 : (int)(len - at);
    MPI_Bcast(msg + at, chunk, MPI_CHAR, 0, comm);
    at += chunk;
  }
  if (all) {
    msg[len] = '\0';
    size_t plen = strlen(msg) + 1;
    char label[512];
    snprintf(label, sizeof label, "file %s", msg);
    if (blk__tuning_parse(out, msg + plen, (size_t)len - plen, label))
      blk__failure_note(f, BLK_EINVAL, rank, -1, -1, "%s", blk_last_error());
  }
  free(msg);
}

int blk_master_config_init(blk_master_config *cfg, unsigned int version) {
  static const blk_master_config defaults = BLK_MASTER_CONFIG_INIT;
  return blk__settings_init(cfg, &defaults, sizeof defaults, config_bytes, version,
                            BLK_MASTER_CONFIG_VERSION, "master: config init");
}

/* The caller's settings in this blk's layout: the fields its version has,
 * the defaults for the rest. A version this blk does not know is a
 * failure (and the defaults are used meanwhile). */
static void read_config(blk_master_config *out, const blk_master_config *cfg, blk__failure *f,
                        int rank) {
  blk_master_config_init(out, BLK_MASTER_CONFIG_VERSION);
  if (cfg->version < 1 || cfg->version > BLK_MASTER_CONFIG_VERSION) {
    blk__failure_note(f, BLK_EINVAL, rank, -1, -1,
                      "the config has version %u; this blk knows 1..%u (initialise it with "
                      "BLK_MASTER_CONFIG_INIT or blk_master_config_init)",
                      cfg->version, BLK_MASTER_CONFIG_VERSION);
    return;
  }
  memcpy(out, cfg, config_bytes[cfg->version]);
  out->version = BLK_MASTER_CONFIG_VERSION;
}

/* What BLK_THREADS_AUTO comes to on this rank (master.h): its processors,
 * each counted 1 / the number of ranks on the node that may run on it,
 * rounded down, at least 1. Collective over comm: every rank calls it,
 * whatever its own setting, since the count needs all of them. A split that
 * fails leaves the rank counting only itself. */
static int auto_threads(MPI_Comm comm) {
  unsigned char mine[BLK__CPU_MASK_BYTES];
  int ncpus = blk__cpus_usable(mine);
  int sharing[8 * BLK__CPU_MASK_BYTES], counts[8 * BLK__CPU_MASK_BYTES];
  for (int c = 0; c < 8 * BLK__CPU_MASK_BYTES; c++)
    counts[c] = sharing[c] = mine[c / 8] >> (c % 8) & 1;
  MPI_Comm node = MPI_COMM_NULL;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    if (MPI_Allreduce(sharing, counts, 8 * BLK__CPU_MASK_BYTES, MPI_INT, MPI_SUM, node) !=
        MPI_SUCCESS)
      memcpy(counts, sharing, sizeof counts);
    MPI_Comm_free(&node);
  }
  double share = 0.0;
  for (int c = 0; c < 8 * BLK__CPU_MASK_BYTES; c++)
    if (sharing[c] && counts[c] > 0) share += 1.0 / counts[c];
  int threads = (int)(share + 1e-9);
  return threads < 1 ? 1 : threads > ncpus ? ncpus : threads;
}

/* The out-of-core settings are checked by budget.c; these are the rest.
 * BLK_THREADS_AUTO becomes auto_n, or 1 where MPI cannot give threads. */
static void check_config(blk_master_config *cfg, blk__failure *f, int rank, int auto_n) {
  if (cfg->log_level != BLK_LOG_DEFAULT &&
      (cfg->log_level < BLK_LOG_NONE || cfg->log_level > BLK_LOG_TRACE))
    blk__failure_note(f, BLK_EINVAL, rank, -1, -1,
                      "log_level = %d, not BLK_LOG_DEFAULT or a level (0..5)", cfg->log_level);
  if (cfg->threads == BLK_THREADS_AUTO) {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    cfg->threads = level < MPI_THREAD_FUNNELED ? 1 : auto_n;
  }
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
    blk__tuning_free(m->tuning);
    blk__budget_free(&m->budget);
    blk__table_free(&m->table);
    blk__pool_destroy(m->pool);
    blk__comm_destroy(m->comm);
    blk__buffer_cache_destroy(m->cache);
    blk__trace_file_discard(m->trace);
    free(m);
  }
  if (*dup != MPI_COMM_NULL && !adopted) MPI_Comm_free(dup);
}

/* How a master stops the job (context.h): the user's stop callback, then
 * MPI_Abort on the master's communicator. MPI_Abort makes the launcher
 * kill every rank, and output not yet forwarded by the launcher is lost
 * with them, so the message that says why gets a moment to travel first. */
static void stop_job(const char *message, void *ctx) {
  blk_master *m = ctx;
  if (m->cfg.stop) m->cfg.stop(message, m->cfg.stop_user);
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  MPI_Abort(m->comm ? blk__comm_mpi(m->comm) : MPI_COMM_WORLD, 1);
  abort(); /* MPI_Abort returned */
}

int blk_master_create(blk_master **out, MPI_Comm comm, const blk_master_config *given) {
  static const blk_master_config defaults = BLK_MASTER_CONFIG_INIT;
  if (!out) return blk__fail(BLK_EINVAL, "master: create: out is NULL");
  *out = NULL;
  if (!given) given = &defaults;
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
  int auto_n = auto_threads(comm);
  blk_master_config config;
  const blk_master_config *cfg = &config;
  read_config(&config, given, &f, rank);
  if (!f.code) check_config(&config, &f, rank, auto_n);
  step(&f, rank, blk__fault_from_env(rank));
  /* Every rank, whatever failed above: rank 0 decides for all. Before the
   * threads start, which name their tracks. */
  blk__trace_file *trace = NULL;
  step(&f, rank, blk__trace_file_open(&trace, comm, cfg->trace));
  blk_master *m = f.code ? NULL : blk__calloc(1, sizeof *m);
  if (!f.code && !m) blk__failure_note(&f, BLK_ENOMEM, rank, -1, -1, "no memory for the master");
  if (!m) blk__trace_file_discard(trace);
  if (m) {
    m->cfg = *cfg;
    m->trace = trace;
    m->context = (blk__context){rank,
                                cfg->log_level,
                                cfg->log,
                                cfg->log_user,
                                stop_job,
                                m,
                                trace ? blk__trace_file_trace(trace) : NULL};
    int size = 1;
    MPI_Comm_size(comm, &size);
    blk__block_fns fns = {cfg->create, cfg->destroy, cfg->save,  cfg->load,
                          cfg->size,   cfg->user,    cfg->evict};
    blk__table_init(&m->table, &fns, size);
    blk__values_clear(&m->results);
    if (blk__buffer_cache_create(&m->cache, CACHE_SLOTS, cache_bytes(cfg)))
      blk__failure_note(&f, BLK_ENOMEM, rank, -1, -1, "no memory for the buffer cache");
    if (!f.code && !step(&f, rank, blk__comm_create(&m->comm, dup, m->cache)))
      blk__op_init(&m->op, m->comm, m->cache);
    if (!f.code) step(&f, rank, blk__pool_create(&m->pool, cfg->threads, &m->context));
    /* 0 is blk's default: auto. */
    int level = cfg->compression_level == 0 ? BLK_COMPRESSION_AUTO : cfg->compression_level;
    /* The codec and I/O threads: as many as the callback threads, but not
     * more than this rank's share of the node's processors (what
     * BLK_THREADS_AUTO comes to): blk's own threads do not oversubscribe
     * the cores when the user's setting does. */
    int io_threads = cfg->threads < auto_n ? cfg->threads : auto_n;
    blk__budget_settings set = {cfg->mem_blocks, cfg->mem_bytes, cfg->queue_spill_bytes,
                                cfg->shuffle,    cfg->spill_dir, cfg->spill_in_memory,
                                level,           io_threads,     &m->context,
                                m->cache};
    if (!f.code) step(&f, rank, blk__budget_init(&m->budget, &m->table, &set, rank));
  }
  /* Every rank, whatever failed above: rank 0's file reaches all of them. */
  blk__tuning *tuning = NULL;
  load_tuning(&tuning, cfg->tuning, comm, rank, &f);
  if (m)
    m->tuning = tuning;
  else
    blk__tuning_free(tuning);
  int rc = blk__op_agree_once(comm, &f, "master: create");
  if (rc) {
    teardown(m, &dup);
    return rc;
  }
  /* Whether any rank may swap blocks out, known alike on every rank: a
   * choice every rank must make alike (arrays' AUTO) may depend on it,
   * where a rank's own budget would split the ranks. */
  int budget = blk__budget_active(&m->budget);
  MPI_Allreduce(&budget, &m->any_budget, 1, MPI_INT, MPI_MAX, comm);
  blk__log_set_rank(rank);
  /* The agreement's all-reduce just brought the ranks together: their
   * timelines start here. */
  if (m->context.trace) blk__trace_set_origin(m->context.trace, blk__now_ns());
  *out = m;
  return BLK_OK;
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
  BLK__ENTER(m);
  if (blk__budget_active(&m->budget)) blk_master_stats_log(m);
  /* Collective: no rank frees its communicator while a message to or from
   * it is under way (MPI would read or write freed memory). */
  blk__op_begin(&m->op, "destroy", NULL, NULL);
  blk__op_wait(&m->op, drained, m);
  blk__op_end(&m->op, NULL);
  blk__table_free(&m->table);
  blk__op_free(&m->op);
  blk__budget_free(&m->budget); /* closes the spill file */
  blk__tuning_free(m->tuning);
  blk__pool_destroy(m->pool);
  /* Its threads are joined: nothing records any more. */
  if (m->trace) blk__trace_file_close(m->trace, blk__comm_mpi(m->comm));
  m->context.trace = NULL;
  blk__comm_destroy(m->comm);
  blk__buffer_cache_destroy(m->cache);
  BLK__LEAVE(); /* the context is m's */
  free(m);
}

int blk_master_rank(const blk_master *m) {
  return blk__comm_rank(m->comm);
}
int blk_master_size(const blk_master *m) {
  return blk__comm_size(m->comm);
}
int blk_master_threads(const blk_master *m) {
  return m->cfg.threads;
}
MPI_Comm blk_master_comm(const blk_master *m) {
  return blk__comm_mpi(m->comm);
}
uint32_t blk_master_epoch(const blk_master *m) {
  return m ? m->op.epoch : 0;
}
int blk_master_local_count(const blk_master *m) {
  return blk__table_count(&m->table);
}

static const blk__block *local(const blk_master *m, int lid) {
  return lid >= 0 && lid < blk__table_count(&m->table) ? blk__table_at(&m->table, lid) : NULL;
}

int blk_master_gid(const blk_master *m, int lid) {
  const blk__block *b = local(m, lid);
  return b ? b->gid : -1;
}

void *blk_master_block(const blk_master *m, int lid) {
  const blk__block *b = local(m, lid);
  return b && b->resident ? b->data : NULL;
}

int blk_master_lid(const blk_master *m, int gid) {
  return blk__table_lid(&m->table, gid);
}

const blk_link *blk_master_links(const blk_master *m, int lid, int *count) {
  const blk__block *b = local(m, lid);
  *count = b ? b->nlinks : 0;
  return b ? b->links : NULL;
}

int blk_master_add(blk_master *m, int gid, void *block, const blk_link *links, int nlinks) {
  if (!m) return blk__fail(BLK_EINVAL, "master: add: the master is NULL");
  BLK__ENTER(m);
  int rc = blk__table_add(&m->table, gid, block, links, nlinks);
  /* Out-of-core, adding may push an older block out; if that write fails the
   * block stays in memory and the error says why. A failed add leaves the
   * block the caller's. */
  if (rc >= 0) rc = blk__budget_added(&m->budget, rc);
  BLK__LEAVE();
  return rc;
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
    int crc;
    if (m->cfg.create_at) {
      blk_block_info info = {.gid = gids[i],
                             .dim = blk_decomposer_dim(d),
                             .continuous = blk_decomposer_is_continuous(d) == 1,
                             .links = links,
                             .nlinks = nlinks,
                             .decomposer = d,
                             .assigner = a};
      if (info.continuous)
        blk_decomposer_block_cbounds(d, gids[i], &info.ccore, &info.cbounds);
      else
        blk_decomposer_block_bounds(d, gids[i], &info.core, &info.bounds);
      crc = m->cfg.create_at(&block, &info, m->cfg.user);
    } else {
      crc = m->cfg.create(&block, gids[i], m->cfg.user);
    }
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
  BLK__ENTER(m);
  blk__op *o = &m->op;
  blk__op_begin(o, "decompose", NULL, NULL);
  int nb = d ? blk_decomposer_nblocks(d) : 0;
  if (!d || !a)
    blk__op_fail(o, BLK_EINVAL, -1, -1, "the decomposer or the assigner is NULL");
  else if (!m->cfg.create && !m->cfg.create_at)
    blk__op_fail(o, BLK_EINVAL, -1, -1,
                 "decompose needs a create_at or create callback in the config");
  else if (blk_assigner_nblocks(a) != nb)
    blk__op_fail(o, BLK_EINVAL, -1, -1, "the assigner has %d blocks but the decomposer has %d",
                 blk_assigner_nblocks(a), nb);
  else if (blk_assigner_nranks(a) != blk__comm_size(m->comm))
    blk__op_fail(o, BLK_EINVAL, -1, -1, "the assigner has %d ranks but the communicator has %d",
                 blk_assigner_nranks(a), blk__comm_size(m->comm));
  else
    create_blocks(m, d, a);
  int rc = blk__op_close(o);
  BLK__LEAVE();
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
  out->records_compressed = st.records_compressed;
  out->records_raw = st.records_raw;
  out->records_raw_poor_ratio = st.records_raw_poor_ratio;
  out->bytes_raw_poor_ratio = st.bytes_raw_poor_ratio;
  out->records_raw_fast_device = st.records_raw_fast_device;
}

const char *blk_master_spill_path(const blk_master *m) {
  return m->budget.storage ? blk__storage_path(m->budget.storage) : "";
}

void blk_master_stats_log(const blk_master *m) {
  BLK__ENTER(m);
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  double ratio = st.bytes_stored_written
                     ? (double)st.bytes_raw_written / (double)st.bytes_stored_written
                     : 0.0;
  blk__storage_stats sst = {0};
  if (m->budget.storage) blk__storage_stats_get(m->budget.storage, &sst);
  blk_log(BLK_LOG_INFO,
          "out-of-core: %d blocks in memory (peak %d), %llu loads, %llu evictions, %llu queues "
          "spilled; wrote %llu bytes as %llu (ratio %.2f), read %llu; compress %.3f s, "
          "decompress %.3f s, write %.3f s, read %.3f s; spill file %llu bytes (peak %llu); "
          "%llu records compressed, %llu raw (%llu of them, %llu bytes, as compression did not "
          "pay; %llu as the device was faster); %llu evictions of blocks saved as they were "
          "loaded (nothing written)",
          st.blocks_in_memory, st.blocks_in_memory_peak, (unsigned long long)st.loads,
          (unsigned long long)st.evictions, (unsigned long long)st.queues_spilled,
          (unsigned long long)st.bytes_raw_written, (unsigned long long)st.bytes_stored_written,
          ratio, (unsigned long long)st.bytes_raw_read, st.seconds_compress, st.seconds_decompress,
          st.seconds_write, st.seconds_read, (unsigned long long)st.spill_file_bytes,
          (unsigned long long)st.spill_file_bytes_peak, (unsigned long long)st.records_compressed,
          (unsigned long long)st.records_raw, (unsigned long long)st.records_raw_poor_ratio,
          (unsigned long long)st.bytes_raw_poor_ratio,
          (unsigned long long)st.records_raw_fast_device,
          (unsigned long long)sst.records_unchanged);
  BLK__LEAVE();
}
