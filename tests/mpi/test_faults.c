/*
 * test_faults: failures are collective. Whatever fails on one rank, every
 * rank returns the same code with the same detail (naming the failing rank,
 * gid and round), no rank hangs (ctest's time-out), and what every block
 * holds afterwards is what the failure semantics say: exact results after
 * a success, and after a failure, for the blocks that did not depend on it,
 * exactly what a run without it gives.
 *
 *   test_faults --case NAME [--threads T] [--mem-blocks M]
 *
 *   callback      a reduction callback fails on one block in one round; each
 *                 block's value and callback count are checked against a
 *                 simulation of the pattern (partners.h) in which the failure
 *                 reaches exactly the blocks downstream of it
 *   alloc         the Nth allocation inside blk fails on one rank, for every N
 *                 an operation reaches (foreach, exchange, reduce, all_to_all,
 *                 the array all-reduce): every rank returns the same code,
 *                 and a success is exact
 *   isend         the same with the Nth MPI send
 *   alloc-a2a, isend-a2a
 *                 the same for all_to_all over 12 blocks, whose items are
 *                 forwarded over three rounds, by copy and by reference
 *   isend-twice   two sends in a row fail: the job stops (death test)
 *   irecv         a payload receive fails: the job stops (death test)
 *   posts         value all-reduces that disagree (a rank whose blocks post
 *                 nothing, blocks of one rank that post different sequences)
 *   missing       a block the assigner puts on a rank was never added, or a
 *                 rank holds another rank's block
 *   create        a master create that fails on one rank only
 *   null          NULL handles
 *   wrap          the operation counter wraps around 2^32
 *   huge          array counts and block counts that cannot fit in memory
 *   corrupt-queue out-of-core, spilled exchange queues are corrupted on disk:
 *                 every rank returns BLK_ECORRUPT, what arrived is right,
 *                 and the next exchange sends nothing stale
 */
#define _POSIX_C_SOURCE 200809L /* pread, pwrite */
#include <blk/blk.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"
#include "check.h"
#include "master/master_state.h"

#define NB_MAX 64
#define ARRAY 64

typedef struct block {
  int gid;
  int64_t v;               /* the reduction's value */
  int calls;               /* reduction callbacks run */
  int counter;             /* foreach runs */
  int arrivals;            /* all_to_all sources seen */
  int64_t sent[NB_MAX][3]; /* all_to_all by reference: the messages, until it returns */
  float a[ARRAY];          /* the array all-reduce's array */
} block;

typedef struct test {
  int rank, size, threads, mem_blocks;
  int nblocks, k, contiguous;
  blk_pattern pattern;
  blk_partners *p;
  int fail_gid, fail_round; /* the callback case's failure, or -1 */
  int seq;                  /* exchange and all_to_all: which run this is */
} test;

static test T;

#include "flat_block.h"

static int64_t initial(int gid) {
  return ((int64_t)1 << (gid % 40)) + 1000 * gid + 7;
}

static blk_master *make_master(int threads, int mem_blocks) {
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  blk_master *m = NULL;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  return m;
}

/* A 1-D periodic decomposition of nblocks blocks, so blocks have links. */
static void add_blocks(blk_master *m, blk_assigner *a, int nblocks) {
  blk_bounds domain;
  int64_t lo[BLK_MAX_DIM] = {0}, hi[BLK_MAX_DIM] = {10 * nblocks};
  CHECK_OK(blk_bounds_set(&domain, 1, lo, hi));
  blk_decomposer_config dc = BLK_DECOMPOSER_CONFIG_INIT;
  dc.wrap[0] = 1;
  blk_decomposer *d;
  CHECK_OK(blk_decomposer_create(&d, &domain, nblocks, &dc));
  CHECK_OK(blk_master_decompose(m, d, a));
  blk_decomposer_destroy(d);
}

static int zero_counter_fn(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  ((block *)data)->counter = 0;
  return 0;
}

/* --- the reduction of values, and its simulation ------------------------ */

static int reset(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  b->v = initial(b->gid);
  b->calls = 0;
  return 0;
}

/* v += what every in-partner sent; send v to every out-partner. Fails (a
 * user code, before changing anything) on the chosen gid and round. */
static int sum_round(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  if (b->gid == T.fail_gid && blk_proxy_round(p) == T.fail_round) return -7;
  int64_t acc = b->v;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    int64_t x;
    blk_proxy_dequeue(p, i, &x, sizeof x);
    CHECK_EQ_INT(blk_proxy_incoming_remaining(p, i), 0);
    acc = (int64_t)((uint64_t)acc + (uint64_t)x);
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    int rc = blk_proxy_enqueue(p, i, &acc, sizeof acc);
    if (rc) return rc; /* nothing changed: the block fails as it was */
  }
  b->v = acc;
  b->calls++;
  return 0;
}

/* What every block holds after the reduction, when (fail_gid, fail_round)
 * fails: a block fails in the round its own callback fails or a message
 * from a failed in-partner arrives, and from then on keeps its value. */
