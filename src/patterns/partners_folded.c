/*
 * partners_folded.c: a pattern with its remainder folded (see
 * partners_folded.h).
 *
 * State: the inner pattern, n, r = n - m and which fold rounds there are.
 * A query maps the gid to its virtual block, asks the inner pattern and maps
 * the partner gids back, so it costs what the inner query costs plus
 * O(count). Nothing changes after create.
 */
#include "patterns/partners_folded.h"

#include <limits.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/fail.h"

typedef struct folded {
  blk_partners *inner;
  int n, r;  /* blocks, and extras: gids 2i + 1 for i < r */
  int first; /* 1 with a fold round (round 0), else 0 */
  int last;  /* 1 with an unfold round */
  int inner_rounds, rounds;
} folded;

/* Whether every prime factor of n is at most bound. The division stops at
 * sqrt of what is left (then that is 1 or a prime) or past the bound (then
 * every factor left is larger, so only 1 is smooth). */
static int smooth(int n, int bound) {
  for (int f = 2; f <= bound && (long long)f * f <= n; f++)
    while (n % f == 0) n /= f;
  return n <= bound;
}

int blk__fold_base_within(int n, int width) {
  int m = n;
  while (m > 1 && !smooth(m, width)) m--; /* a power of two stops it by n / 2 */
  return m;
}

int blk__fold_base(int n, int k) {
  return blk__fold_base_within(n, blk__fold_width(k));
}

static int is_extra(const folded *f, int gid) {
  return gid < 2 * f->r && (gid & 1);
}

/* The virtual block gid stands as (an extra: its stand-in's). */
static int virt(const folded *f, int gid) {
  return gid < 2 * f->r ? gid / 2 : gid - f->r;
}

/* The gid that runs virtual block v. */
static int real(const folded *f, int v) {
  return v < f->r ? 2 * v : v + f->r;
}

/* Which kind of callback round: the inner round it is (0..R'), or -1 for
 * the fold's sending round 0, or R' + 1 for the unfold's receiving round. */
static int inner_of(const folded *f, int round) {
  if (f->first && round == 0) return -1;
  return round - f->first;
}

static int f_rounds(const void *s) {
  return ((const folded *)s)->rounds;
}

static int f_nblocks(const void *s) {
  return ((const folded *)s)->n;
}

static int f_active(const void *s, int round, int gid) {
  const folded *f = s;
  int i = inner_of(f, round);
  if (i < 0 || i > f->inner_rounds) return 1; /* fold and unfold: everyone */
  return !is_extra(f, gid) && blk_partners_active(f->inner, i, virt(f, gid));
}

/* The inner list of gid's virtual block, mapped back to gids. */
static int inner_list(const folded *f, int (*list)(const blk_partners *, int, int, int *, int),
                      int i, int gid, int *gids, int max) {
  int n = list(f->inner, i, virt(f, gid), gids, max);
  for (int j = 0; j < n && j < max; j++) gids[j] = real(f, gids[j]);
  return n;
}

/* A one- or two-member list: the block itself, then its extra. */
static int pair(const folded *f, int gid, int *gids, int max) {
  int n = gid < 2 * f->r ? 2 : 1;
  if (max > 0) gids[0] = gid;
  if (max > 1 && n == 2) gids[1] = gid + 1;
  return n;
}

static int one(int gid, int *gids, int max) {
  if (max > 0) gids[0] = gid;
  return 1;
}

static int f_in(const void *s, int round, int gid, int *gids, int max) {
  const folded *f = s;
  int i = inner_of(f, round);
  if (i < 0) return 0;
  if (i > f->inner_rounds) return one(is_extra(f, gid) ? gid - 1 : gid, gids, max);
  if (is_extra(f, gid)) return 0;
  if (f->first && i == 0) return pair(f, gid, gids, max); /* the fold arrives */
  return inner_list(f, blk_partners_in, i, gid, gids, max);
}

static int f_out(const void *s, int round, int gid, int *gids, int max) {
  const folded *f = s;
  int i = inner_of(f, round);
  if (i < 0) return one(is_extra(f, gid) ? gid - 1 : gid, gids, max);
  if (i > f->inner_rounds || is_extra(f, gid)) return 0;
  if (i == f->inner_rounds) return f->last ? pair(f, gid, gids, max) : 0;
  return inner_list(f, blk_partners_out, i, gid, gids, max);
}

static void f_destroy(void *s) {
  folded *f = s;
  blk_partners_destroy(f->inner);
  free(f);
}

static const blk_partners_ops folded_ops = {
    BLK_PARTNERS_OPS_VERSION, f_rounds, f_nblocks, f_active, f_in, f_out, f_destroy};

int blk__folded_create(const blk_partners_ops **ops, void **state, blk_partners *inner, int n,
                       int fold_in, int fold_out) {
  *state = NULL;
  int m = blk_partners_nblocks(inner), R = blk_partners_rounds(inner);
  if (!inner || n < m || n > 2 * m || R > INT_MAX - 3) {
    blk_partners_destroy(inner);
    return blk__fail(BLK_EINVAL, "partners: folding %d blocks into %d", n, m);
  }
  folded *f = blk__malloc(sizeof *f);
  if (!f) {
    blk_partners_destroy(inner);
    return blk__fail(BLK_ENOMEM, "partners: no memory for a folded pattern");
  }
  *f = (folded){inner, n, n - m, fold_in != 0, fold_out != 0, R, 0};
  f->rounds = R + f->first + f->last;
  *ops = &folded_ops;
  *state = f;
  return 0;
}

int blk__folded_inner_round(const void *state, int round) {
  const folded *f = state;
  int i = inner_of(f, round);
  return i >= 0 && i < f->inner_rounds ? i : -1;
}

int blk__folded_position(const void *state, int round, int gid) {
  const folded *f = state;
  int i = inner_of(f, round);
  if (i < 0) return 0;
  if (i >= f->inner_rounds) return is_extra(f, gid) ? 1 : 0;
  return blk_partners_round_position(f->inner, i, virt(f, gid));
}

const blk_partners *blk__folded_inner(const void *state) {
  return ((const folded *)state)->inner;
}

int blk__folded_extras(const void *state) {
  return ((const folded *)state)->r;
}
