/*
 * redistribute: particles moved to the blocks that own them, by swap-reduce.
 *
 * The unit cube is cut into blocks by a continuous decomposer. Each block
 * makes --points random points anywhere in the cube (so nearly all belong to
 * other blocks) and the points travel to their owners through the k-ary
 * rounds of BLK_SWAP partners: in round r the blocks of a group (at most k of
 * them, or more where a division count has a prime factor above k) differ
 * in one digit of one grid coordinate, and a block hands each point to the
 * member whose digit agrees with the point's owner:
 *
 *     out queue blk_partners_round_position(partners, r, owner)
 *
 * keeping the point when that member is itself. After the last round every
 * digit agrees, so every point is at its owner, having moved at most once per
 * round (about log_k(nblocks) rounds), through messages to k-1 partners per
 * round instead of one to every block.
 *
 * A point's coordinates are a function of its id and the seed, so every
 * rank can compute serially which block owns each of the points. Checks:
 * every block holds only points inside its bounds, unchanged, and exactly as
 * many as the serial count says; the global count and the sums of the ids
 * and of a hash of the ids equal the serial ones (so no point was lost or
 * delivered twice).
 *
 *   mpiexec -n 4 ./redistribute [--blocks 12] [--k 2] [--halving] [--threads 2]
 *                               [--points 1000] [--seed 1]
 *                               [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * Out-of-core (--mem-blocks N), save writes a block's points and load reads
 * them back; the points in flight sit in blk's queues, which blk swaps with
 * their block.
 *
 * Prints one line with PASS, or FAIL and exit status 1 (and, out-of-core, a
 * line of rank 0's storage figures).
 * redistribute_a2a.c does the same with blk_all_to_all; the points, their
 * blocks and the checks both use are in points.h.
 */
#include <blk/blk.h>

#include "example_util.h"
#include "points.h"

typedef struct run {
  const points_setup *ps;
  const blk_partners *partners;
} run;

/* reduce (swap): take in what the group forwarded, then forward each point
 * one digit closer to its owner. */
static int route_points(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  point_block *b = block;
  int gid = blk_proxy_gid(p), round = blk_proxy_round(p);
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t count = blk_proxy_incoming_remaining(p, i) / sizeof(point);
    if (count == 0) continue; /* nothing for us (our own queue is always empty) */
    if (point_block_reserve(b, b->n + count)) return BLK_ENOMEM;
    blk_proxy_dequeue(p, i, b->pts + b->n, count * sizeof(point));
    b->n += count;
  }
  if (round == blk_partners_rounds(r->partners)) return 0; /* every point is home */
  size_t kept = 0;
  for (size_t j = 0; j < b->n; j++) {
    int owner = blk_decomposer_cpoint_to_gid(r->ps->d, b->pts[j].x);
    if (owner < 0) return owner; /* BLK_ENOTFOUND: a point outside the domain */
    int to = blk_partners_round_position(r->partners, round, owner);
    if (blk_proxy_out_gid(p, to) == gid) {
      b->pts[kept++] = b->pts[j];
    } else {
      int rc = blk_proxy_enqueue(p, to, &b->pts[j], sizeof(point));
      if (rc) return rc;
    }
  }
  b->n = kept;
  return 0;
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 12, .k = 2, .contiguous = 1, .threads = 2, .seed = 1};
  long long points = 1000;
  ex_int_option extra[] = {{"--points", &points, 0, "random points made by each block"}};
  if (!ex_start(&argc, &argv, &o, "random points sent to their owners by swap-reduce", extra, 1))
    return o.status;
  int size = ex_size();

  blk_cbounds cube;
  EX_CHECK(points_domain(&cube)); /* the unit cube */
  blk_decomposer *d = NULL;
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  blk_partners *partners = NULL;
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
  EX_CHECK(blk_partners_create(&partners, BLK_SWAP, DIM, div, o.k, o.contiguous));

  /* The serial reference: the owner of every point. */
  points_setup ps;
  if (points_setup_init(&ps, d, o.blocks, o.seed, (uint64_t)points))
    ex_fail(__FILE__, __LINE__, "calloc", BLK_ENOMEM, "serial counts");

  run r = {&ps, partners};
  EX_CHECK(blk_master_foreach(m, make_points, &ps));
  double t0 = MPI_Wtime();
  EX_CHECK(blk_reduce(m, a, partners, route_points, &r));
  double elapsed = MPI_Wtime() - t0;
  EX_CHECK(blk_master_foreach(m, check_points, &ps));
  EX_CHECK(blk_master_exchange(m));
  points_result res = points_results(m, &ps);

  int ok = ex_ooc_agree(m, &o.ooc, points_ok(&res, &ps));
  ex_summary(m, &o.ooc, ok, "redistribute",
             "%llu points (%lld per block) in the unit cube, %d blocks (%dx%dx%d) on %d ranks x "
             "%d threads, %s, swap k=%d %s in %d rounds: %lld arrived, %lld misplaced or wrong, "
             "id and hash sums %s serial, %.3f s",
             (unsigned long long)ps.total, points, o.blocks, div[0], div[1], div[2], size,
             o.threads, ex_ooc_mode(&o.ooc).s, o.k, ex_order(&o), blk_partners_rounds(partners),
             (long long)res.arrived, (long long)res.errors, res.sums_ok ? "equal" : "DIFFER from",
             elapsed);
  points_setup_free(&ps);
  blk_partners_destroy(partners);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  return ex_finish(ok);
}