static void simulate(const blk_partners *p, int n, int fail_gid, int fail_round, int64_t *v,
                     int *calls) {
  int R = blk_partners_rounds(p), failed[NB_MAX], ins[NB_MAX];
  int64_t next[NB_MAX];
  for (int g = 0; g < n; g++) {
    v[g] = initial(g);
    calls[g] = 0;
    failed[g] = R + 1; /* the round it failed in; R + 1: never */
  }
  for (int r = 0; r <= R; r++) {
    memcpy(next, v, (size_t)n * sizeof *v);
    for (int g = 0; g < n; g++) {
      if (!blk_partners_active(p, r, g) || failed[g] <= r) continue;
      int nin = blk_partners_in(p, r, g, ins, NB_MAX);
      int64_t acc = v[g];
      for (int i = 0; i < nin; i++) {
        if (failed[ins[i]] <= r - 1) failed[g] = r; /* it sent a failed message */
        acc = (int64_t)((uint64_t)acc + (uint64_t)v[ins[i]]);
      }
      if (g == fail_gid && r == fail_round) failed[g] = r;
      if (failed[g] == r) continue;
      next[g] = acc;
      calls[g]++;
    }
    memcpy(v, next, (size_t)n * sizeof *v);
  }
}

static int64_t expect_v[NB_MAX];
static int expect_calls[NB_MAX];

static int check_values(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  CHECK_MSG(b->v == expect_v[b->gid] && b->calls == expect_calls[b->gid],
            "gid %d holds %lld after %d callbacks; expected %lld after %d (failure at gid %d "
            "round %d)",
            b->gid, (long long)b->v, b->calls, (long long)expect_v[b->gid], expect_calls[b->gid],
            T.fail_gid, T.fail_round);
  return 0;
}

/* One reduction with the failure T.fail_gid/T.fail_round (or none). */
static void reduce_and_check(blk_master *m, blk_assigner *a) {
  CHECK_OK(blk_master_foreach(m, reset, NULL));
  int rc = blk_reduce(m, a, T.p, sum_round, NULL);
  if (T.fail_gid >= 0) {
    char want[128];
    snprintf(want, sizeof want, "rank %d, gid %d, round %d: the callback returned -7",
             blk_assigner_rank(a, T.fail_gid), T.fail_gid, T.fail_round);
    CHECK_EQ_INT(rc, BLK_ECALLBACK);
    check_agreed(rc, want);
  } else {
    check_agreed(rc, NULL);
  }
  simulate(T.p, T.nblocks, T.fail_gid, T.fail_round, expect_v, expect_calls);
  CHECK_OK(blk_master_foreach(m, check_values, NULL));
}

/* A round in which gid is active, about halfway through its rounds. */
static int middle_round(const blk_partners *p, int gid) {
  int R = blk_partners_rounds(p), active[64], n = 0;
  for (int r = 0; r <= R; r++)
    if (blk_partners_active(p, r, gid)) active[n++] = r;
  CHECK(n > 0);
  return active[n / 2];
}

static int check_counter(void *data, blk_proxy *p, void *user);

/* foreach: counts every block's run; the chosen gid fails. */
static int count_or_fail(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  b->counter++;
  return b->gid == T.fail_gid ? -7 : 0;
}

static void foreach_failure(blk_master *m, blk_assigner *a) {
  CHECK_OK(blk_master_foreach(m, zero_counter_fn, NULL));
  T.fail_gid = T.nblocks - 2;
  int rc = blk_master_foreach(m, count_or_fail, NULL);
  char want[128];
  snprintf(want, sizeof want,
           "foreach %u failed on rank %d, gid %d, round 0: the callback "
           "returned -7",
           blk_master_epoch(m), blk_assigner_rank(a, T.fail_gid), T.fail_gid);
  CHECK_EQ_INT(rc, BLK_ECALLBACK);
  check_agreed(rc, want);
  int one = 1; /* every block ran, the failing one too */
  CHECK_OK(blk_master_foreach(m, check_counter, &one));
  T.fail_gid = -1;
}

static void case_callback(void) {
  static const struct {
    blk_pattern pattern;
    int nblocks, k, contiguous;
  } configs[] = {{BLK_MERGE, 7, 2, 1},
                 {BLK_ALLREDUCE, 12, 3, 0},
                 {BLK_SWAP, 7, 3, 1},
                 {BLK_BROADCAST, 12, 2, 0},
                 {BLK_ALLREDUCE, 5, 2, 1}};
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    T.nblocks = configs[c].nblocks;
    blk_master *m = make_master(T.threads, T.mem_blocks);
    blk_assigner *a;
    CHECK_OK(blk_assigner_create_contiguous(&a, T.size, T.nblocks));
    add_blocks(m, a, T.nblocks);
    CHECK_OK(blk_partners_create(&T.p, configs[c].pattern, 1, &T.nblocks, configs[c].k,
                                 configs[c].contiguous));
    if (c == 0) foreach_failure(m, a);
    /* Two failures (a block in the middle, and the last one early), then
     * none: the master goes on working after a failure. */
    int gids[2] = {T.nblocks / 2, T.nblocks - 1};
    for (int f = 0; f < 2; f++) {
      T.fail_gid = gids[f];
      T.fail_round = f == 0 ? middle_round(T.p, gids[f]) : 0;
      if (!blk_partners_active(T.p, T.fail_round, T.fail_gid))
        T.fail_round = middle_round(T.p, T.fail_gid);
      reduce_and_check(m, a);
    }
    T.fail_gid = T.fail_round = -1;
    reduce_and_check(m, a);
    check_budget(m, T.mem_blocks);
    blk_partners_destroy(T.p);
    T.p = NULL;
    blk_assigner_destroy(a);
    blk_master_destroy(m);
  }
}

/* --- the operations an injected fault is swept through ------------------ */

