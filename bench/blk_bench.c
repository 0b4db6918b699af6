/*
 * blk_bench: blk's patterns against the MPI collectives that do the same job,
 * at equal bytes per rank, in the columns MPI benchmark suites print.
 *
 *   merge-reduce    blk_arrays_reduce (TREE)          MPI_Reduce (float sum)
 *   broadcast       blk_arrays_broadcast (TREE)       MPI_Bcast
 *   swap-reduce     blk_arrays_reduce_scatter (SPLIT) MPI_Reduce_scatter_block
 *   all-reduce      blk_arrays_all_reduce, TREE, SPLIT, BUTTERFLY, RING,
 *                   SEGMENTED_RING and PIPELINED_TREE (--segment),
 *                   AUTO                              MPI_Allreduce
 *   all-to-all      blk_all_to_all_with (placed)      MPI_Alltoall
 *   scan            blk_arrays_scan (inclusive)       MPI_Scan (float sum)
 *   exscan          blk_arrays_scan (exclusive)       MPI_Exscan (float sum)
 *   all-gather      blk_arrays_all_gather             MPI_Allgather (a block's piece
 *                                                     is count / blocks elements)
 *   all-gatherv     blk_all_gather_with (pieces of    MPI_Allgatherv (block or rank
 *                   any size, placed in the array)    g brings a share 1 + g mod 4)
 *   agreement       blk_master_foreach, no-op callbacks MPI_Allreduce (1 int, MIN)
 *                   (the cost of a collective's closing agreement, which
 *                   makes a failure on any rank every rank's; no data, so
 *                   the size does not matter)
 *
 * "bytes" is the MPI message size: what each rank holds (MPI_Alltoall's
 * whole send buffer, not the per-pair size OSU and IMB print). With B blocks
 * per rank each block's array is bytes/B; for all-to-all each block sends
 * bytes/B/nblocks to every block.
 *
 * Timing: every repetition is timed alone between barriers (OSU's loop); a
 * rank's figure is its mean over the repetitions, and t_min/t_max/t_avg are
 * the min, max and mean of that figure over ranks (IMB's columns). blk/MPI
 * is the ratio of the t_avg. Arrays are restored from a saved copy before
 * each repetition, outside the timer. After the timed repetitions every
 * result is checked, blk's and MPI's, against closed forms (integer-valued
 * floats, so sums are exact); a wrong one stops the job with a message.
 *
 * The floor: memcpy of one core (rank 0 while the others wait). "inside" and
 * "across" are the bytes per rank that blk hands between blocks of one rank
 * and sends to other ranks in one operation, counted from the partners; copy
 * is the memcpy time of the inside bytes at the bandwidth of one block
 * array, the floor of the rounds that stay inside a rank. For all_to_all,
 * whose rounds forward items by reference, copy is the exchange between the
 * rank's blocks done by hand, each piece copied once (a2a_copy_usec).
 *
 *   mpiexec -n 2 blk-bench [--sizes 16:16M:4] [--blocks-per-rank 1] [--k 2]
 *       [--halving] [--threads 1|auto] [--segment BYTES] [--reps N] [--warmup N]
 *       [--patterns LIST] [--versus-threads T|auto] [--versus-segment BYTES]
 *       [--versus-mpi]
 *
 * With --versus-threads or --versus-segment blk-bench times blk against
 * itself instead of MPI: configuration A (--threads, --segment) and B (the
 * versus values, the rest as A), one repetition of each back to back in
 * alternating order, and prints the median of the repetitions' B/A ratios
 * with its 95% interval (paired.h). B with other threads runs on a second
 * master holding the same blocks. --versus-mpi pairs blk (B) with the MPI
 * collective (A) the same way: the machine's swings between the separate
 * loops of the default mode cancel. --mpi-agreed adds to the MPI side what
 * an MPI program needs for blk's error contract (every rank returns the
 * same outcome): an MPI_Allreduce of one int after each collective.
 *       [--mpi-agreed] [--mpi-only | --blk-only] [--csv FILE] [--json FILE]
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#define _DEFAULT_SOURCE         /* MAP_ANONYMOUS */
#include <blk/blk.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_util.h"
#include "paired.h"

enum {
  REDUCE,
  BROADCAST,
  REDUCE_SCATTER,
  ALL_REDUCE_TREE,
  ALL_REDUCE_SPLIT,
  ALL_REDUCE_BUTTERFLY,
  ALL_REDUCE_RING,
  ALL_REDUCE_SEGMENTED_RING,
  ALL_REDUCE_PIPELINED_TREE,
  ALL_REDUCE_AUTO,
  ALL_TO_ALL,
  SCAN,
  EXSCAN,
  ALL_GATHER,
  ALL_GATHERV,
  AGREEMENT,
  NPATTERNS
};

typedef struct pattern_info {
  const char *name, *blk, *mpi;
} pattern_info;

static const pattern_info patterns[NPATTERNS] = {
    {"reduce", "blk_arrays_reduce (TREE)", "MPI_Reduce"},
    {"broadcast", "blk_arrays_broadcast (TREE)", "MPI_Bcast"},
    {"reduce_scatter", "blk_arrays_reduce_scatter (SPLIT)", "MPI_Reduce_scatter_block"},
    {"all_reduce_tree", "blk_arrays_all_reduce (TREE)", "MPI_Allreduce"},
    {"all_reduce_split", "blk_arrays_all_reduce (SPLIT)", "MPI_Allreduce"},
    {"all_reduce_butterfly", "blk_arrays_all_reduce (BUTTERFLY)", "MPI_Allreduce"},
    {"all_reduce_ring", "blk_arrays_all_reduce (RING)", "MPI_Allreduce"},
    {"all_reduce_segmented_ring", "blk_arrays_all_reduce (SEGMENTED_RING)", "MPI_Allreduce"},
    {"all_reduce_pipelined_tree", "blk_arrays_all_reduce (PIPELINED_TREE)", "MPI_Allreduce"},
    {"all_reduce_auto", "blk_arrays_all_reduce (AUTO)", "MPI_Allreduce"},
    {"all_to_all", "blk_all_to_all_with (placed)", "MPI_Alltoall"},
    {"scan", "blk_arrays_scan (inclusive)", "MPI_Scan"},
    {"exscan", "blk_arrays_scan (exclusive)", "MPI_Exscan"},
    {"all_gather", "blk_arrays_all_gather", "MPI_Allgather"},
    {"all_gatherv", "blk_all_gather (pieces of any size)", "MPI_Allgatherv"},
    {"agreement", "blk_master_foreach (no-op callbacks)", "MPI_Allreduce (1 int)"},
};

#define MAX_SIZES 64
#define HEADER_BYTES 16 /* all_to_all's item header: src, dst, size */
#define PERIOD 1009     /* values repeat with the element index mod this */

typedef struct options {
  size_t sizes[MAX_SIZES];
  int nsizes;
  int blocks_per_rank, blocks, k, halving, threads, reps, warmup;
  size_t segment; /* the segmented algorithms' spec.segment (0: blk's default) */
  int versus;     /* B against A (--versus-*) instead of blk against MPI */
  int versus_mpi; /* A is the MPI collective, B blk as configured */
  int versus_threads;
  size_t versus_segment;
  int run[NPATTERNS];
  int mpi_only, blk_only;
  int mpi_agreed; /* the MPI side agrees on an outcome after its collective */
  const char *csv, *json;
} options;

typedef struct block {
  int gid;
  size_t bytes;        /* of data, orig and recv */
  unsigned char *data; /* the array blk works on */
  unsigned char *orig; /* its values before an operation */
  unsigned char *recv; /* all_to_all: what arrived, source s at s * chunk */
  int arrivals;        /* all_to_all: sources the last receive saw */
  int bad_src;         /* all_to_all: a source whose message had the wrong size, or -1 */
  int calls;           /* agreement: callbacks run since the last reset */
  size_t bad_bytes;    /* and its size */
} block;

typedef struct stats {
  double tmin, tmax, tavg;
  int valid;
} stats;

typedef struct row {
  int pattern;
  size_t bytes, block_bytes;
  int reps;
  stats blk, mpi;
  double inside, across, copy;
  paired versus; /* --versus-*: B against A */
} row;

typedef struct bench {
  options o;
  int rank, size, nblocks;
  int threads;        /* blk's threads on this rank (--threads auto: what it came to) */
  blk_master *m;      /* the master the operations run on now: ms[0] or ms[1] */
  blk_master *ms[2];  /* A's and B's (the same one unless --versus-threads) */
  size_t segments[2]; /* A's and B's spec.segment */
  size_t segment;     /* the one in use now */
  int versus_threads; /* what B's threads came to */
  blk_assigner *a;
  int pattern;
  size_t bytes;                      /* per rank */
  size_t block_bytes;                /* bytes / B */
  size_t count;                      /* floats in a block's array */
  size_t chunk;                      /* all_to_all: bytes from one block to one block */
  size_t mpi_count;                  /* floats in MPI's buffer */
  size_t mpi_chunk;                  /* MPI_Alltoall: bytes from one rank to one rank */
  unsigned char *send, *recv, *orig; /* MPI's buffers */
  size_t mpi_bytes;                  /* their size */
  int *vcounts, *vdispls;            /* MPI_Allgatherv's, a rank's piece by rank */
  float sum_blocks[PERIOD];          /* sum over gids of value(g, i) by i mod PERIOD */
  float sum_ranks[PERIOD];           /* the same over ranks */
} bench;

