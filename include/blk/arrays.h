/*
 * blk/arrays.h: element-wise collectives over one array per block.
 *
 * The common case of a reduction, done for you: every block holds an array
 * of `count` elements of one type (the `array` callback returns it), and
 * blk combines them element-wise across all blocks of all ranks with a sum,
 * min or max, choosing the algorithm:
 *
 *   BLK_ARRAYS_TREE  merge up a k-ary tree to gid 0 (and, for an all-reduce,
 *                    broadcast back down): 2 log_k(n) rounds, each moving the
 *                    whole array. Latency-optimal; every byte crosses the
 *                    network log_k(n) times. When the all-reduce's top
 *                    group is two blocks on two ranks, the two exchange
 *                    their sums at once and each combines them (as
 *                    BUTTERFLY does), where the root would receive and
 *                    then send back: one round, and one transfer across
 *                    ranks in series, less.
 *   BLK_ARRAYS_SPLIT reduce-scatter by swap rounds (each round splits what a
 *                    block holds into k pieces and keeps one, summing what
 *                    the group sent for it), then, for an all-reduce, an
 *                    all-gather by the same rounds reversed. About 2 (n-1)/n
 *                    of the array crosses per block: bandwidth-optimal, as
 *                    MPI libraries do for large messages.
 *   BLK_ARRAYS_BUTTERFLY  swap rounds where every block sends its whole
 *                    array to its group and combines the group's: log_k(n)
 *                    rounds, half of TREE's, each moving (k-1) whole arrays.
 *                    Latency-optimal (MPI libraries' recursive doubling);
 *                    for small arrays.
 *   BLK_ARRAYS_RING  a ring over the blocks in gid order: n-1 steps of
 *                    reduce-scatter (each block passes a piece of 1/n to
 *                    gid + 1, which adds its own) then n-1 steps of
 *                    all-gather; 2 (n-1) rounds, each moving m/n per block.
 *                    Bandwidth-optimal on any n, and every link carries
 *                    the same load, but its latency grows with n: for
 *                    large arrays over few blocks (one per rank).
 *   BLK_ARRAYS_SEGMENTED_RING  the ring with each step's piece sent in
 *                    segments of at most spec->segment bytes, one per
 *                    round (Open MPI's segmented ring): 2 (n-1) S rounds
 *                    for S segments a piece. A segment leaves when its
 *                    round's callback returns, so segments overlap no
 *                    combine with a transfer; what they buy is smaller
 *                    messages, and, with several blocks on a rank, a
 *                    segment the next block combines while it is in cache.
 *   BLK_ARRAYS_PIPELINED_TREE  the tree all-reduce over a k-nomial tree
 *                    of the gids (a block's parent clears its lowest
 *                    nonzero base-k digit), the array cut into S segments
 *                    of at most spec->segment bytes that follow each other
 *                    up and down the tree a round apart (MPI libraries'
 *                    pipelined tree): S - 1 + 2 H rounds for a tree H
 *                    levels deep. Every edge carries the array once each
 *                    way, the two directions in the same rounds, so with
 *                    enough segments it costs about one array's transfer
 *                    where TREE costs two in series; each segment pays a
 *                    round's latency. Every block ends with the root's bits.
 *                    An array of one segment runs as TREE (the same tree
 *                    with nothing to pipeline, and TREE's top may be one
 *                    exchange across ranks).
 *   BLK_ARRAYS_AUTO  with one block per rank (n <= ranks): BUTTERFLY below
 *                    BLK_ARRAYS_SPLIT_BYTES, SPLIT above. With several
 *                    blocks per rank on several ranks: a tree (its early
 *                    rounds stay on the rank; SPLIT's order would send
 *                    several times the bytes across ranks), PIPELINED_TREE
 *                    from BLK_ARRAYS_PIPELINE_BYTES when no rank has a
 *                    memory budget, else TREE. On one rank:
 *                    TREE below the threshold, SPLIT above, but TREE out
 *                    of core (a master with a memory budget): it passes
 *                    over the blocks in storage twice, SPLIT (a swap, then
 *                    a swap back) about three times. The choices follow the
 *                    measurements in docs/performance.md and
 *                    docs/out-of-core.md. With a tuning file (the master's
 *                    tuning setting, master.h), AUTO instead picks the
 *                    algorithm blk-tune measured fastest for the rank
 *                    count, the nearest block count and k measured, and
 *                    the array's size (interpolated between measured
 *                    sizes), on every rank alike; on one rank out of core
 *                    the TREE rule above still comes first.
 *
 * Every block ends with the same bits: the combines run in the same order
 * on every block (with BUTTERFLY, the group's order; floating-point sums
 * are not associative, so different orders could differ in the last bits).
 *
 * Arrays of different blocks must have the same count and type. The
 * callbacks and blocks follow blk_reduce's rules (pool threads, one block at
 * a time); these functions are collective like blk_reduce. Any block count
 * works (partners.h); one with a prime factor above max(k, 16) is folded
 * into the largest count below it without one, the extras handing their
 * arrays to a neighbour first and getting the result in a last round
 * (docs/patterns.md). The swap-based operations (SPLIT, BUTTERFLY,
 * reduce-scatter, scan, all-gather), where each member of a round of w
 * sends to w - 1 others, may fold further, to a count whose factors are at
 * most k, when blk's cost model (or the tuning file's) predicts that faster
 * for the call's array size: 1009 blocks at k = 2 then run 512 virtual blocks
 * in rounds of 2 rather than 1008 in rounds of up to 7. The choice is the
 * same on every rank. With
 * fewer elements than blocks, SPLIT still works: some blocks' pieces are
 * empty.
 */
