/*
 * test_trace: a traced master's file holds every callback it ran, on the
 * rank and thread that ran it, and loads as trace-event JSON.
 *
 * 7 blocks in a ring, contiguous over the ranks. Each block notes every
 * callback run on it (phase, round); the program runs a foreach, an
 * exchange of 3000 bytes to each neighbour, a foreach that reads them, and
 * a merge with k = 3 over the 7 blocks. After blk_master_destroy rank 0
 * parses the file (tests/trace_json.h, a strict parser) and checks:
 *  - a process per rank, named; a name for every thread that has spans,
 *    "driver" on thread 0 of every rank; every span of positive length
 *    and after the create; the callback spans of one thread never overlap;
 *  - the callback spans are exactly the callbacks the blocks noted, each
 *    on the rank that owns its gid, with its round; the merge's are the
 *    rounds blk_partners_active names (worked out independently);
 *  - the second foreach's spans say 6000 bytes came in, the first's that
 *    6000 went out; one span per collective call of each kind, per rank;
 *  - with 2 threads every callback is handed to the pool (forced), so the
 *    callback spans are on "worker" tracks; out of core (--mem-blocks 1),
 *    a rank with more than one block has store and load spans with their
 *    gid and bytes, and every rank as many I/O threads as its callback
 *    threads, but no more than BLK_THREADS_AUTO comes to.
 * And: rank 0 decides for all (the other ranks' BLK_TRACE names a file
 * that must not appear, and their cfg.trace one that cannot be created);
 * a config of layout version 2 has no trace field; a file rank 0 cannot
 * create fails the create with BLK_EIO on every rank; a create that fails
 * on another rank leaves no file.
 *
 *   test_trace --threads T [--mem-blocks M]
 */
#define _POSIX_C_SOURCE 200809L
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runtime/schedule.h"
#include "trace_checks.h"

#define NBLOCKS 7
#define MSG 3000
#define MAX_CALLS 16

enum { FOREACH_SEND, FOREACH_READ, REDUCE, NPHASES };
static const char *phase_names[NPHASES] = {"foreach", "foreach", "reduce"};

typedef struct call {
  int gid, round, phase;
} call;

typedef struct block {
  int gid, ncalls;
  call calls[MAX_CALLS];
  double sum; /* the merge's */
} block;

#include "flat_block.h"

static void note(block *b, blk_proxy *p, int phase) {
  CHECK(b->ncalls < MAX_CALLS);
  CHECK_EQ_INT(blk_proxy_gid(p), b->gid);
  b->calls[b->ncalls++] = (call){b->gid, blk_proxy_round(p), phase};
}

static int send_both(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  note(b, p, FOREACH_SEND);
  char msg[MSG];
  memset(msg, b->gid, sizeof msg);
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    int rc = blk_proxy_enqueue(p, i, msg, sizeof msg);
    if (rc) return rc;
  }
  return 0;
}

static int read_both(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  note(b, p, FOREACH_READ);
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    CHECK_EQ_INT(blk_proxy_incoming_remaining(p, i), MSG);
    const unsigned char *msg = blk_proxy_dequeue_view(p, i, MSG);
    CHECK_EQ_INT(msg[MSG - 1], blk_proxy_in_gid(p, i));
  }
  return 0;
}

static int merge(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  note(b, p, REDUCE);
  if (blk_proxy_round(p) == 0) b->sum = b->gid;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    if (blk_proxy_in_gid(p, i) == b->gid) continue;
    double got = 0;
    CHECK_EQ_INT(blk_proxy_dequeue_array(p, i, &got, sizeof got, 1), 1);
    b->sum += got;
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++)
    if (blk_proxy_out_gid(p, i) != b->gid) {
      int rc = blk_proxy_enqueue_array(p, i, &b->sum, sizeof b->sum, 1);
      if (rc) return rc;
    }
  return 0;
}

/* Copies a block into user's slot of its gid (on the pool, blocks side by
 * side: each writes its own slot). */
