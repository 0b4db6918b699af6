/*
 * blk/link.h: a block's neighbours.
 *
 * A link names one neighbour of a block: its gid, its rank, and for links
 * made from a decomposer (regular links) the direction towards it, whether
 * the step crosses a periodic boundary, and its core bounds. A block's links
 * are the channels of a neighbour exchange: one message per link.
 *
 * Regular links cover every face, edge and corner neighbour: one link per
 * direction in {-1,0,1}^dim except all-zero. A direction that leaves the
 * domain on an axis without wrap gives no link; on a wrapped axis it wraps
 * around. With 1 or 2 divisions on a wrapped axis several directions reach
 * the same block (with 1 division, the block itself): each direction keeps
 * its own link, because a ghost exchange sends a distinct message per
 * direction. Links are symmetric: for every link of A to B in direction dir,
 * B has exactly one link to A in direction -dir (blk_link_find_reverse).
 */
#ifndef BLK_LINK_H
#define BLK_LINK_H

#include "blk/assigner.h"
#include "blk/bounds.h"
#include "blk/decomposer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One neighbour. Plain value. */
typedef struct blk_link {
  int gid;               /* the neighbour */
  int rank;              /* its rank (from the assigner) */
  int dir[BLK_MAX_DIM];  /* -1, 0, +1 per axis towards the neighbour; all 0 for a general link */
  int wrap[BLK_MAX_DIM]; /* -1/+1 if the link crosses the periodic boundary of that axis at
                            its low/high side, else 0 */
  blk_bounds bounds;     /* the neighbour's core bounds (discrete decomposer; else zero) */
  blk_cbounds cbounds;   /* the neighbour's core bounds (continuous decomposer; else zero) */
} blk_link;

/* The regular links of block gid of decomposer d, with ranks from assigner a.
 * Order: directions enumerated as offsets with axis 0 fastest, -1 before 0
 * before +1 (so in 2D: (-1,-1), (0,-1), (1,-1), (-1,0), (1,0), (-1,1), (0,1),
 * (1,1)), skipping those that leave a non-wrapped axis. Entries of dir and
 * wrap past dim are 0. On success *links is an array of *count links that
 * the caller owns and frees with blk_links_free (not free(): how blk
 * allocates it is its own business); a block without neighbours gets
 * *links = NULL and *count = 0. Returns 0, BLK_ENOMEM, BLK_EINVAL for NULL
 * arguments or an assigner whose block count differs from the decomposer's,
 * or BLK_ENOTFOUND for a gid outside 0..nblocks-1 (no such block), each
 * with a detail; on failure *links = NULL and *count = 0.
 * d and a are only read: any thread. At most 3^dim - 1 links. */
int blk_decomposer_links(const blk_decomposer *d, const blk_assigner *a, int gid, blk_link **links,
                         int *count);

/* Frees an array of links made by blk_decomposer_links; NULL does nothing.
 * The array must not be used afterwards. Any thread (it is the caller's). */
void blk_links_free(blk_link *links);

/* The index in links[0..count) of the link on which a message sent by
 * src_gid along its link direction src_dir arrives: the link whose gid is
 * src_gid and whose dir is -src_dir on axes 0..dim-1. Returns BLK_ENOTFOUND
 * (no detail: a miss is an answer) if there is none, including for count 0
 * (links may then be NULL); BLK_EINVAL, with a detail, for NULL links with
 * count > 0, count < 0, a NULL src_dir, or dim outside 0..BLK_MAX_DIM. Pure
 * function; any thread. */
int blk_link_find_reverse(const blk_link *links, int count, int src_gid, const int *src_dir,
                          int dim);

#ifdef __cplusplus
}
#endif
#endif
