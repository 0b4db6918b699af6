/*
 * ooc_bench: what out-of-core costs, pattern by pattern, against the floor
 * the codec and the storage set.
 *
 * Every rank holds B blocks of one float array each (--bytes per block), a
 * smooth field or random floats in [0, 1). For each pattern it times the
 * operation in-core and with a fraction of the blocks in memory (M = B/2,
 * B/4, B/8 or 1 per rank), through the public API only:
 *
 *   merge             blk_arrays_reduce: element-wise sum up a k-ary tree to gid 0
 *   swap              blk_arrays_reduce_scatter: reduce-scatter by k-ary swap rounds
 *   all_reduce        blk_arrays_all_reduce (AUTO: the algorithm is printed)
 *   all_to_all        blk_all_to_all: block s sends slice d of its array (n / nblocks
 *                     floats) to block d, which stores it as its slice s (a transpose)
 *   foreach_exchange  blk_master_foreach that scales every array by 1.5 and enqueues
 *                     its first and last n/64 floats to its two neighbours on a ring of
 *                     blocks (explicit links), then blk_master_exchange
 *
 * Time: the operation alone, between barriers, the slowest rank, the median
 * of R repetitions. Before each repetition a foreach (untimed) writes the
 * starting values, so the operation starts with M blocks in memory (the
 * last ones that foreach touched) and B - M in storage.
 *
 * Checks, every repetition, every element of every local block, in-core and
 * out-of-core: against an independent reference (merge, swap, all_reduce:
 * the sum over gids of the generating function, in double, within the
 * rounding bound of a float sum of nblocks terms; all_to_all and
 * foreach_exchange: the generating function itself, exactly, and the halos
 * each block received), and out-of-core against the in-core result of the
 * same run, bit for bit: blk combines in the same order in-core and
 * out-of-core (blk/arrays.h, blk/reduce.h: in queues in partner order), so
 * the scratch arrays merge and swap leave behind must match too. Every
 * return code is checked, and the budget (never more than M blocks in
 * memory). Anything wrong stops the job with a message, exit status 1.
 *
 * The floor. A dedicated pass with one block in memory and one thread (a
 * foreach changing every block, so every block is encoded and written, and
 * read and decoded, on one codec and I/O thread) measures, from the master's own stats, the time
 * per raw byte of encode (seconds_compress), write, read and decode (seconds_decompress) for this
 * data at this compression; the median of R passes, the slowest rank. It runs twice: on the
 * starting values, and, for each pattern, on the arrays the pattern ends with (its in-core
 * result). What a block holds sets what its codec costs: the all-reduce's sums of 128 smooth
 * fields encode at about half the speed of one field (zstd 1 after the shuffle, 4 MiB blocks:
 * 915 against 1920 MB/s, and decode 2105 against 5484), so a floor priced on the starting
 * values alone put a reduction's moves at half their cost. With per-block times
 * t_out = encode + write and t_in = read + decode, the mean of the two passes' figures:
 *
 *   floor = p (B - M) t_out + p (B - M) t_in
 *
 * p (B - M) blocks must leave and p (B - M) must come back, where p is the
 * number of passes over the blocks the pattern cannot avoid: the operation
 * starts with B - M blocks in storage, and each pass that touches every
 * block must read those back and, to stay within M, write as many out.
 * p = 1 for merge (a depth-first schedule can keep each group's first
 * member until its group is done, given M >= the tree's depth; with less,
 * the true floor is higher) and for foreach_exchange (one foreach; the
 * exchange moves queues, not blocks). p = 2 for swap with two or more
 * rounds (a block's last round needs every block's first: in between,
 * every block was touched, and at most M stayed), for all_reduce (TREE's
 * broadcast and SPLIT's all-gather follow a reduction that needs every
 * block; BUTTERFLY counts as swap) and for all_to_all (a block's receive
 * follows every block's send). With p = 1
 * this is the floor as issue 12 states it: every block that must leave is
 * encoded and written once, every block that must come back is read and
 * decoded once. (The mean prices a pattern's first pass at the starting
 * values and its last at the result: what the blocks hold when they move
 * lies between. The table gives the floor at each too.) The floor assumes all of it overlaps the
 * callbacks; the ratio OOC / (in-core + floor) is then 1 for a run that reaches it. "moved" is the
 * time the same per-byte costs give for what really went out and came back (blocks and spilled
 * queues, from the stats' raw byte counts): moved far above the floor means too many moves; OOC far
 * above in-core + moved means the moves are not overlapped (the pipeline). Loads and evictions are
 * the stats' block counts during the operation (median over repetitions, the largest rank).
 * "CPU busy" is the CPU time every rank's threads used in the operation (getrusage: the driver,
 * the callback and the I/O threads) over its time times the processors of the ranks' nodes, the
 * median over repetitions: near 100 %, the operation is out of processors, and only less work
 * (fewer moves, a cheaper codec) makes it faster; well below, something waits.
 *
 *   mpiexec -n 1 blk-ooc-bench [--fraction 1/2,1/4,1/8,one] [--patterns LIST]
 *       [--blocks 64] [--bytes 512K] [--data smooth|random] [--compression 1|none|auto]
 *       [--threads 2] [--reps 5] [--k 2] [--spill-dir DIR] [--spill-in-memory]
 *       [--algorithm auto|tree|split|butterfly|pipelined] [--trace PREFIX]
 *
 * --trace PREFIX: the master of each timed out-of-core run (not the floor's
 * pass) writes its timeline (docs/tracing.md) to PREFIX-PATTERN-M.json, the
 * untimed initialising foreach included.
 *
 * B is per rank (the array case: --blocks 64 --bytes 4M).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep (bench_util.h) */