#ifndef BLK_ARRAYS_H
#define BLK_ARRAYS_H

#include <stddef.h>

#include "blk/assigner.h"
#include "blk/master.h"
#include "blk/proxy.h"
#include "blk/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum blk_arrays_algorithm {
  BLK_ARRAYS_AUTO = 0,
  BLK_ARRAYS_TREE = 1,
  BLK_ARRAYS_SPLIT = 2,
  BLK_ARRAYS_BUTTERFLY = 3,
  BLK_ARRAYS_RING = 4,
  BLK_ARRAYS_SEGMENTED_RING = 5,
  BLK_ARRAYS_PIPELINED_TREE = 6
} blk_arrays_algorithm;

/* SEGMENTED_RING's segment when spec->segment is 0: 64 KiB when a rank
 * holds several of the blocks (n > ranks), where a segment that the next
 * block on the rank reads at once is still in cache; 1 MiB (the segment of
 * Open MPI's fixed rules) when each block is on a rank of its own, where
 * segments only add rounds. */
#define BLK_ARRAYS_SEGMENT_BYTES 65536
#define BLK_ARRAYS_SEGMENT_BYTES_SPREAD 1048576

/* PIPELINED_TREE's segment when spec->segment is 0: a segment costs a
 * round, about 10 us here for a message past MPI's eager limit, so smaller
 * ones lose more to rounds than they gain in overlap (32 KiB took up to
 * twice the time of 256 KiB at 2 ranks, docs/performance.md 13.6). */
#define BLK_ARRAYS_PIPELINE_SEGMENT_BYTES 262144
/* ... and at most half the array, but not below this: one segment was
 * TREE's two messages in series (at 256 KiB, 2 ranks, two segments took
 * 0.92 of MPI's time, one 1.46; one segment now runs as TREE, whose top
 * may be one exchange, docs/performance.md 13.21), and 16 KiB ones lose to
 * their rounds. */
#define BLK_ARRAYS_PIPELINE_MIN_BYTES 32768
/* ... unless the master's tuning file gives MPI's eager step (blk-tune's
 * eager-step line, master.h) and the job has several ranks with at most
 * BLK_ARRAYS_PIPELINE_EAGER_BLOCKS blocks each: then an array of at most
 * this many segments just below the step goes in those, each one MPI
 * message that needs no handshake (64 KiB at 2 ranks here: 8 segments of 8
 * KiB took 0.94-1.09 of MPI_Allreduce's time with its agreement, two of 32
 * KiB 1.28). With more blocks a rank the tree's rounds inside the rank
 * weigh more, and they only gain rounds (1 rank x 8 blocks of 64 KiB: 27.5
 * us against 16.5; 2 x 8: 50 against 41). */
#define BLK_ARRAYS_PIPELINE_EAGER_SEGMENTS 8
#define BLK_ARRAYS_PIPELINE_EAGER_BLOCKS 4

/* The array size (bytes) from which BLK_ARRAYS_AUTO prefers PIPELINED_TREE
 * to TREE with several blocks per rank on several ranks, in core (see
 * above): at 2 ranks x 2-8 blocks it was at or below TREE from here
 * (docs/performance.md 13.6). */
