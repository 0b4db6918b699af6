/*
 * partners_regular.c: the regular merge, broadcast, swap and all-reduce patterns.
 *
 * The blocks form a grid: nblocks = prod divisions[a], gid = sum c[a] * stride[a] with
 * axis 0 fastest. Create turns the divisions (factored with radix k, or explicit rounds)
 * into R exchange rounds e = 0..R-1, each with an axis a_e, a radix k_e and a step s_e
 * along that axis:
 *   contiguous  s_e = product of the radices of the earlier rounds on a_e (1, k, k^2, ...)
 *   halving     s_e = divisions[a_e] / product of the radices of the rounds <= e on a_e
 * and gstep_e = s_e * stride[a_e], the gid distance between members of a group. A block
 * with coordinate c on a_e has position pos_e = (c / s_e) mod k_e, and its group is
 * gid - pos_e * gstep_e + j * gstep_e for j = 0..k_e-1. As the radices of an axis multiply
 * to its division, the positions over that axis's rounds are the digits of c in a mixed
 * radix, so the groups of a round partition the grid and stay inside it.
 *   merge      active(r) iff pos_e == 0 for every e < r; in(r) = group_{r-1};
 *              out(r) = {first member of group_r}; the last root is gid 0 (all digits 0).
 *   swap       always active; in(r) = group_{r-1}; out(r) = group_r.
 *   broadcast  active, in, out of round r = merge active, out, in of round R - r.
 *   allreduce  2R rounds: round r is merge round r for r <= R and broadcast round r - R
 *              for r >= R (round R: merge in, broadcast out).
 * Factoring an axis of d blocks: take k while it divides what is left; else the largest
 * j in [2, k) that divides it (counting down from k-1, or by trial division up to the
 * square root when k is large); else the smallest prime factor of what is left, which is
 * then larger than k: one wider round per prime factor larger than k (25 with k = 3 is
 * two rounds of 5; 7 with k = 2 one round of 7). DIY takes what is left whole there (one
 * round of 25): blk's choice keeps each wider round as narrow as the count allows. Unlike
 * DIY's FactorK, what is left is divided by the factor taken, so the radices always
 * multiply to d.
 *
 * Cost: create O(dim + R) plus factoring O(R * min(k, sqrt(d))); active O(R); a partner
 * list O(R + k_e); no allocation after create. R <= 30, since every radix is >= 2 and
 * nblocks fits in int. The state never changes after create, so any thread may query.
 * What the patterns cost the driver, with m bytes per message: merge and broadcast put
 * sum_e (k_e - 1)(alpha + m beta) on the root's path; swap costs every block the same
 * when it sends all m bytes to each member, or sum_e (k_e - 1)(alpha + beta m / (k_0 ...
 * k_e)) when it splits its data k_e ways each round (reduce-scatter).
 */
#include "patterns/partners_regular.h"

#include <limits.h>
#include <stdlib.h>

#include "base/fail.h"

enum {
  MAX_DIM = 8,    /* matches BLK_MAX_DIM (blk/bounds.h) */
  MAX_ROUNDS = 32 /* at most 30 radices >= 2 multiply to an int */
};

typedef struct kind kind;

struct blk__regular {
  const kind *type;
  int dim;
  int nblocks;
  int nrounds; /* R: the merge's exchange rounds */
  int divisions[MAX_DIM];
  int stride[MAX_DIM];
  int axis[MAX_ROUNDS];
  int radix[MAX_ROUNDS];
  int step[MAX_ROUNDS];
  int gstep[MAX_ROUNDS];
};

/* ---- the arithmetic of one exchange round ---- */

static int position(const blk__regular *s, int e, int gid) {
  int a = s->axis[e];
  int c = (gid / s->stride[a]) % s->divisions[a];
  return (c / s->step[e]) % s->radix[e];
}

static int first_member(const blk__regular *s, int e, int gid) {
  return gid - position(s, e, gid) * s->gstep[e];
}

static int group(const blk__regular *s, int e, int gid, int *gids, int max) {
  int first = first_member(s, e, gid);
  for (int j = 0; j < s->radix[e] && j < max; j++) gids[j] = first + j * s->gstep[e];
  return s->radix[e];
}

/* ---- merge, the base of broadcast and all-reduce ---- */

