/*
 * test_arrays: element-wise collectives (blk/arrays.h) against brute force.
 *
 * Every block's array starts as small integers made from (gid, index), so
 * float sums are exact and every result can be compared for equality with a
 * loop over all gids done here. Over block counts that are not powers of k
 * (and primes, and 38 and 17, which are folded), k = 2, 3, 4, the four types, the
 * three ops, every algorithm,
 * and counts below and above the number of blocks and the SPLIT threshold.
 * Sums of inexact doubles must end with the same bits in every block.
 * A receiving round with nothing left to do runs no callback (counted from
 * the info line at 1, 2 and 4 ranks).
 * The all-gather against each element's owner's start value (every other
 * element starts as a value no block has). Scans (inclusive and exclusive)
 * against the prefix over gids done here;
 * the exclusive scan's first block against the op's identity.
 *
 *   test_arrays --threads T [--mem-blocks N] [--quick]
 * --quick runs fewer block counts, lengths and radices (for out-of-core and
 * sanitizer runs, where every swap is slow).
 */
#include <blk/blk.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* ThreadSanitizer's build (GCC's macro; clang's feature test). */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

typedef struct block {
  int gid;
  size_t count;
  double data[]; /* room for count elements of the largest type */
} block;

typedef struct ctx {
  size_t count;
  blk_type type;
  blk_op op;
  int nblocks;
  int what; /* 0 all-reduce, 1 reduce, 2 broadcast, 3 reduce-scatter, 4 inclusive scan,
             * 5 exclusive scan, 6 all-gather */
} ctx;

static const size_t max_count = 20000;

static int64_t start(int gid, size_t i) {
  return (int64_t)((gid * 7 + (int)(i % 1009) * 3) % 23) - 11;
}

static void put(void *a, blk_type t, size_t i, int64_t v) {
  switch (t) {
    case BLK_FLOAT:
      ((float *)a)[i] = (float)v;
      break;
    case BLK_DOUBLE:
      ((double *)a)[i] = (double)v;
      break;
    case BLK_INT32:
      ((int32_t *)a)[i] = (int32_t)v;
      break;
    case BLK_INT64:
      ((int64_t *)a)[i] = v;
      break;
  }
}

static int64_t get(const void *a, blk_type t, size_t i) {
  switch (t) {
    case BLK_FLOAT:
      return (int64_t)((const float *)a)[i];
    case BLK_DOUBLE:
      return (int64_t)((const double *)a)[i];
    case BLK_INT32:
      return ((const int32_t *)a)[i];
    case BLK_INT64:
      return ((const int64_t *)a)[i];
  }
  return 0;
}

static int create(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b + max_count * sizeof(double));
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  *out = b;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

static int failing_saves; /* this rank's save callback fails (messages_held) */

static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  if (failing_saves) return -5;
  return blk_buffer_write(out, b->data, max_count * sizeof(double));
}

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  block *b = data;
  b->gid = gid;
  return blk_buffer_read(in, b->data, max_count * sizeof(double));
}

static void *array_of(void *data, int gid, void *user) {
  (void)user;
  block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  return b->data;
}

/* Every block's array from start(); for the all-gather, its own piece from
 * start() and the rest -1000 - gid, which must all be overwritten. */
static int fill(void *data, blk_proxy *p, void *user) {
  (void)p;
  ctx *c = user;
  block *b = data;
  size_t from = blk_arrays_piece_begin(c->count, c->nblocks, b->gid);
  size_t to = blk_arrays_piece_begin(c->count, c->nblocks, b->gid + 1);
  for (size_t i = 0; i < c->count; i++)
    put(b->data, c->type, i,
        c->what != 6 || (i >= from && i < to) ? start(b->gid, i) : -1000 - b->gid);
  return 0;
}

/* The block whose piece holds element i of count over n blocks. */
static int piece_of(size_t count, int n, size_t i) {
  int g = 0;
  while (g + 1 < n && blk_arrays_piece_begin(count, n, g + 1) <= i) g++;
  return g;
}

/* Element i of gid's result (not for the exclusive scan's gid 0). */
static int64_t expected(const ctx *c, int gid, size_t i) {
  int64_t v = start(0, i);
  if (c->what == 2) return v;
  if (c->what == 6) return start(piece_of(c->count, c->nblocks, i), i);
  int upto = c->what == 4 ? gid + 1 : c->what == 5 ? gid : c->nblocks;
  for (int g = 1; g < upto; g++) {
    int64_t x = start(g, i);
    v = c->op == BLK_OP_SUM ? v + x : c->op == BLK_OP_MIN ? (x < v ? x : v) : (x > v ? x : v);
  }
  return v;
}

