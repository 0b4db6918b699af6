/*
 * partners_joined.c: one pattern after another (see partners_joined.h).
 *
 * State: the two patterns and the first's rounds. A query asks the pattern
 * the round belongs to, so it costs what that query costs plus O(1).
 * Nothing changes after create.
 */
#include "patterns/partners_joined.h"

#include <limits.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/fail.h"

typedef struct joined {
  blk_partners *first, *second;
  int r1, rounds; /* the first's rounds, and both together */
} joined;

static int j_rounds(const void *s) {
  return ((const joined *)s)->rounds;
}

static int j_nblocks(const void *s) {
  return blk_partners_nblocks(((const joined *)s)->first);
}

static int j_active(const void *s, int round, int gid) {
  const joined *j = s;
  if (round < j->r1) return blk_partners_active(j->first, round, gid);
  if (round > j->r1) return blk_partners_active(j->second, round - j->r1, gid);
  return blk_partners_active(j->first, round, gid) || blk_partners_active(j->second, 0, gid);
}

/* (Round r1 receives the first's last messages; the second's round 0
 * receives nothing.) */
static int j_in(const void *s, int round, int gid, int *gids, int max) {
  const joined *j = s;
  return round <= j->r1 ? blk_partners_in(j->first, round, gid, gids, max)
                        : blk_partners_in(j->second, round - j->r1, gid, gids, max);
}

/* (Round r1 sends the second's first messages; the first's last round
 * sends nothing.) */
static int j_out(const void *s, int round, int gid, int *gids, int max) {
  const joined *j = s;
  return round < j->r1 ? blk_partners_out(j->first, round, gid, gids, max)
                       : blk_partners_out(j->second, round - j->r1, gid, gids, max);
}

static void j_destroy(void *s) {
  joined *j = s;
  blk_partners_destroy(j->first);
  blk_partners_destroy(j->second);
  free(j);
}

static const blk_partners_ops joined_ops = {
    BLK_PARTNERS_OPS_VERSION, j_rounds, j_nblocks, j_active, j_in, j_out, j_destroy};

int blk__joined_create(const blk_partners_ops **ops, void **state, blk_partners *first,
                       blk_partners *second) {
  *state = NULL;
  int r1 = blk_partners_rounds(first), r2 = blk_partners_rounds(second);
  if (!first || !second || blk_partners_nblocks(first) != blk_partners_nblocks(second) ||
      r1 > INT_MAX - 1 - r2) {
    int n1 = blk_partners_nblocks(first), n2 = blk_partners_nblocks(second);
    blk_partners_destroy(first);
    blk_partners_destroy(second);
    return blk__fail(BLK_EINVAL,
                     "partners: joining a pattern of %d blocks, %d rounds to one of "
                     "%d blocks, %d rounds",
                     n1, r1, n2, r2);
  }
  joined *j = blk__malloc(sizeof *j);
  if (!j) {
    blk_partners_destroy(first);
    blk_partners_destroy(second);
    return blk__fail(BLK_ENOMEM, "partners: no memory for a joined pattern");
  }
  *j = (joined){first, second, r1, r1 + r2};
  *ops = &joined_ops;
  *state = j;
  return 0;
}

const blk_partners *blk__joined_part(const void *state, int e, int *round) {
  const joined *j = state;
  *round = e < j->r1 ? e : e - j->r1;
  return e < j->r1 ? j->first : j->second;
}

const blk_partners *blk__joined_first(const void *state) {
  return ((const joined *)state)->first;
}
