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
 * The points, their blocks and the checks live in points.h, shared with
 * redistribute.c; what is here is the move.
 *
 * Out-of-core (--mem-blocks N), save writes a block's points and load reads
 * them back; the points in flight sit in blk's queues, which blk swaps with
 * their block.
 *
 * Prints one line with PASS, or FAIL and exit status 1 (and, out-of-core, a
 * line of rank 0's storage figures).
 */
#include <blk/blk.h>

#include "example_util.h"
#include "points.h"

/* all_to_all send: each point to its owner (possibly this block itself). */
static int send_points(void *block, blk_proxy *p, void *user) {
  const points_setup *ps = user;
  point_block *b = block;
  for (size_t j = 0; j < b->n; j++) {
    int owner = blk_decomposer_cpoint_to_gid(ps->d, b->pts[j].x);
    if (owner < 0) return owner; /* BLK_ENOTFOUND: a point outside the domain */
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
    if (point_block_reserve(b, b->n + count)) return BLK_ENOMEM;
    blk_proxy_dequeue(p, i, b->pts + b->n, count * sizeof(point));
    b->n += count;
  }
  return 0;
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 12, .k = 2, .contiguous = 1, .threads = 2, .seed = 1};
  long long points = 1000;
  ex_int_option extra[] = {{"--points", &points, 0, "random points made by each block"}};
  if (!ex_start(&argc, &argv, &o, "random points sent to their owners by all_to_all", extra, 1))
    return o.status;
  int size = ex_size();

  blk_cbounds cube;
  EX_CHECK(points_domain(&cube)); /* the unit cube */
  blk_decomposer *d = NULL;
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  EX_CHECK(blk_decomposer_create_continuous(&d, &cube, o.blocks, NULL));
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  points_configure(&mc); /* create, destroy, save and load a point_block */
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(blk_master_decompose(m, d, a));
  int div[DIM];
  blk_decomposer_divisions(d, div);

  /* The serial reference: the owner of every point. */
  points_setup ps;
  if (points_setup_init(&ps, d, o.blocks, o.seed, (uint64_t)points))
    ex_fail(__FILE__, __LINE__, "calloc", BLK_ENOMEM, "serial counts");

  EX_CHECK(blk_master_foreach(m, make_points, &ps));
  double t0 = MPI_Wtime();
  EX_CHECK(blk_all_to_all(m, a, o.k, o.contiguous, send_points, receive_points, &ps));
  double elapsed = MPI_Wtime() - t0;
  EX_CHECK(blk_master_foreach(m, check_points, &ps));
  EX_CHECK(blk_master_exchange(m));
  points_result res = points_results(m, &ps);

  int ok = ex_ooc_agree(m, &o.ooc, points_ok(&res, &ps));
  ex_summary(m, &o.ooc, ok, "redistribute_a2a",
             "%llu points (%lld per block) in the unit cube, %d blocks (%dx%dx%d) on %d ranks x "
             "%d threads, %s, all_to_all k=%d %s: %lld arrived, %lld misplaced or wrong, id and "
             "hash sums %s serial, %.3f s",
             (unsigned long long)ps.total, points, o.blocks, div[0], div[1], div[2], size,
             o.threads, ex_ooc_mode(&o.ooc).s, o.k, ex_order(&o), (long long)res.arrived,
             (long long)res.errors, res.sums_ok ? "equal" : "DIFFER from", elapsed);
  points_setup_free(&ps);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  return ex_finish(ok);
}
