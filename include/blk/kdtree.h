/*
 * blk/kdtree.h: a k-d tree decomposition of points, over any block count.
 *
 * blk_kdtree_create cuts a continuous domain into the master's nblocks
 * blocks (any count: 7, 13, 38, ...) so that each block gets as nearly as
 * possible the same number of the points the blocks hold, moves every point
 * to the block that now owns it, and returns the tree: each block's box,
 * which block owns a point, and each block's links to every block whose box
 * touches its own (docs/kdtree.md).
 *
 * The tree. A node owning n blocks (gids first..first+n-1) splits into a low
 * child of n_lo = floor(n/2) blocks and a high child of n - n_lo, along one
 * axis, at the quantile n_lo/n of its points, so uneven splits stay
 * balanced (a node of 7 blocks puts 3/7 of its points low). The axis is the
 * longest extent of the node's box (ties: the lowest axis), or, with
 * BLK_KDTREE_ROUND_ROBIN, depth mod dim as DIY's kdtree does. Leaves are the
 * gids in order, so the low child's gids are below the high child's.
 *
 * The cut and its tie rule. Within a node splitting along axis a, points are
 * ordered by their coordinates read from axis a on, cyclically: (x[a],
 * x[a+1], ..., x[a-1]), compared lexicographically. A cut is a point of that
 * order: a point strictly before it goes low, a point after it high, and a
 * point equal to it on every compared coordinate goes the side the cut says.
 * So points sharing the cut coordinate x[a] are split by their other
 * coordinates, and many equal coordinates still balance; only points equal
 * in every coordinate cannot be told apart (they all go one side: the side
 * nearer the quantile). A block's box is closed; the plane x[a] = cut
 * belongs to both children's boxes, and each point on it to exactly one.
 *
 * Balance. EXACT finds each quantile exactly (histogram refinement with
 * all-reduced counts): with no two points equal in every coordinate and at
 * least as many points N as blocks B, every block gets floor(N/B) or
 * ceil(N/B) points. SAMPLED takes the quantiles from a seeded random sample
 * of spec.samples points per block, gathered to every rank: cheaper, and as
 * balanced as the sample is large (docs/kdtree.md has the figures).
 *
 * Results do not depend on the number of ranks or threads: the same points
 * in the same gids give the same tree, bit for bit.
 *
 * A tree is read-only after create: any thread may query it at once. It
 * knows nothing of MPI or the master once made.
 */
#ifndef BLK_KDTREE_H
#define BLK_KDTREE_H

#include <stddef.h>
#include <stdint.h>

#include "blk/assigner.h"
#include "blk/bounds.h"
#include "blk/link.h"
#include "blk/master.h"
#include "blk/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque; read-only after create, safe to query from any number of threads. */
typedef struct blk_kdtree blk_kdtree;

/* A block's points: *records is its first record and *count how many there
 * are, each spec.record_size bytes after the last, with spec.dim
 * coordinates of spec.coord_type at spec.coord_offset bytes into each (they
 * may be unaligned). The records need to stay valid and unchanged only until
 * the callback's next return to blk, and must be the same ones every time
 * blk asks during one create (blk asks several times; out of core, after
 * loading the block). Called on pool threads or the master's thread, one
 * call per block at a time; it must not call MPI or blk_master_*. Returns 0,
 * or a code of the program's own, which fails the create (BLK_ECALLBACK on
 * every rank, naming it). */
typedef int (*blk_kdtree_points_fn)(void *block, int gid, const void **records, size_t *count,
                                    void *user);

/* The block's points after the move: count records (NULL when count is 0),
 * in order of the gid they came from, then of their order there. The block
 * should replace the points it held with these (copy them: records is valid
 * during the call only; it is aligned as malloc aligns). Called once for
 * every block, on pool threads or the master's thread. Returns 0 or a code
 * of the program's own (BLK_ECALLBACK on every rank, naming it). */
typedef int (*blk_kdtree_take_fn)(void *block, int gid, const void *records, size_t count,
                                  void *user);

/* How the quantiles are found. */
typedef enum blk_kdtree_method {
  BLK_KDTREE_EXACT = 0,  /* every point counted: histogram refinement, all-reduces */
  BLK_KDTREE_SAMPLED = 1 /* from spec.samples points per block, gathered to every rank */
} blk_kdtree_method;

