/*
 * blk/partners.h: reduction patterns as pure functions of (round, gid).
 *
 * A reduction runs a callback for blocks in rounds 0..R. In each round a block is
 * active or not. An active block receives one message from each of its in-partners
 * (they sent it in the previous round) and sends one message to each of its
 * out-partners (they receive it in the next round). A partners object answers, for any
 * round and gid, whether the block is active and who its partners are; the reduce driver
 * asks it and moves the messages. It is pure arithmetic: no MPI, no threads, no state
 * that changes after create.
 *
 * Built in are the four regular patterns over a grid of blocks (gids with axis 0
 * fastest, as the decomposer numbers them): merge, broadcast, swap and all-reduce, with
 * the rounds DIY's Regular*Partners give for the same divisions, k and order. Users may
 * supply their own pattern as an ops table (blk_partners_create_custom).
 *
 * How the regular rounds are made. Each axis's division count d is factored greedily
 * with the target radix k: take k while k divides what is left; otherwise the largest j
 * with 2 <= j < k that divides it; otherwise the smallest prime factor of what is left,
 * which is then larger than k. That last case is how blk handles prime factors larger
 * than k: one wider round per such prime, whose groups have that many members (d = 7
 * with k = 2 is one round of 7; d = 44 with k = 4 is 4 then 11; d = 25 with k = 3 is 5
 * then 5, where DIY takes the 25 whole). (DIY also divides by k instead of j after a
 * smaller factor, so for 18 with k = 4 it
 * gets 3,4; blk gets 3,3,2.) Axes with d = 1 give no rounds. The axes take turns: the
 * first factor of axis 0, of axis 1, ..., then the second factor of each, and so on.
 * Exchange round e (the messages from callback round e to e+1 of a merge) works along
 * one axis with radix k_e: the blocks that differ only in one digit of their coordinate
 * along that axis form a group of k_e members, listed by that digit j = 0..k_e-1 (the
 * block itself included). contiguous picks the digit order: 1 takes the lowest digit
 * first (partners 1 apart, then k, k^2, ...: distance doubling), 0 the highest first
 * (partners d/k apart, then closer: distance halving).
 *
 * A block is a member of its own group, so the built-in patterns list it among its own
 * in- and out-partners (a merge root receives its own partial sum; a swap block keeps
 * its own piece). Sending to itself costs a buffer hand-over, no copy and no MPI; a
 * callback that combines what it receives simply treats its own message like the others.
 *
 * Routing points. A swap moves items to their owners one digit per round: in round r a
 * block hands an item bound for gid g to its out-partner number
 * blk_partners_round_position(p, r, g). For points of a decomposer's domain a
 * blk_router (at the end of this file) gives that number straight from the point, with
 * one multiplication and a floor, for one point or a whole array at once.
 */
#ifndef BLK_PARTNERS_H
#define BLK_PARTNERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The built-in patterns. With R exchange rounds from the factoring above:
 *  BLK_MERGE      R rounds (callback rounds 0..R). A block stays active while it is its
 *                 group's first member (j = 0) in every earlier exchange round; it
 *                 receives from its whole group of the previous exchange round and sends
 *                 to the first member of its group of this one. Gid 0 is the final root,
 *                 alone in round R, for both orders.
 *  BLK_BROADCAST  R rounds, merge run backwards: round r is merge round R-r with in and
 *                 out exchanged. Gid 0 alone is active in round 0; all are in round R.
 *  BLK_SWAP       R rounds; every block is always active and exchanges with its whole
 *                 group: it receives from its group of exchange round r-1 and sends to
 *                 its group of exchange round r.
 *  BLK_ALLREDUCE  2R rounds: merge rounds 0..R, then broadcast rounds 0..R; round R is
 *                 both (gid 0 alone receives the merge and starts the broadcast). */
typedef enum blk_pattern {
  BLK_MERGE = 0,
  BLK_BROADCAST = 1,
  BLK_SWAP = 2,
  BLK_ALLREDUCE = 3
} blk_pattern;

