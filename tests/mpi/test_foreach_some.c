/*
 * test_foreach_some: blk_master_foreach_some runs the blocks its select
 * takes and no other, and out of core does not load the others.
 *
 * 13 blocks in a ring (links to gid - 1 and gid + 1), contiguous over the
 * ranks. Checked on every block of every rank: (1) a select by gid runs
 * exactly the blocks it takes, and select sees the gid it is asked about;
 * (2) after an exchange in which every fourth block sent to its right
 * neighbour, blk_select_incoming runs exactly the receivers, which read
 * what was sent, and select saw the bytes waiting; (3) NULL runs every
 * block; (4) a select that takes nothing still makes a collective call;
 * (5) a NULL callback is BLK_EINVAL on every rank. With --mem-blocks 1,
 * blocks are loaded only for the ones selected.
 *
 *   test_foreach_some --threads T [--mem-blocks M]
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define NBLOCKS 13
/* A message's bytes: above queue_spill_bytes (4 KiB), so that out of core a
 * message for a block that is out goes to storage, and select must count
 * it there. */
#define MSG 8192

typedef struct block {
  int gid;
  int runs; /* callbacks run on it */
} block;

#include "flat_block.h"

static int by_gid(int gid, size_t queued, void *user) {
  (void)queued;
  (void)user;
  CHECK(gid >= 0 && gid < NBLOCKS);
  return gid % 3 == 1;
}

/* blk_select_incoming, checking what it is told: a message or nothing. */
static int incoming(int gid, size_t queued, void *user) {
  CHECK_MSG(queued == 0 || queued == MSG, "gid %d: %zu bytes queued", gid, queued);
  return blk_select_incoming(gid, queued, user);
}

static int none(int gid, size_t queued, void *user) {
  (void)gid;
  (void)queued;
  (void)user;
  return 0;
}

/* Counts the run, and reads what came in (checking it). */
static int run(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  b->runs++;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t n = blk_proxy_incoming_remaining(p, i);
    if (!n) continue;
    CHECK_EQ_INT(n, MSG);
    const int *msg = blk_proxy_dequeue_view(p, i, MSG);
    int from;
    memcpy(&from, msg, sizeof from);
    CHECK_EQ_INT(from, blk_proxy_in_gid(p, i));
    CHECK_EQ_INT(from % 4, 0);
  }
  return 0;
}

/* Every fourth block sends its gid to its right neighbour. */
static int send_right(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  if (b->gid % 4 != 0) return 0;
  int msg[MSG / sizeof(int)] = {b->gid};
  return blk_proxy_enqueue_gid(p, (b->gid + 1) % NBLOCKS, msg, sizeof msg);
}

static int reset(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  ((block *)data)->runs = 0;
  return 0;
}

typedef struct tally {
  int runs[NBLOCKS]; /* by gid, this rank's blocks */
} tally;

static int collect(void *data, blk_proxy *p, void *user) {
  (void)p;
  const block *b = data;
  ((tally *)user)->runs[b->gid] = b->runs;
  return 0;
}

/* Every block of every rank ran exactly as want(gid) says (0 or 1). */
static void check_runs(blk_master *m, int (*want)(int gid), const char *what) {
  tally t;
  memset(&t, 0, sizeof t);
  CHECK_OK(blk_master_foreach(m, collect, &t));
  int all[NBLOCKS];
  MPI_Allreduce(t.runs, all, NBLOCKS, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  for (int g = 0; g < NBLOCKS; g++)
    CHECK_MSG(all[g] == want(g), "%s: gid %d ran %d times, expected %d", what, g, all[g], want(g));
  CHECK_OK(blk_master_foreach(m, reset, NULL));
}

static int want_by_gid(int g) {
  return g % 3 == 1;
}
static int want_receivers(int g) {
  return (g + NBLOCKS - 1) % NBLOCKS % 4 == 0; /* from 0, 4, 8 and 12 (to 0) */
}
static int want_all(int g) {
  (void)g;
  return 1;
}
static int want_none(int g) {
  (void)g;
  return 0;
}

static uint64_t loads(const blk_master *m) {
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  return st.loads;
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
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, NBLOCKS));
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  blk_master *m;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
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

  /* (1) by gid; out of core, only the selected blocks are loaded. */
  uint64_t before = loads(m);
  CHECK_OK(blk_master_foreach_some(m, run, by_gid, NULL));
  uint64_t selected = 0;
  for (int i = 0; i < local; i++) selected += (uint64_t)want_by_gid(gids[i]);
  CHECK_MSG(loads(m) - before <= selected, "rank %d: %llu loads for %llu selected blocks", rank,
            (unsigned long long)(loads(m) - before), (unsigned long long)selected);
  check_runs(m, want_by_gid, "select by gid");

  /* (2) only the blocks a message reached. */
  CHECK_OK(blk_master_foreach(m, send_right, NULL));
  CHECK_OK(blk_master_exchange(m));
  if (mem_blocks && size == 1) { /* (4 receivers, at most one in memory) */
    blk_master_stats st;
    blk_master_stats_get(m, &st);
    CHECK_MSG(st.queues_spilled >= 3, "%llu messages went to storage, expected 3 or more",
              (unsigned long long)st.queues_spilled);
  }
  CHECK_OK(blk_master_foreach_some(m, run, incoming, NULL));
  check_runs(m, want_receivers, "blk_select_incoming");
  CHECK_OK(blk_master_exchange(m)); /* (nothing sent: every in queue empty again) */
  CHECK_OK(blk_master_foreach_some(m, run, blk_select_incoming, NULL));
  check_runs(m, want_none, "blk_select_incoming, nothing sent");

  /* (3) NULL: every block; (4) nothing selected: still collective. */
  CHECK_OK(blk_master_foreach_some(m, run, NULL, NULL));
  check_runs(m, want_all, "select NULL");
  before = loads(m);
  CHECK_OK(blk_master_foreach_some(m, run, none, NULL));
  CHECK(loads(m) == before);
  check_runs(m, want_none, "select none");

  /* (5) */
  blk_log_set_level(BLK_LOG_NONE);
  int rc = blk_master_foreach_some(m, NULL, by_gid, NULL);
  CHECK_EQ_INT(rc, BLK_EINVAL);
  check_agreed(rc, "the callback is NULL");
  blk_log_set_level(BLK_LOG_WARN);
  if (mem_blocks) check_budget(m, mem_blocks);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  if (rank == 0)
    printf("test_foreach_some: ok (%d ranks, %d threads, %d blocks in memory)\n", size, threads,
           mem_blocks);
  MPI_Finalize();
  return 0;
}
