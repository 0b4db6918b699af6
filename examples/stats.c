/*
 * stats: global statistics that every block needs, by all-reduce.
 *
 * Each block holds --values pseudo-random values and summarises them: their
 * count, sum, minimum and maximum, plus a vector of --vector doubles (the sum
 * of the values falling into each of that many equal bins: a weighted
 * histogram). blk_reduce with BLK_ALLREDUCE partners combines the summaries
 * up a k-ary tree to gid 0 (the merge half) and sends the total back down the
 * same tree (the broadcast half), so afterwards every block holds the global
 * summary. This is what MPI_Allreduce does for ranks, done for blocks, with
 * a message per tree edge instead of one per block pair.
 *
 * The values are multiples of 1/256 between -4096 and 4096, so every partial
 * sum is exact in a double and the result cannot depend on the order in
 * which blocks are combined: every block compares its result with a serial
 * computation over all values bit for bit.
 *
 * Out-of-core (--mem-blocks N), save writes a block's summary (head and
 * vector) and load reads it back.
 *
 *   mpiexec -n 4 ./stats [--blocks 44] [--k 4] [--halving] [--threads 2]
 *                        [--values 1000] [--vector 16] [--seed 1]
 *                        [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * Prints one line with PASS, or FAIL and exit status 1 (and, out-of-core, a
 * line of rank 0's storage figures).
 */
#include <blk/blk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

/* Value i of block gid: a multiple of 1/256 in [-4096, 4096). */
static double make_value(uint64_t seed, int gid, uint64_t i) {
  uint64_t r = ex_random(seed, (uint64_t)gid, i) >> 43; /* 21 bits */
  return ((double)r - 1048576.0) / 256.0;
}

/* The statistics vector: a fixed head, then vlen bin sums. */
typedef struct stats {
  int64_t count;
  double sum, min, max;
  double *bins;
} stats;

static void stats_add_value(stats *s, int vlen, double v) {
  s->count++;
  s->sum += v;
  if (v < s->min) s->min = v;
  if (v > s->max) s->max = v;
  int bin = (int)((v + 4096.0) / 8192.0 * vlen);
  s->bins[bin < vlen ? bin : vlen - 1] += v;
}

typedef struct setup {
  uint64_t seed, values; /* values per block */
  int vlen;
} setup;

static int stats_init(stats *s, int vlen) {
  s->count = 0;
  s->sum = 0.0;
  s->min = 4096.0; /* above every value */
  s->max = -4096.0;
  s->bins = calloc((size_t)vlen, sizeof *s->bins);
  return s->bins ? 0 : BLK_ENOMEM;
}

/* An empty summary; summarise_values fills it. (Out-of-core, blk also calls
 * this to make the block that load fills, so it does no work.) */
static int create_block(void **out, int gid, void *user) {
  (void)gid;
  const setup *su = user;
  stats *s = calloc(1, sizeof *s);
  *out = s;
  return s && !stats_init(s, su->vlen) ? 0 : BLK_ENOMEM;
}

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  stats *s = block;
  if (s) free(s->bins);
  free(s);
}

/* Out-of-core: the whole summary, field by field. */
static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  const setup *su = user;
  const stats *s = block;
  blk_buffer_write_i64(out, s->count);
  blk_buffer_write_f64(out, s->sum);
  blk_buffer_write_f64(out, s->min);
  blk_buffer_write_f64(out, s->max);
  return blk_buffer_write_array(out, s->bins, sizeof *s->bins, (size_t)su->vlen);
}

static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  const setup *su = user;
  stats *s = block;
  size_t vlen = 0;
  blk_buffer_read_i64(in, &s->count);
  blk_buffer_read_f64(in, &s->sum);
  blk_buffer_read_f64(in, &s->min);
  blk_buffer_read_f64(in, &s->max);
  blk_buffer_read_array(in, s->bins, sizeof *s->bins, (size_t)su->vlen, &vlen);
  if (blk_buffer_error(in)) return blk_buffer_error(in);
  return vlen == (size_t)su->vlen && blk_buffer_remaining(in) == 0 ? 0 : BLK_ECORRUPT;
}

/* foreach: summarise this block's values. */
static int summarise_values(void *block, blk_proxy *p, void *user) {
  const setup *su = user;
  stats *s = block;
  for (uint64_t i = 0; i < su->values; i++)
    stats_add_value(s, su->vlen, make_value(su->seed, blk_proxy_gid(p), i));
  return 0;
}

/* The message: the head as one struct, then the vlen bin sums. */
typedef struct stats_head {
  int64_t count;
  double sum, min, max;
} stats_head;

static int send_stats(blk_proxy *p, int i, const stats *s, int vlen) {
  stats_head h = {s->count, s->sum, s->min, s->max};
  int rc = blk_proxy_enqueue(p, i, &h, sizeof h);
  if (!rc) rc = blk_proxy_enqueue(p, i, s->bins, (size_t)vlen * sizeof *s->bins);
  return rc;
}

