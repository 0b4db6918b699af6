/*
 * redistribute: particles moved to the blocks that own them, by swap-reduce.
 *
 * The unit cube is cut into blocks by a continuous decomposer. Each block
 * makes --points random points anywhere in the cube (so nearly all belong to
 * other blocks) and the points travel to their owners through the k-ary
 * rounds of BLK_SWAP partners: in round r the blocks of a group (at most k of
 * them, or more where a division count has a prime factor above k) differ
 * in one digit of one grid coordinate, and a block hands each point to the
 * member whose digit agrees with the point's owner. After the last round
 * every digit agrees, so every point is at its owner, having moved at most
 * once per round (about log_k(nblocks) rounds), in messages to k-1 partners
 * per round instead of one to every block.
 *
 * Each round the callback takes in what its group sent (its own share
 * included) and then, for all those points at once:
 *  1. routes them: a blk_router gives each point's out queue with one
 *     multiplication and a floor, no gid and no search,
 *         blk_router_cpoints_out_float(router, r, &pts[0].x, sizeof(point), n,
 *                                      to, counts)
 *     (the same as blk_partners_round_position(partners, r,
 *     blk_decomposer_cpoint_to_gid(d, pt)) for every point), and counts them
 *     per out queue;
 *  2. sorts them by out queue into one array (a counting sort: one copy);
 *  3. sends each out queue its run as one message, its own queue included
 *     (a message to itself is handed over, not copied), in the storage of
 *     the messages it received, which it has read by then.
 * It keeps nothing between rounds and reads the messages where they arrived.
 * Memory goes round instead of being allocated: each round's messages take
 * the storage of those just read, and the block's own array, idle between
 * round 0 and the last round, carries one of round 0's messages (where the
 * last round has at most two; blk_buffer_adopt) and the block takes over a
 * message's storage in the last round (blk_buffer_detach): fresh memory
 * costs a page fault every 4 KiB.
 *
 * A point is 16 bytes here: a 32-bit id, which the checks need, and three
 * floats (points.h). DIY's swap-reduce example, the same algorithm (one
 * floor on the round's axis, one enqueue per partner), moves 12-byte points
 * (three floats) and no ids; docs/performance.md compares the two.
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
 * line of rank 0's storage figures); the time is that of blk_reduce between
 * a barrier and its return, the largest over the ranks. redistribute_a2a.c
 * does the same with blk_all_to_all; the points, their blocks and the checks
 * both use are in points.h.
 */
#include <blk/blk.h>
#include <stddef.h>

#include "example_util.h"
#include "points.h"

/* Points to route: count of them at data, which may be unaligned (a
 * received message), so they are copied with memcpy. */
typedef struct span {
  const unsigned char *data;
  size_t count;
} span;

/* What a round routes: the block's own points in round 0, then the
 * messages of its group. Returns how many spans it wrote to s, which has
 * room for in_count + 1. */
static int spans(const point_block *b, blk_proxy *p, span *s) {
  int n = 0;
  if (blk_proxy_round(p) == 0) s[n++] = (span){(const unsigned char *)b->pts, b->n};
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t count = blk_proxy_incoming_remaining(p, i) / sizeof(point);
    const void *data = blk_buffer_read_view(blk_proxy_incoming(p, i), count * sizeof(point));
    if (count) s[n++] = (span){data, count};
  }
  return n;
}

/* The last round: keep what arrived. A block whose storage went out in
 * round 0 (give_storage) takes over that of the largest message as its
 * array, the message's points already in place, and appends the rest. */
static int keep_points(point_block *b, blk_proxy *p) {
  int largest = -1;
  for (int i = 0; i < blk_proxy_in_count(p) && !b->pts; i++) {
    blk_buffer *in = blk_proxy_incoming(p, i);
    if (in->pos == 0 && in->size % sizeof(point) == 0 &&
        (largest < 0 || in->capacity > blk_proxy_incoming(p, largest)->capacity))
      largest = i;
  }
  if (largest >= 0) {
    blk_buffer *in = blk_proxy_incoming(p, largest);
    size_t bytes = in->size, cap = 0;
    point *mem = blk_buffer_detach(in, &cap);
    if (mem) {
      b->pts = mem;
      b->n = bytes / sizeof(point);
      b->cap = cap / sizeof(point);
    }
  }
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t count = blk_proxy_incoming_remaining(p, i) / sizeof(point);
    if (point_block_reserve(b, b->n + count)) return BLK_ENOMEM;
    blk_proxy_dequeue(p, i, b->pts + b->n, count * sizeof(point));
    b->n += count;
  }
  return 0;
}

/* Round 0: the block's own array, read by now, becomes the storage of its
 * largest message, instead of idling until the last round while every
 * message of round 0 takes fresh memory (a page fault every 4 KiB). Only
 * where the last round brings at most two messages: keep_points then finds
 * one holding half the points in storage that came round from some block's
 * array; with eight, it would append seven eighths of the points to a
 * message's storage, into fresh pages (measured: more faults than saved). */
static void give_storage(point_block *b, blk_proxy *p, const size_t *need, int nout) {
  const blk_partners *partners = blk_proxy_partners(p);
  if (blk_partners_round_radix(partners, blk_partners_rounds(partners) - 1) > 2) return;
  int j = 0;
  for (int i = 1; i < nout; i++)
    if (need[i] > need[j]) j = i;
  blk_buffer *out = blk_proxy_outgoing(p, j), mine;
  if (!b->pts || out->capacity >= need[j] || b->cap * sizeof(point) < need[j]) return;
  blk_buffer_adopt(&mine, b->pts, 0, b->cap * sizeof(point));
  blk_buffer_swap(&mine, out);
  blk_buffer_free(&mine); /* what the queue held, too small */
  b->pts = NULL;
  b->n = b->cap = 0;
}