/* A reduction pattern as pure functions of (round, gid), for blk_partners_create_custom.
 * With R = rounds(), the driver runs the callback in rounds 0..R: round 0 receives
 * nothing, round R sends nothing; what a block sends in round r to an out-partner arrives
 * in round r+1, and that receiver lists the sender among its in-partners of round r+1
 * (exactly once). The lists are ordered (by group position j for the built-ins) and may
 * contain the block itself. An inactive block has no partners.
 *
 * blk calls the functions only with 0 <= round <= rounds() and 0 <= gid < nblocks(),
 * and with gids pointing to room for max >= 0 ints (max may be 0). They may be called
 * from several threads at once, so they must only read the state.
 *  version       BLK_PARTNERS_OPS_VERSION.
 *  rounds        R >= 0.
 *  nblocks       the number of blocks, >= 1.
 *  active        1 if the block takes part in the round, 0 if not.
 *  in_partners   the number of in-partners; writes the first min(count, max) of them.
 *  out_partners  the same for out-partners.
 *  destroy       frees the state at blk_partners_destroy; may be NULL. */
typedef struct blk_partners_ops {
  unsigned int version; /* BLK_PARTNERS_OPS_VERSION: the table's layout */
  int (*rounds)(const void *state);
  int (*nblocks)(const void *state);
  int (*active)(const void *state, int round, int gid);
  int (*in_partners)(const void *state, int round, int gid, int *gids, int max);
  int (*out_partners)(const void *state, int round, int gid, int *gids, int max);
  void (*destroy)(void *state);
} blk_partners_ops;

/* The layout of blk_partners_ops in this header. A table names its layout
 * in version (its first member), so a newer blk that adds functions at the
 * end calls only those the table has. */
#define BLK_PARTNERS_OPS_VERSION 1u

/* A reduction pattern: opaque, read-only after create. */
typedef struct blk_partners blk_partners;

/* Create a built-in pattern over a grid of blocks with divisions[0..dim-1] blocks per
 * axis (nblocks = their product), rounds made with target radix k as described at the
 * top of this file. contiguous is 1 for distance doubling (partners adjacent first), 0
 * for distance halving (partners far apart first).
 * On success *out owns a new object; free it with blk_partners_destroy. divisions is
 * copied. Any thread.
 * Errors: BLK_EINVAL for out or divisions NULL, an unknown pattern, dim outside 1..8, a
 * division < 1, a product of divisions that does not fit in int (the detail names the
 * product), k < 2, contiguous not 0 or 1; BLK_ENOMEM. On error *out is set to NULL
 * (when out is not NULL). The object is O(1) in memory whatever the block count. */
int blk_partners_create(blk_partners **out, blk_pattern pattern, int dim, const int *divisions,
                        int k, int contiguous);

/* The same, with the divisions of a decomposer: the pattern runs over its
 * grid of blocks, gids as the decomposer numbers them. Errors as above, and
 * BLK_EINVAL for a NULL decomposer. */
struct blk_decomposer;
int blk_partners_create_for(blk_partners **out, blk_pattern pattern, const struct blk_decomposer *d,
                            int k, int contiguous);

/* Create a built-in pattern with explicit exchange rounds instead of a radix: exchange
 * round i works along axes[i] with radix radices[i], in the given order (DIY's explicit
 * k-vector). Along each axis, the product of its radices must equal divisions[axis];
 * steps follow contiguous as in blk_partners_create. nrounds may be 0 only when every
 * division is 1 (axes and radices may then be NULL). The arrays are copied.
 * On success *out owns a new object; free it with blk_partners_destroy. Any thread.
 * Errors: BLK_EINVAL for what blk_partners_create rejects (except k), nrounds < 0, axes
 * or radices NULL with nrounds > 0, an axis outside 0..dim-1, a radix < 2, radices of an
 * axis whose product differs from its division; BLK_ENOMEM. On error *out is NULL. */
int blk_partners_create_rounds(blk_partners **out, blk_pattern pattern, int dim,
                               const int *divisions, int nrounds, const int *axes,
                               const int *radices, int contiguous);