static int merge_active(const blk__regular *s, int round, int gid) {
  for (int e = 0; e < round; e++)
    if (position(s, e, gid) != 0) return 0;
  return 1;
}

static int merge_in(const blk__regular *s, int round, int gid, int *gids, int max) {
  if (round == 0 || !merge_active(s, round, gid)) return 0;
  return group(s, round - 1, gid, gids, max);
}

static int merge_out(const blk__regular *s, int round, int gid, int *gids, int max) {
  if (round == s->nrounds || !merge_active(s, round, gid)) return 0;
  if (max > 0) gids[0] = first_member(s, round, gid);
  return 1;
}

/* ---- ops tables ---- */

static int rounds_once(const void *state) {
  const blk__regular *s = state;
  return s->nrounds;
}

static int rounds_twice(const void *state) {
  const blk__regular *s = state;
  return 2 * s->nrounds;
}

static int nblocks(const void *state) {
  const blk__regular *s = state;
  return s->nblocks;
}

static void destroy(void *state) {
  free(state);
}

static int merge_active_op(const void *state, int round, int gid) {
  return merge_active(state, round, gid);
}

static int merge_in_op(const void *state, int round, int gid, int *gids, int max) {
  return merge_in(state, round, gid, gids, max);
}

static int merge_out_op(const void *state, int round, int gid, int *gids, int max) {
  return merge_out(state, round, gid, gids, max);
}

static int broadcast_active(const void *state, int round, int gid) {
  const blk__regular *s = state;
  return merge_active(s, s->nrounds - round, gid);
}

static int broadcast_in(const void *state, int round, int gid, int *gids, int max) {
  const blk__regular *s = state;
  return merge_out(s, s->nrounds - round, gid, gids, max);
}

static int broadcast_out(const void *state, int round, int gid, int *gids, int max) {
  const blk__regular *s = state;
  return merge_in(s, s->nrounds - round, gid, gids, max);
}

static int swap_active(const void *state, int round, int gid) {
  (void)state, (void)round, (void)gid;
  return 1;
}

static int swap_in(const void *state, int round, int gid, int *gids, int max) {
  return round == 0 ? 0 : group(state, round - 1, gid, gids, max);
}

static int swap_out(const void *state, int round, int gid, int *gids, int max) {
  const blk__regular *s = state;
  return round == s->nrounds ? 0 : group(s, round, gid, gids, max);
}

/* All-reduce round r as a merge round: r on the way up, 2R - r on the way down. */
static int merge_round(const blk__regular *s, int round) {
  return round <= s->nrounds ? round : 2 * s->nrounds - round;
}

static int allreduce_active(const void *state, int round, int gid) {
  const blk__regular *s = state;
  return merge_active(s, merge_round(s, round), gid);
}

static int allreduce_in(const void *state, int round, int gid, int *gids, int max) {
  const blk__regular *s = state;
  if (round <= s->nrounds) return merge_in(s, round, gid, gids, max);
  return merge_out(s, merge_round(s, round), gid, gids, max);
}

static int allreduce_out(const void *state, int round, int gid, int *gids, int max) {
  const blk__regular *s = state;
  if (round < s->nrounds) return merge_out(s, round, gid, gids, max);
  return merge_in(s, merge_round(s, round), gid, gids, max);
}

static const blk_partners_ops merge_ops = {BLK_PARTNERS_OPS_VERSION,
                                           rounds_once,
                                           nblocks,
                                           merge_active_op,
                                           merge_in_op,
                                           merge_out_op,
                                           destroy};
static const blk_partners_ops broadcast_ops = {BLK_PARTNERS_OPS_VERSION,
                                               rounds_once,
                                               nblocks,
                                               broadcast_active,
                                               broadcast_in,
                                               broadcast_out,
                                               destroy};
static const blk_partners_ops swap_ops = {
    BLK_PARTNERS_OPS_VERSION, rounds_once, nblocks, swap_active, swap_in, swap_out, destroy};
static const blk_partners_ops allreduce_ops = {BLK_PARTNERS_OPS_VERSION,
                                               rounds_twice,
                                               nblocks,
                                               allreduce_active,
                                               allreduce_in,
                                               allreduce_out,
                                               destroy};

/* Which merge exchange round a pattern's exchange round e (sent in callback round e)
 * uses, given the merge's R. */
static int exchange_forward(int nrounds, int e) {
  (void)nrounds;
  return e;
}