#define BLK_ARRAYS_PIPELINE_BYTES 65536

/* The array size (bytes) from which BLK_ARRAYS_AUTO prefers SPLIT (see
 * above): the low end of the range where the two cost the same at 2 ranks
 * x 1 block in blk-bench (docs/performance.md), since BUTTERFLY's bytes
 * grow with log(ranks). */
#define BLK_ARRAYS_SPLIT_BYTES 131072

/* A program's own element-wise op: acc[i] = acc[i] op in[i] for i < count,
 * on elements of spec->type (e.g. a product, a bitwise or). It must be
 * associative and commutative: the algorithms combine in their own orders
 * (the same on every run, rank count and thread count). It runs on pool
 * threads, must not fail, and must not call MPI or blk.
 * TREE and BUTTERFLY (and blk_arrays_reduce and blk_arrays_scan) always
 * hand it whole arrays, count == spec->count, so an op over whole records
 * works with them: a min-loc that keeps the record {value, location, ...}
 * of the smaller value (examples/minimize.c). SPLIT, the rings and
 * PIPELINED_TREE hand it pieces, and AUTO may choose SPLIT or
 * PIPELINED_TREE (and, by a tuning file, a ring): set the algorithm for
 * such an op. */
typedef void (*blk_array_op_fn)(void *acc, const void *in, size_t count, void *user);

/* Returns the block's array (count elements). Called with the block
 * loaded, on pool threads or on the master's thread, never while another
 * call for the same block runs; it must only return the pointer. */
typedef void *(*blk_array_fn)(void *block, int gid, void *user);

/* The settings of one collective; start from BLK_ARRAYS_INIT (or
 * blk_arrays_init). It grows like blk_master_config: version names the
 * layout the program was built with, and new fields only go at the end. */
typedef struct blk_arrays {
  unsigned int version; /* BLK_ARRAYS_VERSION, set by the initialisers */
  blk_array_fn array;
  size_t count;
  blk_type type;
  blk_op op; /* BLK_OP_SUM, BLK_OP_MIN, BLK_OP_MAX */
  int k;     /* radix of the rounds */
  blk_arrays_algorithm algorithm;
  void *user; /* passed to array (and combine) */
  /* Version 2: */
  size_t segment; /* the segmented algorithms' most bytes a message; 0: the defaults above */
  /* Version 3: */
  blk_array_op_fn combine; /* not NULL: the op (op is then not used); gets user */
} blk_arrays;

/* The layout of blk_arrays in this header: 2 added segment, 3 combine (a
 * spec of an older version is read without them, as 0 and NULL). */
#define BLK_ARRAYS_VERSION 3u

#define BLK_ARRAYS_INIT \
  { BLK_ARRAYS_VERSION, NULL, 0, BLK_FLOAT, BLK_OP_SUM, 2, BLK_ARRAYS_AUTO, NULL, 0, NULL }

/* Sets *spec to the defaults of layout version, as BLK_ARRAYS_INIT does.
 * Returns 0, or BLK_EINVAL for a NULL spec or a version this blk does not
 * know. Any thread. */
int blk_arrays_init(blk_arrays *spec, unsigned int version);

/* Every block's array becomes the element-wise op over all blocks' arrays.
 * Errors: BLK_EINVAL (a spec version this blk does not know, no array callback,
 * k < 2, unknown type, op or algorithm, count * element size past SIZE_MAX, the
 * assigner's rank count does not match, a ring or pipelined tree whose
 * segments would take more than 2^24 rounds), BLK_ENOMEM (out of memory, or, before
 * anything runs, a count whose array alone is larger than this process can
 * have: physical memory, RLIMIT_AS or RLIMIT_DATA; the detail names count,
 * bytes and limit), BLK_EMPI, BLK_EIO and BLK_ECORRUPT (out-of-core).
 * Collective like blk_reduce, with the same spec on every rank: every rank
 * returns the same code (also for a limit only one rank runs into, and for a
 * block missing or placed elsewhere, as in blk_reduce). After a failure, a
 * block whose array depended on it holds it as it was before the round it could
 * not run: a partial result. */
int blk_arrays_all_reduce(blk_master *m, const blk_assigner *a, const blk_arrays *spec);