/* Create a built-in pattern over a line of nblocks blocks whose rounds are never
 * wider than max(k, 16) members, whatever the count's prime factors. Over a count
 * with a prime factor above that, blk_partners_create makes one round as wide as
 * the prime (1009 blocks: one round of 1009, a swap of 1009^2 messages); this one
 * folds the count first (Rabenseifner's fold), with m the largest count <= nblocks
 * whose prime factors are all at most max(k, 16) (m >= nblocks / 2) and
 * r = nblocks - m extra blocks:
 *  - the extras are gids 2i+1, i < r; each has gid 2i as its stand-in;
 *  - fold (merge, swap, all-reduce): in callback round 0 every block is active,
 *    an extra sends to its stand-in and every other block to itself, so a
 *    stand-in receives from 2i and 2i+1, in that order, in round 1;
 *  - middle: the pattern over m virtual blocks, as blk_partners_create with
 *    dim 1 makes it over m; virtual block v is gid 2v for v < r and gid v + r
 *    above, so it stands for adjacent gids, in order; the extras are inactive;
 *  - unfold (broadcast, swap, all-reduce): in the last exchange round a
 *    stand-in sends to itself and then to its extra, every other block but the
 *    extras to itself, and in the last callback round every block is active.
 * A merge still ends at gid 0 and a broadcast starts there. Over a count
 * without such a factor (no fold) the pattern is exactly blk_partners_create(out,
 * pattern, 1, &nblocks, k, contiguous), DIY's rounds. The gids are only numbers,
 * so the pattern runs over any decomposer's blocks (a line of its gids).
 *
 * Routing a swap: blk_partners_round_position answers in every round (0 in the
 * fold; in the unfold 1 for an extra, else 0; in between the position of the
 * virtual block the gid stands as), so an item bound for gid g goes to
 * out-partner blk_partners_round_position(p, r, g) as in any built-in swap, and
 * blk_router accepts the pattern. A callback that splits what it holds among its
 * out-partners must count them (blk_proxy_out_count): a fold round has one or
 * two. blk_partners_round_axis, _radix and _step are -1 in the fold rounds and
 * describe the pattern over the virtual blocks in the others;
 * blk_partners_round_coord_position is -1 (a gid's position is not a digit of its
 * coordinate). blk_partners_choose models this pattern.
 * On success *out owns a new object; free it with blk_partners_destroy. Any
 * thread. Errors: those of blk_partners_create for dim 1 (BLK_EINVAL for a NULL
 * out, an unknown pattern, nblocks < 1, k < 2, contiguous not 0 or 1;
 * BLK_ENOMEM). On error *out is NULL (when out is not NULL). O(1) memory. */
int blk_partners_create_folded(blk_partners **out, blk_pattern pattern, int nblocks, int k,
                               int contiguous);

/* Create a pattern from a user's ops table and state. ops must stay valid until the object
 * is destroyed; blk does not copy it. On success the object owns state and calls
 * ops->destroy(state) (if not NULL) at blk_partners_destroy; on error the state stays the
 * caller's. blk checks the pattern at create, calling every function once for each round
 * and gid ((R+1) * nblocks calls of each, the only cost beyond O(1)): partner counts >= 0,
 * partner gids in range, no partners for inactive blocks, none in round 0, none out of
 * round R, and as many messages sent in each round as are received in the next. It also
 * records the largest group for blk_partners_max_group. It cannot check that every sender
 * and receiver name each other; that is the ops' promise. Any thread. Errors: BLK_EINVAL
 * for out or ops NULL, an ops version this blk does not know, a NULL function in ops
 * (destroy excepted), rounds() < 0 or = INT_MAX, nblocks() < 1, (rounds() + 1) * nblocks()
 * above 2^32 (checking that many pairs would take minutes), a partner list longer than
 * nblocks() (a gid is listed at most once), or a pattern that fails the checks above (the
 * detail names round, gid and value); BLK_ENOMEM (also for a partner list larger than this
 * process can hold: physical memory, RLIMIT_AS or RLIMIT_DATA). On error *out is NULL. */
int blk_partners_create_custom(blk_partners **out, const blk_partners_ops *ops, void *state);

/* Free a partners object and, for a custom one, its state. NULL does nothing. Not
 * concurrently with queries on the same object. */
void blk_partners_destroy(blk_partners *p);

/* R: the callback runs in rounds 0..R (so R+1 callback rounds, R message exchanges).
 * 0 for NULL. Any thread. */