static int collect(void *data, blk_proxy *p, void *user) {
  (void)p;
  block *b = data;
  ((block *)user)[b->gid] = *b;
  return 0;
}

static int by_call(const void *x, const void *y) {
  const call *a = x, *b = y;
  if (a->gid != b->gid) return a->gid < b->gid ? -1 : 1;
  if (a->phase != b->phase) return a->phase < b->phase ? -1 : 1;
  return a->round < b->round ? -1 : a->round > b->round;
}

/* Rank 0: the file against what every rank's blocks noted. */
static void check_file(const char *path, call *noted, int nnoted, const blk_assigner *a, int ranks,
                       int threads, int mem_blocks, const int *io_threads) {
  tj_trace t;
  CHECK_MSG(tj_read_file(&t, path) == 0, "%s: %s", path, t.error);

  tj_check_names(&t, ranks);
  for (int r = 0; r < ranks; r++) {
    /* foreach 3 times (send, read, collect), then one of each other kind. */
    CHECK_EQ_INT(tj_count_spans(&t, r, "operation", "foreach"), 3);
    CHECK_EQ_INT(tj_count_spans(&t, r, "operation", "exchange"), 1);
    CHECK_EQ_INT(tj_count_spans(&t, r, "operation", "reduce"), 1);
    CHECK_EQ_INT(tj_count_spans(&t, r, "operation", "destroy"), 1);
  }

  /* Where each rank's reduce ended: collect's spans come after. */
  double reduce_end[64];
  CHECK(ranks <= 64);
  for (size_t i = 0; i < t.n; i++)
    if (!strcmp(t.events[i].cat, "operation") && !strcmp(t.events[i].name, "reduce"))
      reduce_end[(int)t.events[i].pid] = t.events[i].ts + t.events[i].dur;

  /* The callback spans, less collect's (round 1, after the reduce). */
  call *traced = calloc(t.n + 1, sizeof *traced);
  tj_event **spans = calloc(t.n + 1, sizeof *spans);
  CHECK(traced && spans);
  int ntraced = 0, nspans = 0, stores = 0, loads = 0;
  for (size_t i = 0; i < t.n; i++) {
    tj_event *e = &t.events[i];
    if (!strcmp(e->ph, "M")) continue;
    const char *tname = tj_thread_name(&t, e->pid, e->tid);
    if (!strcmp(e->cat, "out-of-core")) {
      CHECK_MSG(e->gid >= 0 && e->gid < NBLOCKS, "%s of gid %g", e->name, e->gid);
      CHECK_EQ_INT(blk_assigner_rank(a, (int)e->gid), e->pid);
      CHECK(e->raw_bytes > 0 && e->stored_bytes > 0 && e->codec_us >= 0 && e->io_us >= 0);
      stores += !strcmp(e->name, "store");
      loads += !strcmp(e->name, "load");
      continue;
    }
    if (strcmp(e->cat, "callback")) continue;
    spans[nspans++] = e;
    int gid = (int)e->gid, round = (int)e->round;
    CHECK_MSG(gid >= 0 && gid < NBLOCKS, "callback span of gid %g", e->gid);
    CHECK_MSG(blk_assigner_rank(a, gid) == (int)e->pid, "gid %d's span is on rank %g", gid, e->pid);
    if (threads > 1) CHECK_MSG(!strncmp(tname, "worker", 6), "a callback ran on %s", tname);
    int phase = -1;
    if (!strcmp(e->name, "reduce")) {
      phase = REDUCE;
    } else if (!strcmp(e->name, "foreach") && round == 0) {
      phase = FOREACH_SEND;
      CHECK_EQ_INT(e->bytes_in, 0);
      CHECK_EQ_INT(e->bytes_out, 2 * MSG);
    } else if (!strcmp(e->name, "foreach") && round == 1) {
      /* read_both's, or collect's (after the merge). */
      if (e->ts >= reduce_end[(int)e->pid]) continue;
      phase = FOREACH_READ;
      CHECK_EQ_INT(e->bytes_in, 2 * MSG);
    }
    CHECK_MSG(phase >= 0, "a callback span named %s in round %d", e->name, round);
    traced[ntraced++] = (call){gid, round, phase};
  }
  qsort(traced, (size_t)ntraced, sizeof *traced, by_call);
  qsort(noted, (size_t)nnoted, sizeof *noted, by_call);
  CHECK_EQ_INT(ntraced, nnoted);
  for (int i = 0; i < nnoted; i++)
    CHECK_MSG(!by_call(&traced[i], &noted[i]),
              "span %d: gid %d %s round %d, noted gid %d %s round %d", i, traced[i].gid,
              phase_names[traced[i].phase], traced[i].round, noted[i].gid,
              phase_names[noted[i].phase], noted[i].round);
  tj_check_tracks(spans, nspans);
  /* Out of core, with more blocks than the budget, blocks went out and back. */
  int most = 0;
  for (int r = 0; r < ranks; r++) {
    int mine = 0;
    for (int g = 0; g < NBLOCKS; g++) mine += blk_assigner_rank(a, g) == r;
    if (mine > most) most = mine;
  }
  if (mem_blocks && most > mem_blocks)
    CHECK_MSG(stores > 0 && loads > 0, "%d stores and %d loads out of core", stores, loads);
  if (!mem_blocks) CHECK_EQ_INT(stores + loads, 0);
  /* The codec and I/O threads ("I/O", numbered when more than one): as
   * many as the rank said (none in core). */
  for (int r = 0; r < ranks; r++) {
    int io = 0;
    for (size_t i = 0; i < t.n; i++)
      io += !strcmp(t.events[i].name, "thread_name") && t.events[i].pid == r &&
            !strncmp(t.events[i].arg_name, "I/O", 3);
    CHECK_MSG(io == io_threads[r], "rank %d: %d I/O threads, expected %d", r, io, io_threads[r]);
  }
  free(traced);
  free(spans);
  tj_free(&t);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int threads = 1, mem_blocks = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      mem_blocks = atoi(argv[++i]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* Rank 0's names, for all: the trace, and a file nobody may write. */
  char path[256], stray[256];
  long id = rank == 0 ? (long)getpid() : 0;
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(path, sizeof path, "%s/blk_test_trace_%ld.json", tmp, id);
  snprintf(stray, sizeof stray, "%s/blk_test_trace_%ld.stray.json", tmp, id);
  unsetenv("BLK_TRACE");
  if (rank != 0) setenv("BLK_TRACE", stray, 1);

  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, NBLOCKS));
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);

  /* A file rank 0 cannot create: BLK_EIO on every rank, no master. */
  blk_master *m = NULL;
  mc.trace = rank == 0 ? "/nonexistent-blk-dir/trace.json" : NULL;
  blk_log_set_level(BLK_LOG_NONE);
  CHECK_ERR(blk_master_create(&m, MPI_COMM_WORLD, &mc), BLK_EIO, "/nonexistent-blk-dir/trace.json");
  CHECK(m == NULL);
  /* A create that fails on the last rank for its own reason: the same code
   * on every rank, and the file rank 0 made is gone. */
  mc.trace = rank == 0 ? path : NULL;
  mc.threads = rank == size - 1 ? 0 : threads;
  CHECK_ERR(blk_master_create(&m, MPI_COMM_WORLD, &mc), BLK_EINVAL, "threads = 0");
  CHECK(m == NULL);
  MPI_Barrier(MPI_COMM_WORLD); /* rank 0 removes it on its way out of the create */
  CHECK_MSG(access(path, F_OK) != 0, "a failed create left %s", path);
  mc.threads = threads;
  blk_log_set_level(BLK_LOG_WARN);

  /* Layout version 2 has no trace: the field is not read. */
  blk_master_config old = mc;
  old.version = 2;
  old.trace = path;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &old));
  blk_master_destroy(m);
  CHECK_MSG(access(path, F_OK) != 0, "a version-2 config traced into %s", path);

  /* Out of core the master runs min(threads, what BLK_THREADS_AUTO comes
   * to) codec and I/O threads: learn the latter from an untraced master. */
  blk_master_config automc = check_master_config(BLK_THREADS_AUTO, 0, create, destroy, save, load);
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &automc));
  int auto_n = blk_master_threads(m);
  blk_master_destroy(m);
  int io_want = !mem_blocks ? 0 : threads < auto_n ? threads : auto_n;
  int io_all[64] = {0};
  CHECK(size <= 64);
  MPI_Gather(&io_want, 1, MPI_INT, io_all, 1, MPI_INT, 0, MPI_COMM_WORLD);

  /* Traced: rank 0's cfg.trace; the others' would fail. */
  mc.trace = rank == 0 ? path : "/nonexistent-blk-dir/other.json";
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  if (threads > 1) blk__sched_force(1);
  int gids[NBLOCKS], local = blk_assigner_local_gids(a, rank, gids, NBLOCKS);
  for (int i = 0; i < local; i++) {
    blk_link links[2];
    memset(links, 0, sizeof links);
    links[0].gid = (gids[i] + NBLOCKS - 1) % NBLOCKS;
    links[1].gid = (gids[i] + 1) % NBLOCKS;
    for (int l = 0; l < 2; l++) links[l].rank = blk_assigner_rank(a, links[l].gid);
    void *b;
    CHECK_OK(create(&b, gids[i], NULL));
    CHECK_OK(blk_master_add(m, gids[i], b, links, 2));
  }
  CHECK_OK(blk_master_foreach(m, send_both, NULL));
  CHECK_OK(blk_master_exchange(m));
  CHECK_OK(blk_master_foreach(m, read_both, NULL));
  blk_partners *p;
  int divisions[1] = {NBLOCKS};
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, divisions, 3, 1));
  CHECK_OK(blk_reduce(m, a, p, merge, NULL));
  block copies[NBLOCKS];
  memset(copies, 0, sizeof copies);
  CHECK_OK(blk_master_foreach(m, collect, copies));
  blk__sched_force(0);
  blk_master_destroy(m);

  /* Every rank's notes to rank 0, with the merge's rounds worked out. */
  call mine[NBLOCKS * MAX_CALLS];
  int nmine = 0;
  for (int i = 0; i < local; i++)
    for (int c = 0; c < copies[gids[i]].ncalls; c++) mine[nmine++] = copies[gids[i]].calls[c];
  int counts[64] = {0}, displs[64] = {0}, n = nmine * 3;
  CHECK(size <= 64);
  MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; r++) {
    displs[r] = total;
    total += counts[r];
  }
  call *all = rank == 0 ? calloc((size_t)total / 3 + 1, sizeof *all) : NULL;
  MPI_Gatherv(mine, n, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    int merges = 0;
    for (int i = 0; i < total / 3; i++) merges += all[i].phase == REDUCE;
    int expected = 0;
    for (int r = 0; r <= blk_partners_rounds(p); r++)
      for (int g = 0; g < NBLOCKS; g++) expected += blk_partners_active(p, r, g);
    CHECK_EQ_INT(merges, expected);
    for (int i = 0; i < total / 3; i++)
      if (all[i].phase == REDUCE) CHECK(blk_partners_active(p, all[i].round, all[i].gid));
    check_file(path, all, total / 3, a, size, threads, mem_blocks, io_all);
    CHECK_MSG(access(stray, F_OK) != 0, "the other ranks' BLK_TRACE made %s", stray);
    unlink(path);
    printf("test_trace: ok (%d ranks, %d threads, %d blocks in memory, %d callbacks traced)\n",
           size, threads, mem_blocks, total / 3);
  }
  free(all);
  blk_partners_destroy(p);
  blk_assigner_destroy(a);
  MPI_Finalize();
  return 0;
}
