/*
 * kdtree_search.c: one node's cut by histogram refinement (see
 * kdtree_search.h for the rounds and their bound). Pure arithmetic on the
 * added-up bins, so every rank steps to the same bracket and the same cut.
 *
 * Invariant between rounds: the node's points before the bracket weigh
 * `below` <= target < below + (the bracket's weight), and every point of the
 * bracket has the fixed coordinates. A step that finds it broken (the
 * target past the last bin, or a first round whose weight is not the
 * node's) reports it instead of cutting: the points changed under the build.
 */
#include "collectives/kdtree_search.h"

#include <stdint.h>

void blk__kd_search_start(blk__kd_search *s, const blk_cbounds *box, int axis, uint64_t target,
                          uint64_t total) {
  memset(s, 0, sizeof *s);
  s->dim = box->dim;
  s->axis = axis;
  for (int a = 0; a < box->dim; a++) {
    s->box_min[a] = box->min[a];
    s->box_max[a] = box->max[a];
  }
  s->lo = blk__kd_key(box->min[axis]);
  s->hi = blk__kd_key(box->max[axis]);
  s->target = target;
  s->total = total;
}

void blk__kd_bins_clear(blk__kd_bin *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    b[i].weight = 0;
    b[i].min = UINT64_MAX;
    b[i].max = 0;
  }
}

void blk__kd_bins_merge(blk__kd_bin *acc, const blk__kd_bin *in, size_t n) {
  for (size_t i = 0; i < n; i++) {
    acc[i].weight += in[i].weight;
    if (in[i].min < acc[i].min) acc[i].min = in[i].min;
    if (in[i].max > acc[i].max) acc[i].max = in[i].max;
  }
}

double blk__kd_between(double a, double b) {
  double mid = a / 2 + b / 2; /* no overflow, unlike (a + b) / 2 */
  return a < mid && mid <= b ? mid : b;
}

/* The cut: the fixed coordinates, then v, then nothing (a point equal on
 * all of them goes high unless incl). */
static void finish(blk__kd_search *s, int m, double v, int incl, uint64_t low) {
  blk__kd_cut *c = &s->cut;
  c->axis = s->axis;
  c->m = m;
  c->incl = incl;
  for (int i = 0; i < BLK_MAX_DIM; i++) c->v[i] = i < s->fixed ? s->f[i] : 0.0;
  if (m > s->fixed) c->v[s->fixed] = v;
  s->low = low;
  s->done = 1;
}

int blk__kd_search_step(blk__kd_search *s, const blk__kd_bin *bins, int nbins) {
  if (s->rounds++ == 0) {
    uint64_t w = 0;
    for (int i = 0; i < nbins; i++) w += bins[i].weight;
    if (w != s->total) return -1;
  }
  uint64_t cum = s->below;
  int last = -1; /* the last non-empty bin before the target's */
  int i = 0;
  for (; i < nbins; i++) {
    if (!bins[i].weight) continue;
    if (s->target < cum + bins[i].weight) break;
    cum += bins[i].weight;
    last = i;
  }
  if (i == nbins) return -1;
  const blk__kd_bin *b = &bins[i];
  int have_prev = last >= 0 ? 1 : s->have_prev;
  double prev = last >= 0 ? blk__kd_value(bins[last].max) : s->prev;

  if (s->target == cum) { /* the target is the bin's first point: cut just before it */
    double first = blk__kd_value(b->min);
    finish(s, s->fixed + 1, have_prev ? blk__kd_between(prev, first) : first, 0, cum);
    return 0;
  }
  if (b->min == b->max) { /* one value: fix it and go on with the next coordinate */
    s->f[s->fixed++] = blk__kd_value(b->min);
    s->below = cum;
    s->have_prev = 0;
    if (s->fixed == s->dim) { /* copies of one point: all low or all high */
      uint64_t under = s->target - cum, over = cum + b->weight - s->target;
      if (under <= over)
        finish(s, s->dim, 0.0, 0, cum);
      else
        finish(s, s->dim, 0.0, 1, cum + b->weight);
      return 0;
    }
    int axis = (s->axis + s->fixed) % s->dim;
    s->lo = blk__kd_key(s->box_min[axis]);
    s->hi = blk__kd_key(s->box_max[axis]);
    return 0;
  }
  s->lo = b->min;
  s->hi = b->max;
  s->below = cum;
  s->have_prev = have_prev;
  s->prev = prev;
  return 0;
}

void blk__kd_cut_volume(blk__kd_cut *c, const blk_cbounds *box, int axis, int num, int den) {
  memset(c, 0, sizeof *c);
  double f = (double)num / (double)den, lo = box->min[axis], hi = box->max[axis];
  double v = (1 - f) * lo + f * hi; /* finite for any finite box */
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  c->axis = axis;
  c->m = 1;
  c->v[0] = v;
}