int blk_partners_rounds(const blk_partners *p);

/* The number of blocks (gids 0..nblocks-1). 0 for NULL. Any thread. */
int blk_partners_nblocks(const blk_partners *p);

/* 1 if block gid takes part in callback round round (0..R), else 0. Out-of-range round
 * or gid, or NULL p, give 0 (inactive). O(dim + R) for the built-ins. Any thread. */
int blk_partners_active(const blk_partners *p, int round, int gid);

/* The in-partners of block gid in round round: the gids it receives one message from,
 * each sent in round round-1. Returns their number and writes the first min(count, max)
 * to gids, ordered (by group position for the built-ins); size gids with
 * blk_partners_max_group. gids may be NULL when max is 0 (to ask for the count). An
 * inactive block, round 0, an out-of-range round or gid, or NULL p give 0 partners.
 * O(dim + R + count) for the built-ins; no allocation. Any thread. */
int blk_partners_in(const blk_partners *p, int round, int gid, int *gids, int max);

/* The out-partners of block gid in round round: the gids it sends one message to, each
 * received in round round+1. Same conventions as blk_partners_in; round R and inactive
 * blocks give 0 partners. Any thread. */
int blk_partners_out(const blk_partners *p, int round, int gid, int *gids, int max);

/* The largest number of in- or out-partners any block has in any round: the size of a
 * gids array that always suffices. For the built-ins, the largest radix (0 when R = 0).
 * 0 for NULL. Any thread. */
int blk_partners_max_group(const blk_partners *p);

/* For the built-ins: the axis along which the groups of exchange round round (the
 * messages sent in callback round round, received in round+1) are formed, for round in
 * 0..R-1 (for all-reduce R is its 2R' rounds: exchange rounds 0..R'-1 are the merge's,
 * R'..2R'-1 the broadcast's). A block's out-partners in callback round r are grouped by
 * exchange round r, its in-partners by exchange round r-1. -1 for a custom pattern,
 * a round outside 0..R-1, or NULL p. Any thread.
 * (DIY's dim(round) on broadcast and all-reduce names the exchange a round receives
 * from, one off from this in their broadcast rounds; blk names the exchange by when it
 * is sent, the same way for all four patterns.) */
int blk_partners_round_axis(const blk_partners *p, int round);

/* The radix (group size) of exchange round round, under the same conventions as
 * blk_partners_round_axis; -1 where that gives -1. Any thread. */
int blk_partners_round_radix(const blk_partners *p, int round);

/* The step of exchange round round: along the round's axis the members of a
 * group have grid coordinates step apart (c0, c0 + step, ...,
 * c0 + (radix-1) * step), so a block's position in its group is the digit
 * (c / step) % radix of its coordinate c on that axis. Contiguous order
 * takes steps 1, k, k^2, ... on each axis, halving d/k, d/k^2, ..., 1.
 * Under the same conventions as blk_partners_round_axis; -1 where that gives
 * -1. Any thread. */
int blk_partners_round_step(const blk_partners *p, int round);

/* The position (0..radix-1) of gid in its group of that exchange round, under
 * the same conventions; -1 where those give -1 or gid is out of range. This is
 * how a swap routes: in round r a block forwards what is bound for gid d to
 * its out-partner number blk_partners_round_position(p, r, d), the member
 * that agrees with d in this round's digit, so after the last round
 * everything is at its destination (all_to_all.h, examples/redistribute.c).
 * Any thread. */
int blk_partners_round_position(const blk_partners *p, int round, int gid);

/* The same position from a grid coordinate instead of a gid: that of every
 * block whose coordinate on the round's axis (blk_partners_round_axis) is
 * coord, (coord / step) % radix. With blk_decomposer_caxis_owner it routes
 * a point in O(1) without its gid:
 *     int a = blk_partners_round_axis(p, r);
 *     int j = blk_partners_round_coord_position(p, r,
 *                                              blk_decomposer_caxis_owner(d, a, pt[a]));
 * (blk_router does the same for many points at once.) -1 where
 * blk_partners_round_axis gives -1, or for coord outside
 * 0..divisions[axis]-1 (so a BLK_ENOTFOUND passed in gives -1). Any thread. */