enum {
  OP_FOREACH,
  OP_EXCHANGE,
  OP_REDUCE,
  OP_A2A,
  OP_A2A_REF,
  OP_TREE,
  OP_BUTTERFLY,
  OP_SPLIT,
  OP_PIPELINED,
  NOPS
};
static const char *const op_names[NOPS] = {"foreach",
                                           "exchange",
                                           "reduce",
                                           "all_to_all",
                                           "all_to_all by reference",
                                           "arrays TREE",
                                           "arrays BUTTERFLY",
                                           "arrays SPLIT",
                                           "arrays PIPELINED_TREE"};

static int count_up(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  ((block *)data)->counter++;
  return 0;
}

static int check_counter(void *data, blk_proxy *p, void *user) {
  (void)p;
  block *b = data;
  CHECK_EQ_INT(b->counter, *(int *)user);
  return 0;
}

/* Exchange: each block sends (its gid, the run number, the link) to every
 * link; what arrives must be exactly that, or (after a failure) nothing. */
static int send_links(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    int64_t msg[3] = {b->gid, T.seq, blk_proxy_out_gid(p, i)};
    CHECK_OK(blk_proxy_enqueue(p, i, msg, sizeof msg));
  }
  return 0;
}

static int check_links(void *data, blk_proxy *p, void *user) {
  block *b = data;
  int must_arrive = *(int *)user;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t left = blk_proxy_incoming_remaining(p, i);
    if (!left && !must_arrive) continue;
    int64_t msg[3];
    CHECK_EQ_INT(left, sizeof msg);
    blk_proxy_dequeue(p, i, msg, sizeof msg);
    CHECK_EQ_INT(msg[0], blk_proxy_in_gid(p, i));
    CHECK_EQ_INT(msg[1], T.seq);
    CHECK_EQ_INT(msg[2], b->gid);
  }
  return 0;
}

/* all_to_all: every block sends (src, dst, run) to every block; whatever
 * arrives must be exactly that. *user is 1 to send by reference (the
 * messages are kept in the block): whole (g % 3 == 0), a reference then a
 * copy (the queue copies the reference first), or a copy. */
static int a2a_by_copy = 0, a2a_by_ref = 1;

static int a2a_send(void *data, blk_proxy *p, void *user) {
  int by_ref = *(const int *)user;
  block *b = data;
  b->arrivals = 0;
  for (int g = 0; g < T.nblocks; g++) {
    int64_t *msg = b->sent[g];
    msg[0] = b->gid;
    msg[1] = g;
    msg[2] = T.seq;
    int rc = !by_ref || g % 3 == 2 ? blk_proxy_enqueue_gid(p, g, msg, 3 * sizeof *msg)
             : g % 3               ? blk_proxy_enqueue_ref_gid(p, g, msg, sizeof *msg)
                                   : blk_proxy_enqueue_ref_gid(p, g, msg, 3 * sizeof *msg);
    if (!rc && by_ref && g % 3 == 1) rc = blk_proxy_enqueue_gid(p, g, msg + 1, 2 * sizeof *msg);
    if (rc) return rc;
  }
  return 0;
}

/* By reference, every other source is read through blk_proxy_incoming,
 * which may have to copy (and find no memory): even blocks then return the
 * error, odd ones go on as if nothing happened, which must fail the
 * operation all the same. */
static int a2a_receive(void *data, blk_proxy *p, void *user) {
  int by_ref = *(const int *)user;
  block *b = data;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    int64_t msg[3];
    CHECK_EQ_INT(blk_proxy_incoming_remaining(p, i), sizeof msg);
    if (!by_ref) {
      blk_proxy_dequeue(p, i, msg, sizeof msg);
    } else if ((i + b->gid) % 2 == 0) {
      blk_buffer *in = blk_proxy_incoming(p, i);
      if (blk_buffer_error(in)) {
        CHECK_EQ_INT(blk_buffer_error(in), BLK_ENOMEM);
        if (b->gid % 2 == 0) return BLK_ENOMEM;
        continue;
      }
      CHECK_OK(blk_buffer_read(in, msg, sizeof msg));
    } else {
      memcpy(msg, blk_proxy_dequeue_view(p, i, sizeof msg), sizeof msg);
    }
    CHECK_EQ_INT(msg[0], blk_proxy_in_gid(p, i));
    CHECK_EQ_INT(msg[1], b->gid);
    CHECK_EQ_INT(msg[2], T.seq);
    b->arrivals++;
  }
  return 0;
}

static int check_arrivals(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  CHECK_EQ_INT(((block *)data)->arrivals, T.nblocks);
  return 0;
}

static float array_value(int gid, int j) {
  return (float)((gid * 7 + j * 3) % 23);
}

static int fill_array(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  for (int j = 0; j < ARRAY; j++) b->a[j] = array_value(b->gid, j);
  return 0;
}

static int check_array(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  for (int j = 0; j < ARRAY; j++) {
    float want = 0;
    for (int g = 0; g < T.nblocks; g++) want += array_value(g, j);
    CHECK_MSG(b->a[j] == want, "gid %d element %d is %g, expected %g", b->gid, j, (double)b->a[j],
              (double)want);
  }
  return 0;
}

static void *array_of(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  return ((block *)data)->a;
}

/* Runs operation op once (the fault, if armed, is armed around exactly this
 * call) and returns its code. */
