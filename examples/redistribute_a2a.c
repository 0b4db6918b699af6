/*
 * redistribute_a2a: particles moved to the blocks that own them, by
 * blk_all_to_all.
 *
 * The same problem as redistribute.c, written the short way: the send
 * callback enqueues each point to its owner's gid, the receive callback
 * collects what arrived. blk_all_to_all moves the messages through the same
 * k-ary swap rounds that redistribute.c spells out by hand (radix --k,
 * contiguous or --halving order, over the gids 0..nblocks-1 rather than the
 * grid), but the callbacks see one send phase and one receive phase.
 *
 * The unit cube is cut into blocks by a continuous decomposer; each block
 * makes --points random points anywhere in it. A point's coordinates are a
 * function of its id and the seed, so every rank can compute serially which
 * block owns each of the points. Checks: every block holds only points
 * inside its bounds, unchanged, and exactly as many as the serial count
 * says; the global count and the sums of the ids and of a hash of the ids
 * equal the serial ones (so no point was lost or delivered twice).
 *
 *   mpiexec -n 4 ./redistribute_a2a [--blocks 12] [--k 2] [--halving] [--threads 2]
 *                                   [--points 1000] [--seed 1]
 *                                   [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * Out-of-core (--mem-blocks N), save writes a block's points and load reads
 * them back; the points in flight sit in blk's queues, which blk swaps with
 * their block.
 *
 * Prints one line with PASS, or FAIL and exit status 1 (and, out-of-core, a
 * line of rank 0's storage figures).
 */
#include <blk/blk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

#define DIM 3

typedef struct point {
  uint64_t id; /* block g makes ids g * P .. g * P + P - 1 */
  double x[DIM];
} point;

/* The point with a given id: the same on every rank. */
static point make_point(uint64_t seed, uint64_t id) {
  point pt = {id, {0}};
  for (int a = 0; a < DIM; a++) pt.x[a] = ex_unit(ex_random(seed, id, (uint64_t)a));
  return pt;
}

typedef struct point_block {
  point *pts;
  size_t n, cap;
} point_block;

static int reserve(point_block *b, size_t n) {
  if (n <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < n) cap *= 2;
  point *grown = realloc(b->pts, cap * sizeof *grown);
  if (!grown) return BLK_ENOMEM;
  b->pts = grown;
  b->cap = cap;
  return 0;
}

static int create_block(void **out, int gid, void *user) {
  (void)gid;
  (void)user;
  *out = calloc(1, sizeof(point_block));
  return *out ? 0 : BLK_ENOMEM;
}

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  point_block *b = block;
  if (b) free(b->pts);
  free(b);
}

/* Out-of-core: the block's points (its capacity is not state). */
static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  const point_block *b = block;
  return blk_buffer_write_array(out, b->pts, sizeof(point), b->n);
}

static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  point_block *b = block;
  size_t n = 0;
  const void *pts = blk_buffer_read_array_view(in, sizeof(point), &n);
  if (!pts) return blk_buffer_error(in);
  if (blk_buffer_remaining(in) != 0) return BLK_ECORRUPT;
  if (reserve(b, n)) return BLK_ENOMEM;
  if (n) memcpy(b->pts, pts, n * sizeof(point));
  b->n = n;
  return 0;
}

typedef struct run {
  const blk_decomposer *d;
  uint64_t seed;
  uint64_t points;         /* per block */
  const int64_t *expected; /* serial: points owned by each gid */
} run;

/* foreach: make this block's points. */
static int make_points(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  point_block *b = block;
  uint64_t first = (uint64_t)blk_proxy_gid(p) * r->points;
  if (reserve(b, r->points)) return BLK_ENOMEM;
  for (uint64_t i = 0; i < r->points; i++) b->pts[i] = make_point(r->seed, first + i);
  b->n = r->points;
  return 0;
}

/* all_to_all send: each point to its owner (possibly this block itself). */
static int send_points(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  point_block *b = block;
  for (size_t j = 0; j < b->n; j++) {
    int owner = blk_decomposer_cpoint_to_gid(r->d, b->pts[j].x);
    int rc = blk_proxy_enqueue_gid(p, owner, &b->pts[j], sizeof(point));
    if (rc) return rc;
  }
  b->n = 0; /* they are in the messages now */
  return 0;
}

/* all_to_all receive: one in queue per block that sent us points, by gid. */
static int receive_points(void *block, blk_proxy *p, void *user) {
  (void)user;
  point_block *b = block;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t count = blk_proxy_incoming_remaining(p, i) / sizeof(point);
    if (reserve(b, b->n + count)) return BLK_ENOMEM;
    blk_proxy_dequeue(p, i, b->pts + b->n, count * sizeof(point));
    b->n += count;
  }
  return 0;
}