#include <blk/blk.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_util.h"

enum { MERGE, SWAP, ALL_REDUCE, ALL_TO_ALL, FOREACH_EXCHANGE, NPATTERNS };

static const char *const pattern_names[NPATTERNS] = {"merge", "swap", "all_reduce", "all_to_all",
                                                     "foreach_exchange"};

#define MAX_FRACTIONS 16
#define MAX_REPS 101
#define SCALE 1.5f /* foreach_exchange's factor */

typedef struct options {
  int fractions[MAX_FRACTIONS]; /* d: M = B / d; 0: M = 1 */
  int nfractions;
  int run[NPATTERNS];
  int blocks; /* per rank */
  size_t bytes;
  int random;
  int level; /* compression_level */
  int threads, reps, k;
  const char *spill_dir;
  int spill_in_memory;
  blk_arrays_algorithm algorithm; /* all_reduce's */
  const char *trace;              /* --trace: each out-of-core run's timeline, or NULL */
} options;

typedef struct block {
  int gid;
  float *v;
} block;

typedef struct bench {
  options o;
  int rank, size, nblocks;
  size_t n;     /* floats per block */
  size_t slice; /* all_to_all: floats from one block to one block */
  size_t halo;  /* foreach_exchange: floats at each end sent to each neighbour */
  float *wave;  /* the smooth field's shape, n floats */
  double *sum;  /* sum over gids of value(g, i), n */
  double *tol;  /* the bound on a float sum's rounding error there, n */
  float **keep; /* by gid: the in-core result of the current pattern (local gids) */
  blk_assigner *a;
  int pattern;
} bench;

/* ---------------------------------------------------------------- helpers */

#if defined(__GNUC__)
static void die(const bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif

/* Says what is wrong and stops every rank (only from the master's thread). */
static void die(const bench *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bench_vstop("blk-ooc-bench", b ? b->rank : -1, fmt, ap);
  va_end(ap);
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) die(NULL, "out of memory (%zu x %zu bytes)", n, size);
  return p;
}

static void check_rc(const bench *b, int rc, const char *what) {
  if (rc) die(b, "%s failed: %s: %s", what, blk_strerror(rc), blk_last_error());
}

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

/* The starting value of element i of block g. Smooth: a slow wave, shifted
 * and scaled per block (what a simulation field looks like to the codec).
 * Random: 24 random bits in [0, 1) (what it cannot compress much). */
static float value(const bench *b, int g, size_t i) {
  if (b->o.random) return (float)(mix64((uint64_t)g << 40 ^ i) >> 40) * 0x1p-24f;
  size_t j = (i + (size_t)g * 7919u) % b->n;
  return b->wave[j] * (1.0f + 0.125f * (float)(g % 8));
}

static int compare_double(const void *x, const void *y) {
  double p = *(const double *)x, q = *(const double *)y;
  return (p > q) - (p < q);
}

static double median(const double *t, int n) {
  double s[MAX_REPS];
  memcpy(s, t, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, compare_double);
  return s[n / 2];
}

static double max_over_ranks(double x) {
  double y = x;
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return y;
}

/* ------------------------------------------------------------- the blocks */

static int create_block(void **out, int gid, void *user) {
  const bench *b = user;
  block *bl = calloc(1, sizeof *bl);
  if (bl) bl->v = malloc(b->n * sizeof *bl->v);
  if (!bl || !bl->v) {
    free(bl);
    return BLK_ENOMEM;
  }
  bl->gid = gid;
  *out = bl;
  return 0;
}

static void destroy_block(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  block *bl = data;
  free(bl->v);
  free(bl);
}

static int save_block(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  const bench *b = user;
  const block *bl = data;
  return blk_buffer_write(out, bl->v, b->n * sizeof *bl->v);
}

/* Going out (destroy follows): the floats' memory itself, no copy. */
static int evict_block(blk_buffer *out, void *data, int gid, void *user) {
  (void)gid;
  const bench *b = user;
  block *bl = data;
  const size_t bytes = b->n * sizeof *bl->v;
  if (!bl->v || !bytes) return save_block(out, data, gid, user);
  blk_buffer_adopt(out, bl->v, bytes, bytes);
  bl->v = NULL;
  return 0;
}

/* Takes the buffer's memory, where the floats already are, rather than copy
 * them (master.h allows it; nothing can fail after the take). */
static int load_block(void *data, blk_buffer *in, int gid, void *user) {
  (void)gid;
  const bench *b = user;
  block *bl = data;
  const size_t bytes = b->n * sizeof *bl->v;
  if (blk_buffer_remaining(in) != bytes) return BLK_ECORRUPT;
  float *mem = in->pos == 0 && bytes > 0 ? blk_buffer_detach(in, NULL) : NULL;
  if (mem) {
    free(bl->v);
    bl->v = mem;
    return 0;
  }
  return blk_buffer_read(in, bl->v, bytes);
}