static int run_op(blk_master *m, blk_assigner *a, int op) {
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = ARRAY;
  spec.k = 2;
  switch (op) {
    case OP_FOREACH:
      return blk_master_foreach(m, count_up, NULL);
    case OP_EXCHANGE:
      return blk_master_exchange(m);
    case OP_REDUCE:
      return blk_reduce(m, a, T.p, sum_round, NULL);
    case OP_A2A:
      return blk_all_to_all(m, a, 2, 1, a2a_send, a2a_receive, &a2a_by_copy);
    case OP_A2A_REF:
      return blk_all_to_all(m, a, 2, 1, a2a_send, a2a_receive, &a2a_by_ref);
    case OP_TREE:
      spec.algorithm = BLK_ARRAYS_TREE;
      return blk_arrays_all_reduce(m, a, &spec);
    case OP_BUTTERFLY:
      spec.algorithm = BLK_ARRAYS_BUTTERFLY;
      return blk_arrays_all_reduce(m, a, &spec);
    case OP_SPLIT:
      spec.algorithm = BLK_ARRAYS_SPLIT;
      return blk_arrays_all_reduce(m, a, &spec);
    default:
      spec.algorithm = BLK_ARRAYS_PIPELINED_TREE;
      spec.segment = 64; /* four segments of the 256-byte array */
      return blk_arrays_all_reduce(m, a, &spec);
  }
}

/* What goes before an operation (unarmed). */
static void prepare_op(blk_master *m, int op, int *counter) {
  T.seq++;
  if (op == OP_FOREACH) CHECK_OK(blk_master_foreach(m, check_counter, counter));
  if (op == OP_EXCHANGE) CHECK_OK(blk_master_foreach(m, send_links, NULL));
  if (op == OP_REDUCE) CHECK_OK(blk_master_foreach(m, reset, NULL));
  if (op >= OP_TREE) CHECK_OK(blk_master_foreach(m, fill_array, NULL));
}

/* What must hold after it: everything, after a success; after a failure,
 * whatever arrived must be right. */
static void check_op(blk_master *m, int op, int rc, int *counter) {
  int complete = rc == 0;
  if (op == OP_FOREACH) {
    if (complete)
      ++*counter;
    else
      *counter = -1; /* some blocks counted, some may not have */
  }
  if (op == OP_FOREACH && !complete) {
    CHECK_OK(blk_master_foreach(m, reset, NULL)); /* (reuse: counters restart) */
    return;
  }
  if (op == OP_EXCHANGE) CHECK_OK(blk_master_foreach(m, check_links, &complete));
  if (op == OP_REDUCE && complete) {
    simulate(T.p, T.nblocks, -1, -1, expect_v, expect_calls);
    CHECK_OK(blk_master_foreach(m, check_values, NULL));
  }
  if ((op == OP_A2A || op == OP_A2A_REF) && complete)
    CHECK_OK(blk_master_foreach(m, check_arrivals, NULL));
  if (op >= OP_TREE && complete) CHECK_OK(blk_master_foreach(m, check_array, NULL));
}

/* Sweeps the Nth call of `kind` on rank `who` through operations first..last
 * over nblocks blocks, for every N the operation reaches. allowed: the codes
 * a failure may give. */
static void sweep(blk__fault_kind kind, const int *allowed, int nallowed, int nblocks, int first,
                  int last) {
  T.nblocks = nblocks;
  T.fail_gid = T.fail_round = -1;
  blk_master *m = make_master(T.threads, T.mem_blocks);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, T.size, T.nblocks));
  add_blocks(m, a, T.nblocks);
  CHECK_OK(blk_partners_create(&T.p, BLK_ALLREDUCE, 1, &T.nblocks, 3, 1));
  int ranks[2] = {0, T.size - 1};
  for (int w = 0; w < (T.size > 1 ? 2 : 1); w++) {
    int who = ranks[w];
    for (int op = first; op <= last; op++) {
      int counter = 0, failures = 0, runs = 0;
      CHECK_OK(blk_master_foreach(m, zero_counter_fn, NULL));
      /* Once unarmed: the storage the operation keeps is in place. */
      prepare_op(m, op, &counter);
      CHECK_OK(run_op(m, a, op));
      check_op(m, op, 0, &counter);
      for (uint64_t n = 1;; n++) {
        if (counter < 0) {
          CHECK_OK(blk_master_foreach(m, zero_counter_fn, NULL));
          counter = 0;
        }
        prepare_op(m, op, &counter);
        if (T.rank == 0 && getenv("TEST_FAULTS_VERBOSE"))
          printf("  %s with call %llu failing on rank %d\n", op_names[op], (unsigned long long)n,
                 who);
        if (T.rank == who) blk__fault_arm(kind, n, 1);
        int rc = run_op(m, a, op);
        uint64_t fired = T.rank == who ? blk__fault_fired(kind) : 0;
        blk__fault_arm(kind, 0, 0);
        MPI_Bcast(&fired, 1, MPI_UINT64_T, who, MPI_COMM_WORLD);
        check_agreed(rc, NULL);
        if (rc) {
          int ok = 0;
          for (int i = 0; i < nallowed; i++) ok |= rc == allowed[i];
          CHECK_MSG(ok, "%s, fault %llu on rank %d: returned %d (%s): %s", op_names[op],
                    (unsigned long long)n, who, rc, blk_strerror(rc), blk_last_error());
          char want[32];
          snprintf(want, sizeof want, "on rank %d", who);
          CHECK_MSG(strstr(blk_last_error(), want), "%s: the detail \"%s\" does not name rank %d",
                    op_names[op], blk_last_error(), who);
          failures++;
        }
        check_op(m, op, rc, &counter);
        runs++;
        if (!fired) {
          CHECK_MSG(rc == 0, "%s returned %d with no fault", op_names[op], rc);
          break;
        }
        CHECK_MSG(n < 2000, "%s: more than 2000 calls", op_names[op]);
      }
      if (T.rank == 0)
        printf("  %s: faults at rank %d: %d runs, %d failed\n", op_names[op], who, runs, failures);
    }
  }
  blk_partners_destroy(T.p);
  T.p = NULL;
  blk_assigner_destroy(a);
  blk_master_destroy(m);
}

