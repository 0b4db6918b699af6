/*
 * histogram: the histogram of a field on a decomposed 2D grid, by
 * merge-reduce.
 *
 * The field's value at a cell is a fixed function of the cell (a smooth wave
 * plus hashed noise), so no data is read or moved to set it up. Each block
 * bins the cells it owns; then blk_reduce with BLK_MERGE partners adds the
 * histograms up a k-ary tree whose groups follow the decomposer's grid:
 * neighbouring blocks first (the default, contiguous order) or far-apart
 * ones first (--halving). Only the first member of each group stays active,
 * and after the last round gid 0 holds the histogram of the whole domain.
 * Every rank also bins the whole grid serially; gid 0's counts must equal
 * those exactly.
 *
 * Out-of-core (--mem-blocks N), a block's histogram is what save writes and
 * load reads back (nothing, before the block has one).
 *
 *   mpiexec -n 4 ./histogram [--blocks 12] [--k 2] [--halving] [--threads 2]
 *                            [--size 256] [--bins 64] [--seed 1]
 *                            [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * --size N makes an N x N grid. Prints one line with PASS, or FAIL and exit
 * status 1 (and, out-of-core, a line of rank 0's storage figures).
 */
#include <blk/blk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

typedef struct setup {
  int64_t n;     /* cells per side */
  int bins;      /* histogram bins over [0, 1) */
  uint64_t seed; /* of the noise */
  blk_decomposer *d;
} setup;

/* The bin of cell (x, y): a wave in [0.1, 0.9) plus noise in [-0.1, 0.1). */
static int cell_bin(const setup *s, int64_t x, int64_t y) {
  const double two_pi = 6.283185307179586;
  double wave =
      0.5 + 0.4 * sin(two_pi * (double)x / (double)s->n) * cos(two_pi * (double)y / (double)s->n);
  double noise = 0.2 * ex_unit(ex_random(s->seed, (uint64_t)(y * s->n + x), 0)) - 0.1;
  int bin = (int)((wave + noise) * s->bins);
  return bin < 0 ? 0 : bin >= s->bins ? s->bins - 1 : bin;
}

/* The counts, bins entries, or NULL until the block bins its cells or is
 * loaded with counts. Out of core create runs before every load, which
 * brings the counts: zeroing them in create, only for load to replace
 * them, took 3-5% of a run. */
typedef struct hist_block {
  uint64_t *counts;
} hist_block;

static int create_block(void **out, int gid, void *user) {
  (void)gid;
  (void)user;
  *out = calloc(1, sizeof(hist_block));
  return *out ? 0 : BLK_ENOMEM;
}

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  hist_block *b = block;
  if (!b) return;
  free(b->counts);
  free(b);
}

/* The counts, zero at first use; NULL if there is no memory. */
static uint64_t *counts_of(const setup *s, hist_block *b) {
  if (!b->counts) b->counts = calloc((size_t)s->bins, sizeof *b->counts);
  return b->counts;
}

/* Out-of-core: the counts are the block's whole state, saved as they are
 * (nothing before it has any). Load takes the buffer's memory, where the
 * counts already are, rather than copy them (master.h allows it; nothing
 * fails after the take). */
static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  const setup *s = user;
  const hist_block *b = block;
  if (!b->counts) return 0;
  return blk_buffer_write(out, b->counts, (size_t)s->bins * sizeof *b->counts);
}

/* ... and when the block goes out (destroy follows), the counts' memory
 * itself: no copy, and none of the fresh pages a copy would fault in. */
static int evict_block(blk_buffer *out, void *block, int gid, void *user) {
  (void)gid;
  const setup *s = user;
  hist_block *b = block;
  if (!b->counts) return 0;
  const size_t bytes = (size_t)s->bins * sizeof *b->counts;
  blk_buffer_adopt(out, b->counts, bytes, bytes);
  b->counts = NULL;
  return 0;
}

static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  const setup *s = user;
  hist_block *b = block; /* fresh from create_block: no counts */
  const size_t bytes = (size_t)s->bins * sizeof *b->counts, saved = blk_buffer_remaining(in);
  if (saved == 0) return 0;
  if (saved != bytes) return BLK_ECORRUPT;
  b->counts = in->pos == 0 ? blk_buffer_detach(in, NULL) : NULL;
  if (b->counts) return 0;
  if (!counts_of(s, b)) return BLK_ENOMEM;
  return blk_buffer_read(in, b->counts, bytes);
}

/* foreach: bin the cells this block owns. */
static int local_histogram(void *block, blk_proxy *p, void *user) {
  const setup *s = user;
  hist_block *b = block;
  blk_bounds core;
  int rc = blk_decomposer_block_bounds(s->d, blk_proxy_gid(p), &core, NULL);
  if (rc) return rc;
  uint64_t *counts = counts_of(s, b);
  if (!counts) return BLK_ENOMEM;
  for (int64_t y = core.min[1]; y <= core.max[1]; y++)
    for (int64_t x = core.min[0]; x <= core.max[0]; x++) counts[cell_bin(s, x, y)]++;
  return 0;
}

/* reduce: add what the group sent, then send the sum to the group's first
 * member. A block is the first member of the group it receives from (that is
 * why it is still active), so it sends nothing to itself, and its own queue
 * in that list is empty: its histogram is already here. */
