/*
 * partners_folded.h: a pattern over n blocks whose count has a prime factor
 * too large for one round, run as a regular pattern over m < n blocks with
 * the other r = n - m folded into partners (Rabenseifner's fold).
 *
 * Without folding, 1009 blocks (a prime) make one round in which every
 * block of a swap sends 1009 messages. Folded, blocks 2i+1 for i < r (the
 * extras) give what they hold to block 2i (their stand-in) in a first
 * round, the m stand-ins and other blocks run the inner pattern as virtual
 * blocks 0..m-1, and a last round gives the extras their part back:
 *   virtual v is gid 2v for v < r and gid v + r above,
 *   gid g stands as virtual g / 2 for g < 2r and g - r above,
 * so a virtual block covers the adjacent gids [2v, 2v+2) or [v+r, v+r+1),
 * in gid order, and the pairs sit on one rank under a contiguous assigner.
 * m is the largest count <= n whose prime factors are all at most
 * max(k, BLK__FOLD_WIDTH), so no round is wider than that; m >= n / 2 (a
 * power of two qualifies), so every extra has a stand-in.
 *
 * Rounds (callback rounds, R' the inner pattern's):
 *   with a fold (fold_in): round 0, extras send to their stand-in, every
 *     other block to itself; the stand-ins receive both in round 1, where
 *     inner round 0 sends; inner round i is round i + 1.
 *   with an unfold (fold_out): after inner round R' (which must have every
 *     virtual block active), stand-ins send to themselves and their extra,
 *     which receives in the last round.
 * Extras are active only in those two rounds. A block's position in round
 * e's group (blk_partners_round_position): 0 in the fold; in the unfold 1
 * for an extra, 0 for the others; in between the inner pattern's position
 * of the virtual block the gid stands as, so an item bound for an extra
 * travels to its stand-in and then on. The inner rounds keep the inner
 * pattern's axis, radix and step; the fold rounds have none (-1).
 */
#ifndef BLK_PARTNERS_FOLDED_H
#define BLK_PARTNERS_FOLDED_H

#include "blk/partners.h"

/* Rounds of up to this many members are run as they are (the regular
 * factoring's wider rounds); a prime factor above max(k, this) is folded. */
#define BLK__FOLD_WIDTH 16

/* The widest round a pattern of radix k keeps: max(k, BLK__FOLD_WIDTH). */
static inline int blk__fold_width(int k) {
  return k > BLK__FOLD_WIDTH ? k : BLK__FOLD_WIDTH;
}

/* m for n blocks and radix k (see the top): n itself when it needs no
 * folding. n >= 1, k >= 2. */
int blk__fold_base(int n, int k);

/* The same with rounds of at most `width` members (>= 2): the largest
 * m <= n whose prime factors are all at most width. blk__fold_base(n, k) is
 * this with blk__fold_width(k); with width k every round has at most k
 * members, which costs two rounds more but, for operations that send whole
 * arrays to every member, far fewer bytes (docs/performance.md, 16). */
int blk__fold_base_within(int n, int width);

/* Wraps a pattern over m = blk_partners_nblocks(inner) blocks as one over n
 * (m <= n <= 2m) as above, with a fold round first (fold_in) and an unfold
 * round last (fold_out). On success *out owns a new object that owns inner;
 * on error *out is NULL and inner is destroyed. Errors: BLK_EINVAL for n
 * outside m..2m or too many rounds, BLK_ENOMEM (through blk__fail). */
int blk__partners_create_folded(blk_partners **out, blk_partners *inner, int n, int fold_in,
                                int fold_out);

/* The built-in pattern over a line of n blocks with radix k (as
 * blk_partners_create with dim 1), folded when n needs it: the fold for a
 * merge, the unfold for a broadcast, both for swap and all-reduce. Errors
 * as blk_partners_create's; on error *out is NULL. */
int blk__partners_create_folding(blk_partners **out, blk_pattern pattern, int n, int k,
                                 int contiguous);

/* The same folded within rounds of `width` members (blk__fold_base_within). */
int blk__partners_create_folding_within(blk_partners **out, blk_pattern pattern, int n, int k,
                                        int contiguous, int width);

/* The state and table, for partners.c to wrap: as blk__partners_create_folded,
 * *state new (freed by (*ops)->destroy, which destroys inner too). */
int blk__folded_create(const blk_partners_ops **ops, void **state, blk_partners *inner, int n,
                       int fold_in, int fold_out);

/* The queries partners.c answers for a folded pattern (state from
 * blk__folded_create): the inner round of exchange round e, or -1 for a
 * fold round; and a gid's position in exchange round e's group. */
int blk__folded_inner_round(const void *state, int round);
int blk__folded_position(const void *state, int round, int gid);
const blk_partners *blk__folded_inner(const void *state);
int blk__folded_extras(const void *state);

/* r, the extras of a folded pattern (partners.c), or -1 for any other. */
int blk__partners_fold_extras(const blk_partners *p);

#endif
