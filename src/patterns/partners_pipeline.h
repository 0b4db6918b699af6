/*
 * partners_pipeline.h: a k-nomial tree over the blocks in gid order, run as
 * a pipeline of S segments (the pipelined tree of MPI libraries): each
 * segment goes up the tree, combined on the way, and comes back down, one
 * level a round, the next segment one round behind. PIPELINED_TREE
 * all-reduce runs over it (arrays.c).
 *
 * The tree. Write gids in base k. Block g's parent is g with its lowest
 * nonzero digit cleared; its children are g + j k^l (j = 1..k-1) for every
 * position l below that digit (every position for gid 0), those below n.
 * So g's subtree is the gid range [g, g + k^l) cut at n: the blocks of a
 * rank under a contiguous assigner stay together, and 2 ranks x 1 block is
 * one edge. depth(g) is g's count of nonzero digits, height(g) the most
 * depth any gid of its subtree adds, H = height(0) the tree's depth.
 *
 * The schedule, for segment s = 0..S-1: block g sends s up in round
 * s + height(g), when every child's s has come (a child is at least one
 * level lower, so it sent s a round or more before); the root then holds
 * s whole and sends it down in round s + H; a block at depth d receives it
 * in round s + H + d and passes it on to its children in that round.
 * R = S - 1 + 2H rounds (0 for one block). A block is active in the rounds
 * where it has a partner (all of round 0 for one block); it never lists
 * itself. With S = 1 this is a tree all-reduce of one message up and one
 * down each edge.
 */
#ifndef BLK_PARTNERS_PIPELINE_H
#define BLK_PARTNERS_PIPELINE_H

#include "blk/partners.h"

/* The pipeline's shape; fill it with blk__pipeline_init. */
typedef struct blk__pipeline {
  int n, k, segments;
  int height; /* H, height(0) */
} blk__pipeline;

/* n >= 1 blocks, radix k >= 2, segments >= 1 with S - 1 + 2H < INT_MAX
 * (H <= 31): 0, or BLK_EINVAL (through blk__fail). */
int blk__pipeline_init(blk__pipeline *t, int n, int k, int segments);

/* The rounds, R = S - 1 + 2H (0 when n is 1). */
int blk__pipeline_rounds(const blk__pipeline *t);

/* g's parent, -1 for gid 0. */
int blk__pipeline_parent(const blk__pipeline *t, int g);

/* The segment `from` sends to `to` in `round`, or -1 when it sends it
 * nothing then (to is neither its parent nor its child, or not in that
 * round). What `to` receives from `from` in round r is the segment
 * blk__pipeline_segment(t, r - 1, from, to). O(log n). */
int blk__pipeline_segment(const blk__pipeline *t, int round, int from, int to);

/* The pattern as an ops table over a copy of *t: *ops is static, *state
 * new (freed by (*ops)->destroy); *max_group the longest partner list.
 * Returns 0 or BLK_ENOMEM (through blk__fail). */
int blk__pipeline_create(const blk_partners_ops **ops, void **state, const blk__pipeline *t,
                         int *max_group);

/* The same, wrapped (partners.c): *out owns a new object, NULL on error.
 * Errors as blk__pipeline_init and blk__pipeline_create. */
int blk__partners_create_pipeline(blk_partners **out, int n, int k, int segments);

#endif