/* Reads a message and combines it with *s (merge) or replaces *s with it. */
static void receive_stats(blk_proxy *p, int i, stats *s, int vlen, int merge) {
  stats_head h;
  blk_proxy_dequeue(p, i, &h, sizeof h);
  for (int j = 0; j < vlen; j++) {
    double v;
    blk_proxy_dequeue(p, i, &v, sizeof v);
    s->bins[j] = merge ? s->bins[j] + v : v;
  }
  if (merge) {
    s->count += h.count;
    s->sum += h.sum;
    if (h.min < s->min) s->min = h.min;
    if (h.max > s->max) s->max = h.max;
  } else {
    s->count = h.count;
    s->sum = h.sum;
    s->min = h.min;
    s->max = h.max;
  }
}

typedef struct run {
  const setup *su;
  int rounds;          /* 2R: rounds 0..R merge, R..2R broadcast */
  const stats *serial; /* the expected result */
} run;

/* reduce (all-reduce): up to round R, add what the group sent; after it,
 * take the total from the parent. Then pass the result on. A block appears
 * in its own partner lists when it is the first member of its group: it
 * sends nothing to itself (its summary is already here) and skips its own
 * in queue, which is therefore empty. */
static int allreduce_stats(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  stats *s = block;
  int gid = blk_proxy_gid(p), merging = blk_proxy_round(p) <= r->rounds / 2;
  for (int i = 0; i < blk_proxy_in_count(p); i++)
    if (blk_proxy_in_gid(p, i) != gid) receive_stats(p, i, s, r->su->vlen, merging);
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    if (blk_proxy_out_gid(p, i) == gid) continue;
    int rc = send_stats(p, i, s, r->su->vlen);
    if (rc) return rc;
  }
  return 0;
}

/* foreach: every block compares its result with the serial one, exactly. */
static int check_stats(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  const stats *s = block, *want = r->serial;
  int64_t differ =
      s->count != want->count || s->sum != want->sum || s->min != want->min || s->max != want->max;
  for (int j = 0; j < r->su->vlen; j++) differ += s->bins[j] != want->bins[j];
  return blk_proxy_all_reduce_i64(p, differ, BLK_OP_SUM);
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 44, .k = 4, .contiguous = 1, .threads = 2, .seed = 1};
  long long values = 1000, vlen = 16;
  ex_int_option extra[] = {{"--values", &values, 0, "values held by each block"},
                           {"--vector", &vlen, 1, "length of the vector of bin sums"}};
  if (!ex_start(&argc, &argv, &o, "per-block statistics combined by all-reduce", extra, 2))
    return o.status;
  int size = ex_size();
  setup su = {o.seed, (uint64_t)values, (int)vlen};

  blk_assigner *a = NULL;
  blk_master *m = NULL;
  blk_partners *partners = NULL;
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  EX_CHECK(ex_choose_k(&o, BLK_ALLREDUCE, a, (size_t)(vlen + 4) * sizeof(double), 0));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = create_block; /* out-of-core, blk makes the blocks it loads into */
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.user = &su;
  mc.shuffle = sizeof(double); /* the records are mostly the vector of doubles */
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(ex_add_blocks(m, a, create_block, &su));
  EX_CHECK(blk_master_foreach(m, summarise_values, &su));
  /* No geometry: the blocks form a 1D row of o.blocks, folded when the
   * count has a prime factor above max(k, 16) (otherwise DIY's rounds). */
  EX_CHECK(blk_partners_create_folded(&partners, BLK_ALLREDUCE, o.blocks, o.k, o.contiguous));

  run r = {&su, blk_partners_rounds(partners), NULL};
  double t0 = MPI_Wtime();
  EX_CHECK(blk_reduce(m, a, partners, allreduce_stats, &r));
  double elapsed = MPI_Wtime() - t0;

  /* The serial reference over every block's values. */
  stats want;
  if (stats_init(&want, su.vlen)) ex_fail(__FILE__, __LINE__, "calloc", BLK_ENOMEM, "serial");
  for (int g = 0; g < o.blocks; g++)
    for (uint64_t i = 0; i < su.values; i++)
      stats_add_value(&want, su.vlen, make_value(o.seed, g, i));
  r.serial = &want;
  EX_CHECK(blk_master_foreach(m, check_stats, &r));
  EX_CHECK(blk_master_exchange(m));
  int64_t differ = blk_master_result_i64(m, 0);

  int ok = ex_ooc_agree(m, &o.ooc, differ == 0);
  ex_summary(m, &o.ooc, ok, "stats",
             "%d blocks x %lld values and %d bin sums, on %d ranks x %d threads, %s, all-reduce "
             "k=%d %s in %d rounds: count %lld, sum %.4f, min %.4f, max %.4f; %lld differences "
             "from serial over all blocks, %.3f s",
             o.blocks, values, su.vlen, size, o.threads, ex_ooc_mode(&o.ooc).s, o.k, ex_order(&o),
             r.rounds, (long long)want.count, want.sum, want.min, want.max, (long long)differ,
             elapsed);
  free(want.bins);
  blk_partners_destroy(partners);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  return ex_finish(ok);
}