int blk_partners_round_coord_position(const blk_partners *p, int round, int coord);

/* ---- choosing k and the order ------------------------------------------------------ */

/* A machine model for blk_partners_predict and blk_partners_choose: what a
 * round costs on a rank (docs/patterns.md, "Choosing k by the model"):
 *     [alpha if any of the round's messages cross ranks]
 *   + beta * the bytes the rank sends to other ranks
 *   + (callback * its blocks' callbacks + local * their messages (all, a
 *      hand-over or a send each) + gamma * the bytes they receive) / threads
 * with the blocks spread evenly over the ranks. The defaults were set by
 * hand from measurements on a 2-core VM with MPICH (docs/performance.md,
 * sections 8 and 17); set your own from blk-bench on your machine. */
typedef struct blk_cost_model {
  unsigned int version; /* BLK_COST_MODEL_VERSION */
  double alpha;         /* seconds: a round that waits on another rank */
  double beta;          /* seconds per byte sent to another rank */
  double callback;      /* seconds: blk's cost of one block's callback in a round */
  double local;         /* seconds per message (its hand-over or its send) */
  double gamma;         /* seconds per byte a callback reads of what it received */
  int threads;          /* callbacks at once on a rank, >= 1 */
} blk_cost_model;

#define BLK_COST_MODEL_VERSION 1u
#define BLK_COST_MODEL_INIT \
  { BLK_COST_MODEL_VERSION, 5e-6, 0.15e-9, 0.3e-6, 0.1e-6, 0.1e-9, 1 }

/* The model's time in seconds for pattern p run over the blocks of assigner a
 * (the same block count), every block's message `bytes` long, or, when
 * split_swap is 1 and the round is a swap's, bytes / k_e per member (each
 * block handing (k_e - 1) / k_e of its data on, as a redistribution or a
 * sort does). Which messages cross ranks is read from p and a on up to 512
 * blocks spread over the gids. model NULL means BLK_COST_MODEL_INIT. Any
 * thread; O(R * 512 * k) time. Returns -1 (with blk_last_error) for a NULL p
 * or a, a model of another version, a constant that is negative or not
 * finite, threads < 1, or block counts that differ, and on no memory. */
struct blk_assigner;
double blk_partners_predict(const blk_partners *p, const struct blk_assigner *a, size_t bytes,
                            const blk_cost_model *model, int split_swap);

/* The radix k (2..min(nblocks, 16)) and order (contiguous 1 or 0) for which
 * blk_partners_predict gives the least time for the built-in pattern over a
 * line of a's blocks as blk_partners_create_folded makes it (which is
 * blk_partners_create with dim 1 unless the count has a prime factor above
 * 16, and the rounds blk_all_to_all runs before it merges those inside a
 * rank, all_to_all.h): the choice a program passes to
 * blk_partners_create_folded, blk_partners_create, blk_reduce or
 * blk_all_to_all (split_swap 1, BLK_SWAP). Ties go to the smaller k, then to
 * contiguous order. The same on every rank for the same arguments (no MPI).
 * Returns 0, BLK_EINVAL (NULL a, k or contiguous, a bad model as above, an
 * unknown pattern) or BLK_ENOMEM. */
int blk_partners_choose(blk_pattern pattern, const struct blk_assigner *a, size_t bytes,
                        const blk_cost_model *model, int split_swap, int *k, int *contiguous);

/* ---- routing points through the rounds -------------------------------------------- */

/* A router: which group member a point goes to in each round of a built-in pattern run
 * over a decomposer's grid of blocks. Its answer for a point pt in (callback) round r is
 *     blk_partners_round_position(p, r, blk_decomposer_cpoint_to_gid(d, pt))
 * (point_to_gid for a discrete decomposer): for BLK_SWAP that is the number of the out
 * queue (proxy.h) that takes the point one digit closer to its owner, so after the
 * last round every point is at its owner. (all_to_all routes by the same digits.)
 *
 * It computes that without the gid: the point's owner along round r's axis, counted in
 * groups of the round's step, is one multiplication and a floor (exact comparisons with
 * the block boundaries settle the few points within rounding error of one, as
 * blk_decomposer_caxis_owner does), and the position is that count modulo the radix,
 * which a multiplication by the radix's reciprocal gives exactly. Every coordinate is
 * also checked against the domain, so a point outside it is reported in the first
 * round, as cpoint_to_gid would report it.
 *
 * Over a folded pattern (blk_partners_create_folded) the position depends on the
 * gid, not on a digit of the coordinate: the router then finds the owner's gid
 * (a multiplication and a floor per axis) and takes the position from it.
 *
 * Opaque; read-only after create, so any number of threads may route with one router
 * at once (one per reduction is enough: build it before blk_reduce, pass it to the
 * callbacks, destroy it after). It keeps a copy of what it needs of p and d: both may
 * be destroyed before it. */