static void *array_of(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  return ((block *)data)->v;
}

static int init_block(void *data, blk_proxy *p, void *user) {
  (void)p;
  const bench *b = user;
  block *bl = data;
  for (size_t i = 0; i < b->n; i++) bl->v[i] = value(b, bl->gid, i);
  return 0;
}

/* foreach: the block's array set to what the current pattern ends with in
 * core (keep). */
static int result_block(void *data, blk_proxy *p, void *user) {
  (void)p;
  const bench *b = user;
  block *bl = data;
  memcpy(bl->v, b->keep[bl->gid], b->n * sizeof *bl->v);
  return 0;
}

static int touch_block(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *bl = data;
  bl->v[0] += 1.0f; /* in memory, and changed: a block saved unchanged is not written again */
  return 0;
}

/* A master with the bench's settings and no blocks (collective); trace:
 * its timeline's file, or NULL. */
static blk_master *empty_master(bench *b, int mem_blocks, const char *trace) {
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.trace = trace;
  mc.threads = b->o.threads;
  mc.create = create_block;
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.evict = evict_block;
  mc.user = b;
  mc.mem_blocks = mem_blocks;
  mc.compression_level = b->o.level;
  mc.shuffle = sizeof(float);
  mc.spill_dir = b->o.spill_dir;
  mc.spill_in_memory = b->o.spill_in_memory;
  blk_master *m = NULL;
  check_rc(b, blk_master_create(&m, MPI_COMM_WORLD, &mc), "blk_master_create");
  return m;
}

/* A master with mem_blocks in memory (0: in-core) and this rank's blocks,
 * linked in a ring (g - 1 and g + 1 modulo nblocks, once each). */
static blk_master *make_master(bench *b, int mem_blocks, const char *trace) {
  blk_master *m = empty_master(b, mem_blocks, trace);
  int *gids = xcalloc((size_t)b->o.blocks, sizeof *gids);
  int n = blk_assigner_local_gids(b->a, b->rank, gids, b->o.blocks);
  for (int i = 0; i < n; i++) {
    int g = gids[i], nb[2] = {(g + b->nblocks - 1) % b->nblocks, (g + 1) % b->nblocks};
    blk_link links[2];
    int nlinks = 0;
    for (int s = 0; s < 2; s++) {
      if (nb[s] == g || (s == 1 && nb[1] == nb[0])) continue;
      memset(&links[nlinks], 0, sizeof links[nlinks]);
      links[nlinks].gid = nb[s];
      links[nlinks].rank = blk_assigner_rank(b->a, nb[s]);
      nlinks++;
    }
    void *bl = NULL;
    check_rc(b, create_block(&bl, g, b), "create_block");
    init_block(bl, NULL, b); /* what an eviction while adding writes is data */
    check_rc(b, blk_master_add(m, g, bl, links, nlinks), "blk_master_add");
  }
  free(gids);
  return m;
}

/* ------------------------------------------------------------- operations */

/* A float sum (BLK_ARRAYS_INIT's type and op) with the algorithm asked for
 * (AUTO unless --algorithm says). */
static blk_arrays array_spec(const bench *b) {
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = b->n;
  spec.k = b->o.k;
  spec.algorithm = b->o.algorithm;
  return spec;
}

/* The send phase copies (blk_proxy_enqueue_gid): under a budget a reference
 * is copied anyway (blk/all_to_all.h), and in-core and out-of-core run the
 * same program. */
static int a2a_send(void *data, blk_proxy *p, void *user) {
  const bench *b = user;
  const block *bl = data;
  if (!b->slice) return 0;
  for (int d = 0; d < b->nblocks; d++) {
    int rc = blk_proxy_enqueue_gid(p, d, bl->v + (size_t)d * b->slice, b->slice * sizeof(float));
    if (rc) return rc;
  }
  return 0;
}

enum { BAD_SOURCE = -1001, BAD_SIZE = -1002, BAD_COUNT = -1003, WRONG = -1004 };

/* Source s's slice lands at slice s; every block must hear from every block
 * with exactly one slice (a callback error otherwise, which blk reports). */
static int a2a_receive(void *data, blk_proxy *p, void *user) {
  const bench *b = user;
  block *bl = data;
  int n = blk_proxy_in_count(p);
  size_t bytes = b->slice * sizeof(float);
  if (n != (b->slice ? b->nblocks : 0)) return BAD_COUNT;
  for (int i = 0; i < n; i++) {
    int src = blk_proxy_in_gid(p, i);
    if (src < 0 || src >= b->nblocks) return BAD_SOURCE;
    if (blk_proxy_incoming_remaining(p, i) != bytes) return BAD_SIZE;
    blk_proxy_dequeue(p, i, bl->v + (size_t)src * b->slice, bytes);
  }
  return 0;
}

/* Scales the array and sends both ends to every link (the same message to
 * each neighbour, so a ring of 2 with one link works alike). */
