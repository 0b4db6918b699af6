/*
 * blk/decomposer.h: a regular grid of blocks over a domain.
 *
 * A decomposer cuts a domain (a discrete blk_bounds or a continuous
 * blk_cbounds) into nblocks blocks arranged as a grid with divisions[a] blocks
 * along axis a. A block's global id (gid, 0..nblocks-1) and its grid
 * coordinates convert with axis 0 fastest:
 *     gid = c[0] + divisions[0] * (c[1] + divisions[1] * (c[2] + ...)).
 *
 * Splitting an axis. Discrete, with n = max - min + 1 cells and d divisions:
 * block i starts at from_i = min + floor(n * i / d) and ends at from_{i+1} - 1,
 * so sizes differ by at most one cell. With share_face[a] every block but the
 * last also takes the first cell of the next block (neighbours share the
 * boundary cell). Continuous: from_i = min + (max - min) * i / d, and block i
 * is [from_i, from_{i+1}], the last one ending exactly at max.
 *
 * Ghosted bounds are the core extended by ghosts[a] cells (discrete) or
 * ghost_width[a] (continuous) on each side; clamped to the domain on an axis
 * without wrap, and not clamped on a wrapped (periodic) axis, where they
 * extend past the domain.
 *
 * Ownership. Every point of the domain has exactly one owner: discrete, the
 * block whose core without the shared face holds the cell; continuous, the
 * block i with from_i <= x < from_{i+1}, the last block closed at max.
 *
 * Chosen divisions. Entries of divisions left 0 are chosen by blk:
 *   1. nblocks divided by the product of the given divisions is factored into
 *      primes;
 *   2. the primes, largest first, each go to the free axis whose blocks are
 *      currently longest (domain extent / divisions so far: cells for a
 *      discrete axis, length for a continuous one; ties go to the lowest
 *      axis). A discrete axis never gets more divisions than cells: if
 *      following this order would end with a prime that fits no axis, the
 *      choices are searched depth first in the same order and the first
 *      assignment that fits is taken (so a 3x8-cell domain with 24 blocks
 *      gets 3x8); if none fits, create fails;
 *   3. free axes with equal domain extents then swap their counts so that a
 *      lower axis never has fewer divisions than a higher one (this changes
 *      no block's shape, only which axis is which).
 * So a 100x100 domain with 12 blocks gets 4x3, with 7 blocks 7x1, with 44
 * blocks 11x4; a cube with 8 blocks 2x2x2; 1D always nblocks.
 *
 * Errors of the queries. BLK_EINVAL means the call itself is wrong, whatever
 * the decomposer holds: a NULL argument, a query of the other kind (say
 * cpoint_to_gid of a discrete decomposer), a negative max. BLK_ENOTFOUND
 * means the call is well formed but names nothing: a point outside the
 * domain (or NaN), a gid outside 0..nblocks-1, grid coordinates outside the
 * grid. Both are negative, so `< 0` still separates a gid from a failure.
 * The point and coordinate lookups return BLK_ENOTFOUND without a detail
 * (a miss is an ordinary answer in a loop over points, and costs what a hit
 * does); every other error sets one for blk_last_error().
 *
 * A decomposer is read-only after create: any number of threads may query
 * the same one at once. Only create and destroy allocate.
 */
#ifndef BLK_DECOMPOSER_H
#define BLK_DECOMPOSER_H

#include <stdint.h>

#include "blk/bounds.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque; read-only after create, safe to query from any number of threads. */
typedef struct blk_decomposer blk_decomposer;

/* Optional settings, per axis; entries past the domain's dim are ignored.
 * Start from BLK_DECOMPOSER_CONFIG_INIT (or blk_decomposer_config_init): all
 * zero but the version (divisions chosen, no shared faces, no wrap, no
 * ghosts). The struct grows like blk_master_config: version names the
 * layout the program was built with, and new fields only go at the end. */
