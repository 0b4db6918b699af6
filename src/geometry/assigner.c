/*
 * assigner.c: gid -> rank policies behind one ops table.
 *
 * Each policy supplies rank(gid), local_count(rank) and local_gid(rank, i).
 * The built-in ones are closed formulas, so they are O(1) in memory and in
 * time per query whatever the block count; a table (any static assignment
 * a program chooses) keeps each gid's rank and, per rank, its gids in
 * ascending order (a counting sort at create: O(nblocks + nranks) memory
 * and time, O(1) per query). The public functions validate their
 * arguments once and then dispatch through the ops table; a new policy is
 * a new table. Immutable after create: no locking.
 */
#include "blk/assigner.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"

typedef struct assigner_ops {
  const char *name;
  int (*rank)(const blk_assigner *a, int gid);              /* gid in range */
  int (*local_count)(const blk_assigner *a, int rank);      /* rank in range */
  int (*local_gid)(const blk_assigner *a, int rank, int i); /* i < local_count */
} assigner_ops;

struct blk_assigner {
  const assigner_ops *ops;
  int nranks;
  int nblocks;
  /* A table's: each gid's rank, each rank's first index into gids, and
   * the gids rank by rank, ascending (NULL for the formulas). */
  int *rank_of, *first, *gids;
};

/* Contiguous: ranks below m = nblocks % nranks own b + 1 gids, the rest b. */

static int contiguous_rank(const blk_assigner *a, int gid) {
  int b = a->nblocks / a->nranks, m = a->nblocks % a->nranks;
  if (m == 0) return gid / b; /* b + 1 below would overflow for INT_MAX blocks on one rank */
  int big = m * (b + 1);      /* gids owned by the first m ranks; <= nblocks */
  if (gid < big) return gid / (b + 1);
  return m + (gid - big) / b; /* b > 0 here: gid >= big means nblocks > big */
}

static int contiguous_count(const blk_assigner *a, int rank) {
  return a->nblocks / a->nranks + (rank < a->nblocks % a->nranks ? 1 : 0);
}

static int contiguous_gid(const blk_assigner *a, int rank, int i) {
  int b = a->nblocks / a->nranks, m = a->nblocks % a->nranks;
  return rank * b + (rank < m ? rank : m) + i;
}

static const assigner_ops contiguous_ops = {"contiguous", contiguous_rank, contiguous_count,
                                            contiguous_gid};

/* Round robin: gid g on rank g % nranks. */

static int round_robin_rank(const blk_assigner *a, int gid) {
  return gid % a->nranks;
}

static int round_robin_count(const blk_assigner *a, int rank) {
  return a->nblocks / a->nranks + (rank < a->nblocks % a->nranks ? 1 : 0);
}

static int round_robin_gid(const blk_assigner *a, int rank, int i) {
  return rank + i * a->nranks;
}

static const assigner_ops round_robin_ops = {"round robin", round_robin_rank, round_robin_count,
                                             round_robin_gid};

/* A table: what the program said. */

static int table_rank(const blk_assigner *a, int gid) {
  return a->rank_of[gid];
}

static int table_count(const blk_assigner *a, int rank) {
  return a->first[rank + 1] - a->first[rank];
}

static int table_gid(const blk_assigner *a, int rank, int i) {
  return a->gids[a->first[rank] + i];
}

static const assigner_ops table_ops = {"table", table_rank, table_count, table_gid};

static int create(blk_assigner **out, const assigner_ops *ops, int nranks, int nblocks) {
  if (!out) return blk__fail(BLK_EINVAL, "assigner: out is NULL");
  *out = NULL;
  if (nranks < 1)
    return blk__fail(BLK_EINVAL, "assigner (%s): nranks = %d must be at least 1", ops->name,
                     nranks);
  if (nblocks < 1)
    return blk__fail(BLK_EINVAL, "assigner (%s): nblocks = %d must be at least 1", ops->name,
                     nblocks);
  blk_assigner *a = blk__calloc(1, sizeof *a);
  if (!a) return blk__fail(BLK_ENOMEM, "assigner: no memory for %zu bytes", sizeof *a);
  a->ops = ops;
  a->nranks = nranks;
  a->nblocks = nblocks;
  *out = a;
  return 0;
}

