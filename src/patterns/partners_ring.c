/*
 * partners_ring.c: the ring pattern (see partners_ring.h).
 *
 * State: the block count and the number of exchange rounds, nothing else;
 * every query is O(1) arithmetic. Every block is active in every round;
 * round 0 receives nothing and round R sends nothing, as every pattern.
 */
#include "patterns/partners_ring.h"

#include <limits.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/fail.h"

typedef struct ring {
  int n, rounds;
} ring;

static int ring_rounds(const void *s) {
  return ((const ring *)s)->rounds;
}

static int ring_nblocks(const void *s) {
  return ((const ring *)s)->n;
}

static int ring_active(const void *s, int round, int gid) {
  (void)s;
  (void)round;
  (void)gid;
  return 1;
}

static int ring_in(const void *s, int round, int gid, int *gids, int max) {
  const ring *r = s;
  if (round == 0 || r->n < 2) return 0;
  if (max > 0) gids[0] = (gid + r->n - 1) % r->n;
  return 1;
}

static int ring_out(const void *s, int round, int gid, int *gids, int max) {
  const ring *r = s;
  if (round == r->rounds || r->n < 2) return 0;
  if (max > 0) gids[0] = (gid + 1) % r->n;
  return 1;
}

static void ring_destroy(void *s) {
  free(s);
}

static const blk_partners_ops ring_ops = {BLK_PARTNERS_OPS_VERSION,
                                          ring_rounds,
                                          ring_nblocks,
                                          ring_active,
                                          ring_in,
                                          ring_out,
                                          ring_destroy};

int blk__ring_create(const blk_partners_ops **ops, void **state, int nblocks, int rounds) {
  *state = NULL;
  if (nblocks < 1 || rounds < 0 || rounds == INT_MAX || (nblocks == 1 && rounds != 0))
    return blk__fail(BLK_EINVAL, "partners: a ring of %d blocks over %d rounds", nblocks, rounds);
  ring *r = blk__malloc(sizeof *r);
  if (!r) return blk__fail(BLK_ENOMEM, "partners: no memory for a ring");
  r->n = nblocks;
  r->rounds = rounds;
  *ops = &ring_ops;
  *state = r;
  return 0;
}