/* Whether element i is the identity of c's op: 0, or the type's largest
 * (MIN) or smallest (MAX) value, infinite for floats. */
static int is_identity(const ctx *c, const void *a, size_t i) {
  if (c->op == BLK_OP_SUM) return get(a, c->type, i) == 0;
  int up = c->op == BLK_OP_MIN;
  switch (c->type) {
    case BLK_FLOAT:
      return ((const float *)a)[i] == (up ? INFINITY : -INFINITY);
    case BLK_DOUBLE:
      return ((const double *)a)[i] == (up ? (double)INFINITY : -(double)INFINITY);
    case BLK_INT32:
      return ((const int32_t *)a)[i] == (up ? INT32_MAX : INT32_MIN);
    case BLK_INT64:
      return ((const int64_t *)a)[i] == (up ? INT64_MAX : INT64_MIN);
  }
  return 0;
}

static int verify(void *data, blk_proxy *p, void *user) {
  (void)p;
  ctx *c = user;
  block *b = data;
  size_t from = 0, to = c->count;
  if (c->what == 1 && b->gid != 0) to = 0; /* reduce: only the root changes */
  if (c->what == 3) {
    from = blk_arrays_piece_begin(c->count, c->nblocks, b->gid);
    to = blk_arrays_piece_begin(c->count, c->nblocks, b->gid + 1);
  }
  if (c->what == 5 && b->gid == 0) { /* the op's identity */
    for (size_t i = 0; i < c->count; i++)
      CHECK_MSG(is_identity(c, b->data, i), "gid 0 element %zu", i);
    return 0;
  }
  for (size_t i = from; i < to; i++)
    CHECK_MSG(get(b->data, c->type, i) == expected(c, b->gid, i),
              "collective %d type %d op %d: gid %d element %zu is %lld, expected %lld", c->what,
              (int)c->type, (int)c->op, b->gid, i, (long long)get(b->data, c->type, i),
              (long long)expected(c, b->gid, i));
  return 0;
}

/* Doubles that are not small integers, so the order of the sums shows in
 * the last bits. */
static double inexact(int gid, size_t i) {
  return 1.0 / (double)(3 + gid * 5 + (int)i) + 1e-3 * (double)gid;
}

static int fill_inexact(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  for (size_t i = 0; i < 100; i++) b->data[i] = inexact(b->gid, i);
  return 0;
}

/* hashes[gid]: a hash of the block's bits (one slot per block, so threads
 * do not share one). */
static int fold_bits(void *data, blk_proxy *p, void *user) {
  (void)p;
  block *b = data;
  unsigned long long *hashes = user, x = 1469598103934665603ull;
  for (size_t i = 0; i < 100; i++) {
    unsigned long long bits;
    memcpy(&bits, &b->data[i], sizeof bits);
    x = (x ^ bits) * 1099511628211ull;
  }
  hashes[b->gid] = x;
  return 0;
}

static int near_sum(void *data, blk_proxy *p, void *user) {
  (void)p;
  const int *n = user;
  block *b = data;
  for (size_t i = 0; i < 100; i++) {
    double want = 0;
    for (int g = 0; g < *n; g++) want += inexact(g, i);
    CHECK_MSG(b->data[i] > want - 1e-9 && b->data[i] < want + 1e-9,
              "gid %d element %zu is %.17g, expected about %.17g", b->gid, i, b->data[i], want);
  }
  return 0;
}

/* A program's own op: the product of int64s, wrapping (associative and
 * commutative in unsigned arithmetic), which no built-in op gives. */
static void product(void *acc, const void *in, size_t count, void *user) {
  (void)user;
  int64_t *x = acc;
  const int64_t *y = in;
  for (size_t i = 0; i < count; i++) x[i] = (int64_t)((uint64_t)x[i] * (uint64_t)y[i]);
}

static int64_t product_of(int from, int to, size_t i) { /* gids [from, to) */
  uint64_t v = 1;
  for (int g = from; g < to; g++) v *= (uint64_t)start(g, i);
  return (int64_t)v;
}