int blk_assigner_create_contiguous(blk_assigner **out, int nranks, int nblocks) {
  return create(out, &contiguous_ops, nranks, nblocks);
}

int blk_assigner_create_round_robin(blk_assigner **out, int nranks, int nblocks) {
  return create(out, &round_robin_ops, nranks, nblocks);
}

int blk_assigner_create_table(blk_assigner **out, int nranks, int nblocks, const int *ranks) {
  int rc = create(out, &table_ops, nranks, nblocks);
  if (rc) return rc;
  blk_assigner *a = *out;
  *out = NULL;
  if (!ranks) {
    rc = blk__fail(BLK_EINVAL, "assigner (table): ranks is NULL");
    goto fail;
  }
  for (int g = 0; g < nblocks; g++)
    if (ranks[g] < 0 || ranks[g] >= nranks) {
      rc = blk__fail(BLK_EINVAL, "assigner (table): gid %d has rank %d, not in 0..%d", g, ranks[g],
                     nranks - 1);
      goto fail;
    }
  a->rank_of = blk__malloc((size_t)nblocks * sizeof *a->rank_of);
  a->first = blk__calloc((size_t)nranks + 1, sizeof *a->first);
  a->gids = blk__malloc((size_t)nblocks * sizeof *a->gids);
  if (!a->rank_of || !a->first || !a->gids) {
    rc = blk__fail(BLK_ENOMEM, "assigner (table): no memory for %d blocks on %d ranks", nblocks,
                   nranks);
    goto fail;
  }
  memcpy(a->rank_of, ranks, (size_t)nblocks * sizeof *ranks);
  for (int g = 0; g < nblocks; g++) a->first[ranks[g] + 1]++;
  for (int r = 0; r < nranks; r++) a->first[r + 1] += a->first[r];
  /* Each gid to its rank's next free place (first[r] walks to the next
   * rank's start), then first moved back by one rank. */
  for (int g = 0; g < nblocks; g++) a->gids[a->first[ranks[g]]++] = g;
  for (int r = nranks; r > 0; r--) a->first[r] = a->first[r - 1];
  a->first[0] = 0;
  *out = a;
  return BLK_OK;
fail:
  blk_assigner_destroy(a);
  return rc;
}

void blk_assigner_destroy(blk_assigner *a) {
  if (!a) return;
  free(a->rank_of);
  free(a->first);
  free(a->gids);
  free(a);
}

int blk_assigner_nranks(const blk_assigner *a) {
  return a ? a->nranks : 0;
}

int blk_assigner_nblocks(const blk_assigner *a) {
  return a ? a->nblocks : 0;
}

int blk_assigner_rank(const blk_assigner *a, int gid) {
  if (!a) return blk__fail(BLK_EINVAL, "assigner: NULL assigner");
  if (gid < 0 || gid >= a->nblocks)
    return blk__fail(BLK_ENOTFOUND, "assigner: gid %d is outside 0..%d", gid, a->nblocks - 1);
  return a->ops->rank(a, gid);
}

static int check_rank(const blk_assigner *a, int rank) {
  if (rank < 0 || rank >= a->nranks)
    return blk__fail(BLK_ENOTFOUND, "assigner: rank %d is outside 0..%d", rank, a->nranks - 1);
  return 0;
}

int blk_assigner_local_count(const blk_assigner *a, int rank) {
  if (!a) return blk__fail(BLK_EINVAL, "assigner: NULL assigner");
  int rc = check_rank(a, rank);
  if (rc) return rc;
  return a->ops->local_count(a, rank);
}

int blk_assigner_local_gids(const blk_assigner *a, int rank, int *gids, int max) {
  if (!a) return blk__fail(BLK_EINVAL, "assigner: NULL assigner");
  if (max < 0) return blk__fail(BLK_EINVAL, "assigner: local_gids: max = %d is negative", max);
  if (max > 0 && !gids)
    return blk__fail(BLK_EINVAL, "assigner: local_gids: gids is NULL but max = %d", max);
  int rc = check_rank(a, rank);
  if (rc) return rc;
  int n = a->ops->local_count(a, rank);
  for (int i = 0; i < n && i < max; i++) gids[i] = a->ops->local_gid(a, rank, i);
  return n;
}