/* Every operation over 7 blocks: all_to_all is then a direct exchange (7
 * is prime, one round). */
static void case_alloc(void) {
  const int allowed[] = {BLK_ENOMEM, BLK_ECALLBACK};
  sweep(BLK__FAULT_ALLOC, allowed, 2, 7, 0, NOPS - 1);
}

static void case_isend(void) {
  const int allowed[] = {BLK_EMPI};
  sweep(BLK__FAULT_ISEND, allowed, 1, 7, 0, NOPS - 1);
}

/* all_to_all over 12 blocks with k = 2: three rounds (2, 2, 3), so items
 * are forwarded, by reference inside a rank and packed across. */
static void case_alloc_a2a(void) {
  const int allowed[] = {BLK_ENOMEM, BLK_ECALLBACK};
  sweep(BLK__FAULT_ALLOC, allowed, 2, 12, OP_A2A, OP_A2A_REF);
}

static void case_isend_a2a(void) {
  const int allowed[] = {BLK_EMPI};
  sweep(BLK__FAULT_ISEND, allowed, 1, 12, OP_A2A, OP_A2A_REF);
}

/* A swap round of messages of `bytes` each (above 16 KiB they travel as
 * separate payloads). */
static size_t big_bytes;

static int big_round(void *data, blk_proxy *p, void *user) {
  (void)data;
  (void)user;
  static _Thread_local unsigned char buf[65536];
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    CHECK_EQ_INT(blk_proxy_incoming_remaining(p, i), big_bytes);
    blk_proxy_dequeue(p, i, buf, big_bytes);
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++)
    CHECK_OK(blk_proxy_enqueue(p, i, buf, big_bytes));
  return 0;
}

/* Death tests: two sends in a row fail on rank 0 (the first is a round's
 * message, whose failed stand-in then fails too), or rank 0's first
 * payload receive fails. The job must stop; returning is a failure. */
static void case_stop(blk__fault_kind kind, int count, size_t bytes) {
  T.nblocks = 4;
  big_bytes = bytes;
  blk_master *m = make_master(T.threads, 0);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, T.size, T.nblocks));
  add_blocks(m, a, T.nblocks);
  CHECK_OK(blk_partners_create(&T.p, BLK_SWAP, 1, &T.nblocks, 4, 1));
  if (T.rank == 0) blk__fault_arm(kind, 1, (uint64_t)count);
  /* No rank sends before rank 0 is armed: a faster rank's payload could
   * otherwise reach rank 0 while add_blocks' agreement ends, and its receive
   * would be posted, unarmed, then (1 run in 40-80 at 4 ranks). */
  MPI_Barrier(MPI_COMM_WORLD);
  int rc = blk_reduce(m, a, T.p, big_round, NULL);
  CHECK_MSG(0, "the job should have stopped; the reduction returned %d (%s)", rc, blk_strerror(rc));
}

/* --- disagreeing value all-reduces --------------------------------------- */

/* Posts one sum (gid) and one max (gid); with user != NULL, the blocks of
 * the rank it points to post nothing, or its first block posts a third. */
typedef struct posts {
  int rank, how; /* how: 0 all post, 1 that rank's blocks post nothing, 2 one posts more */
} posts;

static int post_values(void *data, blk_proxy *p, void *user) {
  block *b = data;
  const posts *ps = user;
  if (ps->how == 1 && ps->rank == T.rank) return 0;
  CHECK_OK(blk_proxy_all_reduce_i64(p, b->gid, BLK_OP_SUM));
  CHECK_OK(blk_proxy_all_reduce_f64(p, b->gid, BLK_OP_MAX));
  if (ps->how == 2 && ps->rank == T.rank && blk_proxy_gid(p) == b->gid && b->counter == 1)
    CHECK_OK(blk_proxy_all_reduce_i64(p, 1, BLK_OP_MIN));
  return 0;
}

static int mark_first(void *data, blk_proxy *p, void *user) {
  (void)p;
  block *b = data;
  b->counter = b->gid == *(int *)user;
  return 0;
}