static int merge_histograms(void *block, blk_proxy *p, void *user) {
  const setup *s = user;
  hist_block *b = block;
  int gid = blk_proxy_gid(p);
  uint64_t *counts = counts_of(s, b);
  if (!counts) return BLK_ENOMEM;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    if (blk_proxy_in_gid(p, i) == gid) continue;
    /* Added from where they arrived (a view, no copy; maybe unaligned). */
    const void *in = NULL;
    size_t count = blk_proxy_dequeue_array_view(p, i, &in, sizeof *counts);
    if (count != (size_t)s->bins) return BLK_ECORRUPT;
    for (size_t j = 0; j < count; j++) {
      uint64_t c;
      memcpy(&c, (const unsigned char *)in + j * sizeof c, sizeof c);
      counts[j] += c;
    }
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++) { /* 0 or 1 out-partners */
    if (blk_proxy_out_gid(p, i) == gid) continue;
    int rc = blk_proxy_enqueue_array(p, i, counts, sizeof *counts, (size_t)s->bins);
    if (rc) return rc;
  }
  return 0;
}

typedef struct check {
  const setup *s;
  const uint64_t *serial;
} check;

/* foreach: gid 0 compares with the serial histogram; every block posts the
 * number of differing bins and the root's total, so every rank learns the
 * verdict from one exchange. */
static int check_root(void *block, blk_proxy *p, void *user) {
  const check *c = user;
  hist_block *b = block;
  int64_t differ = 0, total = 0;
  if (blk_proxy_gid(p) == 0)
    for (int j = 0; j < c->s->bins; j++) {
      uint64_t count = b->counts ? b->counts[j] : 0;
      differ += count != c->serial[j];
      total += (int64_t)count;
    }
  int rc = blk_proxy_all_reduce_i64(p, differ, BLK_OP_SUM);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, total, BLK_OP_SUM);
  return rc;
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 12, .k = 2, .contiguous = 1, .threads = 2, .seed = 1};
  long long n = 256, bins = 64;
  ex_int_option extra[] = {{"--size", &n, 1, "cells per side of the N x N grid"},
                           {"--bins", &bins, 1, "histogram bins"}};
  if (!ex_start(&argc, &argv, &o, "a histogram of a 2D field by merge-reduce", extra, 2))
    return o.status;
  int size = ex_size();
  setup s = {n, (int)bins, o.seed, NULL};

  /* The grid, its blocks, and the merge partners over the same divisions. */
  blk_bounds domain;
  int64_t lo[2] = {0, 0}, hi[2] = {n - 1, n - 1};
  EX_CHECK(blk_bounds_set(&domain, 2, lo, hi));
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  blk_partners *partners = NULL;
  EX_CHECK(blk_decomposer_create(&s.d, &domain, o.blocks, NULL));
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  EX_CHECK(ex_choose_k(&o, BLK_MERGE, a, (size_t)bins * sizeof(uint64_t), 0));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = create_block;
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.evict = evict_block;
  mc.user = &s;
  mc.shuffle = sizeof(uint64_t); /* the records are arrays of counts */
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(blk_master_decompose(m, s.d, a));
  int div[2];
  blk_decomposer_divisions(s.d, div);
  /* (blk_partners_create_for(&partners, BLK_MERGE, s.d, ...) does these two steps in one.) */
  EX_CHECK(blk_partners_create(&partners, BLK_MERGE, 2, div, o.k, o.contiguous));

  double t0 = MPI_Wtime();
  EX_CHECK(blk_master_foreach(m, local_histogram, &s));
  EX_CHECK(blk_reduce(m, a, partners, merge_histograms, &s));
  double elapsed = MPI_Wtime() - t0;

  /* The serial reference: the whole grid binned on this rank. */
  uint64_t *serial = calloc((size_t)s.bins, sizeof *serial);
  if (!serial) ex_fail(__FILE__, __LINE__, "calloc", BLK_ENOMEM, "serial histogram");
  for (int64_t y = 0; y < n; y++)
    for (int64_t x = 0; x < n; x++) serial[cell_bin(&s, x, y)]++;
  check c = {&s, serial};
  EX_CHECK(blk_master_foreach(m, check_root, &c));
  EX_CHECK(blk_master_exchange(m));
  int64_t differ = blk_master_result_i64(m, 0), total = blk_master_result_i64(m, 1);
  free(serial);

  int ok = ex_ooc_agree(m, &o.ooc, differ == 0 && total == (int64_t)(n * n));
  ex_summary(m, &o.ooc, ok, "histogram",
             "%lldx%lld cells in %d bins, %d blocks (%dx%d) on %d ranks x %d threads, %s, merge "
             "k=%d %s in %d rounds: root total %lld, %lld bins differ from serial, %.3f s",
             n, n, s.bins, o.blocks, div[0], div[1], size, o.threads, ex_ooc_mode(&o.ooc).s, o.k,
             ex_order(&o), blk_partners_rounds(partners), (long long)total, (long long)differ,
             elapsed);
  blk_partners_destroy(partners);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(s.d);
  return ex_finish(ok);
}