typedef struct user_ctx {
  int n, what, count; /* what: 0 all-reduce, 1 reduce, 2 scan, 3 exclusive scan, 4 scatter */
} user_ctx;

static int fill_int64(void *data, blk_proxy *p, void *user) {
  (void)p;
  const user_ctx *u = user;
  block *b = data;
  for (int i = 0; i < u->count; i++) ((int64_t *)(void *)b->data)[i] = start(b->gid, (size_t)i);
  return 0;
}

static int verify_product(void *data, blk_proxy *p, void *user) {
  (void)p;
  const user_ctx *u = user;
  block *b = data;
  const int64_t *v = (const int64_t *)(void *)b->data;
  size_t from = 0, to = (size_t)u->count;
  if (u->what == 1 && b->gid != 0) return 0; /* reduce: the root's only */
  if (u->what == 4) {
    from = blk_arrays_piece_begin((size_t)u->count, u->n, b->gid);
    to = blk_arrays_piece_begin((size_t)u->count, u->n, b->gid + 1);
  }
  for (size_t i = from; i < to; i++) {
    int64_t want = u->what == 2   ? product_of(0, b->gid + 1, i)
                   : u->what == 3 ? product_of(0, b->gid == 0 ? u->n : b->gid, i)
                                  : product_of(0, u->n, i);
    CHECK_MSG(v[i] == want, "user op %d: gid %d element %zu is %lld, expected %lld", u->what,
              b->gid, i, (long long)v[i], (long long)want);
  }
  return 0;
}

/* Every collective that combines, with the product as spec->combine (an
 * exclusive scan's gid 0 ends with the product over all blocks). */
static void user_op(blk_master *m, const blk_assigner *a, int n, int k, int folded_only) {
  static const blk_arrays_algorithm algs[] = {BLK_ARRAYS_TREE,           BLK_ARRAYS_SPLIT,
                                              BLK_ARRAYS_BUTTERFLY,      BLK_ARRAYS_RING,
                                              BLK_ARRAYS_SEGMENTED_RING, BLK_ARRAYS_PIPELINED_TREE};
  for (int what = 0; what < 5; what++)
    for (int ai = 0; ai < (what == 0 ? 6 : 1); ai++) {
      /* (folded_only: not the rings, which run unfolded) */
      if (folded_only && (ai == 3 || ai == 4)) continue;
      user_ctx u = {n, what, 37};
      blk_arrays spec = BLK_ARRAYS_INIT;
      spec.array = array_of;
      spec.count = (size_t)u.count;
      spec.type = BLK_INT64;
      spec.op = BLK_OP_MIN; /* not used: combine is set */
      spec.k = k;
      spec.algorithm = algs[ai];
      spec.segment = 16;
      spec.combine = product;
      CHECK_OK(blk_master_foreach(m, fill_int64, &u));
      if (what == 0) CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
      if (what == 1) CHECK_OK(blk_arrays_reduce(m, a, &spec));
      if (what == 2) CHECK_OK(blk_arrays_scan(m, a, &spec, BLK_SCAN_INCLUSIVE));
      if (what == 3) CHECK_OK(blk_arrays_scan(m, a, &spec, BLK_SCAN_EXCLUSIVE));
      if (what == 4) CHECK_OK(blk_arrays_reduce_scatter(m, a, &spec));
      CHECK_OK(blk_master_foreach(m, verify_product, &u));
    }
}

/* The fold chosen per call (arrays.c, fold_width): over 12 = 2 * 2 * 3
 * blocks with k = 2, a BUTTERFLY all-reduce runs rounds of 2, 2 and 3
 * (4 combines a block, 48 in all) or, folded to 8, a fold round and three
 * of 2 (4 + 8 * 3 = 28 combines). The cost model picks the fold for large
 * arrays (fewer bytes) and not for one element (two more rounds) across
 * ranks; on one rank the two are within a few percent at one element,
 * so only the large array is pinned there. The combines are counted in a
 * program's own op (the product), and the results checked. */
static _Atomic long combines;

static void counted_product(void *acc, const void *in, size_t count, void *user) {
  combines++;
  product(acc, in, count, user);
}