static int exchange_backward(int nrounds, int e) {
  return nrounds - 1 - e;
}

static int exchange_up_down(int nrounds, int e) {
  return e < nrounds ? e : 2 * nrounds - 1 - e;
}

struct kind {
  const blk_partners_ops *ops;
  int (*exchange)(int nrounds, int e);
};

static const kind kinds[] = {
    [BLK_MERGE] = {&merge_ops, exchange_forward},
    [BLK_BROADCAST] = {&broadcast_ops, exchange_backward},
    [BLK_SWAP] = {&swap_ops, exchange_forward},
    [BLK_ALLREDUCE] = {&allreduce_ops, exchange_up_down},
};

/* ---- create ---- */

/* Checks what both create paths share and returns nblocks in *n. */
static int check_grid(blk_pattern pattern, int dim, const int *divisions, int contiguous, int *n) {
  int pk = (int)pattern;
  if (pk < 0 || pk >= (int)(sizeof kinds / sizeof kinds[0]))
    return blk__fail(BLK_EINVAL, "partners: pattern = %d, not a blk_pattern (0..3)", pk);
  if (dim < 1 || dim > MAX_DIM)
    return blk__fail(BLK_EINVAL, "partners: dim = %d, must be 1..%d", dim, MAX_DIM);
  if (divisions == NULL) return blk__fail(BLK_EINVAL, "partners: divisions is NULL");
  long long product = 1;
  for (int a = 0; a < dim; a++) {
    if (divisions[a] < 1)
      return blk__fail(BLK_EINVAL, "partners: divisions[%d] = %d, must be >= 1", a, divisions[a]);
    product *= divisions[a];
    if (product > INT_MAX)
      return blk__fail(BLK_EINVAL,
                       "partners: nblocks = product of divisions[0..%d] = %lld, more than "
                       "INT_MAX",
                       a, product);
  }
  if (contiguous != 0 && contiguous != 1)
    return blk__fail(BLK_EINVAL,
                     "partners: contiguous = %d, must be 1 (distance doubling) or 0 (halving)",
                     contiguous);
  *n = (int)product;
  return 0;
}

/* The largest j with 2 <= j < k that divides n >= 2, or 0. */
static int largest_divisor_below(int n, int k) {
  if (k > n) return n;
  if ((long long)(k - 1) * (k - 1) <= n) { /* counting down costs at most sqrt(n) */
    for (int j = k - 1; j >= 2; j--)
      if (n % j == 0) return j;
    return 0;
  }
  int best = 0; /* k - 1 > sqrt(n): pair up the divisors below the square root instead */
  for (int i = 2; (long long)i * i <= n; i++) {
    if (n % i != 0) continue;
    if (i < k && i > best) best = i;
    if (n / i < k && n / i > best) best = n / i;
  }
  return best;
}

/* The smallest prime factor of n >= 2. */
static int smallest_prime_factor(int n) {
  for (int i = 2; (long long)i * i <= n; i++)
    if (n % i == 0) return i;
  return n;
}

/* Greedy factoring of d (see the top of the file); returns the number of radices. */
static int factor(int d, int k, int radices[MAX_ROUNDS]) {
  int n = 0;
  for (int rem = d; rem > 1; rem /= radices[n++]) {
    int f = rem % k == 0 ? k : largest_divisor_below(rem, k);
    radices[n] = f != 0 ? f : smallest_prime_factor(rem);
  }
  return n;
}

int blk__regular_create_k(const blk_partners_ops **ops, blk__regular **state, blk_pattern pattern,
                          int dim, const int *divisions, int k, int contiguous) {
  *ops = NULL;
  *state = NULL;
  int n = 0, rc = check_grid(pattern, dim, divisions, contiguous, &n);
  if (rc != 0) return rc;
  if (k < 2) return blk__fail(BLK_EINVAL, "partners: k = %d, must be >= 2", k);

  int per_axis[MAX_DIM][MAX_ROUNDS], count[MAX_DIM], most = 0;
  for (int a = 0; a < dim; a++) {
    count[a] = factor(divisions[a], k, per_axis[a]);
    if (count[a] > most) most = count[a];
  }
  int axes[MAX_ROUNDS], radices[MAX_ROUNDS], nrounds = 0;
  for (int i = 0; i < most; i++) /* the axes take turns */
    for (int a = 0; a < dim; a++)
      if (i < count[a]) {
        axes[nrounds] = a;
        radices[nrounds++] = per_axis[a][i];
      }
  return blk__regular_create_rounds(ops, state, pattern, dim, divisions, nrounds, axes, radices,
                                    contiguous);
}