static void case_posts(void) {
  int counts[2] = {7, 3}; /* 3 blocks: at 4 ranks one rank has none */
  for (int c = 0; c < 2; c++) {
    T.nblocks = counts[c];
    blk_master *m = make_master(T.threads, T.mem_blocks);
    blk_assigner *a;
    CHECK_OK(blk_assigner_create_contiguous(&a, T.size, T.nblocks));
    add_blocks(m, a, T.nblocks);
    int last = T.size - 1 < T.nblocks - 1 ? T.size - 1 : T.nblocks - 1; /* a rank with blocks */
    int first_gid = 0;
    blk_assigner_local_gids(a, last, &first_gid, 1);
    CHECK_OK(blk_master_foreach(m, mark_first, &first_gid));
    /* Everyone posts the same: the results, also on a rank without blocks. */
    posts all = {last, 0};
    CHECK_OK(blk_master_foreach(m, post_values, &all));
    check_agreed(blk_master_exchange(m), NULL);
    CHECK_EQ_INT(blk_master_result_count(m), 2);
    CHECK_EQ_INT(blk_master_result_i64(m, 0), (int64_t)T.nblocks * (T.nblocks - 1) / 2);
    CHECK_NEAR(blk_master_result_f64(m, 1), T.nblocks - 1, 0.0);
    if (T.size > 1) {
      /* One rank's blocks post nothing: the others' sums would be partial. */
      posts none = {last, 1};
      CHECK_OK(blk_master_foreach(m, post_values, &none));
      int rc = blk_master_exchange(m);
      CHECK_EQ_INT(rc, BLK_EINVAL);
      check_agreed(rc, "ranks posted different all-reduce sequences");
      CHECK_EQ_INT(blk_master_result_count(m), 0);
    }
    /* One block posts a value more than the others of its rank. */
    posts more = {last, 2};
    CHECK_OK(blk_master_foreach(m, post_values, &more));
    int rc = blk_master_exchange(m);
    char want[96];
    snprintf(want, sizeof want, "where gid %d posted 3", first_gid);
    CHECK_EQ_INT(rc, BLK_EINVAL);
    if (blk_assigner_local_count(a, last) > 1)
      check_agreed(rc, want);
    else
      check_agreed(rc, "ranks posted different all-reduce sequences");
    /* And the next all-reduce is fine again. */
    CHECK_OK(blk_master_foreach(m, post_values, &all));
    check_agreed(blk_master_exchange(m), NULL);
    CHECK_EQ_INT(blk_master_result_i64(m, 0), (int64_t)T.nblocks * (T.nblocks - 1) / 2);
    blk_assigner_destroy(a);
    blk_master_destroy(m);
  }
}

/* --- blocks that do not match the assigner ------------------------------ */

static void case_missing(void) {
  T.nblocks = 7;
  blk_master *m = make_master(T.threads, 0);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, T.size, T.nblocks));
  int last = T.size - 1, gids[NB_MAX];
  int n = blk_assigner_local_gids(a, T.rank, gids, NB_MAX);
  /* The last rank leaves out its first block. */
  for (int i = T.rank == last ? 1 : 0; i < n; i++) {
    void *b;
    CHECK_OK(create(&b, gids[i], NULL));
    CHECK_OK(blk_master_add(m, gids[i], b, NULL, 0));
  }
  int missing = 0;
  blk_assigner_local_gids(a, last, &missing, 1);
  CHECK_OK(blk_partners_create(&T.p, BLK_MERGE, 1, &T.nblocks, 2, 1));
  char want[96];
  snprintf(want, sizeof want, "gid %d was never added", missing);
  int rc = blk_reduce(m, a, T.p, sum_round, NULL);
  CHECK_EQ_INT(rc, BLK_EINVAL);
  check_agreed(rc, want);
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = ARRAY;
  rc = blk_arrays_all_reduce(m, a, &spec);
  CHECK_EQ_INT(rc, BLK_EINVAL);
  check_agreed(rc, want);
  T.fail_gid = T.fail_round = -1;
  rc = blk_all_to_all(m, a, 2, 1, a2a_send, a2a_receive, &a2a_by_copy);
  CHECK_EQ_INT(rc, BLK_EINVAL);
  check_agreed(rc, want);
  /* Added late, the block makes the reduction work. */
  if (T.rank == last) {
    void *b;
    CHECK_OK(create(&b, missing, NULL));
    CHECK_OK(blk_master_add(m, missing, b, NULL, 0));
  }
  reduce_and_check(m, a);
  /* A rank that holds another rank's block (the last rank takes gid 0). */
  if (T.size > 1) {
    if (T.rank == last) {
      void *b;
      CHECK_OK(create(&b, 0, NULL));
      CHECK_OK(blk_master_add(m, 0, b, NULL, 0));
    }
    rc = blk_reduce(m, a, T.p, sum_round, NULL);
    CHECK_EQ_INT(rc, BLK_EINVAL);
    check_agreed(rc, "has a block with gid 0, which the assigner puts on rank 0");
  }
  blk_partners_destroy(T.p);
  T.p = NULL;
  blk_assigner_destroy(a);
  blk_master_destroy(m);
}

/* --- create that fails on one rank --------------------------------------- */

static void case_create(void) {
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.create = create;
  mc.destroy = destroy;
  mc.save = save;
  mc.load = load;
  mc.mem_blocks = 1;
  mc.spill_dir = T.rank == T.size - 1 ? "/nonexistent/blk-faults" : NULL;
  blk_master *m = (blk_master *)&mc; /* must come back NULL */
  int rc = blk_master_create(&m, MPI_COMM_WORLD, &mc);
  CHECK_EQ_INT(rc, BLK_EIO);
  CHECK(m == NULL);
  char want[96];
  snprintf(want, sizeof want, "on rank %d", T.size - 1);
  check_agreed(rc, want);
  check_agreed(rc, "/nonexistent/blk-faults");
  /* Bad settings on rank 0 only. */
  blk_master_config bad = BLK_MASTER_CONFIG_INIT;
  bad.threads = T.rank == 0 ? 0 : 1;
  rc = blk_master_create(&m, MPI_COMM_WORLD, &bad);
  CHECK_EQ_INT(rc, BLK_EINVAL);
  check_agreed(rc, "on rank 0");
  check_agreed(rc, "threads = 0");
  /* And then a good one. */
  m = make_master(T.threads, 0);
  blk_master_destroy(m);
}

