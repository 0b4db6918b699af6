/*
 * kdtree_tree.c: the k-d tree object and its queries (blk/kdtree.h); the
 * build is kdtree.c.
 *
 * A tree of B blocks has 2B - 1 nodes: B leaves and B - 1 splits. Boxes are
 * kept per leaf only; a node's box is the domain cut by its ancestors' cuts
 * (low children end at the cut's first value on its axis, high children
 * start there), which the link search recomputes on its way down.
 *
 * Links: a block's neighbours are the leaves whose closed box meets its
 * own. The search descends from the root into every child whose box meets
 * it, so it visits the paths to the neighbours and nothing else. A link's
 * dir compares the two boxes axis by axis, a rule that gives the reverse
 * link exactly -dir (see link_dir).
 *
 * Read-only after the build: any number of threads may query a tree.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "collectives/kdtree_tree.h"

blk_kdtree *blk__kd_tree_new(int dim, int nblocks, const blk_cbounds *domain, uint64_t points) {
  blk_kdtree *t = blk__calloc(1, sizeof *t);
  if (!t) return NULL;
  size_t n = (size_t)nblocks;
  t->dim = dim;
  t->nblocks = nblocks;
  t->domain = *domain;
  t->nodes = blk__malloc((2 * n - 1) * sizeof *t->nodes);
  t->leaf = blk__malloc(n * sizeof *t->leaf);
  t->boxes = blk__malloc(n * sizeof *t->boxes);
  if (!t->nodes || !t->leaf || !t->boxes) {
    blk_kdtree_destroy(t);
    return NULL;
  }
  memset(&t->nodes[0], 0, sizeof t->nodes[0]);
  t->nodes[0].first = 0;
  t->nodes[0].count = nblocks;
  t->nodes[0].child[0] = t->nodes[0].child[1] = -1;
  t->nodes[0].parent = -1;
  t->nodes[0].points = points;
  t->nnodes = 1;
  return t;
}

int blk__kd_tree_split(blk_kdtree *t, int n, const blk__kd_cut *c, uint64_t low) {
  blk__kd_node *p = &t->nodes[n];
  int lo = t->nnodes;
  int nlo = p->count / 2;
  for (int s = 0; s < 2; s++) {
    blk__kd_node *ch = &t->nodes[lo + s];
    memset(ch, 0, sizeof *ch);
    ch->first = s ? p->first + nlo : p->first;
    ch->count = s ? p->count - nlo : nlo;
    ch->child[0] = ch->child[1] = -1;
    ch->parent = n;
    ch->depth = p->depth + 1;
    ch->points = s ? p->points - low : low;
  }
  p->cut = *c;
  p->child[0] = lo;
  p->child[1] = lo + 1;
  t->nnodes += 2;
  return lo;
}

void blk__kd_tree_node_box(const blk_kdtree *t, int n, blk_cbounds *box) {
  *box = t->domain;
  for (int c = n, p = t->nodes[n].parent; p >= 0; c = p, p = t->nodes[p].parent) {
    const blk__kd_cut *cut = &t->nodes[p].cut;
    int a = cut->axis;
    if (t->nodes[p].child[0] == c) {
      if (cut->v[0] < box->max[a]) box->max[a] = cut->v[0];
    } else if (cut->v[0] > box->min[a]) {
      box->min[a] = cut->v[0];
    }
  }
}

void blk__kd_tree_finish(blk_kdtree *t) {
  t->depth = 0;
  for (int n = 0; n < t->nnodes; n++) {
    const blk__kd_node *nd = &t->nodes[n];
    if (nd->child[0] >= 0) continue;
    t->leaf[nd->first] = n;
    blk__kd_tree_node_box(t, n, &t->boxes[nd->first]);
    if (nd->depth > t->depth) t->depth = nd->depth;
  }
}

void blk_kdtree_destroy(blk_kdtree *t) {
  if (!t) return;
  free(t->nodes);
  free(t->leaf);
  free(t->boxes);
  free(t);
}

int blk_kdtree_dim(const blk_kdtree *t) {
  return t ? t->dim : 0;
}

int blk_kdtree_nblocks(const blk_kdtree *t) {
  return t ? t->nblocks : 0;
}

int blk_kdtree_depth(const blk_kdtree *t) {
  return t ? t->depth : 0;
}

int blk_kdtree_domain(const blk_kdtree *t, blk_cbounds *domain) {
  if (!t || !domain) return blk__fail(BLK_EINVAL, "kdtree: domain: NULL argument");
  *domain = t->domain;
  return 0;
}

static int check_gid(const blk_kdtree *t, int gid, const void *out, const char *what) {
  if (!t || !out) return blk__fail(BLK_EINVAL, "kdtree: %s: NULL argument", what);
  if (gid < 0 || gid >= t->nblocks)
    return blk__fail(BLK_ENOTFOUND, "kdtree: %s: gid %d is outside 0..%d", what, gid,
                     t->nblocks - 1);
  return 0;
}

int blk_kdtree_block_bounds(const blk_kdtree *t, int gid, blk_cbounds *core) {
  int rc = check_gid(t, gid, core, "block_bounds");
  if (!rc) *core = t->boxes[gid];
  return rc;
}

int blk_kdtree_block_points(const blk_kdtree *t, int gid, uint64_t *count) {
  int rc = check_gid(t, gid, count, "block_points");
  if (!rc) *count = t->nodes[t->leaf[gid]].points;
  return rc;
}

int blk_kdtree_point_to_gid(const blk_kdtree *t, const double *pt) {
  if (!t || !pt) return blk__fail(BLK_EINVAL, "kdtree: point_to_gid: NULL argument");
  if (!blk_cbounds_contains(&t->domain, pt)) return BLK_ENOTFOUND; /* also NaN; no detail */
  return t->nodes[blk__kd_descend(t, pt)].first;
}