static int scale_and_send(void *data, blk_proxy *p, void *user) {
  const bench *b = user;
  block *bl = data;
  for (size_t i = 0; i < b->n; i++) bl->v[i] *= SCALE;
  int nlinks = blk_proxy_out_count(p);
  for (int l = 0; l < nlinks; l++) {
    int rc = blk_proxy_enqueue(p, l, bl->v, b->halo * sizeof(float));
    if (!rc) rc = blk_proxy_enqueue(p, l, bl->v + b->n - b->halo, b->halo * sizeof(float));
    if (rc) return rc;
  }
  return 0;
}

static void run_pattern(bench *b, blk_master *m) {
  blk_arrays spec = array_spec(b);
  int rc = 0;
  switch (b->pattern) {
    case MERGE:
      rc = blk_arrays_reduce(m, b->a, &spec);
      break;
    case SWAP:
      rc = blk_arrays_reduce_scatter(m, b->a, &spec);
      break;
    case ALL_REDUCE:
      rc = blk_arrays_all_reduce(m, b->a, &spec);
      break;
    case ALL_TO_ALL:
      rc = blk_all_to_all(m, b->a, b->o.k, 1, a2a_send, a2a_receive, b);
      break;
    case FOREACH_EXCHANGE:
      rc = blk_master_foreach(m, scale_and_send, b);
      if (!rc) rc = blk_master_exchange(m);
      break;
  }
  check_rc(b, rc, pattern_names[b->pattern]);
}

/* ----------------------------------------------------------------- checks */

/* What a check does besides the reference: nothing more (in-core, before
 * the last repetition), keep the result (in-core, the last), or compare it
 * with the kept one (out-of-core). */
enum { REFERENCE_ONLY, KEEP, COMPARE };

typedef struct check_ctx {
  bench *b;
  int mode;
} check_ctx;

/* Runs on pool threads: says what is wrong on stderr and fails the
 * callback; the master's thread then stops the job. */
static int wrong(const bench *b, int gid, const char *what, size_t i, double got, double want) {
  fprintf(stderr,
          "blk-ooc-bench (rank %d): WRONG RESULT: %s, gid %d, %s element %zu is %.9g, expected "
          "%.9g\n",
          b->rank, pattern_names[b->pattern], gid, what, i, got, want);
  return WRONG;
}

static int near_sum(const bench *b, int gid, const float *v, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (!(fabs((double)v[i] - b->sum[i]) <= b->tol[i]))
      return wrong(b, gid, "(against the reference sum)", i, v[i], b->sum[i]);
  return 0;
}

static int exactly(const bench *b, int gid, const char *what, size_t i, float got, float want) {
  return memcmp(&got, &want, sizeof got) ? wrong(b, gid, what, i, got, want) : 0;
}

/* Every element against the reference, then (out-of-core) against the
 * in-core result bit for bit; or, after the in-core run, keeps the result. */
static int check_block(void *data, blk_proxy *p, void *user) {
  const check_ctx *c = user;
  const bench *b = c->b;
  const block *bl = data;
  int g = bl->gid, rc = 0;
  switch (b->pattern) {
    case MERGE: /* gid 0 holds the sum; the others' arrays are scratch */
      if (g == 0) rc = near_sum(b, g, bl->v, 0, b->n);
      break;
    case SWAP:
      rc = near_sum(b, g, bl->v, blk_arrays_piece_begin(b->n, b->nblocks, g),
                    blk_arrays_piece_begin(b->n, b->nblocks, g + 1));
      break;
    case ALL_REDUCE:
      rc = near_sum(b, g, bl->v, 0, b->n);
      break;
    case ALL_TO_ALL: {
      size_t done = b->slice * (size_t)b->nblocks;
      for (size_t i = 0; i < b->n && !rc; i++) {
        float want = i < done ? value(b, (int)(i / b->slice), (size_t)g * b->slice + i % b->slice)
                              : value(b, g, i);
        rc = exactly(b, g, "(against the transpose)", i, bl->v[i], want);
      }
      break;
    }
    case FOREACH_EXCHANGE: {
      for (size_t i = 0; i < b->n && !rc; i++)
        rc = exactly(b, g, "(against 1.5 x the start)", i, bl->v[i], SCALE * value(b, g, i));
      for (int l = 0; l < blk_proxy_in_count(p) && !rc; l++) {
        int from = blk_proxy_in_gid(p, l);
        if (blk_proxy_incoming_remaining(p, l) != 2 * b->halo * sizeof(float))
          return wrong(b, g, "halo size from a neighbour, at", 0,
                       (double)blk_proxy_incoming_remaining(p, l),
                       (double)(2 * b->halo * sizeof(float)));
        const unsigned char *h = blk_proxy_dequeue_view(p, l, 2 * b->halo * sizeof(float));
        for (size_t j = 0; j < 2 * b->halo && !rc; j++) {
          size_t i = j < b->halo ? j : b->n - 2 * b->halo + j;
          float got;
          memcpy(&got, h + j * sizeof got, sizeof got); /* the view may be unaligned */
          rc = exactly(b, g, "(halo from its neighbour)", i, got, SCALE * value(b, from, i));
        }
      }
      int want_links = b->nblocks >= 3 ? 2 : b->nblocks - 1;
      if (!rc && blk_proxy_in_count(p) != want_links)
        rc = wrong(b, g, "number of halos, at", 0, blk_proxy_in_count(p), want_links);
      break;
    }
  }
  if (rc) return rc;
  float *kept = b->keep[g];
  if (c->mode == KEEP) {
    memcpy(kept, bl->v, b->n * sizeof *kept);
  } else if (c->mode == COMPARE && memcmp(kept, bl->v, b->n * sizeof *kept)) {
    for (size_t i = 0; i < b->n; i++)
      if (memcmp(&kept[i], &bl->v[i], sizeof kept[i]))
        return wrong(b, g, "(against in-core, bit for bit)", i, bl->v[i], kept[i]);
  }
  return 0;
}