/* --- NULL handles -------------------------------------------------------- */

static int noop(void *data, blk_proxy *p, void *user) {
  (void)data;
  (void)p;
  (void)user;
  return 0;
}

static void case_null(void) {
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, T.size, 4));
  int n = 4;
  blk_partners *p;
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, &n, 2, 1));
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = 4;
  CHECK_ERR(blk_master_create(NULL, MPI_COMM_WORLD, NULL), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_master_exchange(NULL), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_master_foreach(NULL, noop, NULL), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_master_add(NULL, 0, NULL, NULL, 0), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_master_decompose(NULL, NULL, a), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_reduce(NULL, a, p, noop, NULL), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_all_to_all(NULL, a, 2, 1, noop, noop, NULL), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_arrays_all_reduce(NULL, a, &spec), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_arrays_reduce(NULL, a, &spec), BLK_EINVAL, "NULL");
  blk_master_destroy(NULL);
  /* A collective with a NULL argument on every rank: the same code
   * everywhere, and the master goes on. */
  blk_master *m = make_master(T.threads, 0);
  CHECK_ERR(blk_master_foreach(m, NULL, NULL), BLK_EINVAL, "NULL");
  check_agreed(BLK_EINVAL, "NULL");
  CHECK_ERR(blk_master_decompose(m, NULL, a), BLK_EINVAL, "NULL");
  CHECK_OK(blk_master_foreach(m, noop, NULL));
  blk_master_destroy(m);
  blk_partners_destroy(p);
  blk_assigner_destroy(a);
}

/* --- a spilled exchange queue that cannot be read back ------------------ */

#define BIG_QUEUE 8192 /* above the default queue_spill_bytes: goes out with its block */

static unsigned char big_byte(int64_t src, int64_t seq, int64_t dst, size_t i) {
  return (unsigned char)(((uint64_t)(src * 131 + seq * 17 + dst * 7) + i * 2654435761u) >> 13);
}

static int send_big(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  static _Thread_local unsigned char msg[BIG_QUEUE];
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    int dst = blk_proxy_out_gid(p, i);
    for (size_t j = 0; j < BIG_QUEUE; j++) msg[j] = big_byte(b->gid, T.seq, dst, j);
    CHECK_OK(blk_proxy_enqueue(p, i, msg, sizeof msg));
  }
  return 0;
}

/* Each in queue is exactly what its neighbour sent in this run, or (after a
 * failure, with *must_arrive 0) empty: never anything else, never stale. */
static int check_big(void *data, blk_proxy *p, void *user) {
  block *b = data;
  int must_arrive = *(int *)user;
  static _Thread_local unsigned char msg[BIG_QUEUE];
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t left = blk_proxy_incoming_remaining(p, i);
    if (!left && !must_arrive) continue;
    CHECK_EQ_INT(left, BIG_QUEUE);
    blk_proxy_dequeue(p, i, msg, sizeof msg);
    for (size_t j = 0; j < BIG_QUEUE; j++)
      CHECK_MSG(msg[j] == big_byte(blk_proxy_in_gid(p, i), T.seq, b->gid, j),
                "gid %d: byte %zu from gid %d is not from run %d", b->gid, j,
                blk_proxy_in_gid(p, i), T.seq);
  }
  return 0;
}

/* Flips a byte in the data of every out queue this rank has in storage;
 * returns how many. */
static int corrupt_queues(blk_master *m) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", blk__storage_fd(m->budget.storage));
  int fd = open(path, O_RDWR), n = 0;
  CHECK(fd >= 0);
  for (int lid = 0; lid < blk__table_count(&m->table); lid++)
    for (int l = 0; l < blk__table_at(&m->table, lid)->nlinks; l++) {
      const blk__record *r = &blk__table_at(&m->table, lid)->out_rec[l];
      if (!r->stored) continue;
      off_t at = (off_t)r->offset + 64 + 100;
      unsigned char x;
      CHECK(pread(fd, &x, 1, at) == 1);
      x ^= 0x5a;
      CHECK(pwrite(fd, &x, 1, at) == 1);
      n++;
    }
  close(fd);
  return n;
}

static void case_corrupt_queue(void) {
  T.nblocks = 7;
  blk_master *m = make_master(T.threads, 1);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, T.size, T.nblocks));
  add_blocks(m, a, T.nblocks);
  int complete = 1, partial = 0;
  T.seq = 1;
  CHECK_OK(blk_master_foreach(m, send_big, NULL));
  int mine = corrupt_queues(m), any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK_MSG(any > 0, "no queue went to storage: nothing was tested");
  int rc = blk_master_exchange(m);
  CHECK_EQ_INT(rc, BLK_ECORRUPT);
  check_agreed(rc, "was lost");
  check_agreed(rc, "checksum");
  CHECK_OK(blk_master_foreach(m, check_big, &partial));
  /* The next exchange sends what this run enqueued, nothing older. */
  T.seq = 2;
  CHECK_OK(blk_master_foreach(m, send_big, NULL));
  check_agreed(blk_master_exchange(m), NULL);
  CHECK_OK(blk_master_foreach(m, check_big, &complete));
  check_budget(m, 1);
  blk_assigner_destroy(a);
  blk_master_destroy(m);
}

/* --- sizes that cannot fit -------------------------------------------- */

