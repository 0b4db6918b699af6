/*
 * test_threads: where callbacks run with threads > 1, what BLK_THREADS_AUTO
 * comes to, and that threads change nothing in the results.
 *
 *   test_threads --case policy|auto|same|blocking
 *
 * policy    8 blocks per rank, 2 threads, foreach with one callback that is
 *           short, then long (it sleeps 5 ms), then short again: short
 *           callbacks end up on the driver thread (after the first, unknown,
 *           ones went to the pool), long ones on the workers, 2 at once (each
 *           waits for another to have started), and short ones come back to
 *           the driver.
 * auto      BLK_THREADS_AUTO gives the rank's processors shared with the
 *           ranks of its node (checked against this process's affinity and
 *           the node's rank count), at least 1; it is also blk's default.
 * same      the array collectives (TREE, SPLIT, BUTTERFLY, and a broadcast),
 *           blk_reduce and blk_all_to_all over values that are not
 *           integers give the same bits with threads 1, 2 and auto.
 * blocking  2+ ranks, 2 threads: a callback that waits for another rank's
 *           callback (through a file, outside blk) while its own rank must
 *           still send that rank the message it needs; the driver keeps
 *           moving messages, so the wait ends. On a fresh master, where the
 *           callbacks of that round are of a kind not yet measured, so they
 *           start on workers (schedule.h says why a kind known to be short
 *           would not).
 * No check depends on timing: waits are bounded (a few seconds) only so a
 * wrong answer fails rather than hangs.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <blk/blk.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/thread.h"
#include "check.h"

static int rank, size;

/* Each thread's copy has its own address: a thread identity without
 * pthread.h. */
static _Thread_local char thread_marker;

static double now_s(void) {
  return 1e-9 * (double)blk__now_ns();
}

static void nap_us(long us) {
  nanosleep(&(struct timespec){us / 1000000, (us % 1000000) * 1000}, NULL);
}

static void destroy_block(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  free(data);
}

static blk_master *make_master(int threads, blk_assigner **a, int nblocks, size_t bytes) {
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = threads;
  mc.destroy = destroy_block;
  blk_master *m = NULL;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_OK(blk_assigner_create_contiguous(a, size, nblocks));
  int *gids = malloc((size_t)nblocks * sizeof *gids);
  CHECK(gids);
  int n = blk_assigner_local_gids(*a, rank, gids, nblocks);
  for (int i = 0; i < n; i++) {
    void *b = calloc(1, bytes);
    CHECK(b);
    CHECK_OK(blk_master_add(m, gids[i], b, NULL, 0));
  }
  free(gids);
  return m;
}

/* ---- policy ---- */

typedef struct policy {
  const void *driver;   /* the driver thread's marker */
  int long_us;          /* 0: a short callback */
  int meet;             /* long callbacks wait until two have started */
  atomic_int on_driver; /* callbacks of this operation on the driver */
  atomic_int elsewhere; /* and on workers */
  atomic_int started;   /* long callbacks of this operation started */
  atomic_int met;       /* long callbacks that saw another one running */
} policy;

static int policy_fn(void *block, blk_proxy *p, void *user) {
  (void)block;
  (void)p;
  policy *q = user;
  atomic_fetch_add(&thread_marker == q->driver ? &q->on_driver : &q->elsewhere, 1);
  if (!q->long_us) return 0;
  /* Long: with meet, wait until two of this operation's callbacks have
   * started (at most 10 s: then they did not run at once); then keep the
   * thread busy. */
  atomic_fetch_add(&q->started, 1);
  double until = now_s() + 10.0;
  while (q->meet && atomic_load(&q->started) < 2 && now_s() < until) nap_us(50);
  if (atomic_load(&q->started) >= 2) atomic_fetch_add(&q->met, 1);
  /* Sleeping, not spinning: a callback waiting for I/O, and the measured
   * hand-offs do not depend on how many other jobs share the cores. */
  nap_us(q->long_us);
  return 0;
}