static void check_result(bench *b, blk_master *m, int mode) {
  check_ctx c = {b, mode};
  int rc = blk_master_foreach(m, check_block, &c);
  if (rc)
    die(b, "%s: the check failed (see above): %s", pattern_names[b->pattern], blk_last_error());
}

/* The sums the reductions must give, and how far a float sum of nblocks
 * terms may round from them: gamma(nblocks - 1) * sum |x| (the bound of any
 * summation order), plus the double reference's own rounding. */
static void reference_sums(bench *b) {
  b->sum = xcalloc(b->n, sizeof *b->sum);
  b->tol = xcalloc(b->n, sizeof *b->tol);
  double *abs_sum = b->tol;
  for (int g = 0; g < b->nblocks; g++)
    for (size_t i = 0; i < b->n; i++) {
      double x = value(b, g, i);
      b->sum[i] += x;
      abs_sum[i] += fabs(x);
    }
  double u = 0x1p-24, nu = (double)(b->nblocks - 1) * u;
  double gamma = nu / (1.0 - nu) + (double)b->nblocks * 0x1p-52;
  for (size_t i = 0; i < b->n; i++) b->tol[i] = gamma * abs_sum[i];
}

/* ----------------------------------------------------------------- timing */

/* The CPU seconds all of this process's threads have used (user and
 * system): the driver, the callback threads and the I/O threads. */