typedef struct blk_decomposer_config {
  unsigned int version;            /* BLK_DECOMPOSER_CONFIG_VERSION, set by the initialisers */
  int divisions[BLK_MAX_DIM];      /* 0 = chosen by blk; given ones are kept */
  int share_face[BLK_MAX_DIM];     /* discrete: neighbouring blocks share the boundary cell */
  int wrap[BLK_MAX_DIM];           /* nonzero: the axis is periodic */
  int64_t ghosts[BLK_MAX_DIM];     /* discrete: ghost cells added on each side */
  double ghost_width[BLK_MAX_DIM]; /* continuous: ghost length added on each side */
} blk_decomposer_config;

/* The layout of blk_decomposer_config in this header. */
#define BLK_DECOMPOSER_CONFIG_VERSION 1u

/* clang-format off */
#define BLK_DECOMPOSER_CONFIG_INIT {BLK_DECOMPOSER_CONFIG_VERSION, {0}, {0}, {0}, {0}, {0}}
/* clang-format on */

/* Sets *cfg to the defaults of layout version, as BLK_DECOMPOSER_CONFIG_INIT
 * does. Returns 0, or BLK_EINVAL for a NULL cfg or a version this blk does
 * not know. Any thread. */
int blk_decomposer_config_init(blk_decomposer_config *cfg, unsigned int version);

/* Creates a decomposer of the discrete domain *domain into nblocks blocks.
 * cfg may be NULL for the defaults; domain and cfg are copied, not kept.
 * On success *out owns a new decomposer (free it with blk_decomposer_destroy).
 * Returns 0, BLK_ENOMEM, or BLK_EINVAL with a detail naming the value for:
 * a NULL out or domain, a config version this blk does not know (0 is what
 * a config cleared by hand has), dim outside 1..BLK_MAX_DIM, nblocks < 1, min > max, a
 * negative division, given divisions whose product passes INT_MAX or does
 * not divide nblocks (or, when all are given, does not equal it), more
 * divisions than cells on an axis (including when no choice of divisions
 * fits), negative ghosts, ghost_width set (it is for continuous domains; use
 * ghosts), or ghosts on a wrapped axis that would take the ghosted bounds
 * past the int64 range. On failure *out is set to NULL. The decomposer is
 * O(1) in memory whatever nblocks (up to INT_MAX), so BLK_ENOMEM is only for
 * its own few hundred bytes. Any thread. */
int blk_decomposer_create(blk_decomposer **out, const blk_bounds *domain, int nblocks,
                          const blk_decomposer_config *cfg);

/* The same for a continuous domain. Besides the errors above: NaN or infinite
 * bounds, a non-finite extent (max - min overflows), ghosts or share_face set
 * (discrete-only settings), a NaN, infinite or negative ghost_width, or a
 * ghost_width that takes the ghosted bounds of a wrapped axis out of the
 * finite doubles. */
int blk_decomposer_create_continuous(blk_decomposer **out, const blk_cbounds *domain, int nblocks,
                                     const blk_decomposer_config *cfg);

/* Frees a decomposer; NULL does nothing. No other thread may be using it. */
void blk_decomposer_destroy(blk_decomposer *d);

/* The number of dimensions, 1..BLK_MAX_DIM. */
int blk_decomposer_dim(const blk_decomposer *d);

/* The number of blocks. */
int blk_decomposer_nblocks(const blk_decomposer *d);

/* 1 if the domain is continuous (made by blk_decomposer_create_continuous). */
int blk_decomposer_is_continuous(const blk_decomposer *d);

/* Writes the divisions (given and chosen) to divisions[0..dim). */
void blk_decomposer_divisions(const blk_decomposer *d, int *divisions);

/* 1 if axis is wrapped (periodic), 0 otherwise or for an axis outside 0..dim-1. */
int blk_decomposer_wrap(const blk_decomposer *d, int axis);

/* The effective settings: the config as given, with the chosen divisions
 * filled in, entries past dim zero and this header's version. */
void blk_decomposer_get_config(const blk_decomposer *d, blk_decomposer_config *cfg);