/* Whether cond holds on every rank (loops that end on it stay collective). */
static int everywhere(int cond) {
  int all = 0;
  MPI_Allreduce(&cond, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

/* Runs one foreach; returns how many callbacks ran on the driver. */
static int policy_run(blk_master *m, policy *q, int long_us, int meet) {
  q->long_us = long_us;
  q->meet = meet;
  atomic_store(&q->on_driver, 0);
  atomic_store(&q->elsewhere, 0);
  atomic_store(&q->started, 0);
  atomic_store(&q->met, 0);
  CHECK_OK(blk_master_foreach(m, policy_fn, q));
  CHECK_EQ_INT(atomic_load(&q->on_driver) + atomic_load(&q->elsewhere), 8);
  return atomic_load(&q->on_driver);
}

static void case_policy(void) {
  blk_assigner *a;
  blk_master *m = make_master(2, &a, 8 * size, 16);
  CHECK_EQ_INT(blk_master_threads(m), 2);
  policy q;
  q.driver = &thread_marker;
  /* Short: the first ones are unknown and go to the pool; from then on the
   * driver runs them. */
  policy_run(m, &q, 0, 0);
  policy_run(m, &q, 0, 0);
  for (int op = 0; op < 20; op++) {
    int here = policy_run(m, &q, 0, 0);
    CHECK_MSG(here == 8, "short callbacks, operation %d: %d of 8 on the driver", op, here);
  }
  /* Long (5 ms): within a few operations every one runs on a worker, two at
   * once. */
  int op = 0, all_off = 0;
  for (; op < 10 && !all_off; op++) all_off = everywhere(policy_run(m, &q, 5000, 0) == 0);
  CHECK_MSG(all_off, "long callbacks still ran on the driver after %d operations", op);
  CHECK_EQ_INT(policy_run(m, &q, 5000, 1), 0);
  CHECK_MSG(atomic_load(&q.met) == 8, "only %d of 8 long callbacks ran beside another",
            atomic_load(&q.met));
  /* Short again: back on the driver within a few operations. */
  int all_here = 0;
  for (op = 0; op < 40 && !all_here; op++) all_here = everywhere(policy_run(m, &q, 0, 0) == 8);
  CHECK_MSG(all_here, "short callbacks still ran on the workers after %d operations", op);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
}

/* ---- auto ---- */

static void case_auto(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK_EQ_INT(sched_getaffinity(0, sizeof set, &set), 0);
  int cpus = CPU_COUNT(&set);
  MPI_Comm node;
  int nlocal = 1, same = 1;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &nlocal);
  /* With every rank of the node on the same processors, each gets its share. */
  cpu_set_t first = set;
  MPI_Bcast(&first, (int)sizeof first, MPI_BYTE, 0, node);
  int mine_same = CPU_EQUAL(&first, &set), all_same = 0;
  MPI_Allreduce(&mine_same, &all_same, 1, MPI_INT, MPI_MIN, node);
  same = all_same;
  MPI_Comm_free(&node);
  int want = cpus / nlocal < 1 ? 1 : cpus / nlocal;

  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  CHECK_EQ_INT(mc.threads, BLK_THREADS_AUTO);
  blk_master *m = NULL;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  int got = blk_master_threads(m);
  CHECK_MSG(got >= 1 && got <= cpus, "auto: %d threads, %d processors", got, cpus);
  if (same)
    CHECK_MSG(got == want, "auto: %d threads, want %d (%d processors, %d ranks on the node)", got,
              want, cpus, nlocal);
  blk_master_destroy(m);
  /* A NULL config is the default too; an explicit count is kept. */
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, NULL));
  CHECK_EQ_INT(blk_master_threads(m), got);
  blk_master_destroy(m);
  mc.threads = 3;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_EQ_INT(blk_master_threads(m), 3);
  blk_master_destroy(m);
  /* Ranks may differ: auto on some, an explicit count on others. */
  mc.threads = rank % 2 ? 1 : BLK_THREADS_AUTO;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_EQ_INT(blk_master_threads(m), rank % 2 ? 1 : got);
  blk_master_destroy(m);
}

/* ---- same ---- */

#define COUNT 1003 /* floats per block: not a multiple of the block count */

typedef struct vec_block {
  float v[COUNT];
  uint64_t seen; /* all_to_all: a hash of what arrived */
} vec_block;

