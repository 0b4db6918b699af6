/*
 * kdtree_search.h: finding one node's cut by histogram refinement
 * (kdtree_search.c). Pure arithmetic: whoever runs a search counts the
 * points (or weighted sample points) into its histogram, adds the
 * histograms of all ranks, and steps it, so the same counts give the same
 * cut everywhere.
 *
 * The points of a node splitting along axis a are ordered by (x[a],
 * x[a+1], ..., x[a-1]) (kdtree_tree.h), and the search wants a cut with
 * exactly `target` of them (by weight) below it. It keeps a bracket: the
 * coordinates fixed so far (the first `fixed` of that order), a range of
 * keys [lo, hi] of the next coordinate that holds the target point, and the
 * weight `below` of the node's points that come before the bracket. A round
 * counts the bracket's points into `bins` bins of equal key ranges, each
 * with the weight it holds and its smallest and largest key, and the step
 * then
 *   - ends when the target falls at the start of a bin: the cut is the
 *     midpoint between the last point before it and the bin's first point
 *     (low gets exactly `target`);
 *   - fixes the coordinate when the target's bin holds one value, and goes
 *     on with the next coordinate over the node's box; with every
 *     coordinate fixed the bin holds copies of one point, which all go to
 *     the side that leaves low nearer the target (ties: high);
 *   - else narrows the bracket to the smallest and largest key in the bin.
 * Each round shrinks the key range at least `bins` times (data-tight:
 * usually far more), so a coordinate takes at most ceil(64 / log2 bins)
 * rounds; uniform or clustered points take 2 or 3 a level.
 */
#ifndef BLK_KDTREE_SEARCH_H
#define BLK_KDTREE_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/kdtree_tree.h"

/* One bin: the weight of its points and their smallest and largest key
 * (UINT64_MAX and 0 when empty). Combined by sum, min and max. */
typedef struct blk__kd_bin {
  uint64_t weight, min, max;
} blk__kd_bin;

typedef struct blk__kd_search {
  int dim, axis;
  int fixed;             /* coordinates fixed so far */
  double f[BLK_MAX_DIM]; /* their values, in the node's order */
  uint64_t lo, hi;       /* the bracket's keys of coordinate number `fixed` */
  uint64_t below;        /* weight of the node's points before the bracket */
  uint64_t target;       /* weight that must go low */
  uint64_t total;        /* the node's weight, checked in the first round */
  int have_prev;         /* prev: the largest value before the bracket */
  double prev;           /* (of coordinate `fixed`, the fixed ones equal) */
  int rounds;
  double box_min[BLK_MAX_DIM], box_max[BLK_MAX_DIM]; /* the node's box */
  int done;
  blk__kd_cut cut; /* when done: the cut, and the weight it puts low */
  uint64_t low;
} blk__kd_search;

/* Starts a search for a cut of the node with box *box along axis, putting
 * target of its total weight low (target < total). */
void blk__kd_search_start(blk__kd_search *s, const blk_cbounds *box, int axis, uint64_t target,
                          uint64_t total);

/* Empty bins. */
void blk__kd_bins_clear(blk__kd_bin *b, size_t n);

/* acc[i] combined with in[i] for i < n (sum, min, max). */
void blk__kd_bins_merge(blk__kd_bin *acc, const blk__kd_bin *in, size_t n);

/* The bin (0..bins-1) of point x in this round, or -1 if x is not in the
 * bracket. *key gets the key of its coordinate number `fixed`. */
static inline int blk__kd_search_bin(const blk__kd_search *s, const double *x, int bins,
                                     uint64_t *key) {
  int axis = s->axis;
  for (int i = 0; i < s->fixed; i++) {
    if (x[axis] != s->f[i]) return -1;
    if (++axis == s->dim) axis = 0;
  }
  uint64_t k = blk__kd_key(x[axis]);
  if (k < s->lo || k > s->hi) return -1;
  *key = k;
  return (int)((k - s->lo) / ((s->hi - s->lo) / (uint64_t)bins + 1));
}

static inline void blk__kd_bin_add(blk__kd_bin *b, uint64_t key, uint64_t weight) {
  b->weight += weight;
  if (key < b->min) b->min = key;
  if (key > b->max) b->max = key;
}

/* One step with the round's bins (every rank's, added up). Returns 0, or
 * -1 when the counts contradict the bracket (the points changed between
 * rounds, or the first round's total is not the node's): no cut then. */
int blk__kd_search_step(blk__kd_search *s, const blk__kd_bin *bins, int nbins);

/* A cut of the node with box *box along axis at the fraction num/den of
 * its extent (num < den), for a node without points. */
void blk__kd_cut_volume(blk__kd_cut *c, const blk_cbounds *box, int axis, int num, int den);

#endif