/* Which axis a node splits along. */
typedef enum blk_kdtree_axis_rule {
  BLK_KDTREE_LONGEST = 0,    /* the longest extent of the node's box; ties: the lowest */
  BLK_KDTREE_ROUND_ROBIN = 1 /* depth mod dim (DIY's rule) */
} blk_kdtree_axis_rule;

/* What blk_kdtree_create builds and from what. Start from
 * BLK_KDTREE_SPEC_INIT (or blk_kdtree_spec_init) and set at least dim,
 * record_size, coord_offset, coord_type and points. It grows like
 * blk_master_config: version names the layout the program was built with,
 * and new fields only go at the end. Every rank passes the same values (the
 * callbacks and user excepted); create checks that the rest agree. */
typedef struct blk_kdtree_spec {
  unsigned int version;        /* BLK_KDTREE_SPEC_VERSION, set by the initialisers */
  int dim;                     /* coordinates per point, 1..BLK_MAX_DIM */
  size_t record_size;          /* bytes from one record to the next, >= 1 */
  size_t coord_offset;         /* where the coordinates start in a record */
  blk_type coord_type;         /* BLK_DOUBLE or BLK_FLOAT */
  blk_kdtree_points_fn points; /* a block's points (required) */
  blk_kdtree_take_fn take;     /* the block's points after the move; NULL: nothing moves */
  void *user;                  /* passed to points and take */
  const blk_cbounds *domain;   /* copied; NULL: the bounding box of all the points */
  blk_kdtree_method method;
  blk_kdtree_axis_rule axis;
  int bins;       /* EXACT: histogram bins per node per round, 2..65536; 0: 256 */
  size_t samples; /* SAMPLED: points drawn per block, >= 1; 0: 256 */
  uint64_t seed;  /* SAMPLED: which sample (the same seed, the same tree) */
  int k;          /* radix of the all-to-all move; 0: blk_partners_choose's */
  int contiguous; /* its order when k is given: 1 contiguous, 0 halving */
} blk_kdtree_spec;

/* The layout of blk_kdtree_spec in this header. */
#define BLK_KDTREE_SPEC_VERSION 1u

/* clang-format off */
#define BLK_KDTREE_SPEC_INIT                                                               \
  { BLK_KDTREE_SPEC_VERSION, 0, 0, 0, BLK_DOUBLE, NULL, NULL, NULL, NULL, BLK_KDTREE_EXACT, \
    BLK_KDTREE_LONGEST, 0, 0, 0, 0, 1 }
/* clang-format on */

/* Sets *spec to the defaults of layout version, as BLK_KDTREE_SPEC_INIT
 * does. Returns 0, or BLK_EINVAL for a NULL spec or a version this blk does
 * not know. Any thread. */
int blk_kdtree_spec_init(blk_kdtree_spec *spec, unsigned int version);

/* Builds the tree over the blocks of assigner a (nblocks = the assigner's
 * block count, which need not be a power of two) from the points of every
 * block of master m, and, if spec->take is set, moves every point to its
 * block (one blk_all_to_all). On success *out owns the tree on every rank
 * (the same tree everywhere); free it with blk_kdtree_destroy.
 *
 * Collective over m's communicator, like blk_reduce: every rank calls it
 * (also a rank without blocks), with the same spec, and every rank returns
 * the same code with the same detail; on failure *out is NULL everywhere.
 * The master's memory budget applies: out of core the blocks are loaded for
 * each pass over the points. Every block the assigner puts on a rank must be
 * in that rank's master, and no other.
 * Errors: BLK_EINVAL (a NULL out, a or spec, or a spec this blk does not
 * know: dim outside 1..BLK_MAX_DIM, record_size 0, coordinates past the end
 * of a record, a coord_type other than BLK_DOUBLE or BLK_FLOAT, no points
 * callback, a domain of another dim or with NaN, infinite or reversed
 * bounds, bins or samples out of range, k of 1 or contiguous not 0 or 1; the
 * assigner for another communicator size; specs that differ between ranks;
 * points outside the domain, or with a NaN or infinite coordinate (the
 * detail names the first, by gid and index); no points and no domain; a
 * block missing from or foreign to a rank's master; a points callback that
 * gives other points than before), BLK_ECALLBACK (points or take returned
 * non-zero; the detail names the code), BLK_ENOMEM, and what the master's
 * collectives return (BLK_EIO, BLK_ECORRUPT out of core; BLK_EMPI). Any of
 * these, found on one rank, is returned on all of them. A NULL m returns
 * BLK_EINVAL on that rank only (there is no communicator to agree on).
 * MPI failing inside one of create's own collectives stops the job.
 *
 * Blocks after a failure: a failure before the move leaves every block's
 * points as they were. The move is one blk_all_to_all: if it fails (every
 * rank returns its code), the blocks whose take ran hold their new points,
 * the others their old ones, so some points may be in two blocks or none.
 *
 * Cost (docs/kdtree.md): EXACT, 1 + R passes over the points, R being 3
 * or 4 rounds per level of the tree (ceil(log2 nblocks) levels), each a
 * blk_master_foreach and an all-reduce of 24 bytes per bin of the level's
 * nodes; SAMPLED, one pass and one all-gather of the sample; then the
 * move. */