static void fold_choice(blk_master *m, const blk_assigner *a, int n, int size) {
  static const int lengths[] = {1, 20000};
  for (int li = 0; li < 2; li++) {
    user_ctx u = {n, 0, lengths[li]};
    blk_arrays spec = BLK_ARRAYS_INIT;
    spec.array = array_of;
    spec.count = (size_t)u.count;
    spec.type = BLK_INT64;
    spec.k = 2;
    spec.algorithm = BLK_ARRAYS_BUTTERFLY;
    spec.combine = counted_product;
    CHECK_OK(blk_master_foreach(m, fill_int64, &u));
    combines = 0;
    CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
    long mine = combines, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK_OK(blk_master_foreach(m, verify_product, &u));
    if (li == 1)
      CHECK_MSG(all == 28, "%d elements over 12 blocks: %ld combines, not the fold's 28", u.count,
                all);
    else if (size > 1)
      CHECK_MSG(all == 48, "1 element over 12 blocks: %ld combines, not the rounds' 48", all);
    else
      CHECK(all == 28 || all == 48);
  }
}

/* An inclusive scan of inexact doubles: near the prefix over gids. */
static int near_prefix(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  for (size_t i = 0; i < 100; i++) {
    double want = 0;
    for (int g = 0; g <= b->gid; g++) want += inexact(g, i);
    CHECK_MSG(b->data[i] > want - 1e-9 && b->data[i] < want + 1e-9,
              "scan: gid %d element %zu is %.17g, expected about %.17g", b->gid, i, b->data[i],
              want);
  }
  return 0;
}

static void scan_inexact(blk_master *m, const blk_assigner *a, int k) {
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = 100;
  spec.type = BLK_DOUBLE;
  spec.k = k;
  CHECK_OK(blk_master_foreach(m, fill_inexact, NULL));
  CHECK_OK(blk_arrays_scan(m, a, &spec, BLK_SCAN_INCLUSIVE));
  CHECK_OK(blk_master_foreach(m, near_prefix, NULL));
}

/* An all-reduce of doubles whose sum depends on the order must leave the
 * same bits in every block (blk/arrays.h promises it). */
static void same_bits(blk_master *m, const blk_assigner *a, int k, blk_arrays_algorithm alg,
                      int n) {
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = 100;
  spec.type = BLK_DOUBLE;
  spec.k = k;
  spec.algorithm = alg;
  spec.segment = 64; /* the segmented algorithms: 8 doubles a message */
  CHECK_OK(blk_master_foreach(m, fill_inexact, NULL));
  CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
  CHECK_OK(blk_master_foreach(m, near_sum, &n));
  unsigned long long hashes[64];
  CHECK_OK(blk_master_foreach(m, fold_bits, hashes));
  /* 63-bit hashes as int64: the min and max over every block of every rank
   * (blocks of a rank that has none stay neutral). */
  int64_t mine[2] = {INT64_MAX, INT64_MIN}, lo = 0, hi = 0;
  for (int lid = 0; lid < blk_master_local_count(m); lid++) {
    int64_t x = (int64_t)(hashes[blk_master_gid(m, lid)] >> 1);
    mine[0] = x < mine[0] ? x : mine[0];
    mine[1] = x > mine[1] ? x : mine[1];
  }
  MPI_Allreduce(&mine[0], &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine[1], &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  CHECK_MSG(lo == hi, "algorithm %d, k = %d, %d blocks: blocks ended with different bits", (int)alg,
            k, n);
}

/* A master holding this rank's blocks of a (fresh arrays), with a budget
 * of mem_blocks (0: none). */
static blk_master *make_master(const blk_assigner *a, int threads, int mem_blocks, int rank) {
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  blk_master *m;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  int gids[64], local = blk_assigner_local_gids(a, rank, gids, 64);
  check_add_blocks(m, gids, local, create);
  return m;
}

/* The callbacks of the last "arrays" operation, from its info line
 * ("blk[r] info: arrays N: ..."). */
static void count_callbacks(blk_log_level level, const char *line, void *user) {
  const char *at = strstr(line, " callbacks");
  if (level != BLK_LOG_INFO || !strstr(line, ": arrays ") || !at) return;
  while (at > line && at[-1] >= '0' && at[-1] <= '9') at--;
  *(int *)user = atoi(at);
}

/* A round whose inputs all landed in place and that sends nothing runs no
 * callback (blk__driver.done_when_placed). An all-gather over one block a
 * rank, in core, k = 2: every message but a block's empty one to itself
 * comes from another rank, so a block runs the rounds that send and skips
 * the last, which only receives, when the message lands in place. It does
 * unless it came before the block reached that round (a rank ahead of
 * this one), so one call may run all its rounds; 20 calls, each after a
 * barrier, must skip in at least one. Counted by hand, a rank's callbacks
 * with the skip, and its rounds: 1 rank, none of 1 (nothing in or out);
 * 2 ranks, 1 of 2; 4 ranks, 2 of 3. Other rank counts are checked for the
 * result only (3 blocks may fold, which changes the rounds). */
static void placed_rounds_skipped(int threads, int size, int rank) {
  static const int want[] = {-1, 0, 1, -1, 2}, rounds[] = {-1, 1, 2, -1, 3};
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, size));
  blk_master_config mc = check_master_config(threads, 0, create, destroy, save, load);
  int callbacks = -1, fewest = INT32_MAX, most = -1;
  mc.log = count_callbacks;
  mc.log_user = &callbacks;
  mc.log_level = BLK_LOG_INFO;
  blk_master *m;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  int gids[64], local = blk_assigner_local_gids(a, rank, gids, 64);
  check_add_blocks(m, gids, local, create);
  ctx c = {100, BLK_FLOAT, BLK_OP_SUM, size, 6};
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = c.count;
  spec.type = c.type;
  spec.k = 2;
  for (int i = 0; i < 20; i++) {
    CHECK_OK(blk_master_foreach(m, fill, &c));
    MPI_Barrier(MPI_COMM_WORLD);
    callbacks = -1;
    CHECK_OK(blk_arrays_all_gather(m, a, &spec));
    CHECK_OK(blk_master_foreach(m, verify, &c));
    fewest = callbacks < fewest ? callbacks : fewest;
    most = callbacks > most ? callbacks : most;
  }
  if (size < 5 && want[size] >= 0)
    CHECK_MSG(fewest == want[size] && most <= rounds[size],
              "all-gather on %d ranks: rank %d ran %d to %d callbacks a call, expected %d at "
              "least once and never more than %d",
              size, rank, fewest, most, want[size], rounds[size]);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
}

