/*
 * blk/assigner.h: which MPI rank owns which block.
 *
 * An assigner maps every gid in 0..nblocks-1 to one rank in 0..nranks-1 and
 * lists the gids of a rank. Two policies are built in:
 *   contiguous:  ranks own runs of consecutive gids; with b = nblocks / nranks
 *                and m = nblocks % nranks, ranks 0..m-1 own b + 1 blocks and
 *                the others b (DIY's ContiguousAssigner);
 *   round robin: gid g lives on rank g % nranks.
 * Fewer blocks than ranks is valid: the ranks past the last block own none.
 * Any other static assignment (by measured load, by a kd-tree's leaves, by
 * node) is a table: the program gives each gid's rank
 * (blk_assigner_create_table).
 *
 * Errors of the queries: BLK_EINVAL when the call itself is wrong (a NULL
 * assigner, max < 0, NULL gids with max > 0); BLK_ENOTFOUND, with a detail
 * naming the value, when a well-formed call names no block or rank: a gid
 * outside 0..nblocks-1 or a rank outside 0..nranks-1. A gid out of range is
 * "no such block", not bad input, so a caller holding a gid from elsewhere
 * (a message, a file) can tell it from a misuse of the call.
 *
 * An assigner is read-only after create; any number of threads may query the
 * same one at once. It knows nothing about MPI: nranks is just a number, so
 * the master checks that it matches its communicator.
 */
#ifndef BLK_ASSIGNER_H
#define BLK_ASSIGNER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque; read-only after create, safe to query from any number of threads. */
typedef struct blk_assigner blk_assigner;

/* Creates a contiguous assigner of nblocks blocks over nranks ranks (see the
 * top of this file). On success *out owns it (free with blk_assigner_destroy).
 * Returns 0, BLK_ENOMEM, or BLK_EINVAL (detail names the value) for a NULL
 * out, nranks < 1 or nblocks < 1; on failure *out is NULL. */
int blk_assigner_create_contiguous(blk_assigner **out, int nranks, int nblocks);

/* Creates a round-robin assigner: gid g on rank g % nranks. Errors as above. */
int blk_assigner_create_round_robin(blk_assigner **out, int nranks, int nblocks);

/* Creates an assigner from a table: gid g lives on rank ranks[g], for g in
 * 0..nblocks-1 (copied; the caller keeps ranks). A rank may own any number
 * of blocks, none included; local_gids lists them ascending. O(nblocks +
 * nranks) memory; every query O(1). Every rank of a job must make the same
 * table (blk's collectives check that the blocks are where the assigner
 * says, not that the tables agree). Errors as above, and BLK_EINVAL for a
 * NULL ranks or a rank outside 0..nranks-1 (the detail names the gid). */
int blk_assigner_create_table(blk_assigner **out, int nranks, int nblocks, const int *ranks);

/* Frees an assigner; NULL does nothing. No other thread may be using it. */
void blk_assigner_destroy(blk_assigner *a);

/* The number of ranks it was made for. */
int blk_assigner_nranks(const blk_assigner *a);

/* The number of blocks it was made for. */
int blk_assigner_nblocks(const blk_assigner *a);

/* The rank that owns gid; BLK_ENOTFOUND for a gid outside 0..nblocks-1 (the
 * detail names it), BLK_EINVAL for a NULL a. O(1); any thread. */
int blk_assigner_rank(const blk_assigner *a, int gid);

/* The number of blocks rank owns (0 is possible); BLK_ENOTFOUND for a rank
 * outside 0..nranks-1, BLK_EINVAL for a NULL a. O(1); any thread. */
int blk_assigner_local_count(const blk_assigner *a, int rank);

/* Writes the gids of rank in ascending order to gids[0..max) and returns how
 * many the rank owns (which may exceed max: then only max are written).
 * BLK_EINVAL for a NULL a, max < 0, or NULL gids with max > 0 (checked
 * first); BLK_ENOTFOUND for a rank outside 0..nranks-1. The i-th gid
 * written is the rank's block with local id i. Any thread. */
int blk_assigner_local_gids(const blk_assigner *a, int rank, int *gids, int max);

#ifdef __cplusplus
}
#endif
#endif