/* The domain, for a discrete decomposer. Returns 0, or BLK_EINVAL for a
 * continuous one. */
int blk_decomposer_domain(const blk_decomposer *d, blk_bounds *domain);

/* The domain, for a continuous decomposer. Returns 0, or BLK_EINVAL for a
 * discrete one. */
int blk_decomposer_cdomain(const blk_decomposer *d, blk_cbounds *domain);

/* The grid coordinates of a block, coords[0..dim), axis 0 fastest. For a gid
 * outside 0..nblocks-1 every coordinate is set to -1. */
void blk_decomposer_gid_to_coords(const blk_decomposer *d, int gid, int *coords);

/* The gid of the block at grid coordinates coords[0..dim). BLK_ENOTFOUND
 * (no detail) if any coordinate is outside 0..divisions[a]-1 (coordinates
 * are not wrapped); BLK_EINVAL for a NULL d or coords. Any thread. */
int blk_decomposer_coords_to_gid(const blk_decomposer *d, const int *coords);

/* A block's bounds, discrete decomposer: *core (with the shared face, if
 * share_face) and *ghosted (core plus ghosts; see the top of this file).
 * Either may be NULL; they are written, as plain values, only on success.
 * Returns 0, BLK_ENOTFOUND for a gid outside 0..nblocks-1, or BLK_EINVAL
 * for a NULL d or a continuous decomposer. Any thread. */
int blk_decomposer_block_bounds(const blk_decomposer *d, int gid, blk_bounds *core,
                                blk_bounds *ghosted);

/* The same for a continuous decomposer (BLK_EINVAL for a discrete one). */
int blk_decomposer_block_cbounds(const blk_decomposer *d, int gid, blk_cbounds *core,
                                 blk_cbounds *ghosted);

/* The gid of the block that owns the cell pt[0..dim) (the block whose core,
 * without the shared face, holds it), or BLK_ENOTFOUND (no detail) if pt is
 * outside the domain (wrapped axes included: pt is not wrapped here).
 * BLK_EINVAL, with a detail, for a NULL d or pt or a continuous decomposer.
 * Any thread. Cost: O(dim), a few integer divisions per axis. */
int blk_decomposer_point_to_gid(const blk_decomposer *d, const int64_t *pt);

/* The block that owns the point pt[0..dim) of a continuous domain: per axis
 * the block i with from_i <= x < from_{i+1}, the last block closed at max.
 * BLK_ENOTFOUND (no detail) if pt is outside the domain or has a NaN
 * coordinate; BLK_EINVAL, with a detail, for a NULL d or pt or a discrete
 * decomposer. Any thread. Cost: O(dim), a few floating-point operations per
 * axis. */
int blk_decomposer_cpoint_to_gid(const blk_decomposer *d, const double *pt);

/* Every block whose ghosted bounds contain the cell pt. On a wrapped axis a
 * point and its periodic images (pt + k * extent) are the same point: a block
 * counts if its ghosted bounds hold any image, and pt itself may lie outside
 * the domain on that axis. A pt outside the domain on an axis without wrap
 * belongs to no block (the count is 0: this query returns a count, never
 * BLK_ENOTFOUND). The gids go to gids[0..max) in ascending order without
 * duplicates; the return value is the full count, which may exceed max (then
 * only the first max are written). Returns BLK_EINVAL for a NULL d or pt, a
 * continuous decomposer, max < 0, or NULL gids with max > 0. Allocates
 * nothing; any thread; cost O(dim log divisions + count written). */
int blk_decomposer_point_to_gids(const blk_decomposer *d, const int64_t *pt, int *gids, int max);

/* The same for a continuous decomposer: blocks whose closed ghosted bounds
 * contain pt (a point on the face between two blocks is in both). The period
 * of a wrapped axis is max - min as a double. NaN coordinates give 0. */
int blk_decomposer_cpoint_to_gids(const blk_decomposer *d, const double *pt, int *gids, int max);

#ifdef __cplusplus
}
#endif
#endif