/* The algorithm blk_arrays_all_reduce runs on m for spec with this
 * assigner: spec->algorithm, or what BLK_ARRAYS_AUTO picks (the same on
 * every rank; blk/master.h, tuning). m may be NULL: a master without a
 * memory budget or a tuning file. When AUTO follows a tuning file's cost
 * model it predicts the algorithms over their patterns, O(R * min(n, 512) *
 * k) for R rounds; if that has no memory here, this returns what the
 * built-in rules pick, and blk_arrays_all_reduce fails with BLK_ENOMEM on
 * every rank. */
blk_arrays_algorithm blk_arrays_all_reduce_algorithm(const blk_master *m, const blk_assigner *a,
                                                     const blk_arrays *spec);

/* gid 0's array becomes the element-wise op over all blocks (MPI_Reduce's
 * job). It works in place: the other blocks' arrays end as scratch (the
 * partial results they passed up the tree). Errors as
 * blk_arrays_all_reduce. */
int blk_arrays_reduce(blk_master *m, const blk_assigner *a, const blk_arrays *spec);

/* Every block's array becomes a copy of gid 0's (MPI_Bcast's job). op is
 * not used (but must be valid). Errors as blk_arrays_all_reduce. */
int blk_arrays_broadcast(blk_master *m, const blk_assigner *a, const blk_arrays *spec);

/* Block g ends with piece g of the element-wise op, in its array at elements
 * [blk_arrays_piece_begin(g), blk_arrays_piece_begin(g + 1)); the rest of
 * its array is scratch (MPI_Reduce_scatter_block's job, with the pieces of
 * n blocks as equal as the count allows). Errors as blk_arrays_all_reduce. */
int blk_arrays_reduce_scatter(blk_master *m, const blk_assigner *a, const blk_arrays *spec);

/* Every block's array becomes every block's piece in gid order: block g
 * brings elements [blk_arrays_piece_begin(count, n, g), ..(g + 1)) of its
 * own array, and afterwards every array holds all n pieces (MPI_Allgather's
 * job, in place). op is not used (it must be valid); spec->k is the radix.
 * It runs the reduce-scatter's swap rounds backwards (halving order
 * reversed), a block's share growing k-fold a round: about (n-1)/n of the
 * array reaches each block, each byte once. Errors as
 * blk_arrays_all_reduce; after a failure a block holds the pieces it had
 * gathered before the round it missed. */
int blk_arrays_all_gather(blk_master *m, const blk_assigner *a, const blk_arrays *spec);

/* Which prefixes blk_arrays_scan computes. */
typedef enum blk_scan_kind {
  BLK_SCAN_INCLUSIVE = 0, /* block g: the op over blocks 0..g (MPI_Scan's job) */
  BLK_SCAN_EXCLUSIVE = 1  /* block g: the op over blocks 0..g-1 (MPI_Exscan's job); block 0
                           * gets the op's identity: 0 for a sum, the type's largest value for
                           * MIN (+infinity for floats), its smallest for MAX (-infinity); with
                           * spec->combine, whose identity blk does not know, block 0 ends
                           * with the op over all blocks instead */
} blk_scan_kind;

/* Every block's array becomes the element-wise op over the arrays of the
 * blocks before it in gid order (exclusive) or up to and including it
 * (inclusive): a prefix over blocks, e.g. the output offset of each block
 * from counts. spec->algorithm is not used (it must be valid); spec->k is
 * the radix. It runs log_k(n) swap rounds (contiguous order): in each, a
 * block sends the total of the gid range it stands for to the k-1 others
 * of its group, adds the totals of the members before it to its prefix and
 * all of them to its total: R (alpha + (k-1) beta m + k gamma m). Over a
 * folded count a pair's second block hands its array to the first, which
 * scans for both and sends it its result in a last round. Every
 * block's result comes from the same combines in the same order on any
 * number of ranks and threads, in core or out (bit-identical; a float sum
 * may differ from a left-to-right sum in its last bits). Errors as
 * blk_arrays_all_reduce; after a failure, arrays are partial (a block that
 * failed or depended on one holds what it had before the round it missed,
 * a prefix of part of its range or a range total). */
int blk_arrays_scan(blk_master *m, const blk_assigner *a, const blk_arrays *spec,
                    blk_scan_kind kind);

/* Where piece g of count elements over n blocks begins: floor(g * count / n). */
size_t blk_arrays_piece_begin(size_t count, int nblocks, int g);

#ifdef __cplusplus
}
#endif
#endif