int blk__regular_create_rounds(const blk_partners_ops **ops, blk__regular **state,
                               blk_pattern pattern, int dim, const int *divisions, int nrounds,
                               const int *axes, const int *radices, int contiguous) {
  *ops = NULL;
  *state = NULL;
  int n = 0, rc = check_grid(pattern, dim, divisions, contiguous, &n);
  if (rc != 0) return rc;
  if (nrounds < 0) return blk__fail(BLK_EINVAL, "partners: nrounds = %d, must be >= 0", nrounds);
  if (nrounds > 0 && (axes == NULL || radices == NULL))
    return blk__fail(BLK_EINVAL, "partners: nrounds = %d but %s is NULL", nrounds,
                     axes == NULL ? "axes" : "radices");

  /* Each round multiplies its axis's product by >= 2 and no product may pass its
   * division, so this loop ends within 31 rounds on bad input. */
  long long product[MAX_DIM];
  for (int a = 0; a < dim; a++) product[a] = 1;
  for (int e = 0; e < nrounds; e++) {
    int a = axes[e];
    if (a < 0 || a >= dim)
      return blk__fail(BLK_EINVAL, "partners: axes[%d] = %d, must be 0..%d", e, a, dim - 1);
    if (radices[e] < 2)
      return blk__fail(BLK_EINVAL, "partners: radices[%d] = %d, must be >= 2", e, radices[e]);
    product[a] *= radices[e];
    if (product[a] > divisions[a])
      return blk__fail(BLK_EINVAL,
                       "partners: radices of axis %d multiply to %lld by round %d, more than "
                       "divisions[%d] = %d",
                       a, product[a], e, a, divisions[a]);
  }
  for (int a = 0; a < dim; a++) {
    if (product[a] == divisions[a]) continue;
    if (nrounds == 0)
      return blk__fail(BLK_EINVAL, "partners: nrounds = 0 but divisions[%d] = %d needs rounds", a,
                       divisions[a]);
    return blk__fail(BLK_EINVAL,
                     "partners: radices of axis %d multiply to %lld, not divisions[%d] = %d", a,
                     product[a], a, divisions[a]);
  }

  blk__regular *s = calloc(1, sizeof *s);
  if (s == NULL)
    return blk__fail(BLK_ENOMEM, "partners: no memory for a %zu-byte pattern", sizeof *s);
  s->type = &kinds[pattern];
  s->dim = dim;
  s->nblocks = n;
  s->nrounds = nrounds;
  int cur[MAX_DIM];
  for (int a = 0; a < dim; a++) {
    s->divisions[a] = divisions[a];
    s->stride[a] = a == 0 ? 1 : s->stride[a - 1] * divisions[a - 1];
    cur[a] = contiguous ? 1 : divisions[a];
  }
  for (int e = 0; e < nrounds; e++) {
    int a = axes[e];
    s->axis[e] = a;
    s->radix[e] = radices[e];
    if (contiguous) {
      s->step[e] = cur[a];
      cur[a] *= radices[e];
    } else {
      cur[a] /= radices[e];
      s->step[e] = cur[a];
    }
    s->gstep[e] = s->step[e] * s->stride[a];
  }
  *ops = s->type->ops;
  *state = s;
  return 0;
}

/* ---- queries beyond the ops ---- */

int blk__regular_max_group(const void *state) {
  const blk__regular *s = state;
  int most = 0;
  for (int e = 0; e < s->nrounds; e++)
    if (s->radix[e] > most) most = s->radix[e];
  return most;
}

/* The merge exchange round behind the pattern's exchange round, or -1. */
static int merge_exchange(const blk__regular *s, int round) {
  if (round < 0 || round >= s->type->ops->rounds(s)) return -1;
  return s->type->exchange(s->nrounds, round);
}

int blk__regular_round_digit(const void *state, int round, blk__round_digit *out) {
  const blk__regular *s = state;
  int e = merge_exchange(s, round);
  if (e < 0) return -1;
  int a = s->axis[e];
  *out = (blk__round_digit){a, s->radix[e], s->step[e], s->divisions[a], s->stride[a]};
  return 0;
}