int blk_kdtree_create(blk_kdtree **out, blk_master *m, const blk_assigner *a,
                      const blk_kdtree_spec *spec);

/* Frees a tree; NULL does nothing. No other thread may be using it. */
void blk_kdtree_destroy(blk_kdtree *t);

/* The number of coordinates, the number of blocks, and the depth of the
 * tree (ceil(log2 nblocks): the most splits from the domain to a block);
 * 0 for a NULL tree. Any thread. */
int blk_kdtree_dim(const blk_kdtree *t);
int blk_kdtree_nblocks(const blk_kdtree *t);
int blk_kdtree_depth(const blk_kdtree *t);

/* The domain the tree cuts (spec.domain, or the points' bounding box).
 * Returns 0, or BLK_EINVAL for a NULL argument. Any thread. */
int blk_kdtree_domain(const blk_kdtree *t, blk_cbounds *domain);

/* Block gid's box (closed; the boxes tile the domain, touching in faces).
 * Returns 0, BLK_ENOTFOUND for a gid outside 0..nblocks-1, or BLK_EINVAL
 * for a NULL argument; each with a detail. Any thread. */
int blk_kdtree_block_bounds(const blk_kdtree *t, int gid, blk_cbounds *core);

/* How many points the build sent to block gid, in *count: EXACT, the
 * number it received (counted, not estimated); SAMPLED, the sample's
 * estimate. Returns 0, BLK_ENOTFOUND or BLK_EINVAL as block_bounds. */
int blk_kdtree_block_points(const blk_kdtree *t, int gid, uint64_t *count);

/* The block that owns the point pt[0..dim): the one the build sent such a
 * point to (the tie rule above decides points on a cut). BLK_ENOTFOUND (no
 * detail: a miss is an answer) if pt is outside the domain or has a NaN
 * coordinate; BLK_EINVAL, with a detail, for a NULL t or pt. Any thread.
 * Cost: O(depth) comparisons, at most dim each. */
int blk_kdtree_point_to_gid(const blk_kdtree *t, const double *pt);

/* The links of block gid: one to every other block whose closed box
 * touches gid's (a face, an edge or a corner), in ascending gid order, with
 * ranks from assigner a. dir[axis] is +1 where the neighbour lies above
 * (its box starts where gid's ends and extends past it), -1 where it lies
 * below, 0 where the two extents overlap, so the reverse link has -dir and
 * the links are symmetric, as blk_master_exchange needs; wrap is 0, bounds
 * zero and cbounds the neighbour's box. Add them with blk_master_add to
 * exchange over the tree. On success *links is an array of *count links
 * the caller frees with blk_links_free (NULL and 0 for a lone block).
 * Returns 0, BLK_ENOMEM, BLK_EINVAL (NULL arguments, an assigner of another
 * block count) or BLK_ENOTFOUND (gid outside 0..nblocks-1), each with a
 * detail; on failure *links = NULL and *count = 0. Any thread. Cost:
 * O(depth) per link found, plus the branches that touch gid's box. */
int blk_kdtree_links(const blk_kdtree *t, const blk_assigner *a, int gid, blk_link **links,
                     int *count);

#ifdef __cplusplus
}
#endif
#endif