/* Counts whose memory no process here can have (under a terabyte of
 * memory): every rank refuses them with the same code, before anything
 * runs, and the master goes on. */
static void case_huge(void) {
  T.nblocks = 4;
  blk_master *m = make_master(T.threads, 0);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, T.size, T.nblocks));
  add_blocks(m, a, T.nblocks);
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.type = BLK_DOUBLE;
  spec.count = SIZE_MAX / 4;
  int rc = blk_arrays_all_reduce(m, a, &spec);
  CHECK_EQ_INT(rc, BLK_EINVAL);
  check_agreed(rc, "elements of 8 bytes overflow");
  spec.count = SIZE_MAX / 8;
  rc = blk_arrays_reduce(m, a, &spec);
  CHECK_EQ_INT(rc, BLK_ENOMEM);
  check_agreed(rc, "arrays: count = 2305843009213693951 elements");
  spec.count = (size_t)1 << 37; /* a terabyte of doubles */
  rc = blk_arrays_broadcast(m, a, &spec);
  CHECK_EQ_INT(rc, BLK_ENOMEM);
  check_agreed(rc, "more than this process can have");
  /* INT_MAX blocks: the records of a rank's share cannot fit. */
  blk_master *big = make_master(T.threads, 0);
  blk_bounds domain;
  int64_t lo[BLK_MAX_DIM] = {0}, hi[BLK_MAX_DIM] = {INT32_MAX};
  CHECK_OK(blk_bounds_set(&domain, 1, lo, hi));
  blk_decomposer *d;
  blk_assigner *huge;
  CHECK_OK(blk_decomposer_create(&d, &domain, INT32_MAX, NULL));
  CHECK_OK(blk_assigner_create_contiguous(&huge, T.size, INT32_MAX));
  rc = blk_master_decompose(big, d, huge);
  CHECK_EQ_INT(rc, BLK_ENOMEM);
  check_agreed(rc, "local blocks on rank 0");
  CHECK_EQ_INT(blk_master_local_count(big), 0);
  blk_master_destroy(big);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(huge);
  /* The first master still works. */
  spec.count = ARRAY;
  spec.type = BLK_FLOAT;
  CHECK_OK(blk_master_foreach(m, fill_array, NULL));
  CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
  CHECK_OK(blk_master_foreach(m, check_array, NULL));
  blk_assigner_destroy(a);
  blk_master_destroy(m);
}

/* --- the operation counter wraps ------------------------------------------ */

static void case_wrap(void) {
  T.nblocks = 5;
  T.fail_gid = T.fail_round = -1;
  blk_master *m = make_master(T.threads, T.mem_blocks);
  /* Every rank alike, as after 2^32 - 7 operations; the barrier keeps a
   * fast rank's next operation from reaching a rank that has not set it. */
  m->op.epoch = UINT32_MAX - 6;
  MPI_Barrier(MPI_COMM_WORLD);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, T.size, T.nblocks));
  add_blocks(m, a, T.nblocks);
  CHECK_OK(blk_partners_create(&T.p, BLK_ALLREDUCE, 1, &T.nblocks, 2, 1));
  int complete = 1;
  for (int i = 0; i < 4; i++) {
    T.seq++;
    CHECK_OK(blk_master_foreach(m, send_links, NULL));
    CHECK_OK(blk_master_exchange(m));
    CHECK_OK(blk_master_foreach(m, check_links, &complete));
    reduce_and_check(m, a);
  }
  CHECK(blk_master_epoch(m) < 100); /* it did wrap */
  blk_partners_destroy(T.p);
  T.p = NULL;
  blk_assigner_destroy(a);
  blk_master_destroy(m);
}

int main(int argc, char **argv) {
  const char *which = NULL;
  T.threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--case"))
      which = argv[i + 1];
    else if (!strcmp(argv[i], "--threads"))
      T.threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--mem-blocks"))
      T.mem_blocks = atoi(argv[i + 1]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  CHECK_MSG(which, "usage: test_faults --case NAME [--threads T] [--mem-blocks M]");
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &T.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &T.size);
  T.fail_gid = T.fail_round = -1;
  if (!strcmp(which, "callback"))
    case_callback();
  else if (!strcmp(which, "alloc"))
    case_alloc();
  else if (!strcmp(which, "isend"))
    case_isend();
  else if (!strcmp(which, "alloc-a2a"))
    case_alloc_a2a();
  else if (!strcmp(which, "isend-a2a"))
    case_isend_a2a();
  else if (!strcmp(which, "isend-twice"))
    case_stop(BLK__FAULT_ISEND, 2, 64);
  else if (!strcmp(which, "irecv"))
    case_stop(BLK__FAULT_IRECV, 1, 32768);
  else if (!strcmp(which, "posts"))
    case_posts();
  else if (!strcmp(which, "missing"))
    case_missing();
  else if (!strcmp(which, "create"))
    case_create();
  else if (!strcmp(which, "null"))
    case_null();
  else if (!strcmp(which, "wrap"))
    case_wrap();
  else if (!strcmp(which, "huge"))
    case_huge();
  else if (!strcmp(which, "corrupt-queue"))
    case_corrupt_queue();
  else
    CHECK_MSG(0, "unknown case %s", which);
  MPI_Barrier(MPI_COMM_WORLD);
  if (T.rank == 0)
    printf("test_faults %s: ok (%d ranks, %d threads, %d blocks in memory)\n", which, T.size,
           T.threads, T.mem_blocks);
  MPI_Finalize();
  return 0;
}