/* ---- links ------------------------------------------------------------- */

static int meets(const blk_cbounds *a, const blk_cbounds *b) {
  for (int i = 0; i < a->dim; i++)
    if (a->min[i] > b->max[i] || b->min[i] > a->max[i]) return 0;
  return 1;
}

/* Towards box b from box a, on each axis: +1 if b starts where a ends and
 * extends past a's start (it lies above), -1 in the mirror case, else 0.
 * Swapping a and b swaps the two conditions, so the reverse is -dir; both
 * cannot hold at once (that would need a and b to be one point on the
 * axis, which fails "extends past"). */
static void link_dir(const blk_cbounds *a, const blk_cbounds *b, int *dir) {
  memset(dir, 0, BLK_MAX_DIM * sizeof *dir);
  for (int i = 0; i < a->dim; i++) {
    if (b->min[i] == a->max[i] && b->max[i] > a->min[i])
      dir[i] = 1;
    else if (b->max[i] == a->min[i] && b->min[i] < a->max[i])
      dir[i] = -1;
  }
}

typedef struct link_walk {
  const blk_kdtree *t;
  const blk_assigner *a;
  int gid;
  const blk_cbounds *box;
  blk_link *out; /* NULL: count only */
  int n;
} link_walk;

/* Low children first, so the gids come out ascending. */
static void walk(link_walk *w, int n, blk_cbounds *box) {
  const blk__kd_node *nd = &w->t->nodes[n];
  if (nd->child[0] < 0) {
    if (nd->first == w->gid) return;
    if (w->out) {
      blk_link *l = &w->out[w->n];
      memset(l, 0, sizeof *l);
      l->gid = nd->first;
      l->rank = blk_assigner_rank(w->a, nd->first);
      l->cbounds = w->t->boxes[nd->first];
      link_dir(w->box, &l->cbounds, l->dir);
    }
    w->n++;
    return;
  }
  int axis = nd->cut.axis;
  double v = nd->cut.v[0], lo = box->min[axis], hi = box->max[axis];
  box->max[axis] = v;
  if (meets(box, w->box)) walk(w, nd->child[0], box);
  box->max[axis] = hi;
  box->min[axis] = v;
  if (meets(box, w->box)) walk(w, nd->child[1], box);
  box->min[axis] = lo;
}

int blk_kdtree_links(const blk_kdtree *t, const blk_assigner *a, int gid, blk_link **links,
                     int *count) {
  if (links) *links = NULL;
  if (count) *count = 0;
  if (!t || !a || !links || !count) return blk__fail(BLK_EINVAL, "kdtree: links: NULL argument");
  if (blk_assigner_nblocks(a) != t->nblocks)
    return blk__fail(BLK_EINVAL, "kdtree: links: the assigner has %d blocks, the tree %d",
                     blk_assigner_nblocks(a), t->nblocks);
  if (gid < 0 || gid >= t->nblocks)
    return blk__fail(BLK_ENOTFOUND, "kdtree: links: gid %d is outside 0..%d", gid, t->nblocks - 1);
  link_walk w = {t, a, gid, &t->boxes[gid], NULL, 0};
  blk_cbounds box = t->domain;
  walk(&w, 0, &box);
  if (w.n == 0) return 0;
  w.out = blk__malloc((size_t)w.n * sizeof *w.out);
  if (!w.out)
    return blk__fail(BLK_ENOMEM, "kdtree: links: no memory for %d links of gid %d", w.n, gid);
  w.n = 0;
  walk(&w, 0, &box);
  *links = w.out;
  *count = w.n;
  return 0;
}