/* AUTO's pipelined tree needs every rank in core, and a rank cannot see
 * another's budget: master create agrees whether any rank has one. Rank 0
 * alone keeps one block of its share in memory; every rank must still pick
 * TREE (on one rank the out-of-core rule does), and the sums be right. With
 * no budget anywhere, several ranks pick PIPELINED_TREE. 7 blocks. */
static void budget_on_one_rank(int threads, int size, int rank) {
  const int n = 7;
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, n));
  for (int budget = 1; budget >= 0; budget--) {
    blk_master *m = make_master(a, threads, budget && rank == 0 ? 1 : 0, rank);
    ctx c = {2 * BLK_ARRAYS_PIPELINE_BYTES / sizeof(float), BLK_FLOAT, BLK_OP_SUM, n, 0};
    blk_arrays spec = BLK_ARRAYS_INIT;
    spec.array = array_of;
    spec.count = c.count;
    /* (One rank: TREE out of core, SPLIT in core at this size.) */
    blk_arrays_algorithm want = budget     ? BLK_ARRAYS_TREE
                                : size > 1 ? BLK_ARRAYS_PIPELINED_TREE
                                           : BLK_ARRAYS_SPLIT;
    CHECK_MSG(blk_arrays_all_reduce_algorithm(m, a, &spec) == want,
              "budget on rank 0: %d; AUTO picked %d, expected %d", budget,
              (int)blk_arrays_all_reduce_algorithm(m, a, &spec), (int)want);
    CHECK_OK(blk_master_foreach(m, fill, &c));
    CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
    CHECK_OK(blk_master_foreach(m, verify, &c));
    blk_master_destroy(m);
  }
  blk_assigner_destroy(a);
}

/* Out of core, a message for a block that is out may stay in memory in
 * the place of a block the operation is done with, instead of being
 * written out and read back (blk__budget_lend). A broadcast of 64 blocks
 * of 160 KB with 8 in memory a rank: its sums stay right and its blocks
 * within the budget; on one rank, one thread (the counts are then the same
 * every run) it wrote 41 of its messages out before, 20 with it. Then the
 * same broadcast with the last rank's save callback failing (so some of
 * its evictions fail, whether for a load or for a message's place): every
 * rank returns BLK_ECALLBACK naming the save, and nobody hangs. */
