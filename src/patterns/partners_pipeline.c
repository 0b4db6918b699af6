/*
 * partners_pipeline.c: the pipelined k-nomial tree (see partners_pipeline.h).
 *
 * Everything is arithmetic on base-k digits of gids: a query walks a gid's
 * digits (O(log n)) and a partner list a block's children (O(k log n)).
 * Nothing but the shape is stored.
 */
#include "patterns/partners_pipeline.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"

/* The place value k^l of g's lowest nonzero digit: g's children are at the
 * places below it. For gid 0, the smallest power of k not below n, so
 * every place with a child is below it. (At most k n: no overflow.) */
static long long low_place(const blk__pipeline *t, int g) {
  long long p = 1;
  if (g == 0)
    while (p < t->n) p *= t->k;
  else
    while ((g / p) % t->k == 0) p *= t->k;
  return p;
}

static int depth(const blk__pipeline *t, int g) {
  int d = 0;
  for (; g > 0; g /= t->k) d += g % t->k != 0;
  return d;
}

/* The most nonzero base-k digits of any x in 0..m: m's own count, or m
 * with one nonzero digit lowered by one and every digit below it k - 1. */
static int most_digits(long long m, int k) {
  int digit[64], len = 0, best = 0, above = 0;
  for (; m > 0; m /= k) digit[len++] = (int)(m % k);
  for (int i = 0; i < len; i++) best += digit[i] != 0;
  for (int p = len - 1; p >= 0; above += digit[p] != 0, p--)
    if (digit[p] > 0) {
      int lowered = above + (digit[p] > 1) + p;
      if (lowered > best) best = lowered;
    }
  return best;
}

/* The subtree of g is the gids g + x, x < min(low place, n - g); its height
 * is the most digits such an x has. */
static int height(const blk__pipeline *t, int g) {
  long long span = low_place(t, g), left = (long long)t->n - g;
  return most_digits((span < left ? span : left) - 1, t->k);
}

int blk__pipeline_init(blk__pipeline *t, int n, int k, int segments) {
  memset(t, 0, sizeof *t);
  if (n < 1 || k < 2 || segments < 1)
    return blk__fail(BLK_EINVAL, "partners: a pipelined tree of %d blocks, k = %d, %d segments", n,
                     k, segments);
  t->n = n;
  t->k = k;
  t->segments = segments;
  t->height = height(t, 0);
  if (segments - 1 > INT_MAX - 1 - 2 * t->height)
    return blk__fail(BLK_EINVAL, "partners: a pipelined tree of %d segments takes too many rounds",
                     segments);
  return 0;
}

int blk__pipeline_rounds(const blk__pipeline *t) {
  return t->n < 2 ? 0 : t->segments - 1 + 2 * t->height;
}

/* g (not 0) with its lowest nonzero digit, at place `top`, cleared. */
static int clear_low_digit(const blk__pipeline *t, int g, long long top) {
  return (int)(g - (g / top) % t->k * top);
}

int blk__pipeline_parent(const blk__pipeline *t, int g) {
  return g == 0 ? -1 : clear_low_digit(t, g, low_place(t, g));
}

int blk__pipeline_segment(const blk__pipeline *t, int round, int from, int to) {
  int s;
  if (from != 0 && blk__pipeline_parent(t, from) == to)
    s = round - height(t, from);
  else if (to != 0 && blk__pipeline_parent(t, to) == from)
    s = round - t->height - depth(t, from);
  else
    return -1;
  return s >= 0 && s < t->segments ? s : -1;
}

/* What the lists of a block need, worked out once per query. */
typedef struct node {
  int parent, height, depth;
  long long top; /* low_place: the children are at the places below it */
} node;

static node node_of(const blk__pipeline *t, int g) {
  node v = {-1, 0, depth(t, g), low_place(t, g)};
  if (g) v.parent = clear_low_digit(t, g, v.top);
  long long left = (long long)t->n - g;
  v.height = most_digits((v.top < left ? v.top : left) - 1, t->k);
  return v;
}

static int in_range(const blk__pipeline *t, int s) {
  return s >= 0 && s < t->segments;
}

/* The partners of g in round r: the parent first, then the children in
 * gid order, those with a segment for g (in) or from g (out) then. A
 * child c = g + j q has its lowest digit at place q = k^l, so its height is
 * l when its subtree [c, c + q) is whole. The segments follow
 * blk__pipeline_segment: up, a block sends in round s + height; down, a
 * block at depth d in round s + H + d. */
static int partners_of(const blk__pipeline *t, const node *v, int r, int g, int *gids, int max,
                       int in) {
  int count = 0, up = in ? in_range(t, r - t->height - v->depth) : in_range(t, r - v->height);
  if (g && up) {
    if (count < max) gids[count] = v->parent;
    count++;
  }
  if (!in && !in_range(t, r - t->height - v->depth)) return count; /* nothing down */
  int l = 0;
  for (long long q = 1; q < v->top; q *= t->k, l++)
    for (int j = 1; j < t->k; j++) {
      long long c = g + j * q; /* (q < n, so no overflow before the break) */
      if (c >= t->n) break;
      if (in && !in_range(t, r - 1 - (c + q <= t->n ? l : most_digits(t->n - c - 1, t->k))))
        continue;
      if (count < max) gids[count] = (int)c;
      count++;
    }
  return count;
}

static int pipeline_rounds(const void *s) {
  return blk__pipeline_rounds(s);
}

static int pipeline_nblocks(const void *s) {
  return ((const blk__pipeline *)s)->n;
}

static int pipeline_in(const void *s, int round, int gid, int *gids, int max) {
  node v = node_of(s, gid);
  return partners_of(s, &v, round, gid, gids, max, 1);
}

static int pipeline_out(const void *s, int round, int gid, int *gids, int max) {
  node v = node_of(s, gid);
  return partners_of(s, &v, round, gid, gids, max, 0);
}

/* (The driver asks this for every round of every block: the node once.) */
static int pipeline_active(const void *s, int round, int gid) {
  const blk__pipeline *t = s;
  if (t->n < 2) return 1;
  node v = node_of(t, gid);
  return partners_of(t, &v, round, gid, NULL, 0, 1) > 0 ||
         partners_of(t, &v, round, gid, NULL, 0, 0) > 0;
}

static void pipeline_destroy(void *s) {
  free(s);
}

static const blk_partners_ops pipeline_ops = {
    BLK_PARTNERS_OPS_VERSION, pipeline_rounds, pipeline_nblocks,
    pipeline_active,          pipeline_in,     pipeline_out,
    pipeline_destroy};

int blk__pipeline_create(const blk_partners_ops **ops, void **state, const blk__pipeline *t,
                         int *max_group) {
  *state = NULL;
  blk__pipeline *copy = blk__malloc(sizeof *copy);
  if (!copy) return blk__fail(BLK_ENOMEM, "partners: no memory for a pipelined tree");
  *copy = *t;
  /* The root has the most children; any other block has fewer, and a parent. */
  int children = 0;
  for (long long q = 1, top = low_place(t, 0); q < top; q *= t->k)
    for (int j = 1; j < t->k && j * q < t->n; j++) children++;
  *max_group = children + 1;
  *ops = &pipeline_ops;
  *state = copy;
  return 0;
}
