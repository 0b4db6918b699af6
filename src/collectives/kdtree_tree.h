/*
 * kdtree_tree.h: the k-d tree object, its cuts and the order of points
 * inside a node (kdtree_tree.c); the build (kdtree.c) fills it in and the
 * quantile search (kdtree_search.h) finds its cuts.
 *
 * Nodes live in one array, the root first: a node owns the gids
 * first..first+count-1; it is a leaf when count is 1 and unsplit while its
 * children are -1 (during the build). A split node's cut says which child a
 * point goes to (blk__kd_goes_low); the children's boxes are the node's with
 * the split axis ending (low) or starting (high) at the cut's first value.
 *
 * Keys: a double's order as an unsigned 64-bit integer (blk__kd_key), so
 * the search can cut a range of values into equal ranges of keys whatever
 * the values' spread; -0.0 and +0.0 share a key, as they compare equal.
 */
#ifndef BLK_KDTREE_TREE_H
#define BLK_KDTREE_TREE_H

#include <stdint.h>
#include <string.h>

#include "blk/kdtree.h"

/* A cut of a node splitting along axis: a point x goes low when (x[axis],
 * x[axis+1], ..., cyclically) is below (v[0], ..., v[m-1]) in lexicographic
 * order, or equal to it and incl is set; else high. */
typedef struct blk__kd_cut {
  int axis;
  int m;    /* coordinates compared, 1..dim */
  int incl; /* a point equal on all m goes low */
  double v[BLK_MAX_DIM];
} blk__kd_cut;

typedef struct blk__kd_node {
  int first, count; /* the gids first..first+count-1 */
  int child[2];     /* low and high node, or -1 (a leaf, or not yet split) */
  int parent;       /* -1 for the root */
  int depth;
  uint64_t points; /* points (EXACT) or sample weight (SAMPLED) the build counted */
  blk__kd_cut cut; /* when split */
} blk__kd_node;

struct blk_kdtree {
  int dim, nblocks, depth;
  blk_cbounds domain;
  int nnodes;          /* in use, up to 2 nblocks - 1 */
  blk__kd_node *nodes; /* the root is node 0 */
  int *leaf;           /* per gid: its node */
  blk_cbounds *boxes;  /* per gid: its box (filled in when the tree is complete) */
};

/* The key of a finite double: unsigned integers in the doubles' order. */
static inline uint64_t blk__kd_key(double x) {
  x += 0.0; /* -0.0 becomes +0.0 */
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return (u >> 63) ? ~u : u | ((uint64_t)1 << 63);
}

/* The double of a key. */
static inline double blk__kd_value(uint64_t k) {
  uint64_t u = (k >> 63) ? k & ~((uint64_t)1 << 63) : ~k;
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Whether x goes to the low child of a node with this cut. */
static inline int blk__kd_goes_low(const blk__kd_cut *c, const double *x, int dim) {
  int axis = c->axis;
  for (int i = 0; i < c->m; i++) {
    if (x[axis] < c->v[i]) return 1;
    if (x[axis] > c->v[i]) return 0;
    if (++axis == dim) axis = 0;
  }
  return c->incl;
}

/* The node a point reaches from the root: a leaf, or during the build the
 * unsplit node it lies in. */
static inline int blk__kd_descend(const blk_kdtree *t, const double *x) {
  int n = 0;
  while (t->nodes[n].child[0] >= 0)
    n = t->nodes[n].child[blk__kd_goes_low(&t->nodes[n].cut, x, t->dim) ? 0 : 1];
  return n;
}

/* A tree for nblocks blocks of dim coordinates over *domain, with only the
 * root (unsplit unless nblocks is 1). NULL without memory (no detail). */
blk_kdtree *blk__kd_tree_new(int dim, int nblocks, const blk_cbounds *domain, uint64_t points);

/* Splits unsplit node n with cut c, the low child counting low points and
 * the high one the rest. Returns the low child's index (the high one is
 * next). The tree has room: it was made for its block count. */
int blk__kd_tree_split(blk_kdtree *t, int n, const blk__kd_cut *c, uint64_t low);

/* The box of node n, from the domain and the cuts above it. */
void blk__kd_tree_node_box(const blk_kdtree *t, int n, blk_cbounds *box);

/* Once every node is split down to leaves: the leaves' gids and boxes, and
 * the depth. */
void blk__kd_tree_finish(blk_kdtree *t);

/* The midpoint of a < b, strictly above a and not above b. */
double blk__kd_between(double a, double b);

#endif