static void *array_of(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  return ((vec_block *)block)->v;
}

static float value(int gid, int i) {
  return (float)(gid + 1) * 0.1f + (float)i * 1e-3f + 1.0f / (float)(1 + (gid * 7 + i) % 13);
}

static int fill(void *block, blk_proxy *p, void *user) {
  (void)user;
  vec_block *b = block;
  for (int i = 0; i < COUNT; i++) b->v[i] = value(blk_proxy_gid(p), i);
  b->seen = 0;
  return 0;
}

/* blk_reduce: a merge whose sum is taken in the order of the in queues. */
static int merge_fn(void *block, blk_proxy *p, void *user) {
  (void)user;
  vec_block *b = block;
  float in[COUNT];
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    if (blk_proxy_in_gid(p, i) == blk_proxy_gid(p)) continue;
    CHECK_EQ_INT(blk_proxy_incoming_remaining(p, i), sizeof in);
    blk_proxy_dequeue(p, i, in, sizeof in);
    for (int j = 0; j < COUNT; j++) b->v[j] = b->v[j] * 0.5f + in[j];
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++)
    if (blk_proxy_out_gid(p, i) != blk_proxy_gid(p))
      CHECK_OK(blk_proxy_enqueue(p, i, b->v, sizeof b->v));
  return 0;
}

static int nblocks_same;

static int a2a_send(void *block, blk_proxy *p, void *user) {
  (void)user;
  vec_block *b = block;
  for (int d = 0; d < nblocks_same; d++)
    CHECK_OK(blk_proxy_enqueue_gid(p, d, &b->v[d % COUNT], sizeof(float) * (size_t)(1 + d % 5)));
  return 0;
}

static int a2a_receive(void *block, blk_proxy *p, void *user) {
  (void)user;
  vec_block *b = block;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    float x[8];
    size_t n = blk_proxy_incoming_remaining(p, i);
    CHECK(n <= sizeof x);
    blk_proxy_dequeue(p, i, x, n);
    uint64_t h = (uint64_t)blk_proxy_in_gid(p, i) * 1000003u;
    for (size_t k = 0; k < n / sizeof(float); k++) {
      uint32_t bits;
      memcpy(&bits, &x[k], sizeof bits);
      h = h * 31u + bits;
    }
    b->seen += h; /* the order of arrival does not matter */
  }
  return 0;
}

/* Every local block's floats after each collective, in order, as bits. */
static size_t run_all(int threads, uint32_t *out, size_t cap) {
  blk_assigner *a;
  int nblocks = nblocks_same;
  blk_master *m = make_master(threads, &a, nblocks, sizeof(vec_block));
  size_t n = 0;
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = COUNT;
  spec.k = 3;
  const blk_arrays_algorithm algs[] = {BLK_ARRAYS_TREE, BLK_ARRAYS_SPLIT, BLK_ARRAYS_BUTTERFLY};
  blk_partners *merge;
  CHECK_OK(blk_partners_create(&merge, BLK_MERGE, 1, &nblocks, 2, 1));
  for (int step = 0; step < 6; step++) {
    CHECK_OK(blk_master_foreach(m, fill, NULL));
    if (step < 3) {
      spec.algorithm = algs[step];
      CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
    } else if (step == 3) {
      CHECK_OK(blk_arrays_broadcast(m, a, &spec));
    } else if (step == 4) {
      CHECK_OK(blk_reduce(m, a, merge, merge_fn, NULL));
    } else {
      CHECK_OK(blk_all_to_all(m, a, 2, 1, a2a_send, a2a_receive, NULL));
    }
    for (int lid = 0; lid < blk_master_local_count(m); lid++) {
      vec_block *b = blk_master_block(m, lid);
      CHECK(n + COUNT + 2 <= cap);
      memcpy(out + n, b->v, sizeof b->v);
      n += COUNT;
      memcpy(out + n, &b->seen, sizeof b->seen);
      n += 2;
    }
  }
  blk_partners_destroy(merge);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  return n;
}