typedef struct blk_router blk_router;

/* Creates a router for the built-in pattern p over the decomposer d, whose grid p must
 * be made for (blk_partners_create_for(d), or blk_partners_create with d's
 * divisions): the same number of blocks and, on every axis that p has rounds on, the
 * same number of divisions; or for a folded pattern over d's block count
 * (blk_partners_create_folded). On success *out owns a new router; free it with
 * blk_router_destroy. O(R) time and memory for R rounds. Any thread.
 * Errors: BLK_EINVAL (with a detail) for a NULL out, p or d, a custom pattern (it has
 * no axes), or a p made for another grid; BLK_ENOMEM. On error *out is NULL (when out
 * is not NULL). */
int blk_router_create(blk_router **out, const blk_partners *p, const struct blk_decomposer *d);

/* Frees a router; NULL does nothing. No other thread may be using it. */
void blk_router_destroy(blk_router *r);

/* The group position (0..radix-1) of round round for the point pt[0..dim) of a
 * continuous decomposer's domain: see the top of this section. round is a callback
 * round that sends, 0..R-1 (R = blk_partners_rounds). Returns the position,
 * BLK_ENOTFOUND (no detail, as for cpoint_to_gid) if pt is outside the domain or has
 * a NaN coordinate, or BLK_EINVAL (with a detail) for a NULL r or pt, a discrete
 * decomposer, or a round outside 0..R-1. Any thread. Cost: O(dim) comparisons and
 * one multiplication-and-floor. */
int blk_router_cpoint_out(const blk_router *r, int round, const double *pt);

/* The same for the cell pt of a discrete decomposer's domain (BLK_EINVAL for a
 * continuous one). */
int blk_router_point_out(const blk_router *r, int round, const int64_t *pt);

/* The same for n points at once: the coordinates of point i are the dim doubles at
 * (const char *)pts + i * stride, at any alignment, so pts may point into an array of
 * structs (&a[0].x, stride sizeof a[0]) or into a received message. Writes point i's
 * position to to[i] and, when counts is not NULL, adds 1 to counts[to[i]] (counts has
 * an element for each out-partner, blk_proxy_out_count, which is the round's radix
 * for a swap: clear them first; adding lets one count span several arrays), which
 * is what a callback needs to size its out queues before it copies each point to
 * one. Returns 0; BLK_ENOTFOUND if a point is outside the domain or has a NaN
 * coordinate, with a detail naming it (then to and counts hold the points before
 * it only); BLK_EINVAL (with a detail) for a NULL r, what
 * cpoint_out refuses, a stride below dim * sizeof(double), or NULL pts or to with
 * n > 0. Any thread. */
int blk_router_cpoints_out(const blk_router *r, int round, const void *pts, size_t stride, size_t n,
                           int *to, size_t *counts);

/* The same for points whose coordinates are dim floats (stride at least dim *
 * sizeof(float)): single-precision particles routed where they lie, with no copy
 * into doubles. Each coordinate is widened to a double, exactly, so a point goes
 * where cpoints_out sends the double point of the same value. */
int blk_router_cpoints_out_float(const blk_router *r, int round, const void *pts, size_t stride,
                                 size_t n, int *to, size_t *counts);

/* The same for cells (dim int64_t per point, stride at least dim * sizeof(int64_t))
 * of a discrete decomposer's domain. */
int blk_router_points_out(const blk_router *r, int round, const void *pts, size_t stride, size_t n,
                          int *to, size_t *counts);

#ifdef __cplusplus
}
#endif
#endif
