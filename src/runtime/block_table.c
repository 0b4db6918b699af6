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
  for (int i = 0; i < b->nin; i++) blk_buffer_free(&b->in[i]);
  for (int i = 0; i < b->nout; i++) blk_buffer_free(&b->out[i]);
  free(b->in);
  free(b->out);
  free(b->in_gids);
  free(b->out_gids);
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

/* Makes room for cap queues on one side (in or out), keeping the n there. */
static int grow_side(blk_buffer **q, int **gids, blk__record **rec, int *cap, int n, int want) {
  if (want <= *cap) return BLK_OK;
  if (want > INT_MAX / 2) return BLK_ENOMEM;
  int ncap = *cap ? *cap : 4;
  while (ncap < want) ncap *= 2;
  size_t from = (size_t)n, to = (size_t)ncap;
  blk_buffer *nq = blk__realloc(*q, to * sizeof *nq);
  if (nq) *q = nq;
  int *ng = nq ? blk__realloc(*gids, to * sizeof *ng) : NULL;
  if (ng) *gids = ng;
  blk__record *nr = ng ? blk__realloc(*rec, to * sizeof *nr) : NULL;
  if (!nr) return BLK_ENOMEM;
  *rec = nr;
  memset(nq + from, 0, (to - from) * sizeof *nq);
  memset(nr + from, 0, (to - from) * sizeof *nr);
  *cap = ncap;
  return BLK_OK;
}

static int set_links(blk__block *b, const blk_link *links, int nlinks) {
  size_t n = (size_t)nlinks;
  b->nlinks = nlinks;
  if (nlinks == 0) return BLK_OK;
  b->links = blk__malloc(n * sizeof *b->links);
  b->link_gids = blk__malloc(n * sizeof *b->link_gids);
  b->keys = blk__malloc(n * sizeof *b->keys);
  if (!b->links || !b->link_gids || !b->keys ||
      grow_side(&b->in, &b->in_gids, &b->in_rec, &b->cap_in, 0, nlinks) ||
      grow_side(&b->out, &b->out_gids, &b->out_rec, &b->cap_out, 0, nlinks))
    return blk__fail(BLK_ENOMEM, "master: no memory for %d links of block %d", nlinks, b->gid);
  memcpy(b->links, links, n * sizeof *links);
  for (int i = 0; i < nlinks; i++) {
    b->link_gids[i] = b->in_gids[i] = b->out_gids[i] = links[i].gid;
    b->keys[i].code = direction_code(links[i].dir, 1);
    b->keys[i].rev_code = direction_code(links[i].dir, -1);
    b->keys[i].occ = 0;
    for (int j = 0; j < i; j++)
      if (links[j].gid == links[i].gid && b->keys[j].code == b->keys[i].code) b->keys[i].occ++;
  }
  b->nin = b->nout = nlinks;
  return BLK_OK;
}

int blk__block_open_out(blk__block *b, int gid) {
  /* A callback usually writes to one gid many times in a row: the last one
   * opened is looked at first. */
  if (b->nout > b->nlinks && b->out_gids[b->nout - 1] == gid) return b->nout - 1;
  for (int i = b->nlinks; i < b->nout; i++)
    if (b->out_gids[i] == gid) return i;
  if (grow_side(&b->out, &b->out_gids, &b->out_rec, &b->cap_out, b->nout, b->nout + 1))
    return blk__fail(BLK_ENOMEM, "gid %d has no memory for a queue to gid %d", b->gid, gid);
  int i = b->nout++;
  b->out_gids[i] = gid;
  return i;
}

int blk__block_open_in(blk__block *b, int gid) {
  int lo = b->nlinks, hi = b->nin; /* the first remote queue from a gid >= gid */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (b->in_gids[mid] < gid)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < b->nin && b->in_gids[lo] == gid) return lo;
  if (grow_side(&b->in, &b->in_gids, &b->in_rec, &b->cap_in, b->nin, b->nin + 1))
    return blk__fail(BLK_ENOMEM, "gid %d has no memory for a queue from gid %d", b->gid, gid);
  size_t after = (size_t)(b->nin - lo);
  memmove(&b->in[lo + 1], &b->in[lo], after * sizeof *b->in);
  memmove(&b->in_gids[lo + 1], &b->in_gids[lo], after * sizeof *b->in_gids);
  memmove(&b->in_rec[lo + 1], &b->in_rec[lo], after * sizeof *b->in_rec);
  blk_buffer_init(&b->in[lo]);
  memset(&b->in_rec[lo], 0, sizeof b->in_rec[lo]);
  b->in_gids[lo] = gid;
  b->nin++;
  return lo;
}

size_t blk__block_queued(const blk__block *b) {
  size_t n = 0;
  for (int i = 0; i < b->nin; i++) n += blk_buffer_remaining(&b->in[i]) + (size_t)b->in_rec[i].raw;
  return n;
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