static double cpu_seconds(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* The processors of the nodes the ranks run on (each node's once):
 * sysconf's online count, shared out among the ranks of a node. */
static double node_processors(void) {
  MPI_Comm node;
  int here = 1;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &here);
  MPI_Comm_free(&node);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  double share = (double)(online > 0 ? online : 1) / here, all = 0.0;
  MPI_Allreduce(&share, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

/* The operation's time, the slowest rank's; *busy (may be NULL) gets the
 * CPU seconds every rank's threads used in it over the time the nodes'
 * processors had (1: every processor busy throughout). */
static double timed(bench *b, blk_master *m, double *busy) {
  MPI_Barrier(MPI_COMM_WORLD);
  double c0 = cpu_seconds(), t0 = MPI_Wtime();
  run_pattern(b, m);
  double t = max_over_ranks(MPI_Wtime() - t0), used = cpu_seconds() - c0, all = 0.0;
  if (busy) {
    MPI_Allreduce(&used, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *busy = t > 0 ? all / (t * node_processors()) : 0.0;
  }
  return t;
}

/* Time per raw byte of each stage, from a pass with one block in memory. */
typedef struct costs {
  double encode, write, read, decode; /* seconds per raw byte */
  double ratio;                       /* raw / stored */
} costs;

/* The costs with every block's array as fill leaves it (collective). */
static costs measure_costs(bench *b, blk_foreach_fn fill) {
  /* One thread, so one codec and I/O thread (the master starts as many as
   * it has callback threads): the costs of one stream, uncontended. */
  int threads = b->o.threads;
  b->o.threads = 1;
  blk_master *m = make_master(b, 1, NULL);
  b->o.threads = threads;
  double enc[MAX_REPS], wr[MAX_REPS], rd[MAX_REPS], dec[MAX_REPS], ratio = 0.0;
  check_rc(b, blk_master_foreach(m, fill, b), "foreach (fill)");
  for (int r = 0; r < b->o.reps; r++) {
    blk_master_stats s0, s1;
    blk_master_stats_get(m, &s0);
    check_rc(b, blk_master_foreach(m, touch_block, NULL), "foreach (touch)");
    blk_master_stats_get(m, &s1);
    double out = (double)(s1.bytes_raw_written - s0.bytes_raw_written);
    double in = (double)(s1.bytes_raw_read - s0.bytes_raw_read);
    if (b->o.blocks > 1 && (out <= 0 || in <= 0))
      die(b, "the spill pass moved nothing (%g bytes out, %g in)", out, in);
    out = out > 0 ? out : 1;
    in = in > 0 ? in : 1;
    enc[r] = (s1.seconds_compress - s0.seconds_compress) / out;
    wr[r] = (s1.seconds_write - s0.seconds_write) / out;
    rd[r] = (s1.seconds_read - s0.seconds_read) / in;
    dec[r] = (s1.seconds_decompress - s0.seconds_decompress) / in;
    uint64_t stored = s1.bytes_stored_written - s0.bytes_stored_written;
    ratio = stored ? (double)(s1.bytes_raw_written - s0.bytes_raw_written) / (double)stored : 0;
  }
  blk_master_destroy(m);
  costs c = {max_over_ranks(median(enc, b->o.reps)), max_over_ranks(median(wr, b->o.reps)),
             max_over_ranks(median(rd, b->o.reps)), max_over_ranks(median(dec, b->o.reps)), ratio};
  return c;
}

/* The passes over every block the pattern cannot avoid (the header). */
static int passes(const bench *b) {
  if (b->nblocks < 2 || b->pattern == MERGE || b->pattern == FOREACH_EXCHANGE) return 1;
  if (b->pattern == ALL_TO_ALL) return 2;
  blk_arrays spec = array_spec(b);
  if (b->pattern == ALL_REDUCE &&
      blk_arrays_all_reduce_algorithm(NULL, b->a, &spec) != BLK_ARRAYS_BUTTERFLY)
    return 2;
  blk_partners *p = NULL;
  check_rc(b, blk_partners_create(&p, BLK_SWAP, 1, &b->nblocks, b->o.k, 1), "partners");
  int rounds = blk_partners_rounds(p);
  blk_partners_destroy(p);
  return rounds >= 2 ? 2 : 1;
}

/* All_reduce's algorithm in core (ooc = 0) or out of core (1): AUTO may
 * pick differently. Out of core it asks a master holding the blocks with
 * room for one, since a budget that holds every block counts as none.
 * Collective. */
static const char *algorithm_name(bench *b, int ooc) {
  blk_arrays spec = array_spec(b);
  blk_master *m = ooc ? make_master(b, 1, NULL) : NULL;
  blk_arrays_algorithm alg = blk_arrays_all_reduce_algorithm(m, b->a, &spec);
  blk_master_destroy(m);
  switch (alg) {
    case BLK_ARRAYS_TREE:
      return "TREE";
    case BLK_ARRAYS_SPLIT:
      return "SPLIT";
    case BLK_ARRAYS_BUTTERFLY:
      return "BUTTERFLY";
    case BLK_ARRAYS_PIPELINED_TREE:
      return "PIPELINED_TREE";
    default:
      return "?";
  }
}

/* One pattern: in-core, then out-of-core at every fraction; one row each.
 * start: the costs on the starting values. */
static void run_one(bench *b, blk_master *in_core, const costs *start) {
  double t[MAX_REPS];
  int R = b->o.reps, B = b->o.blocks;
  for (int r = 0; r < R; r++) {
    check_rc(b, blk_master_foreach(in_core, init_block, b), "foreach (init)");
    t[r] = timed(b, in_core, NULL);
    check_result(b, in_core, r == R - 1 ? KEEP : REFERENCE_ONLY);
  }
  double t_in = median(t, R);
  const costs end = measure_costs(b, result_block); /* keep holds the result now */
  double per_block = (double)b->n * sizeof(float);
  /* Per block, on the starting values and on the result; the floor and
   * moved take the mean (the header). */
  double t_start = per_block * (start->encode + start->write + start->read + start->decode);
  double t_end = per_block * (end.encode + end.write + end.read + end.decode);
  double out_byte = (start->encode + start->write + end.encode + end.write) / 2;
  double in_byte = (start->read + start->decode + end.read + end.decode) / 2;
  for (int f = 0; f < b->o.nfractions; f++) {
    int d = b->o.fractions[f], M = d ? B / d : 1;
    if (M < 1) M = 1;
    char trace[4096];
    if (b->o.trace)
      snprintf(trace, sizeof trace, "%s-%s-%d.json", b->o.trace, pattern_names[b->pattern], M);
    blk_master *m = make_master(b, M, b->o.trace ? trace : NULL);
    /* AUTO may run another all_reduce out of core than in core, whose sums
     * round differently: then the reference alone checks. */
    blk_arrays spec = array_spec(b);
    int same =
        b->pattern != ALL_REDUCE || blk_arrays_all_reduce_algorithm(m, b->a, &spec) ==
                                        blk_arrays_all_reduce_algorithm(in_core, b->a, &spec);
    double loads[MAX_REPS], evictions[MAX_REPS], moved[MAX_REPS], busy[MAX_REPS];
    for (int r = 0; r < R; r++) {
      check_rc(b, blk_master_foreach(m, init_block, b), "foreach (init)");
      blk_master_stats s0, s1;
      blk_master_stats_get(m, &s0);
      t[r] = timed(b, m, &busy[r]);
      blk_master_stats_get(m, &s1);
      loads[r] = (double)(s1.loads - s0.loads);
      evictions[r] = (double)(s1.evictions - s0.evictions);
      moved[r] = (double)(s1.bytes_raw_written - s0.bytes_raw_written) * out_byte +
                 (double)(s1.bytes_raw_read - s0.bytes_raw_read) * in_byte;
      if (s1.blocks_in_memory_peak > M)
        die(b, "budget broken: %d blocks in memory, budget %d", s1.blocks_in_memory_peak, M);
      if (B > M && s1.loads == s0.loads)
        die(b, "%s with %d of %d blocks in memory loaded nothing", pattern_names[b->pattern], M, B);
      check_result(b, m, same ? COMPARE : REFERENCE_ONLY);
    }
    blk_master_destroy(m);
    double t_ooc = median(t, R);
    int p = passes(b);
    double floor_start = (double)p * (double)(B - M) * t_start;
    double floor_end = (double)p * (double)(B - M) * t_end;
    double floor = (floor_start + floor_end) / 2;
    double nl = max_over_ranks(median(loads, R)), ne = max_over_ranks(median(evictions, R));
    double mv = max_over_ranks(median(moved, R));
    char frac[32];
    if (d)
      snprintf(frac, sizeof frac, "1/%d (%d)", d, M);
    else
      snprintf(frac, sizeof frac, "one (1)");
    if (b->rank == 0) {
      printf(
          "| %s | %s | %.4f | %.4f | %.0f | %.0f | %d | %.4f | %.4f / %.4f | %.4f | %.2f | %.2f "
          "| %.0f %% |\n",
          pattern_names[b->pattern], frac, t_in, t_ooc, nl, ne, p, floor, floor_start, floor_end,
          mv, t_ooc / t_in, t_ooc / (t_in + floor), 100.0 * median(busy, R));
      fflush(stdout);
    }
  }
}

/* ---------------------------------------------------------------- options */

static int parse_size(const char *s, size_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  const char *units = "KMG";
  const char *unit = *end ? strchr(units, *end) : NULL;
  if (unit) v <<= 10 * (unit - units + 1);
  if (unit ? end[1] != '\0' : *end != '\0') return -1;
  *out = (size_t)v;
  return 0;
}

static int parse_int(const char *s, int min, int max, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}

static int parse_fractions(options *o, const char *s) {
  char item[32];
  o->nfractions = 0;
  while (*s) {
    size_t len = strcspn(s, ",");
    if (len == 0 || len >= sizeof item || o->nfractions == MAX_FRACTIONS) return -1;
    memcpy(item, s, len);
    item[len] = '\0';
    s += len + (s[len] == ',');
    int d = 0;
    if (!strcmp(item, "one"))
      d = 0;
    else if (strncmp(item, "1/", 2) || parse_int(item + 2, 1, 1 << 20, &d))
      return -1;
    o->fractions[o->nfractions++] = d;
  }
  return o->nfractions ? 0 : -1;
}

static int parse_patterns(options *o, const char *s) {
  char item[32];
  memset(o->run, 0, sizeof o->run);
  while (*s) {
    size_t len = strcspn(s, ",");
    if (len == 0 || len >= sizeof item) return -1;
    memcpy(item, s, len);
    item[len] = '\0';
    s += len + (s[len] == ',');
    int found = 0;
    for (int p = 0; p < NPATTERNS; p++)
      if (!strcmp(item, pattern_names[p]) || !strcmp(item, "all")) o->run[p] = found = 1;
    if (!found) return -1;
  }
  return 0;
}

static int parse_level(const char *s, int *level) {
  if (!strcmp(s, "none")) {
    *level = BLK_COMPRESSION_NONE;
    return 0;
  }
#ifdef BLK_COMPRESSION_AUTO
  if (!strcmp(s, "auto")) {
    *level = BLK_COMPRESSION_AUTO;
    return 0;
  }
#endif
  return parse_int(s, -131072, 22, level);
}

static int parse_data(options *o, const char *s) {
  if (strcmp(s, "smooth") && strcmp(s, "random")) return -1;
  o->random = !strcmp(s, "random");
  return 0;
}

static int parse_algorithm(const char *s, blk_arrays_algorithm *out) {
  static const struct {
    const char *name;
    blk_arrays_algorithm a;
  } names[] = {{"auto", BLK_ARRAYS_AUTO},
               {"tree", BLK_ARRAYS_TREE},
               {"split", BLK_ARRAYS_SPLIT},
               {"butterfly", BLK_ARRAYS_BUTTERFLY},
               {"pipelined", BLK_ARRAYS_PIPELINED_TREE}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(s, names[i].name)) {
      *out = names[i].a;
      return 0;
    }
  return -1;
}

static const char *usage =
    "usage: blk-ooc-bench [--fraction 1/2,1/4,1/8,one] [--patterns "
    "merge,swap,all_reduce,all_to_all,foreach_exchange]\n"
    "         [--blocks B per rank] [--bytes per block, default 512K] [--data smooth|random]\n"
    "         [--compression N|none"
#ifdef BLK_COMPRESSION_AUTO
    "|auto"
#endif
    "] [--threads T] [--reps R] [--k K] [--spill-dir DIR] [--spill-in-memory]\n"
    "         [--algorithm auto|tree|split|butterfly|pipelined (all_reduce's)]\n"
    "         [--trace PREFIX (each timed out-of-core run's BLK_TRACE timeline in\n"
    "          PREFIX-PATTERN-M.json)]\n";

static int parse_options(options *o, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *opt = argv[i], *arg = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(opt, "--spill-in-memory")) {
      o->spill_in_memory = 1;
      continue;
    }
    if (!arg) return -1;
    if (!strcmp(opt, "--fraction"))
      bad = parse_fractions(o, arg);
    else if (!strcmp(opt, "--patterns"))
      bad = parse_patterns(o, arg);
    else if (!strcmp(opt, "--blocks"))
      bad = parse_int(arg, 1, 1 << 20, &o->blocks);
    else if (!strcmp(opt, "--bytes"))
      bad = parse_size(arg, &o->bytes) || o->bytes < sizeof(float);
    else if (!strcmp(opt, "--data"))
      bad = parse_data(o, arg);
    else if (!strcmp(opt, "--compression"))
      bad = parse_level(arg, &o->level);
    else if (!strcmp(opt, "--threads"))
      bad = parse_int(arg, 1, 1024, &o->threads);
    else if (!strcmp(opt, "--reps"))
      bad = parse_int(arg, 1, MAX_REPS, &o->reps);
    else if (!strcmp(opt, "--k"))
      bad = parse_int(arg, 2, 1 << 20, &o->k);
    else if (!strcmp(opt, "--spill-dir"))
      o->spill_dir = arg;
    else if (!strcmp(opt, "--algorithm"))
      bad = parse_algorithm(arg, &o->algorithm);
    else if (!strcmp(opt, "--trace"))
      o->trace = arg;
    else
      bad = -1;
    if (bad) return -1;
    i++;
  }
  return 0;
}

static const char *level_name(int level, char *buf, size_t size) {
  if (level == BLK_COMPRESSION_NONE) return "none";
#ifdef BLK_COMPRESSION_AUTO
  if (level == BLK_COMPRESSION_AUTO) return "auto";
#endif
  snprintf(buf, size, "zstd %d + 4-byte shuffle", level ? level : 1);
  return buf;
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  bench b;
  memset(&b, 0, sizeof b);
  options *o = &b.o;
  *o = (options){.fractions = {2, 4, 8, 0},
                 .nfractions = 4,
                 .blocks = 64,
                 .bytes = 512 << 10,
                 .level = 1,
                 .threads = 2,
                 .reps = 5,
                 .k = 2};
  for (int p = 0; p < NPATTERNS; p++) o->run[p] = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.size);
  if (parse_options(o, argc, argv)) {
    if (b.rank == 0) fputs(usage, stderr);
    MPI_Finalize();
    return 2;
  }
  b.nblocks = o->blocks * b.size;
  b.n = o->bytes / sizeof(float);
  b.slice = b.n / (size_t)b.nblocks;
  b.halo = b.n / 64 ? b.n / 64 : 1;
  if (2 * b.halo > b.n) b.halo = b.n / 2;
  b.wave = xcalloc(b.n, sizeof *b.wave);
  for (size_t i = 0; i < b.n; i++)
    b.wave[i] = (float)(sin(0.001 * (double)i) * cos(0.0003 * (double)i));
  check_rc(&b, blk_assigner_create_contiguous(&b.a, b.size, b.nblocks), "assigner");
  b.keep = xcalloc((size_t)b.nblocks, sizeof *b.keep);
  int *gids = xcalloc((size_t)o->blocks, sizeof *gids);
  int nlocal = blk_assigner_local_gids(b.a, b.rank, gids, o->blocks);
  for (int i = 0; i < nlocal; i++) b.keep[gids[i]] = xcalloc(b.n, sizeof(float));
  free(gids);
  if (o->run[MERGE] || o->run[SWAP] || o->run[ALL_REDUCE]) reference_sums(&b);

  costs c = measure_costs(&b, init_block);
  const char *in_alg = algorithm_name(&b, 0), *ooc_alg = algorithm_name(&b, 1);
  char buf[64];
  if (b.rank == 0) {
    printf(
        "blk-ooc-bench: %d ranks x %d blocks of %zu bytes (%s data), %s, threads %d, k %d, "
        "spill %s; median of %d\n",
        b.size, o->blocks, b.n * sizeof(float), o->random ? "random" : "smooth",
        level_name(o->level, buf, sizeof buf), o->threads, o->k,
        o->spill_in_memory ? "in memory"
        : o->spill_dir     ? o->spill_dir
                           : "$TMPDIR or /tmp",
        o->reps);
    printf(
        "codec and storage on the starting values (raw MB/s, one block in memory, one thread, "
        "slowest rank): encode "
        "%.0f, write %.0f, read %.0f, decode %.0f; ratio %.2f; all_reduce runs %s in core, %s out "
        "of core\n\n",
        1e-6 / c.encode, 1e-6 / c.write, 1e-6 / c.read, 1e-6 / c.decode, c.ratio, in_alg, ooc_alg);
    printf(
        "| pattern | in memory (M) | in-core s | out-of-core s | loads | evictions | passes | "
        "floor s | floor at start / end s | moved s | OOC/in-core | OOC/(in-core+floor) | "
        "CPU busy |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
  }
  blk_master *in_core = make_master(&b, 0, NULL);
  for (int p = 0; p < NPATTERNS; p++) {
    if (!o->run[p]) continue;
    b.pattern = p;
    run_one(&b, in_core, &c);
  }
  blk_master_destroy(in_core);
  for (int g = 0; g < b.nblocks; g++) free(b.keep[g]);
  free(b.keep);
  free(b.sum);
  free(b.tol);
  free(b.wave);
  blk_assigner_destroy(b.a);
  MPI_Finalize();
  return 0;
}
