/*
 * redistribute_a2a: particles moved to the blocks that own them, by
 * blk_all_to_all.
 *
 * The same problem as redistribute.c, written the short way: the send
 * callback sorts its points by owner and enqueues each owner's run by
 * reference (blk_proxy_enqueue_ref_gid, no copy into a queue), the receive
 * callback collects what arrived. blk_all_to_all moves the messages through the same
 * k-ary swap rounds that redistribute.c spells out by hand (radix --k,
 * contiguous or --halving order, over the gids 0..nblocks-1 rather than the
 * grid), with the rounds inside a rank merged (at most 64 blocks on one
 * rank: one round), but the callbacks see one send phase and one receive
 * phase.
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

/* What the callbacks need besides the problem: the number of gids. */
typedef struct a2a_setup {
  const points_setup *ps;
  int nblocks;
} a2a_setup;

/* all_to_all send: the points sorted by owner (a counting sort), then one
 * reference per owner (possibly this block itself): blk reads them in place,
 * so they are kept in b->sent until blk_all_to_all returns, and b->pts is
 * free to receive. DIY's all-to-all example enqueues point by point; here
 * that would copy each point into a queue first. */
static int send_points(void *block, blk_proxy *p, void *user) {
  const a2a_setup *s = user;
  point_block *b = block;
  size_t *end = calloc((size_t)s->nblocks + 1, sizeof *end);
  int *owner = malloc((b->n ? b->n : 1) * sizeof *owner);
  point *sorted = malloc((b->n ? b->n : 1) * sizeof *sorted);
  int rc = end && owner && sorted ? 0 : BLK_ENOMEM;
  for (size_t j = 0; j < b->n && !rc; j++) {
    double x[DIM];
    point_coords(&b->pts[j], x);
    owner[j] = blk_decomposer_cpoint_to_gid(s->ps->d, x);
    if (owner[j] < 0)
      rc = owner[j]; /* BLK_ENOTFOUND: a point outside the domain */
    else
      end[owner[j] + 1]++;
  }
  if (!rc) {
    for (int g = 0; g < s->nblocks; g++) end[g + 1] += end[g]; /* end[g]: where g starts */
    for (size_t j = 0; j < b->n; j++) sorted[end[owner[j]]++] = b->pts[j]; /* now where it ends */
    for (int g = 0; g < s->nblocks && !rc; g++) {
      size_t first = g ? end[g - 1] : 0;
      if (end[g] > first)
        rc = blk_proxy_enqueue_ref_gid(p, g, sorted + first, (end[g] - first) * sizeof(point));
    }
  }
  free(end);
  free(owner);
  free(b->sent);
  b->sent = sorted; /* on failure too: a reference may have been taken */
  b->n = 0;         /* they are in the messages now */
  return rc;
}

/* foreach, after the move: the sent points are no longer referred to. */
static int drop_sent(void *block, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  point_block *b = block;
  free(b->sent);
  b->sent = NULL;
  return 0;
}

/* all_to_all receive: one in queue per block that sent us points, by gid.
 * The room for all of them is made once: out of core the block arrives with
 * none (it left empty after its send), and growing it queue by queue copied
 * what had arrived at each doubling. */
static int receive_points(void *block, blk_proxy *p, void *user) {
  (void)user; /* the a2a_setup */
  point_block *b = block;
  size_t total = b->n;
  for (int i = 0; i < blk_proxy_in_count(p); i++)
    total += blk_proxy_incoming_remaining(p, i) / sizeof(point);
  if (point_block_reserve(b, total)) return BLK_ENOMEM;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t count = blk_proxy_incoming_remaining(p, i) / sizeof(point);
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
  EX_CHECK(ex_choose_k(&o, BLK_SWAP, a, (size_t)points * sizeof(point), 1));
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
  points_setup_init(&ps, d, o.blocks, o.seed, (uint64_t)points);

  EX_CHECK(blk_master_foreach(m, make_points, &ps));
  MPI_Barrier(MPI_COMM_WORLD); /* time the move alone: max over ranks, from a barrier */
  double t0 = MPI_Wtime();
  a2a_setup s = {&ps, o.blocks};
  EX_CHECK(blk_all_to_all(m, a, o.k, o.contiguous, send_points, receive_points, &s));
  double elapsed = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EX_CHECK(blk_master_foreach(m, drop_sent, NULL));
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
