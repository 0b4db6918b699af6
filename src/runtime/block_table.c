/*
 * block_table.c: a rank's block records; see block_table.h.
 *
 * Adding a block copies its links and works out, once, where each link's
 * messages land (the direction codes of blk__link_key), so that delivering
 * an exchange message is a scan of the receiver's few links.
 */
#include "runtime/block_table.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"

void blk__table_init(blk__table *t, const blk__block_fns *fns, int nranks) {
  memset(t, 0, sizeof *t);
  t->fns = *fns;
  t->nranks = nranks;
  blk__gid_map_init(&t->lids);
}

static void free_block(const blk__table *t, blk__block *b) {
  if (b->resident && b->data && t->fns.destroy) t->fns.destroy(b->data, b->gid, t->fns.user);
  for (int i = 0; i < b->nlinks; i++) {
    if (b->in) blk_buffer_free(&b->in[i]);
    if (b->out) blk_buffer_free(&b->out[i]);
  }
  free(b->in);
  free(b->out);
  free(b->in_rec);
  free(b->out_rec);
  blk_buffer_free(&b->held);
  free(b->links);
  free(b->link_gids);
  free(b->keys);
}

void blk__table_free(blk__table *t) {
  for (int i = 0; i < t->count; i++) free_block(t, &t->blocks[i]);
  free(t->blocks);
  blk__gid_map_free(&t->lids);
  memset(t, 0, sizeof *t);
}

static int32_t direction_code(const int *dir, int sign) {
  int32_t code = 0;
  for (int i = BLK_MAX_DIM - 1; i >= 0; i--) code = code * 3 + (sign * dir[i] + 1);
  return code;
}

static int check_links(const blk__table *t, int gid, const blk_link *links, int nlinks) {
  for (int i = 0; i < nlinks; i++) {
    if (links[i].gid < 0)
      return blk__fail(BLK_EINVAL, "master: block %d, link %d has gid %d", gid, i, links[i].gid);
    if (links[i].rank < 0 || links[i].rank >= t->nranks)
      return blk__fail(BLK_EINVAL,
                       "master: block %d, link %d (to gid %d) has rank %d, not in 0..%d", gid, i,
                       links[i].gid, links[i].rank, t->nranks - 1);
    for (int d = 0; d < BLK_MAX_DIM; d++)
      if (links[i].dir[d] < -1 || links[i].dir[d] > 1)
        return blk__fail(BLK_EINVAL, "master: block %d, link %d has dir[%d] = %d, not -1, 0 or 1",
                         gid, i, d, links[i].dir[d]);
  }
  return BLK_OK;
}

static int set_links(blk__block *b, const blk_link *links, int nlinks) {
  size_t n = (size_t)nlinks;
  b->nlinks = nlinks;
  if (nlinks == 0) return BLK_OK;
  b->links = blk__malloc(n * sizeof *b->links);
  b->link_gids = blk__malloc(n * sizeof *b->link_gids);
  b->keys = blk__malloc(n * sizeof *b->keys);
  b->in = blk__calloc(n, sizeof *b->in);
  b->out = blk__calloc(n, sizeof *b->out);
  b->in_rec = blk__calloc(n, sizeof *b->in_rec);
  b->out_rec = blk__calloc(n, sizeof *b->out_rec);
  if (!b->links || !b->link_gids || !b->keys || !b->in || !b->out || !b->in_rec || !b->out_rec)
    return blk__fail(BLK_ENOMEM, "master: no memory for %d links of block %d", nlinks, b->gid);
  memcpy(b->links, links, n * sizeof *links);
  for (int i = 0; i < nlinks; i++) {
    b->link_gids[i] = links[i].gid;
    b->keys[i].code = direction_code(links[i].dir, 1);
    b->keys[i].rev_code = direction_code(links[i].dir, -1);
    b->keys[i].occ = 0;
    for (int j = 0; j < i; j++)
      if (links[j].gid == links[i].gid && b->keys[j].code == b->keys[i].code) b->keys[i].occ++;
  }
  return BLK_OK;
}

int blk__table_add(blk__table *t, int gid, void *data, const blk_link *links, int nlinks) {
  if (gid < 0) return blk__fail(BLK_EINVAL, "master: add: gid = %d is negative", gid);
  if (nlinks < 0 || (nlinks > 0 && !links))
    return blk__fail(BLK_EINVAL, "master: add: block %d has nlinks = %d and links %s", gid, nlinks,
                     links ? "given" : "NULL");
  if (blk__table_lid(t, gid) >= 0)
    return blk__fail(BLK_EINVAL, "master: add: gid %d is already on this rank", gid);
  int rc = check_links(t, gid, links, nlinks);
  if (rc) return rc;
  if (t->count == t->cap) {
    if (t->cap > INT_MAX / 2)
      return blk__fail(BLK_ENOMEM, "master: add: %d blocks on one rank are too many", t->count);
    int ncap = t->cap ? 2 * t->cap : 8;
    blk__block *grown = blk__realloc(t->blocks, (size_t)ncap * sizeof *grown);
    if (!grown) return blk__fail(BLK_ENOMEM, "master: no memory for %d blocks", ncap);
    t->blocks = grown;
    t->cap = ncap;
  }
  blk__block *b = &t->blocks[t->count];
  memset(b, 0, sizeof *b);
  b->gid = gid;
  blk__values_none_posted(&b->posts);
  rc = set_links(b, links, nlinks);
  if (!rc) rc = blk__gid_map_put(&t->lids, gid, t->count);
  if (rc) {
    free_block(t, b); /* not resident: the caller keeps data */
    return rc;
  }
  b->data = data;
  b->resident = 1;
  return t->count++;
}