static void case_same(void) {
  nblocks_same = 3 * size + 2;
  size_t cap = (size_t)nblocks_same * 6 * (COUNT + 2);
  uint32_t *one = malloc(cap * sizeof *one), *other = malloc(cap * sizeof *other);
  CHECK(one && other);
  size_t n = run_all(1, one, cap);
  const int others[] = {2, BLK_THREADS_AUTO};
  for (int t = 0; t < 2; t++) {
    CHECK_EQ_INT(run_all(others[t], other, cap), n);
    for (size_t i = 0; i < n; i++)
      CHECK_MSG(one[i] == other[i], "threads %d: word %zu is %08x, with 1 thread %08x", others[t],
                i, (unsigned)other[i], (unsigned)one[i]);
  }
  free(one);
  free(other);
}

/* ---- blocking ---- */

#define BIG 65536 /* floats gid 1 sends gid 3: a payload of its own */

typedef struct blocking {
  char path[256];
  int waited; /* gid 0 saw the file */
} blocking;

static int blocking_fn(void *block, blk_proxy *p, void *user) {
  (void)block;
  blocking *w = user;
  int gid = blk_proxy_gid(p), r = blk_proxy_round(p);
  if (r == 1 && gid == 0) {
    /* Wait (at most 30 s) for gid 3, which needs gid 1's message of this
     * round: its rank must keep sending while this waits. */
    double until = now_s() + 30.0;
    while (access(w->path, F_OK) != 0 && now_s() < until) nap_us(200);
    w->waited = access(w->path, F_OK) == 0;
    if (!w->waited) return -1;
  }
  if (r == 2 && gid == 3) {
    CHECK(blk_proxy_in_count(p) == 2);
    FILE *f = fopen(w->path, "w");
    CHECK_MSG(f, "cannot create %s", w->path);
    fclose(f);
  }
  static float big[BIG];
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t n = blk_proxy_incoming_remaining(p, i);
    CHECK(n == 0 || n == sizeof big);
  }
  if (r < 2)
    for (int i = 0; i < blk_proxy_out_count(p); i++)
      if (blk_proxy_out_gid(p, i) != gid) CHECK_OK(blk_proxy_enqueue(p, i, big, sizeof big));
  return 0;
}

static void case_blocking(void) {
  for (int rep = 0; rep < 3; rep++) {
    blk_assigner *a;
    blk_master *m = make_master(2, &a, 4, 16);
    blocking w = {{0}, 0};
    if (rank == 0)
      snprintf(w.path, sizeof w.path, "%s/blk-test-threads-%ld-%d",
               getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(), rep);
    MPI_Bcast(w.path, (int)sizeof w.path, MPI_CHAR, 0, MPI_COMM_WORLD);
    /* Swap rounds, contiguous: round 0 in groups {0,1} {2,3}, round 1 in
     * {0,2} {1,3}: gid 3's last round needs gid 1's round-1 message. */
    int n = 4;
    blk_partners *p;
    CHECK_OK(blk_partners_create(&p, BLK_SWAP, 1, &n, 2, 1));
    CHECK_OK(blk_reduce(m, a, p, blocking_fn, &w));
    int waited = w.waited, any = 0;
    MPI_Allreduce(&waited, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK_EQ_INT(any, 1);
    if (blk_assigner_rank(a, 3) == rank) CHECK_EQ_INT(unlink(w.path), 0);
    blk_partners_destroy(p);
    blk_master_destroy(m);
    blk_assigner_destroy(a);
  }
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK_MSG(argc == 3 && !strcmp(argv[1], "--case"),
            "usage: test_threads --case policy|auto|same|blocking");
  CHECK_MSG(provided >= MPI_THREAD_FUNNELED, "MPI gives thread level %d", provided);
  const char *which = argv[2];
  if (!strcmp(which, "policy"))
    case_policy();
  else if (!strcmp(which, "auto"))
    case_auto();
  else if (!strcmp(which, "same"))
    case_same();
  else if (!strcmp(which, "blocking"))
    case_blocking();
  else
    CHECK_MSG(0, "unknown case %s", which);
  if (rank == 0) printf("test_threads %s: ok (%d ranks)\n", which, size);
  MPI_Finalize();
  return 0;
}