/* foreach: check this block's points and post the global sums. */
static int check_points(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  point_block *b = block;
  int gid = blk_proxy_gid(p);
  blk_cbounds core;
  int rc = blk_decomposer_block_cbounds(r->d, gid, &core, NULL);
  if (rc) return rc;
  int64_t errors = (int64_t)b->n != r->expected[gid];
  int64_t id_sum = 0, hash_sum = 0;
  for (size_t j = 0; j < b->n; j++) {
    const point *pt = &b->pts[j];
    point want = make_point(r->seed, pt->id);
    if (blk_decomposer_cpoint_to_gid(r->d, pt->x) != gid || !blk_cbounds_contains(&core, pt->x) ||
        memcmp(pt, &want, sizeof want) != 0)
      errors++;
    id_sum += (int64_t)pt->id;
    hash_sum += (int64_t)(ex_mix64(pt->id) >> 33); /* < 2^31: sums of < 2^32 points fit */
  }
  int64_t post[4] = {(int64_t)b->n, errors, id_sum, hash_sum};
  for (int i = 0; i < 4 && !rc; i++) rc = blk_proxy_all_reduce_i64(p, post[i], BLK_OP_SUM);
  return rc;
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  ex_options o = {.blocks = 12, .k = 2, .contiguous = 1, .threads = 2, .seed = 1};
  long long points = 1000;
  ex_int_option extra[] = {{"--points", &points, 0, "random points made by each block"}};
  if (!ex_parse(&o, argc, argv, "random points sent to their owners by all_to_all", extra, 1)) {
    MPI_Finalize();
    return o.status;
  }

  blk_cbounds cube;
  double lo[DIM] = {0, 0, 0}, hi[DIM] = {1, 1, 1};
  EX_CHECK(blk_cbounds_set(&cube, DIM, lo, hi));
  blk_decomposer *d = NULL;
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  EX_CHECK(blk_decomposer_create_continuous(&d, &cube, o.blocks, NULL));
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = create_block;
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.shuffle = sizeof(double); /* a point is a uint64_t and doubles */
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(blk_master_decompose(m, d, a));
  int div[DIM];
  blk_decomposer_divisions(d, div);

  /* The serial reference: the owner of every point. */
  uint64_t total = (uint64_t)o.blocks * (uint64_t)points;
  int64_t *expected = calloc((size_t)o.blocks, sizeof *expected);
  if (!expected) ex_fail(__FILE__, __LINE__, "calloc", BLK_ENOMEM, "serial counts");
  int64_t serial_hash = 0;
  for (uint64_t id = 0; id < total; id++) {
    point pt = make_point(o.seed, id);
    expected[blk_decomposer_cpoint_to_gid(d, pt.x)]++;
    serial_hash += (int64_t)(ex_mix64(id) >> 33);
  }
  int64_t serial_ids = (int64_t)(total * (total - 1) / 2);

  run r = {d, o.seed, (uint64_t)points, expected};
  EX_CHECK(blk_master_foreach(m, make_points, &r));
  double t0 = MPI_Wtime();
  EX_CHECK(blk_all_to_all(m, a, o.k, o.contiguous, send_points, receive_points, &r));
  double elapsed = MPI_Wtime() - t0;
  EX_CHECK(blk_master_foreach(m, check_points, &r));
  EX_CHECK(blk_master_exchange(m));
  int64_t arrived = blk_master_result_i64(m, 0), errors = blk_master_result_i64(m, 1);
  int64_t ids = blk_master_result_i64(m, 2), hash = blk_master_result_i64(m, 3);
  free(expected);

  int sums_ok = ids == serial_ids && hash == serial_hash;
  int ok = ex_ooc_agree(m, &o.ooc, arrived == (int64_t)total && errors == 0 && sums_ok);
  if (rank == 0)
    printf(
        "redistribute_a2a: %llu points (%lld per block) in the unit cube, %d blocks (%dx%dx%d) on "
        "%d ranks x %d threads, %s, all_to_all k=%d %s: %lld arrived, %lld misplaced or wrong, "
        "id and hash sums %s serial, %.3f s: %s\n",
        (unsigned long long)total, points, o.blocks, div[0], div[1], div[2], size, o.threads,
        ex_ooc_mode(&o.ooc).s, o.k, ex_order(&o), (long long)arrived, (long long)errors,
        sums_ok ? "equal" : "DIFFER from", elapsed, ok ? "PASS" : "FAIL");
  ex_ooc_report(m, &o.ooc, "redistribute_a2a");
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  MPI_Finalize();
  return ok ? 0 : 1;
}