/* Gives the out queues room for their runs (need[j] bytes) with the
 * storage of the messages received, all read by the time this is called:
 * so message memory goes round the blocks, already paged in, instead of
 * back to malloc, which would hand out fresh pages (a page fault every 4
 * KiB) for the next messages. The largest run first, each taking the
 * smallest received storage that holds it: where a round's radix differs
 * from the last one's (k = 4 over 8 divisions: 4, 2, 4, ...), the messages
 * received are smaller or larger than those to send, and taking the largest
 * for the first queue left the later ones to grow into fresh memory. A run
 * that no received storage holds keeps its queue's own storage, which
 * blk_proxy_enqueue replaces from blk's spare storage if too small.
 * blk_proxy_incoming allows taking it. */
static void recycle(blk_proxy *p, const size_t *need, int nout) {
  int order[64], n = nout < 64 ? nout : 64;
  for (int j = 0; j < n; j++) { /* by need, largest first (queues past 64 just grow) */
    int at = j;
    while (at > 0 && need[order[at - 1]] < need[j]) order[at] = order[at - 1], at--;
    order[at] = j;
  }
  for (int o = 0; o < n; o++) {
    blk_buffer *out = blk_proxy_outgoing(p, order[o]), *best = NULL;
    size_t bytes = need[order[o]];
    if (out->capacity >= bytes) continue;
    for (int i = 0; i < blk_proxy_in_count(p); i++) {
      blk_buffer *in = blk_proxy_incoming(p, i);
      if (in->capacity >= bytes && (!best || in->capacity < best->capacity)) best = in;
    }
    if (best) {
      blk_buffer_swap(best, out);
      blk_buffer_clear(out);
    }
  }
}

/* reduce (swap): steps 1-3 above. */
static int route_points(void *block, blk_proxy *p, void *user) {
  const blk_router *router = user;
  point_block *b = block;
  int round = blk_proxy_round(p), nout = blk_proxy_out_count(p);
  if (nout == 0) return keep_points(b, p); /* the last round: every point is home */

  span *s = malloc((size_t)(blk_proxy_in_count(p) + 1) * sizeof *s);
  int ns = s ? spans(b, p, s) : 0;
  size_t n = 0;
  for (int k = 0; k < ns; k++) n += s[k].count;
  int *to = malloc((n ? n : 1) * sizeof *to);                /* each point's out queue */
  size_t *counts = calloc(2 * (size_t)nout, sizeof *counts); /* per out queue, and next */
  point *sorted = malloc((n ? n : 1) * sizeof *sorted);
  int rc = s && to && counts && sorted ? 0 : BLK_ENOMEM;

  /* 1. Route, and count the points of each out queue. */
  for (size_t k = 0, i = 0; k < (size_t)ns && !rc; i += s[k++].count)
    rc = blk_router_cpoints_out_float(router, round, s[k].data + offsetof(point, x), sizeof(point),
                                      s[k].count, to + i, counts);
  /* 2. Sort by out queue: next[j] is the next place in queue j's run. */
  size_t *next = rc ? NULL : counts + nout;
  for (int j = 1; j < nout && !rc; j++) next[j] = next[j - 1] + counts[j - 1];
  for (size_t k = 0, i = 0; k < (size_t)ns && !rc; k++)
    for (size_t m = 0; m < s[k].count; m++, i++)
      memcpy(&sorted[next[to[i]]++], s[k].data + m * sizeof(point), sizeof(point));
  /* 3. Send each run as one message (next[j] is now where it ends). */
  for (int j = 0; j < nout && !rc; j++) counts[j] *= sizeof(point); /* now bytes */
  if (!rc && round == 0) give_storage(b, p, counts, nout);
  if (!rc) recycle(p, counts, nout);
  for (int j = 0; j < nout && !rc; j++)
    rc = blk_proxy_enqueue(p, j, (unsigned char *)(sorted + next[j]) - counts[j], counts[j]);
  b->n = 0; /* every point is in a message now */
  free(sorted);
  free(counts);
  free(to);
  free(s);
  return rc;
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
  blk_router *router = NULL;
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
  EX_CHECK(blk_partners_create_for(&partners, BLK_SWAP, d, o.k, o.contiguous));
  /* A division with a prime factor above max(k, 16) makes a round that wide
   * (1009 blocks: every block sends 1009 messages): fold instead. */
  if (blk_partners_max_group(partners) > (o.k > 16 ? o.k : 16)) {
    blk_partners_destroy(partners);
    partners = NULL;
    EX_CHECK(blk_partners_create_folded(&partners, BLK_SWAP, o.blocks, o.k, o.contiguous));
    if (ex_rank() == 0)
      printf("folded: no round wider than %d\n", blk_partners_max_group(partners));
  }
  EX_CHECK(blk_router_create(&router, partners, d)); /* read-only: shared by the threads */

  /* The serial reference: the owner of every point. */
  points_setup ps;
  points_setup_init(&ps, d, o.blocks, o.seed, (uint64_t)points);

  EX_CHECK(blk_master_foreach(m, make_points, &ps));
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  EX_CHECK(blk_reduce(m, a, partners, route_points, router));
  double mine = MPI_Wtime() - t0, elapsed = 0;
  MPI_Allreduce(&mine, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
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
  blk_router_destroy(router);
  blk_partners_destroy(partners);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  return ex_finish(ok);
}