/* ---------------------------------------------------------------- helpers */

#if defined(__GNUC__)
static void die(const void *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif

/* Says what is wrong, on this rank, and stops every rank. */
static void die(const void *bp, const char *fmt, ...) {
  const bench *b = bp;
  va_list ap;
  va_start(ap, fmt);
  bench_vstop("blk-bench", b ? b->rank : -1, fmt, ap);
  va_end(ap);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die(NULL, "out of memory (%zu bytes)", n);
  return p;
}

/* The benchmark's own arrays come straight from mmap, so that malloc's state
 * (its mmap and trim thresholds move with every large free) is the library's
 * alone, the same on every rank: docs/performance.md shows how much blk's
 * speed depends on it. */
static void *map_bytes(size_t n) {
  void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die(NULL, "out of memory (mmap of %zu bytes)", n);
  return p;
}

static void unmap_bytes(void *p, size_t n) {
  if (p) munmap(p, n ? n : 1);
}

/* Integer-valued, small: sums over up to a few thousand gids are exact. */
static float value(int g, size_t i) {
  return (float)((g * 7 + (int)(i % PERIOD) * 3) % 23 - 11);
}

static unsigned char byte_of(int src, int dst, size_t j) {
  return (unsigned char)((size_t)src * 31u + (size_t)dst * 17u + j * 7u + 1u);
}

static void sums(float *t, int n) {
  for (size_t i = 0; i < PERIOD; i++) {
    float s = 0.0f;
    for (int g = 0; g < n; g++) s += value(g, i);
    t[i] = s;
  }
}

/* want[i]: the sum over gids (or ranks) 0..upto of value(g, i), by i mod PERIOD. */
static void prefix_sums(float want[PERIOD], int upto) {
  for (size_t i = 0; i < PERIOD; i++) {
    float s = 0;
    for (int g = 0; g <= upto; g++) s += value(g, i);
    want[i] = s;
  }
}

/* Where piece g of count elements over n begins when piece h's share is
 * 1 + h mod 4 (all_gatherv's uneven pieces, each at least one element once
 * count >= 4 n). */
static uint64_t shares_before(int g) { /* sum of 1 + h mod 4 over h < g */
  int r = g % 4; /* each whole run of four adds h mod 4 = 0 + 1 + 2 + 3, the last 0 + .. + r-1 */
  return (uint64_t)g + 6 * (uint64_t)(g / 4) + (uint64_t)(r * (r - 1) / 2);
}

static size_t vbegin(size_t count, int n, int g) {
  return (size_t)((uint64_t)count * shares_before(g) / shares_before(n));
}

static int is_gather(int pattern) {
  return pattern == ALL_GATHER || pattern == ALL_GATHERV;
}

static size_t piece_begin(const bench *b, size_t count, int n, int g) {
  return b->pattern == ALL_GATHERV ? vbegin(count, n, g) : blk_arrays_piece_begin(count, n, g);
}

static int is_a2a(int pattern) {
  return pattern == ALL_TO_ALL;
}

static blk_arrays_algorithm algorithm_of(int pattern) {
  return pattern == ALL_REDUCE_TREE             ? BLK_ARRAYS_TREE
         : pattern == ALL_REDUCE_SPLIT          ? BLK_ARRAYS_SPLIT
         : pattern == ALL_REDUCE_BUTTERFLY      ? BLK_ARRAYS_BUTTERFLY
         : pattern == ALL_REDUCE_RING           ? BLK_ARRAYS_RING
         : pattern == ALL_REDUCE_SEGMENTED_RING ? BLK_ARRAYS_SEGMENTED_RING
         : pattern == ALL_REDUCE_PIPELINED_TREE ? BLK_ARRAYS_PIPELINED_TREE
                                                : BLK_ARRAYS_AUTO;
}

static int is_all_reduce(int pattern) {
  return pattern == ALL_REDUCE_TREE || pattern == ALL_REDUCE_SPLIT ||
         pattern == ALL_REDUCE_BUTTERFLY || pattern == ALL_REDUCE_RING ||
         pattern == ALL_REDUCE_SEGMENTED_RING || pattern == ALL_REDUCE_PIPELINED_TREE ||
         pattern == ALL_REDUCE_AUTO;
}

/* ----------------------------------------------------------------- memcpy */

typedef struct copy_time {
  size_t bytes;
  double usec;
} copy_time;

static copy_time copies[2 * MAX_SIZES];
static int ncopies;

/* One core's memcpy of n bytes, warm (source and destination touched), in
 * microseconds per copy: measured on rank 0 alone, the others wait. */
static double memcpy_usec(const bench *b, size_t n) {
  for (int i = 0; i < ncopies; i++)
    if (copies[i].bytes == n) return copies[i].usec;
  double usec = 0.0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (b->rank == 0 && n > 0) {
    unsigned char *src = map_bytes(n), *dst = map_bytes(n);
    memset(src, 1, n);
    memset(dst, 2, n);
    long reps = (long)((size_t)256 << 20) / (long)n;
    if (reps < 20) reps = 20;
    if (reps > 200000) reps = 200000;
    for (int w = 0; w < 5; w++) memcpy(dst, src, n);
    double t0 = MPI_Wtime();
    for (long r = 0; r < reps; r++) {
      src[(size_t)r % n] = (unsigned char)r; /* the copy cannot be hoisted */
      memcpy(dst, src, n);
    }
    usec = (MPI_Wtime() - t0) / (double)reps * 1e6;
    volatile unsigned char sink = dst[n / 2];
    (void)sink;
    unmap_bytes(src, n);
    unmap_bytes(dst, n);
  }
  MPI_Bcast(&usec, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (ncopies < (int)(sizeof copies / sizeof copies[0])) copies[ncopies++] = (copy_time){n, usec};
  return usec;
}

/* ------------------------------------------------------------- blk blocks */

static void destroy_block(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  block *bl = data;
  unmap_bytes(bl->data, bl->bytes);
  unmap_bytes(bl->orig, bl->bytes);
  unmap_bytes(bl->recv, bl->bytes);
  free(bl);
}

static void *array_of(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  return ((block *)data)->data;
}

static block *local_block(const bench *b, int lid) {
  return blk_master_block(b->m, lid);
}
/* all_to_all's floor inside a rank: the same job done by hand on rank 0's
 * own blocks, one memcpy for each pair of local blocks (a block's piece for
 * itself too, as MPI_Alltoall fills its own part of the receive buffer),
 * from the source's array into the destination's receive array where
 * a2a_receive puts it. Each piece is copied once, as blk copies it whatever
 * the rounds (it forwards items between rounds by reference), and the
 * arrays are the ones blk works on, so the caches see the same footprint: a
 * copy column made of block-sized copies times the inside bytes would count
 * forwarded bytes again and time them in a cache one block fits.
 * Microseconds per exchange, warm (the first five untimed), on rank 0
 * alone; the others wait. The receive arrays end as blk's exchange left
 * them. */
static double a2a_copy_usec(const bench *b) {
  double usec = 0.0;
  MPI_Barrier(MPI_COMM_WORLD);
  int nlocal = blk_master_local_count(b->m);
  if (b->rank == 0 && nlocal > 0 && b->chunk > 0) {
    size_t moved = (size_t)nlocal * (size_t)nlocal * b->chunk;
    long reps = (long)(((size_t)256 << 20) / moved);
    if (reps < 20) reps = 20;
    if (reps > 200000) reps = 200000;
    double t0 = 0.0;
    for (long r = -5; r < reps; r++) {
      if (r == 0) t0 = MPI_Wtime();
      for (int s = 0; s < nlocal; s++) {
        const block *from = local_block(b, s);
        for (int d = 0; d < nlocal; d++) {
          block *to = local_block(b, d);
          memcpy(to->recv + (size_t)from->gid * b->chunk, from->data + (size_t)to->gid * b->chunk,
                 b->chunk);
        }
      }
    }
    usec = (MPI_Wtime() - t0) / (double)reps * 1e6;
  }
  MPI_Bcast(&usec, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return usec;
}

/* Sizes every local block's arrays for the current size and pattern and
 * fills orig (and data) with the starting values. */
static void setup_blocks(bench *b) {
  int nlocal = blk_master_local_count(b->m);
  for (int lid = 0; lid < nlocal; lid++) {
    block *bl = local_block(b, lid);
    if (bl->bytes != b->block_bytes) {
      unmap_bytes(bl->data, bl->bytes);
      unmap_bytes(bl->orig, bl->bytes);
      unmap_bytes(bl->recv, bl->bytes);
      bl->bytes = b->block_bytes;
      bl->data = map_bytes(bl->bytes);
      bl->orig = map_bytes(bl->bytes);
      bl->recv = map_bytes(bl->bytes);
    }
    if (is_a2a(b->pattern)) {
      memset(bl->orig, 0, bl->bytes);
      for (int d = 0; d < b->nblocks; d++)
        for (size_t j = 0; j < b->chunk; j++)
          bl->orig[(size_t)d * b->chunk + j] = byte_of(bl->gid, d, j);
    } else {
      /* An all-gather starts with its own piece only; the rest NaN, so a
       * piece that never arrives shows. */
      float *v = (float *)(void *)bl->orig;
      size_t from = piece_begin(b, b->count, b->nblocks, bl->gid);
      size_t to = piece_begin(b, b->count, b->nblocks, bl->gid + 1);
      if (is_gather(b->pattern)) memset(bl->orig, 0xFF, bl->bytes);
      for (size_t i = 0; i < b->count; i++)
        if (!is_gather(b->pattern) || (i >= from && i < to)) v[i] = value(bl->gid, i);
    }
    memcpy(bl->data, bl->orig, bl->bytes);
    memset(bl->recv, 0, bl->bytes);
  }
}

/* ------------------------------------------------------------- operations */

static int count_call(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  ((block *)data)->calls++;
  return 0;
}

/* By reference: blk reads the block's array in place until blk_all_to_all
 * returns, as MPI_Alltoall reads its send buffer; nothing writes it meanwhile. */
static int a2a_send(void *data, blk_proxy *p, void *user) {
  const bench *b = user;
  block *bl = data;
  for (int d = 0; d < b->nblocks; d++) {
    int rc = blk_proxy_enqueue_ref_gid(p, d, bl->data + (size_t)d * b->chunk, b->chunk);
    if (rc) return rc;
  }
  return 0;
}

/* Where MPI_Alltoall puts it: source src's part of the receive array. blk
 * receives a message from another rank there when it can (a direct
 * exchange, in-core, above the header size); the rest lands in blk's
 * storage and a2a_receive copies it. */
static void *a2a_place(void *data, int gid, int src, size_t bytes, void *user) {
  const bench *b = user;
  block *bl = data;
  (void)gid;
  if (src < 0 || src >= b->nblocks || bytes != b->chunk) return NULL; /* a2a_receive says why */
  return bl->recv + (size_t)src * b->chunk;
}

/* At most one copy per source, into the block's receive array (none for
 * what blk placed there); the check reads that array after the timed
 * calls. */
static int a2a_receive(void *data, blk_proxy *p, void *user) {
  const bench *b = user;
  block *bl = data;
  int n = blk_proxy_in_count(p);
  for (int i = 0; i < n; i++) {
    int src = blk_proxy_in_gid(p, i);
    size_t got = blk_proxy_incoming_remaining(p, i);
    if (src < 0 || src >= b->nblocks || got != b->chunk) {
      /* A pool thread may not stop the job (only the master's thread calls
       * MPI): say what came, fail the callback, blk_run reports it. */
      bl->bad_src = src;
      bl->bad_bytes = got;
      return -1;
    }
    unsigned char *want = bl->recv + (size_t)src * b->chunk;
    const void *got_at = blk_proxy_dequeue_view(p, i, b->chunk);
    if (got_at != want) memcpy(want, got_at, b->chunk);
  }
  bl->arrivals = n;
  return 0;
}

/* all_gatherv: a block brings its uneven piece of its array... */
static int gv_give(void *data, int gid, const void **out, size_t *size, void *user) {
  const bench *b = user;
  block *bl = data;
  size_t from = vbegin(b->count, b->nblocks, gid), to = vbegin(b->count, b->nblocks, gid + 1);
  *out = bl->data + from * sizeof(float);
  *size = (to - from) * sizeof(float);
  return 0;
}

/* ... and gets all of them in it, as MPI_Allgatherv fills its receive
 * buffer: blk writes them there (place), so take has nothing to copy (the
 * check reads the array after the timed calls). */
static void *gv_place(void *data, int gid, size_t total, void *user) {
  const bench *b = user;
  (void)gid;
  return total == b->count * sizeof(float) ? ((block *)data)->data : NULL;
}

static int gv_take(void *data, int gid, const void *all, const size_t *offsets, int n, void *user) {
  const bench *b = user;
  block *bl = data;
  (void)gid;
  if (n != b->nblocks || offsets[n] != b->count * sizeof(float) || all != bl->data) return -1;
  return 0;
}

static void blk_run(bench *b) {
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = b->count;
  spec.type = BLK_FLOAT;
  spec.op = BLK_OP_SUM;
  spec.k = b->o.k;
  int rc = 0;
  switch (b->pattern) {
    case REDUCE:
      rc = blk_arrays_reduce(b->m, b->a, &spec);
      break;
    case BROADCAST:
      rc = blk_arrays_broadcast(b->m, b->a, &spec);
      break;
    case REDUCE_SCATTER:
      rc = blk_arrays_reduce_scatter(b->m, b->a, &spec);
      break;
    case ALL_REDUCE_TREE:
    case ALL_REDUCE_SPLIT:
    case ALL_REDUCE_BUTTERFLY:
    case ALL_REDUCE_RING:
    case ALL_REDUCE_SEGMENTED_RING:
    case ALL_REDUCE_PIPELINED_TREE:
    case ALL_REDUCE_AUTO:
      spec.algorithm = algorithm_of(b->pattern);
      spec.segment = b->segment;
      rc = blk_arrays_all_reduce(b->m, b->a, &spec);
      break;
    case ALL_TO_ALL: {
      blk_all_to_all_config cfg = BLK_ALL_TO_ALL_CONFIG_INIT;
      cfg.place = a2a_place;
      rc = blk_all_to_all_with(b->m, b->a, b->o.k, !b->o.halving, a2a_send, a2a_receive, &cfg, b);
      break;
    }
    case SCAN:
    case EXSCAN:
      rc = blk_arrays_scan(b->m, b->a, &spec,
                           b->pattern == SCAN ? BLK_SCAN_INCLUSIVE : BLK_SCAN_EXCLUSIVE);
      break;
    case ALL_GATHER:
      rc = blk_arrays_all_gather(b->m, b->a, &spec);
      break;
    case ALL_GATHERV: {
      blk_all_gather_config cfg = BLK_ALL_GATHER_CONFIG_INIT;
      cfg.place = gv_place;
      rc = blk_all_gather_with(b->m, b->a, b->o.k, gv_give, gv_take, &cfg, b);
      break;
    }
    case AGREEMENT:
      rc = blk_master_foreach(b->m, count_call, NULL);
      break;
  }
  if (rc) {
    for (int lid = 0; lid < blk_master_local_count(b->m); lid++) {
      const block *bl = local_block(b, lid);
      if (bl->bad_src != -1)
        die(b, "WRONG RESULT: all_to_all: gid %d got %zu bytes from gid %d, expected %zu", bl->gid,
            bl->bad_bytes, bl->bad_src, b->chunk);
    }
    die(b, "%s failed: %s", patterns[b->pattern].blk, blk_last_error());
  }
}

static void blk_prepare(bench *b, int last) {
  int nlocal = blk_master_local_count(b->m);
  for (int lid = 0; lid < nlocal; lid++) {
    block *bl = local_block(b, lid);
    if (is_a2a(b->pattern)) {
      if (last) {
        memset(bl->recv, 0xEE, bl->bytes);
        bl->arrivals = -1;
      }
    } else if (b->pattern == AGREEMENT) {
      if (last) bl->calls = 0;
    } else {
      memcpy(bl->data, bl->orig, bl->bytes);
    }
  }
}

static void mpi_run(bench *b) {
  int rc = MPI_SUCCESS, n = (int)b->mpi_count;
  switch (b->pattern) {
    case REDUCE:
      rc = MPI_Reduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      break;
    case BROADCAST:
      rc = MPI_Bcast(b->send, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case REDUCE_SCATTER:
      rc = MPI_Reduce_scatter_block(b->send, b->recv, n / b->size, MPI_FLOAT, MPI_SUM,
                                    MPI_COMM_WORLD);
      break;
    case ALL_TO_ALL:
      rc = MPI_Alltoall(b->send, (int)b->mpi_chunk, MPI_BYTE, b->recv, (int)b->mpi_chunk, MPI_BYTE,
                        MPI_COMM_WORLD);
      break;
    case SCAN:
      rc = MPI_Scan(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case EXSCAN:
      rc = MPI_Exscan(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case ALL_GATHERV:
      rc = MPI_Allgatherv((float *)(void *)b->send + b->vdispls[b->rank], b->vcounts[b->rank],
                          MPI_FLOAT, b->recv, b->vcounts, b->vdispls, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case ALL_GATHER: {
      int piece = n / b->size;
      rc = MPI_Allgather((float *)(void *)b->send + (size_t)b->rank * (size_t)piece, piece,
                         MPI_FLOAT, b->recv, piece, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    }
    case AGREEMENT:
      rc = MPI_Allreduce(&b->rank, b->recv, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      break;
    default:
      rc = MPI_Allreduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
  }
  if (rc != MPI_SUCCESS) die(b, "%s failed (MPI error %d)", patterns[b->pattern].mpi, rc);
  /* What an MPI program adds for blk's contract (docs/errors.md): every
   * rank learns whether any rank failed, here in its part after the
   * collective (a rank's outcome: 0). */
  if (b->o.mpi_agreed && b->pattern != AGREEMENT) {
    int mine = 0, any = 0;
    rc = MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS || any) die(b, "the agreement after %s failed", patterns[b->pattern].mpi);
  }
}

/* The MPI side's name: the collective, and the agreement when it has one. */
static const char *mpi_label(const bench *b, int pattern, char *out, size_t n) {
  snprintf(out, n, "%s%s", patterns[pattern].mpi,
           b->o.mpi_agreed && pattern != AGREEMENT ? " + MPI_Allreduce (1 int)" : "");
  return out;
}

static void mpi_prepare(bench *b, int last) {
  if (b->pattern == BROADCAST)
    memcpy(b->send, b->orig, b->bytes); /* in place: restore every repetition */
  else if (last)
    memset(b->recv, 0xFF, b->bytes); /* NaN floats: a result not written shows */
}

static void setup_mpi(bench *b) {
  unmap_bytes(b->send, b->mpi_bytes);
  unmap_bytes(b->recv, b->mpi_bytes);
  unmap_bytes(b->orig, b->mpi_bytes);
  b->mpi_bytes = b->bytes;
  b->send = map_bytes(b->bytes);
  b->recv = map_bytes(b->bytes);
  b->orig = map_bytes(b->bytes);
  if (is_a2a(b->pattern)) {
    memset(b->orig, 0, b->bytes);
    for (int q = 0; q < b->size; q++)
      for (size_t j = 0; j < b->mpi_chunk; j++)
        b->orig[(size_t)q * b->mpi_chunk + j] = byte_of(b->rank, q, j);
  } else {
    float *v = (float *)(void *)b->orig;
    for (size_t i = 0; i < b->mpi_count; i++) v[i] = value(b->rank, i);
  }
  memcpy(b->send, b->orig, b->bytes);
  memset(b->recv, 0, b->bytes);
  if (b->pattern == ALL_GATHERV) {
    free(b->vcounts);
    free(b->vdispls);
    b->vcounts = xmalloc((size_t)b->size * sizeof *b->vcounts);
    b->vdispls = xmalloc((size_t)b->size * sizeof *b->vdispls);
    for (int q = 0; q < b->size; q++) {
      b->vdispls[q] = (int)vbegin(b->mpi_count, b->size, q);
      b->vcounts[q] = (int)vbegin(b->mpi_count, b->size, q + 1) - b->vdispls[q];
    }
  }
}

/* ----------------------------------------------------------------- checks */

static void check_floats(const bench *b, const char *who, int gid, const float *got, size_t from,
                         size_t to, const float *want_by_period, int want_gid) {
  for (size_t i = from; i < to; i++) {
    float want = want_by_period ? want_by_period[i % PERIOD] : value(want_gid, i);
    if (got[i] != want)
      die(b,
          "WRONG RESULT: %s, %s at %zu bytes per rank: gid/rank %d element %zu is %g, "
          "expected %g",
          patterns[b->pattern].name, who, b->bytes, gid, i, (double)got[i], (double)want);
  }
}

static void check_blk(const bench *b) {
  int nlocal = blk_master_local_count(b->m);
  for (int lid = 0; lid < nlocal; lid++) {
    const block *bl = local_block(b, lid);
    const float *v = (const float *)(const void *)bl->data;
    switch (b->pattern) {
      case REDUCE:
        if (bl->gid == 0) check_floats(b, "blk", 0, v, 0, b->count, b->sum_blocks, 0);
        break;
      case BROADCAST:
        check_floats(b, "blk", bl->gid, v, 0, b->count, NULL, 0);
        break;
      case REDUCE_SCATTER:
        check_floats(b, "blk", bl->gid, v, blk_arrays_piece_begin(b->count, b->nblocks, bl->gid),
                     blk_arrays_piece_begin(b->count, b->nblocks, bl->gid + 1), b->sum_blocks, 0);
        break;
      case SCAN:
      case EXSCAN: {
        float want[PERIOD];
        prefix_sums(want, b->pattern == SCAN ? bl->gid : bl->gid - 1); /* gid 0: none, 0 */
        check_floats(b, "blk", bl->gid, v, 0, b->count, want, 0);
        break;
      }
      case ALL_GATHER:
      case ALL_GATHERV:
        for (int g = 0; g < b->nblocks; g++)
          check_floats(b, "blk", bl->gid, v, piece_begin(b, b->count, b->nblocks, g),
                       piece_begin(b, b->count, b->nblocks, g + 1), NULL, g);
        break;
      case AGREEMENT:
        if (bl->calls != 1)
          die(b, "WRONG RESULT: agreement, blk: gid %d ran %d times in one foreach", bl->gid,
              bl->calls);
        break;
      case ALL_TO_ALL:
        if (b->chunk && bl->arrivals != b->nblocks)
          die(b, "WRONG RESULT: all_to_all, blk: gid %d heard from %d blocks, expected %d", bl->gid,
              bl->arrivals, b->nblocks);
        for (int s = 0; s < b->nblocks; s++)
          for (size_t j = 0; j < b->chunk; j++) {
            unsigned char got = bl->recv[(size_t)s * b->chunk + j], want = byte_of(s, bl->gid, j);
            if (got != want)
              die(b,
                  "WRONG RESULT: all_to_all, blk at %zu bytes per rank: gid %d byte %zu from gid "
                  "%d is %u, expected %u",
                  b->bytes, bl->gid, j, s, got, want);
          }
        break;
      default:
        check_floats(b, "blk", bl->gid, v, 0, b->count, b->sum_blocks, 0);
        break;
    }
  }
}

static void check_mpi(const bench *b) {
  const float *recv = (const float *)(const void *)b->recv;
  const float *send = (const float *)(const void *)b->send;
  switch (b->pattern) {
    case REDUCE:
      if (b->rank == 0) check_floats(b, "MPI", 0, recv, 0, b->mpi_count, b->sum_ranks, 0);
      break;
    case BROADCAST:
      check_floats(b, "MPI", b->rank, send, 0, b->mpi_count, NULL, 0);
      break;
    case REDUCE_SCATTER: {
      size_t rc = b->mpi_count / (size_t)b->size, off = (size_t)b->rank * rc;
      for (size_t i = 0; i < rc; i++)
        if (recv[i] != b->sum_ranks[(off + i) % PERIOD])
          die(b, "WRONG RESULT: reduce_scatter, MPI: rank %d element %zu is %g, expected %g",
              b->rank, i, (double)recv[i], (double)b->sum_ranks[(off + i) % PERIOD]);
      break;
    }
    case ALL_TO_ALL:
      for (int q = 0; q < b->size; q++)
        for (size_t j = 0; j < b->mpi_chunk; j++)
          if (b->recv[(size_t)q * b->mpi_chunk + j] != byte_of(q, b->rank, j))
            die(b, "WRONG RESULT: all_to_all, MPI: rank %d byte %zu from rank %d", b->rank, j, q);
      break;
    case SCAN:
    case EXSCAN: { /* MPI_Exscan leaves rank 0's result undefined */
      float want[PERIOD];
      prefix_sums(want, b->pattern == SCAN ? b->rank : b->rank - 1);
      if (b->pattern == SCAN || b->rank > 0)
        check_floats(b, "MPI", b->rank, recv, 0, b->mpi_count, want, 0);
      break;
    }
    case ALL_GATHERV:
      for (int q = 0; q < b->size; q++)
        check_floats(b, "MPI", b->rank, recv, vbegin(b->mpi_count, b->size, q),
                     vbegin(b->mpi_count, b->size, q + 1), NULL, q);
      break;
    case ALL_GATHER: {
      size_t piece = b->mpi_count / (size_t)b->size;
      for (int q = 0; q < b->size; q++)
        check_floats(b, "MPI", b->rank, recv, (size_t)q * piece, (size_t)(q + 1) * piece, NULL, q);
      break;
    }
    case AGREEMENT: {
      int lowest;
      memcpy(&lowest, b->recv, sizeof lowest);
      if (lowest != 0) die(b, "WRONG RESULT: agreement, MPI: the lowest rank came out %d", lowest);
      break;
    }
    default:
      check_floats(b, "MPI", b->rank, recv, 0, b->mpi_count, b->sum_ranks, 0);
      break;
  }
}

/* ----------------------------------------------------------------- timing */

static stats time_loop(bench *b, void (*run)(bench *), void (*prepare)(bench *, int), int reps,
                       int warmup) {
  for (int w = 0; w < warmup; w++) {
    prepare(b, 0);
    run(b);
  }
  double total = 0.0;
  for (int r = 0; r < reps; r++) {
    prepare(b, r == reps - 1);
    bench_barrier();
    double t0 = MPI_Wtime();
    run(b);
    total += MPI_Wtime() - t0;
  }
  double mean = total / reps * 1e6, lo, hi, sum;
  MPI_Allreduce(&mean, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mean, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&mean, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return (stats){lo, hi, sum / b->size, 1};
}

/* Configuration s (0: A, 1: B) for the next operations. */
static void use(bench *b, int s) {
  b->m = b->ms[s];
  b->segment = b->segments[s];
}

/* Side s of a pair (0: A, 1: B) for the next operation: a configuration
 * of blk, or with --versus-mpi for A the MPI collective. */
static int is_mpi_side(const bench *b, int s) {
  return b->o.versus_mpi && s == 0;
}

static void prepare_side(bench *b, int s, int last) {
  if (is_mpi_side(b, s))
    mpi_prepare(b, last);
  else {
    use(b, b->o.versus_mpi ? 0 : s);
    blk_prepare(b, last);
  }
}

static void run_side(bench *b, int s) {
  (is_mpi_side(b, s) ? mpi_run : blk_run)(b);
}

/* A and B timed in pairs (paired.h): each repetition runs A and B back to
 * back, A first on even repetitions and B first on odd ones; a side's time
 * in a repetition is its slowest rank's. Then each runs once more,
 * untimed, and its results are checked (A and B may share the master, and
 * so the blocks). */
static paired time_versus(bench *b, int reps, int warmup) {
  double *t = xmalloc(5 * (size_t)reps * sizeof *t), *ta = t, *tb = t + reps;
  for (int w = 0; w < warmup; w++)
    for (int s = 0; s < 2; s++) {
      prepare_side(b, s, 0);
      run_side(b, s);
    }
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < 2; j++) {
      int s = (r + j) % 2;
      prepare_side(b, s, 0);
      bench_barrier();
      double t0 = MPI_Wtime();
      run_side(b, s);
      (s ? tb : ta)[r] = (MPI_Wtime() - t0) * 1e6;
    }
  MPI_Allreduce(MPI_IN_PLACE, t, 2 * reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  for (int s = 0; s < 2; s++) {
    prepare_side(b, s, 1);
    run_side(b, s);
    (is_mpi_side(b, s) ? check_mpi : check_blk)(b);
  }
  use(b, 0);
  paired sum = paired_summary(ta, tb, reps, t + 2 * reps);
  free(t);
  return sum;
}

static int auto_reps(size_t bytes) {
  size_t r = ((size_t)1 << 30) / (bytes ? bytes : 1);
  return r < 50 ? 50 : r > 2000 ? 2000 : (int)r;
}

/* ---------------------------------------------------------------- traffic */

/* The gid range a block holds in SPLIT after `done` swap rounds in halving
 * order (blk/arrays.h: each round splits the range k_e ways). */
static void split_share(const blk_partners *p, int n, int gid, int done, int *lo, int *hi) {
  *lo = 0;
  *hi = n;
  for (int e = 0; e < done; e++) {
    int k = blk_partners_round_radix(p, e), width = (*hi - *lo) / k;
    *lo += blk_partners_round_position(p, e, gid) * width;
    *hi = *lo + width;
  }
}

static double piece_bytes(const bench *b, int lo, int hi) {
  return (double)(blk_arrays_piece_begin(b->count, b->nblocks, hi) -
                  blk_arrays_piece_begin(b->count, b->nblocks, lo)) *
         sizeof(float);
}

static void account(const bench *b, int from, int to, double bytes, double *inside,
                    double *across) {
  if (from == to) return; /* a message to itself is empty or a hand-over */
  if (blk_assigner_rank(b->a, from) == blk_assigner_rank(b->a, to))
    *inside += bytes;
  else
    *across += bytes;
}

/* Bytes per rank (mean over ranks) that one operation moves between blocks
 * of one rank and between ranks, from the partners and the algorithms'
 * message sizes documented in blk/arrays.h and blk/all_to_all.h. */
static void traffic(const bench *b, double *inside, double *across) {
  *inside = *across = 0.0;
  if (b->pattern == AGREEMENT) return; /* no data between blocks */
  blk_arrays_algorithm alg = BLK_ARRAYS_TREE;
  if (is_all_reduce(b->pattern)) {
    blk_arrays spec = BLK_ARRAYS_INIT;
    spec.count = b->count;
    spec.k = b->o.k;
    spec.algorithm = algorithm_of(b->pattern);
    spec.segment = b->segment;
    alg = blk_arrays_all_reduce_algorithm(b->m, b->a, &spec);
  }
  int n = b->nblocks,
      split = b->pattern == REDUCE_SCATTER || b->pattern == ALL_GATHER || alg == BLK_ARRAYS_SPLIT;
  int *gids = xmalloc((size_t)n * sizeof *gids);
  blk_partners *p = NULL;
  int rc = 0;
  if (is_a2a(b->pattern)) {
    rc = blk_partners_create(&p, BLK_SWAP, 1, &n, b->o.k, !b->o.halving);
    if (rc) die(b, "partners: %s", blk_last_error());
    int R = blk_partners_rounds(p);
    /* Where item (s, d) is after each round: at the member of its group whose
     * position is d's digit. */
    int *at = xmalloc((size_t)n * (size_t)n * sizeof *at);
    for (int s = 0; s < n; s++)
      for (int d = 0; d < n; d++) at[s * n + d] = s;
    /* items carry a header, except in a direct (one-round) exchange */
    double item = (double)(b->chunk + (R > 1 ? HEADER_BYTES : 0));
    for (int e = 0; e < R && b->chunk; e++)
      for (int x = 0; x < n * n; x++) {
        int d = x % n, here = at[x];
        blk_partners_out(p, e, here, gids, n);
        int there = gids[blk_partners_round_position(p, e, d)];
        account(b, here, there, item, inside, across);
        at[x] = there;
      }
    free(at);
  } else if (alg == BLK_ARRAYS_RING || alg == BLK_ARRAYS_SEGMENTED_RING) {
    /* 2 (n-1) steps, each a piece (1/n of the array) to gid + 1 */
    for (int g = 0; g < n && n > 1; g++)
      for (int q = 0; q < n; q++)
        account(b, g, (g + 1) % n, 2.0 * (n - 1) / n * piece_bytes(b, q, q + 1), inside, across);
  } else if (alg == BLK_ARRAYS_PIPELINED_TREE) {
    /* the whole array once up and once down every edge of the k-nomial
     * tree (a block's parent clears its lowest nonzero base-k digit) */
    for (int g = 1; g < n; g++) {
      int place = 1;
      while ((g / place) % b->o.k == 0) place *= b->o.k;
      int parent = g - (g / place) % b->o.k * place;
      account(b, g, parent, piece_bytes(b, 0, n), inside, across);
      account(b, parent, g, piece_bytes(b, 0, n), inside, across);
    }
  } else if (b->pattern == ALL_GATHERV) {
    /* contiguous swap rounds: a block sends the run of pieces it holds to
     * the others of its group, and holds the group's runs after */
    rc = blk_partners_create(&p, BLK_SWAP, 1, &n, b->o.k, 1);
    if (rc) die(b, "partners: %s", blk_last_error());
    int *lo = xmalloc((size_t)n * sizeof *lo), *hi = xmalloc((size_t)n * sizeof *hi),
        *nlo = xmalloc((size_t)n * sizeof *nlo), *nhi = xmalloc((size_t)n * sizeof *nhi);
    for (int g = 0; g < n; g++) lo[g] = g, hi[g] = g + 1;
    for (int e = 0; e < blk_partners_rounds(p); e++) {
      for (int g = 0; g < n; g++) {
        int k = blk_partners_out(p, e, g, gids, n);
        nlo[g] = lo[g], nhi[g] = hi[g];
        for (int j = 0; j < k; j++) {
          account(b, g, gids[j],
                  (double)(vbegin(b->count, n, hi[g]) - vbegin(b->count, n, lo[g])) * sizeof(float),
                  inside, across);
          if (lo[gids[j]] < nlo[g]) nlo[g] = lo[gids[j]];
          if (hi[gids[j]] > nhi[g]) nhi[g] = hi[gids[j]];
        }
      }
      memcpy(lo, nlo, (size_t)n * sizeof *lo);
      memcpy(hi, nhi, (size_t)n * sizeof *hi);
    }
    free(lo);
    free(hi);
    free(nlo);
    free(nhi);
  } else if (alg == BLK_ARRAYS_BUTTERFLY || b->pattern == SCAN || b->pattern == EXSCAN) {
    /* every block sends its whole array to every other member of its group
     * (a scan: its range's total) */
    rc = blk_partners_create(&p, BLK_SWAP, 1, &n, b->o.k, 1);
    if (rc) die(b, "partners: %s", blk_last_error());
    for (int e = 0; e < blk_partners_rounds(p); e++)
      for (int g = 0; g < n; g++) {
        int k = blk_partners_out(p, e, g, gids, n);
        for (int j = 0; j < k; j++)
          account(b, g, gids[j], (double)b->count * sizeof(float), inside, across);
      }
  } else if (split) {
    rc = blk_partners_create(&p, BLK_SWAP, 1, &n, b->o.k, 0);
    if (rc) die(b, "partners: %s", blk_last_error());
    int R = blk_partners_rounds(p);
    for (int e = 0; e < R; e++)
      for (int g = 0; g < n; g++) {
        int lo, hi, k = blk_partners_out(p, e, g, gids, n);
        split_share(p, n, g, e, &lo, &hi);
        int width = (hi - lo) / k;
        for (int j = 0; j < k && b->pattern != ALL_GATHER; j++)
          account(b, g, gids[j], piece_bytes(b, lo + j * width, lo + (j + 1) * width), inside,
                  across);
        if (b->pattern == REDUCE_SCATTER) continue;
        /* the all-gather runs the same groups backwards: what a block sent
         * in scatter round e it gets back, whole, in gather round R-1-e */
        split_share(p, n, g, e + 1, &lo, &hi);
        for (int j = 0; j < k; j++) account(b, g, gids[j], piece_bytes(b, lo, hi), inside, across);
      }
  } else {
    blk_pattern pat = b->pattern == REDUCE      ? BLK_MERGE
                      : b->pattern == BROADCAST ? BLK_BROADCAST
                                                : BLK_ALLREDUCE;
    rc = blk_partners_create(&p, pat, 1, &n, b->o.k, 1);
    if (rc) die(b, "partners: %s", blk_last_error());
    int R = blk_partners_rounds(p);
    for (int r = 0; r < R; r++)
      for (int g = 0; g < n; g++) {
        if (!blk_partners_active(p, r, g)) continue;
        int k = blk_partners_out(p, r, g, gids, n);
        for (int j = 0; j < k; j++)
          account(b, g, gids[j], (double)b->count * sizeof(float), inside, across);
      }
  }
  blk_partners_destroy(p);
  free(gids);
  *inside /= b->size;
  *across /= b->size;
}

/* ----------------------------------------------------------------- output */

static void print_header(const bench *b, int pattern) {
  const char *order =
      pattern == ALL_TO_ALL ? (b->o.halving ? ", halving order" : ", contiguous order")
      : pattern == REDUCE_SCATTER || pattern == ALL_REDUCE_SPLIT ? ", halving order (fixed)"
      : pattern == ALL_GATHER ? ", halving order backwards (fixed)"
      : pattern == ALL_REDUCE_RING || pattern == ALL_REDUCE_SEGMENTED_RING
          ? ", a ring in gid order (k not used)"
      : pattern == ALL_REDUCE_AUTO ? ""
                                   : ", contiguous order (fixed)";
  char mpi[128];
  printf("\n### %s: %s vs %s\n\n", patterns[pattern].name, patterns[pattern].blk,
         mpi_label(b, pattern, mpi, sizeof mpi));
  printf(
      "%d ranks x %d blocks per rank, k = %d%s, %d thread%s per rank%s; block array = bytes / "
      "%d%s\n\n",
      b->size, b->o.blocks_per_rank, b->o.k, order, b->threads, b->threads > 1 ? "s" : "",
      b->o.threads == BLK_THREADS_AUTO ? " (auto)" : "", b->o.blocks_per_rank,
      pattern == ALL_TO_ALL ? ", each block sends block bytes / nblocks to every block" : "");
  printf(
      "| bytes | block bytes | repetitions | blk t_min[usec] | blk t_max[usec] | blk t_avg[usec] "
      "| MPI t_min[usec] | MPI t_max[usec] | MPI t_avg[usec] | blk/MPI | inside | across "
      "| copy[usec] | blk/copy |\n");
  printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  fflush(stdout);
}

static void print_time(double t) {
  if (t < 100)
    printf(" %.2f |", t);
  else if (t < 10000)
    printf(" %.1f |", t);
  else
    printf(" %.0f |", t);
}

static void print_row(const row *r) {
  printf("| %zu | %zu | %d |", r->bytes, r->block_bytes, r->reps);
  const stats *s[2] = {&r->blk, &r->mpi};
  for (int i = 0; i < 2; i++) {
    if (!s[i]->valid) {
      printf(" - | - | - |");
      continue;
    }
    print_time(s[i]->tmin);
    print_time(s[i]->tmax);
    print_time(s[i]->tavg);
  }
  if (r->blk.valid && r->mpi.valid)
    printf(" %.2f |", r->blk.tavg / r->mpi.tavg);
  else
    printf(" - |");
  printf(" %.0f | %.0f |", r->inside, r->across);
  if (r->blk.valid && r->inside > 0) {
    print_time(r->copy);
    printf(" %.2f |\n", r->blk.tavg / r->copy);
  } else {
    printf(" - | - |\n");
  }
  fflush(stdout);
}

/* What side s is, for the versus tables. */
static void describe(const bench *b, int s, char *out, size_t n) {
  if (is_mpi_side(b, s)) {
    mpi_label(b, b->pattern, out, n);
    return;
  }
  if (b->o.versus_mpi) s = 0; /* (B is blk as configured) */
  int threads = s ? b->versus_threads : b->threads;
  size_t seg = b->segments[s];
  snprintf(out, n, "%d thread%s", threads, threads > 1 ? "s" : "");
  if (seg) snprintf(out + strlen(out), n - strlen(out), ", segment %zu", seg);
}

static void print_versus_header(const bench *b, int pattern) {
  char a[64], bb[64];
  describe(b, 0, a, sizeof a);
  describe(b, 1, bb, sizeof bb);
  printf("\n### %s: %s, B (%s) against A (%s)\n\n", patterns[pattern].name, patterns[pattern].blk,
         bb, a);
  printf(
      "%d ranks x %d blocks per rank, k = %d; a repetition's time is its slowest rank's; "
      "B/A = median of the repetitions' ratios, with its 95%% interval\n\n",
      b->size, b->o.blocks_per_rank, b->o.k);
  printf(
      "| bytes | repetitions | A median[usec] | B median[usec] | B/A | 95%% low | 95%% high |\n");
  printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  fflush(stdout);
}

static void print_versus_row(const row *r) {
  printf("| %zu | %d |", r->bytes, r->reps);
  print_time(r->versus.a_median);
  print_time(r->versus.b_median);
  printf(" %.3f | %.3f | %.3f |\n", r->versus.median, r->versus.lo, r->versus.hi);
  fflush(stdout);
}

static void write_versus_csv(bench *b, const row *rows, int nrows) {
  FILE *f = fopen(b->o.csv, "w");
  if (!f) die(b, "cannot write %s", b->o.csv);
  fprintf(f,
          "pattern,a,b,ranks,blocks_per_rank,k,bytes,repetitions,a_median_usec,b_median_usec,"
          "ratio,ratio_low,ratio_high\n");
  for (int i = 0; i < nrows; i++) {
    const row *r = &rows[i];
    char a[64], bb[64];
    b->pattern = r->pattern; /* (describe names the MPI collective) */
    describe(b, 0, a, sizeof a);
    describe(b, 1, bb, sizeof bb);
    fprintf(f, "%s,\"%s\",\"%s\",%d,%d,%d,%zu,%d,%.4f,%.4f,%.4f,%.4f,%.4f\n",
            patterns[r->pattern].name, a, bb, b->size, b->o.blocks_per_rank, b->o.k, r->bytes,
            r->reps, r->versus.a_median, r->versus.b_median, r->versus.median, r->versus.lo,
            r->versus.hi);
  }
  fclose(f);
}

static void write_file(const bench *b, const row *rows, int nrows, int json) {
  const char *path = json ? b->o.json : b->o.csv;
  FILE *f = fopen(path, "w");
  if (!f) die(b, "cannot write %s", path);
  if (json)
    fprintf(f, "[\n");
  else
    fprintf(f,
            "pattern,blk,mpi,ranks,blocks_per_rank,k,halving,threads,bytes,block_bytes,"
            "repetitions,blk_t_min_usec,blk_t_max_usec,blk_t_avg_usec,mpi_t_min_usec,"
            "mpi_t_max_usec,mpi_t_avg_usec,ratio,inside_bytes,across_bytes,copy_usec\n");
  for (int i = 0; i < nrows; i++) {
    const row *r = &rows[i];
    double nan = NAN;
    double v[8] = {r->blk.valid ? r->blk.tmin : nan,
                   r->blk.valid ? r->blk.tmax : nan,
                   r->blk.valid ? r->blk.tavg : nan,
                   r->mpi.valid ? r->mpi.tmin : nan,
                   r->mpi.valid ? r->mpi.tmax : nan,
                   r->mpi.valid ? r->mpi.tavg : nan,
                   r->blk.valid && r->mpi.valid ? r->blk.tavg / r->mpi.tavg : nan,
                   r->inside > 0 ? r->copy : nan};
    char mpi[128];
    mpi_label(b, r->pattern, mpi, sizeof mpi);
    if (json) {
      fprintf(f,
              "  {\"pattern\": \"%s\", \"blk\": \"%s\", \"mpi\": \"%s\", \"ranks\": %d, "
              "\"blocks_per_rank\": %d, \"k\": %d, \"halving\": %d, \"threads\": %d, "
              "\"bytes\": %zu, \"block_bytes\": %zu, \"repetitions\": %d",
              patterns[r->pattern].name, patterns[r->pattern].blk, mpi, b->size,
              b->o.blocks_per_rank, b->o.k, b->o.halving, b->threads, r->bytes, r->block_bytes,
              r->reps);
      static const char *names[8] = {"blk_t_min_usec", "blk_t_max_usec", "blk_t_avg_usec",
                                     "mpi_t_min_usec", "mpi_t_max_usec", "mpi_t_avg_usec",
                                     "ratio",          "copy_usec"};
      for (int j = 0; j < 8; j++) {
        if (isnan(v[j]))
          fprintf(f, ", \"%s\": null", names[j]);
        else
          fprintf(f, ", \"%s\": %.4f", names[j], v[j]);
      }
      fprintf(f, ", \"inside_bytes\": %.0f, \"across_bytes\": %.0f}%s\n", r->inside, r->across,
              i + 1 < nrows ? "," : "");
    } else {
      fprintf(f, "%s,%s,%s,%d,%d,%d,%d,%d,%zu,%zu,%d", patterns[r->pattern].name,
              patterns[r->pattern].blk, mpi, b->size, b->o.blocks_per_rank, b->o.k, b->o.halving,
              b->threads, r->bytes, r->block_bytes, r->reps);
      for (int j = 0; j < 7; j++) {
        if (isnan(v[j]))
          fprintf(f, ",");
        else
          fprintf(f, ",%.4f", v[j]);
      }
      fprintf(f, ",%.0f,%.0f", r->inside, r->across);
      if (isnan(v[7]))
        fprintf(f, ",\n");
      else
        fprintf(f, ",%.4f\n", v[7]);
    }
  }
  if (json) fprintf(f, "]\n");
  fclose(f);
}

/* ---------------------------------------------------------------- options */

static const char usage[] =
    "usage: mpiexec -n P blk-bench [options]\n"
    "  --sizes FROM:TO:FACTOR | S,S,...  bytes per rank (K, M, G = KiB, MiB, GiB);\n"
    "                                   default 16:16M:4\n"
    "  --blocks-per-rank B              blocks on each rank (default 1); block array = bytes/B\n"
    "  --blocks N                       N blocks in all instead (contiguous assigner; any N,\n"
    "                                   e.g. a prime); block array = bytes * ranks / N\n"
    "  --k K                            radix of blk's rounds (default 2)\n"
    "  --halving                        all_to_all in halving order (default contiguous);\n"
    "                                   the array collectives fix their order\n"
    "  --threads T | auto               blk's threads per rank (default 1; auto: what\n"
    "                                   BLK_THREADS_AUTO, blk's default, comes to)\n"
    "  --segment BYTES                  the segmented all-reduces' most bytes a message\n"
    "                                   (default: blk's own, blk/arrays.h)\n"
    "  --reps N                         timed repetitions (default by size: 1 GiB / bytes,\n"
    "                                   between 50 and 2000)\n"
    "  --warmup N                       untimed repetitions first (default reps / 10, >= 2)\n"
    "  --patterns LIST                  of reduce, broadcast, reduce_scatter, all_reduce (its\n"
    "                                   seven), all_reduce_tree, all_reduce_split,\n"
    "                                   all_reduce_butterfly, all_reduce_ring,\n"
    "                                   all_reduce_segmented_ring, all_reduce_pipelined_tree,\n"
    "                                   all_reduce_auto, all_to_all,\n"
    "                                   scan, exscan, all_gather, all_gatherv, agreement,\n"
    "                                   all (the default)\n"
    "  --mpi-only | --blk-only          time one side only\n"
    "  --versus-threads T | auto        time blk with T threads (B) against --threads (A),\n"
    "                                   in pairs of repetitions, instead of against MPI\n"
    "  --versus-segment BYTES           the same with B's segment for the segmented ones\n"
    "  --versus-mpi                     time blk (B) against the MPI collective (A) in\n"
    "                                   pairs of repetitions\n"
    "  --mpi-agreed                     the MPI side ends each collective with an\n"
    "                                   MPI_Allreduce of one int: every rank learns the\n"
    "                                   outcome, as every blk collective's ranks do\n"
    "  --csv FILE, --json FILE          also write the rows to FILE\n";

static size_t parse_bytes(const char *s, int *ok) {
  char *end = NULL;
  double v = strtod(s, &end);
  double mult = 1.0;
  if (end && (*end == 'K' || *end == 'k'))
    mult = 1024.0, end++;
  else if (end && (*end == 'M' || *end == 'm'))
    mult = 1048576.0, end++;
  else if (end && (*end == 'G' || *end == 'g'))
    mult = 1073741824.0, end++;
  if (end && (*end == 'B' || *end == 'b')) end++;
  if (!end || end == s || (*end && *end != ':' && *end != ',') || v < 0) *ok = 0;
  return (size_t)(v * mult);
}

static int parse_sizes(options *o, const char *arg) {
  int ok = 1;
  o->nsizes = 0;
  if (strchr(arg, ':')) {
    const char *b2 = strchr(arg, ':') + 1, *c = strchr(b2, ':');
    if (!c) return 0;
    size_t from = parse_bytes(arg, &ok), to = parse_bytes(b2, &ok);
    size_t factor = (size_t)atol(c + 1);
    if (!ok || from == 0 || factor < 2 || to < from) return 0;
    for (size_t s = from; s <= to && o->nsizes < MAX_SIZES; s *= factor) o->sizes[o->nsizes++] = s;
    return 1;
  }
  for (const char *p = arg; p && *p && o->nsizes < MAX_SIZES;) {
    o->sizes[o->nsizes++] = parse_bytes(p, &ok);
    p = strchr(p, ',');
    if (p) p++;
  }
  return ok && o->nsizes > 0;
}

static int parse_patterns(options *o, const char *arg) {
  memset(o->run, 0, sizeof o->run);
  char list[512];
  snprintf(list, sizeof list, "%s", arg);
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int found = 0;
    if (!strcmp(t, "all")) {
      for (int i = 0; i < NPATTERNS; i++) o->run[i] = 1;
      found = 1;
    }
    if (!strcmp(t, "all_reduce")) {
      o->run[ALL_REDUCE_TREE] = o->run[ALL_REDUCE_SPLIT] = o->run[ALL_REDUCE_BUTTERFLY] =
          o->run[ALL_REDUCE_RING] = o->run[ALL_REDUCE_SEGMENTED_RING] =
              o->run[ALL_REDUCE_PIPELINED_TREE] = o->run[ALL_REDUCE_AUTO] = 1;
      found = 1;
    }
    for (int i = 0; i < NPATTERNS; i++)
      if (!strcmp(t, patterns[i].name)) o->run[i] = found = 1;
    if (!found) return 0;
  }
  return 1;
}

static int parse(options *o, int argc, char **argv, int rank) {
  memset(o, 0, sizeof *o);
  parse_sizes(o, "16:16M:4");
  o->blocks_per_rank = 1;
  o->k = 2;
  o->threads = 1;
  o->warmup = -1; /* by size */
  for (int i = 0; i < NPATTERNS; i++) o->run[i] = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1, takes = 1;
    if (!strcmp(a, "--sizes") && v)
      ok = parse_sizes(o, v);
    else if (!strcmp(a, "--blocks-per-rank") && v)
      ok = (o->blocks_per_rank = atoi(v)) >= 1;
    else if (!strcmp(a, "--blocks") && v)
      ok = (o->blocks = atoi(v)) >= 1;
    else if (!strcmp(a, "--k") && v)
      ok = (o->k = atoi(v)) >= 2;
    else if (!strcmp(a, "--threads") && v)
      ok = !strcmp(v, "auto") ? (o->threads = BLK_THREADS_AUTO) != 0 : (o->threads = atoi(v)) >= 1;
    else if (!strcmp(a, "--segment") && v)
      ok = (o->segment = parse_bytes(v, &ok)) > 0 && ok;
    else if (!strcmp(a, "--versus-threads") && v)
      o->versus = 1, ok = !strcmp(v, "auto") ? (o->versus_threads = BLK_THREADS_AUTO) != 0
                                             : (o->versus_threads = atoi(v)) >= 1;
    else if (!strcmp(a, "--versus-segment") && v)
      o->versus = 1, ok = (o->versus_segment = parse_bytes(v, &ok)) > 0 && ok;
    else if (!strcmp(a, "--versus-mpi"))
      o->versus = o->versus_mpi = 1, takes = 0;
    else if (!strcmp(a, "--mpi-agreed"))
      o->mpi_agreed = 1, takes = 0;
    else if (!strcmp(a, "--reps") && v)
      ok = (o->reps = atoi(v)) >= 1;
    else if (!strcmp(a, "--warmup") && v)
      ok = (o->warmup = atoi(v)) >= 0;
    else if (!strcmp(a, "--patterns") && v)
      ok = parse_patterns(o, v);
    else if (!strcmp(a, "--csv") && v)
      o->csv = v;
    else if (!strcmp(a, "--json") && v)
      o->json = v;
    else if (!strcmp(a, "--halving"))
      o->halving = 1, takes = 0;
    else if (!strcmp(a, "--mpi-only"))
      o->mpi_only = 1, takes = 0;
    else if (!strcmp(a, "--blk-only"))
      o->blk_only = 1, takes = 0;
    else
      ok = 0;
    if (!ok || (o->mpi_only && o->blk_only) ||
        (o->versus && (o->mpi_only || o->blk_only || o->json)) ||
        (o->versus_mpi && (o->versus_threads || o->versus_segment))) {
      if (rank == 0) fprintf(stderr, "blk-bench: bad option near '%s'\n%s", a, usage);
      return 0;
    }
    i += takes;
  }
  return 1;
}

/* ------------------------------------------------------------------- main */

/* A master with the given threads, holding this rank's blocks. */
static blk_master *make_master(bench *b, int threads) {
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = threads;
  mc.destroy = destroy_block;
  blk_master *m = NULL;
  if (blk_master_create(&m, MPI_COMM_WORLD, &mc)) die(b, "master: %s", blk_last_error());
  int *gids = xmalloc((size_t)b->nblocks * sizeof *gids);
  int nlocal = blk_assigner_local_gids(b->a, b->rank, gids, b->nblocks);
  for (int i = 0; i < nlocal; i++) {
    block *bl = calloc(1, sizeof *bl);
    if (!bl) die(b, "out of memory");
    bl->gid = gids[i];
    bl->bad_src = -1;
    if (blk_master_add(m, gids[i], bl, NULL, 0)) die(b, "add: %s", blk_last_error());
  }
  free(gids);
  return m;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  static bench bb;
  bench *b = &bb;
  MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b->size);
  if (!parse(&b->o, argc, argv, b->rank)) {
    MPI_Finalize();
    return 2;
  }
  const options *o = &b->o;
  b->nblocks = o->blocks ? o->blocks : b->size * o->blocks_per_rank;
  if (o->blocks) /* (what the tables print: the most on a rank) */
    b->o.blocks_per_rank = (o->blocks + b->size - 1) / b->size;
  if (blk_assigner_create_contiguous(&b->a, b->size, b->nblocks))
    die(b, "assigner: %s", blk_last_error());
  b->ms[0] = b->ms[1] = make_master(b, o->threads);
  if (o->versus_threads) b->ms[1] = make_master(b, o->versus_threads);
  b->segments[0] = o->segment;
  b->segments[1] = o->versus_segment ? o->versus_segment : o->segment;
  use(b, 0);
  b->threads = blk_master_threads(b->ms[0]); /* what auto came to (rank 0's, in the output) */
  b->versus_threads = blk_master_threads(b->ms[1]);
  sums(b->sum_blocks, b->nblocks);
  sums(b->sum_ranks, b->size);

  if (b->rank == 0) {
    printf(
        "blk-bench: %d ranks x %d blocks per rank (%d blocks), k = %d, %d thread%s per rank%s, "
        "MPI thread level %d\n",
        b->size, o->blocks_per_rank, b->nblocks, o->k, b->threads, b->threads > 1 ? "s" : "",
        o->threads == BLK_THREADS_AUTO ? " (auto)" : "", provided);
    printf(
        "bytes = bytes per rank = the MPI message size (MPI_Alltoall: the whole send buffer); "
        "each block's array is bytes / %d.\n",
        o->blocks_per_rank);
    printf(
        "Times in usec: each repetition timed alone between barriers; t_min/t_max/t_avg = "
        "min/max/mean over ranks of each rank's mean; blk/MPI = ratio of t_avg.\n");
    printf(
        "inside/across: bytes per rank blk moves between blocks of a rank / to other ranks; "
        "copy = memcpy time of the inside bytes (one core; all_to_all: its items between "
        "the rank's blocks, its own piece too, copied once each by hand); every result is "
        "checked.\n");
    printf("\n### memcpy floor: one core (rank 0, the others idle), warm buffers\n\n");
    printf("| bytes | t[usec] | GB/s |\n|---:|---:|---:|\n");
  }
  for (int i = 0; i < o->nsizes; i++) {
    double t = memcpy_usec(b, o->sizes[i]);
    if (b->rank == 0) {
      printf("| %zu |", o->sizes[i]);
      print_time(t);
      printf(" %.1f |\n", t > 0 ? (double)o->sizes[i] / t * 1e-3 : 0.0);
    }
  }

  row *rows = xmalloc((size_t)(NPATTERNS * o->nsizes) * sizeof *rows);
  int nrows = 0;
  stats allreduce_mpi[MAX_SIZES];
  memset(allreduce_mpi, 0, sizeof allreduce_mpi);
  for (int pat = 0; pat < NPATTERNS; pat++) {
    if (!o->run[pat]) continue;
    b->pattern = pat;
    if (b->rank == 0) (o->versus ? print_versus_header : print_header)(b, pat);
    for (int si = 0; si < o->nsizes; si++) {
      size_t bytes = o->sizes[si];
      row r;
      memset(&r, 0, sizeof r);
      r.pattern = pat;
      r.bytes = bytes;
      r.block_bytes = bytes * (size_t)b->size / (size_t)b->nblocks;
      b->bytes = bytes;
      b->block_bytes = r.block_bytes;
      b->count = b->block_bytes / sizeof(float);
      b->chunk = b->block_bytes / (size_t)b->nblocks;
      b->mpi_count = bytes / sizeof(float);
      b->mpi_chunk = bytes / (size_t)b->size;
      int blk_ok = !o->mpi_only && (is_a2a(pat) ? b->chunk > 0 : b->count > 0);
      int mpi_can = is_a2a(pat)                               ? b->mpi_chunk > 0
                    : pat == REDUCE_SCATTER || is_gather(pat) ? b->mpi_count >= (size_t)b->size
                                                              : b->mpi_count > 0;
      int mpi_ok = !o->blk_only && !o->versus && mpi_can;
      if (pat == REDUCE_SCATTER || pat == ALL_GATHER)
        b->mpi_count -= b->mpi_count % (size_t)b->size;
      r.reps = o->reps ? o->reps : auto_reps(bytes);
      int warmup = o->warmup >= 0 ? o->warmup : r.reps / 10 < 2 ? 2 : r.reps / 10;
      if (mpi_ok) {
        if (is_all_reduce(pat) && allreduce_mpi[si].valid) {
          r.mpi = allreduce_mpi[si];
        } else {
          setup_mpi(b);
          r.mpi = time_loop(b, mpi_run, mpi_prepare, r.reps, warmup);
          check_mpi(b);
          if (is_all_reduce(pat)) allreduce_mpi[si] = r.mpi;
        }
      }
      if (blk_ok && o->versus) {
        if (o->versus_mpi && !mpi_can) continue;
        if (o->versus_mpi) setup_mpi(b);
        for (int s = 1; s >= 0; s--) {
          use(b, s);
          setup_blocks(b);
        }
        r.versus = time_versus(b, r.reps, warmup);
        r.blk.valid = 1;
        if (b->rank == 0) print_versus_row(&r);
        rows[nrows++] = r;
        continue;
      }
      if (blk_ok) {
        setup_blocks(b);
        r.blk = time_loop(b, blk_run, blk_prepare, r.reps, warmup);
        check_blk(b);
        traffic(b, &r.inside, &r.across);
        if (is_a2a(pat)) {
          r.copy = a2a_copy_usec(b);
        } else {
          double per_block = memcpy_usec(b, b->block_bytes);
          r.copy = r.inside / (double)b->block_bytes * per_block;
        }
      }
      if (!blk_ok && !mpi_ok) continue;
      if (b->rank == 0) print_row(&r);
      rows[nrows++] = r;
    }
  }
  if (b->rank == 0 && o->versus) {
    if (o->csv) write_versus_csv(b, rows, nrows);
  } else if (b->rank == 0) {
    if (o->csv) write_file(b, rows, nrows, 0);
    if (o->json) write_file(b, rows, nrows, 1);
  }
  free(rows);
  unmap_bytes(b->send, b->mpi_bytes);
  unmap_bytes(b->recv, b->mpi_bytes);
  unmap_bytes(b->orig, b->mpi_bytes);
  free(b->vcounts);
  free(b->vdispls);
  if (b->ms[1] != b->ms[0]) blk_master_destroy(b->ms[1]);
  blk_master_destroy(b->ms[0]);
  blk_assigner_destroy(b->a);
  MPI_Finalize();
  return 0;
}