static void messages_held(int size, int rank) {
  const int n = 64, budget = 8;
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, n));
  ctx c = {max_count, BLK_DOUBLE, BLK_OP_SUM, n, 2};
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = c.count;
  spec.type = c.type;
  for (int failing = 0; failing <= 1; failing++) {
    blk_master *m = make_master(a, 1, budget, rank);
    CHECK_OK(blk_master_foreach(m, fill, &c));
    blk_master_stats before, after;
    blk_master_stats_get(m, &before);
    if (!failing) {
      CHECK_OK(blk_arrays_broadcast(m, a, &spec));
      blk_master_stats_get(m, &after);
      CHECK_OK(blk_master_foreach(m, verify, &c));
      uint64_t spilled = after.queues_spilled - before.queues_spilled;
      if (size == 1)
        CHECK_MSG(spilled <= 24,
                  "a broadcast of %d blocks with %d in memory wrote %llu messages out", n, budget,
                  (unsigned long long)spilled);
      check_budget(m, budget);
    } else {
      blk_log_set_level(BLK_LOG_NONE);
      failing_saves = rank == size - 1;
      int rc = blk_arrays_broadcast(m, a, &spec);
      failing_saves = 0;
      check_agreed(rc, "save");
      CHECK_EQ_INT(rc, BLK_ECALLBACK);
      blk_log_set_level(BLK_LOG_WARN);
    }
    blk_master_destroy(m);
  }
  blk_assigner_destroy(a);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int threads = 1, mem_blocks = 0, quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      mem_blocks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* 13: one wide round; 38: folded into 36 (gids 1 and 3 to 0 and 2 and
   * back), 17 (--quick only, the cheaper fold) into 16, both with the
   * round-robin assigner so that the pairs cross ranks */
  static const int counts[] = {1, 2, 7, 12, 13, 17, 38, 44};
  static const size_t lengths[] = {1, 5, 100, 20000};
  int runs = 0;
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    int n = counts[ci];
    if (quick ? n != 7 && n != 13 && n != 17 : n == 17) continue;
    /* Out of core under ThreadSanitizer, 7 blocks only: 13 took 15 s of
     * arrays.t2.m2.n1's 20 and 17 (the folded count) 6 s of 27, while 7
     * takes the same threaded paths (a wide round of 7, the rings) in 5 s.
     * The plain and ASan builds run all three; TSan still runs 13 and 17 in
     * core (arrays.t2.quick, arrays.t2.mall) and all_to_all's folded count
     * out of core (all_to_all.big.t2.m2). */
    if (UNDER_TSAN && n > 7 && mem_blocks && mem_blocks < n) continue;
    blk_assigner *a;
    if (n == 17 || n == 38)
      CHECK_OK(blk_assigner_create_round_robin(&a, size, n));
    else
      CHECK_OK(blk_assigner_create_contiguous(&a, size, n));
    blk_master *m = make_master(a, threads, mem_blocks, rank);
    /* (--quick over 17 blocks, the folded count, out of core or under a
     * sanitizer: 5 elements and k = 2 only.) */
    int fold_quick = quick && n == 17;
    /* Over the folded counts, only what folds: the rings run over them
     * unfolded, as over 44 blocks. */
    int folded_only = n == 17 || n == 38;
    for (int li = quick ? 1 : 0; li < (fold_quick ? 2 : 4); li += quick ? 2 : 1)
      for (int k = 2; k <= (fold_quick ? 2 : 4); k += quick ? 2 : 1) {
        /* (Over 38 blocks, 100 elements: a few per piece, at every k.) */
        if (n == 38 && li != 2) continue;
        for (int what = 0; what < 7; what++)
          for (int ai = 0; ai < 7; ai++) {
            static const blk_arrays_algorithm algs[] = {
                BLK_ARRAYS_TREE,          BLK_ARRAYS_SPLIT, BLK_ARRAYS_BUTTERFLY,
                BLK_ARRAYS_AUTO,          BLK_ARRAYS_RING,  BLK_ARRAYS_SEGMENTED_RING,
                BLK_ARRAYS_PIPELINED_TREE};
            blk_arrays_algorithm alg = algs[ai];
            if (what != 0 && ai > 0) continue; /* one algorithm each */
            int ring = alg == BLK_ARRAYS_RING || alg == BLK_ARRAYS_SEGMENTED_RING;
            if (folded_only && ring) continue;
            /* (--quick, 17 blocks: the reduce and broadcast trees are the
             * all-reduce TREE's halves.) */
            if (fold_quick && (what == 1 || what == 2 || alg == BLK_ARRAYS_AUTO)) continue;
            /* A ring has no radix, and 2 (n-1) S rounds in which every
             * block is busy (out of core, a load each): k = 2, a count below
             * the block count, and one far above it (up to 13 blocks, in
             * core: there S = 2..12 segments). */
            if (ring && (k > 2 || li % 2 == 0 || (li == 3 && (quick || n > 13)))) continue;
            /* The pipelined tree has a radix, and S - 1 + 2 H rounds: every
             * k, the same lengths (a segment of two or so elements on 5, up
             * to 160 segments on 20000). */
            if (alg == BLK_ARRAYS_PIPELINED_TREE && (li % 2 == 0 || (li == 3 && (quick || n > 13))))
              continue;
            /* Types and ops in turn, so every pair is covered across the loop. */
            ctx c = {lengths[li], (blk_type)((runs + k) % 4), (blk_op)(runs % 3), n, what};
            blk_arrays spec = BLK_ARRAYS_INIT;
            spec.array = array_of;
            spec.count = c.count;
            spec.type = c.type;
            spec.op = c.op;
            spec.k = k;
            spec.algorithm = alg;
            /* Segments of a few elements (one or two on short arrays), so a
             * step takes several rounds; about a dozen rounds a step at most. */
            spec.segment = c.count >= 1000 ? 1024 : 8;
            /* (k = 3: the pipelined tree's default, two segments of 20000) */
            if (alg == BLK_ARRAYS_PIPELINED_TREE && k == 3) spec.segment = 0;
            CHECK_OK(blk_master_foreach(m, fill, &c));
            if (what == 0) CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
            if (what == 1) CHECK_OK(blk_arrays_reduce(m, a, &spec));
            if (what == 2) CHECK_OK(blk_arrays_broadcast(m, a, &spec));
            if (what == 3) CHECK_OK(blk_arrays_reduce_scatter(m, a, &spec));
            if (what == 6) CHECK_OK(blk_arrays_all_gather(m, a, &spec));
            if (what == 4 || what == 5)
              CHECK_OK(blk_arrays_scan(m, a, &spec,
                                       what == 4 ? BLK_SCAN_INCLUSIVE : BLK_SCAN_EXCLUSIVE));
            CHECK_OK(blk_master_foreach(m, verify, &c));
            runs++;
          }
      }
    /* (--quick: k = 2 only; the program's op at k = 2 only, since it goes
     * through the same rounds as the built-in ops at every k.) */
    for (int k = 2; k <= (quick ? 2 : 4); k++) {
      for (int alg = BLK_ARRAYS_TREE; alg <= BLK_ARRAYS_PIPELINED_TREE; alg++)
        if (alg < BLK_ARRAYS_RING || alg == BLK_ARRAYS_PIPELINED_TREE || (k == 2 && !folded_only))
          same_bits(m, a, k, (blk_arrays_algorithm)alg, n);
      scan_inexact(m, a, k);
      if (k == 2) user_op(m, a, n, k, folded_only);
    }
    if (n == 12) fold_choice(m, a, n, size);
    blk_arrays bad = BLK_ARRAYS_INIT;
    bad.array = array_of;
    bad.k = 1;
    blk_log_set_level(BLK_LOG_NONE);
    CHECK_ERR(blk_arrays_all_reduce(m, a, &bad), BLK_EINVAL, "k = 1");
    CHECK_ERR(blk_arrays_scan(m, a, &bad, BLK_SCAN_INCLUSIVE), BLK_EINVAL, "k = 1");
    bad.k = 2;
    CHECK_ERR(blk_arrays_scan(m, a, &bad, (blk_scan_kind)7), BLK_EINVAL, "kind 7");
    bad.k = 2;
    bad.type = (blk_type)9;
    CHECK_ERR(blk_arrays_all_reduce(m, a, &bad), BLK_EINVAL, "type 9");
    bad.type = BLK_FLOAT;
    bad.version = 0; /* a spec not made by BLK_ARRAYS_INIT or blk_arrays_init */
    CHECK_ERR(blk_arrays_all_reduce(m, a, &bad), BLK_EINVAL, "version 0");
    blk_arrays fresh;
    CHECK_OK(blk_arrays_init(&fresh, BLK_ARRAYS_VERSION));
    CHECK(fresh.version == BLK_ARRAYS_VERSION && fresh.k == 2 && fresh.array == NULL &&
          fresh.algorithm == BLK_ARRAYS_AUTO);
    CHECK(fresh.segment == 0 && fresh.combine == NULL);
    CHECK_ERR(blk_arrays_init(&fresh, 4), BLK_EINVAL, "version 4");
    /* Version 2 (before combine): init leaves combine alone. */
    fresh.combine = product;
    CHECK_OK(blk_arrays_init(&fresh, 2));
    CHECK(fresh.version == 2 && fresh.segment == 0 && fresh.combine == product);
    /* Version 1 (before segment): init writes only its fields, and a spec of
     * that version runs with the default segment. */
    fresh.segment = 12345;
    CHECK_OK(blk_arrays_init(&fresh, 1));
    CHECK(fresh.version == 1 && fresh.segment == 12345);
    bad = fresh;
    bad.array = array_of;
    bad.algorithm = (blk_arrays_algorithm)7;
    CHECK_ERR(blk_arrays_all_reduce(m, a, &bad), BLK_EINVAL, "algorithm 7");
    bad.algorithm = BLK_ARRAYS_SEGMENTED_RING;
    bad.segment = 1; /* below an element: one a segment */
    bad.count = 100;
    CHECK_OK(blk_master_foreach(m, fill_inexact, NULL));
    CHECK_OK(blk_arrays_all_reduce(m, a, &bad)); /* version 1: segment not read */
    bad.version = 2;
    bad.count = (size_t)1 << 28; /* 2^28 one-float segments: more rounds than blk runs */
    if (n > 1) CHECK_ERR(blk_arrays_all_reduce(m, a, &bad), BLK_EINVAL, "rounds");
    bad.algorithm = BLK_ARRAYS_PIPELINED_TREE;
    if (n > 1) CHECK_ERR(blk_arrays_all_reduce(m, a, &bad), BLK_EINVAL, "rounds");
    /* AUTO's choice by its rules: with several blocks per rank, on
     * several ranks, PIPELINED_TREE from its threshold in core (no rank has
     * a budget), else TREE; on one rank TREE below the SPLIT threshold or
     * out of core, SPLIT in core above it. With a block or none per rank,
     * BUTTERFLY or SPLIT. */
    fresh.count = 2 * BLK_ARRAYS_SPLIT_BYTES / sizeof(float);
    blk_arrays_algorithm big_in = blk_arrays_all_reduce_algorithm(NULL, a, &fresh);
    blk_arrays_algorithm big_here = blk_arrays_all_reduce_algorithm(m, a, &fresh);
    int several = n > size;
    CHECK(big_in == (!several   ? BLK_ARRAYS_SPLIT
                     : size > 1 ? BLK_ARRAYS_PIPELINED_TREE
                                : BLK_ARRAYS_SPLIT));
    /* (On one rank a budget that holds every block counts as in core; on
     * several, any budget on any rank makes it TREE.) */
    CHECK(big_here == (several && size > 1 && mem_blocks                      ? BLK_ARRAYS_TREE
                       : several && size == 1 && mem_blocks && mem_blocks < n ? BLK_ARRAYS_TREE
                                                                              : big_in));
    fresh.count = BLK_ARRAYS_PIPELINE_BYTES / sizeof(float) - 1; /* below it: TREE */
    if (several && size > 1)
      CHECK(blk_arrays_all_reduce_algorithm(NULL, a, &fresh) == BLK_ARRAYS_TREE);
    fresh.count = 1;
    CHECK(blk_arrays_all_reduce_algorithm(m, a, &fresh) ==
          (several ? BLK_ARRAYS_TREE : BLK_ARRAYS_BUTTERFLY));
    blk_log_set_level(BLK_LOG_WARN);
    check_budget(m, mem_blocks);
    blk_master_destroy(m);
    blk_assigner_destroy(a);
  }
  if (!mem_blocks) budget_on_one_rank(threads, size, rank);
  /* (One thread: a callback on a worker lets the driver take the next
   * round's message while the block is busy, and that one is not placed.) */
  if (!mem_blocks) placed_rounds_skipped(1, size, rank);
  if (mem_blocks) messages_held(size, rank);
  if (rank == 0)
    printf("test_arrays: ok (%d collectives, %d ranks, %d threads, %d blocks in memory)\n", runs,
           size, threads, mem_blocks);
  MPI_Finalize();
  return 0;
}
