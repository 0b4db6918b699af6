/*
 * link.c: regular links of a block from a decomposer and an assigner.
 *
 * Directions are the 3^dim - 1 nonzero offsets in {-1,0,1}^dim, read as base-3
 * digits with axis 0 least significant, so they come out axis 0 fastest and
 * -1 before 0 before +1. A step off a wrapped axis comes back on the other
 * side and records the crossing in wrap[]; a step off an axis without wrap
 * drops the direction. Each direction keeps its own link even when several
 * reach the same block. Built only from the decomposer's and assigner's
 * public queries; no state, no locking.
 */
#include "blk/link.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"

/* The neighbour of coords c in direction number k; 0 if it leaves the domain. */
static int step(const blk_decomposer *d, const int *div, const int *c, int k, blk_link *l) {
  int dim = blk_decomposer_dim(d);
  int nc[BLK_MAX_DIM];
  for (int a = 0; a < dim; a++) {
    int dir = k % 3 - 1;
    k /= 3;
    l->dir[a] = dir;
    l->wrap[a] = 0;
    nc[a] = c[a] + dir;
    if (nc[a] < 0 || nc[a] >= div[a]) {
      if (!blk_decomposer_wrap(d, a)) return 0;
      nc[a] = nc[a] < 0 ? div[a] - 1 : 0;
      l->wrap[a] = dir;
    }
  }
  l->gid = blk_decomposer_coords_to_gid(d, nc);
  return 1;
}

int blk_decomposer_links(const blk_decomposer *d, const blk_assigner *a, int gid, blk_link **links,
                         int *count) {
  int rc = 0, n = 0, total = 1;
  blk_link *out = NULL;
  if (links) *links = NULL;
  if (count) *count = 0;
  if (!d || !a || !links || !count) return blk__fail(BLK_EINVAL, "links: NULL argument");
  int nblocks = blk_decomposer_nblocks(d);
  if (blk_assigner_nblocks(a) != nblocks)
    return blk__fail(BLK_EINVAL, "links: the assigner has %d blocks, the decomposer %d",
                     blk_assigner_nblocks(a), nblocks);
  if (gid < 0 || gid >= nblocks)
    return blk__fail(BLK_ENOTFOUND, "links: gid %d is outside 0..%d", gid, nblocks - 1);

  int dim = blk_decomposer_dim(d), continuous = blk_decomposer_is_continuous(d);
  int div[BLK_MAX_DIM], c[BLK_MAX_DIM];
  blk_decomposer_divisions(d, div);
  blk_decomposer_gid_to_coords(d, gid, c);
  for (int i = 0; i < dim; i++) total *= 3;
  int self = (total - 1) / 2; /* the all-zero offset */

  blk_link l;
  for (int k = 0; k < total; k++)
    if (k != self && step(d, div, c, k, &l)) n++;
  if (n == 0) return 0; /* no neighbours: *links = NULL, *count = 0 */
  out = blk__malloc((size_t)n * sizeof *out);
  if (!out) {
    rc = blk__fail(BLK_ENOMEM, "links: no memory for %d links of gid %d", n, gid);
    goto fail;
  }
  n = 0;
  for (int k = 0; k < total; k++) {
    memset(&l, 0, sizeof l);
    if (k == self || !step(d, div, c, k, &l)) continue;
    l.rank = blk_assigner_rank(a, l.gid);
    rc = continuous ? blk_decomposer_block_cbounds(d, l.gid, &l.cbounds, NULL)
                    : blk_decomposer_block_bounds(d, l.gid, &l.bounds, NULL);
    if (rc) goto fail;
    out[n++] = l;
  }
  *links = out;
  *count = n;
  return 0;
fail:
  free(out);
  return rc;
}

void blk_links_free(blk_link *links) {
  free(links);
}

int blk_link_find_reverse(const blk_link *links, int count, int src_gid, const int *src_dir,
                          int dim) {
  if ((!links && count > 0) || count < 0 || !src_dir)
    return blk__fail(BLK_EINVAL, "links: find_reverse with a NULL argument or count = %d", count);
  if (dim < 0 || dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "links: find_reverse: dim = %d is outside 0..%d", dim,
                     BLK_MAX_DIM);
  for (int i = 0; i < count; i++) {
    if (links[i].gid != src_gid) continue;
    int a = 0;
    while (a < dim && links[i].dir[a] == -src_dir[a]) a++;
    if (a == dim) return i;
  }
  return BLK_ENOTFOUND; /* an answer, not a failure: no detail */
}
