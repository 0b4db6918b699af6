/*
 * partners_top.c: a tree all-reduce whose top is one exchange (see
 * partners_top.h).
 *
 * State: the tree pattern and its middle round. A query asks the tree
 * pattern, so it costs what that query costs, plus one more for round
 * M - 1's out-partners and round M's in-partners (the root's group).
 * Nothing changes after create.
 */
#include "patterns/partners_top.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/fail.h"

typedef struct top {
  blk_partners *tree;
  int m;      /* the tree's middle round, where its root turns */
  int rounds; /* the tree's rounds less one */
} top;

/* The tree's round for callback round r: the same below m, one later from
 * m (round m itself is special only in its in-partners). */
static int tree_round(const top *t, int r) {
  return r < t->m ? r : r + 1;
}

/* The top group of gid, which sends to the root in the tree's round m - 1
 * (none if gid does not). */
static int group_of(const top *t, int gid, int *gids, int max) {
  int root;
  if (blk_partners_out(t->tree, t->m - 1, gid, &root, 1) != 1) return 0;
  return blk_partners_in(t->tree, t->m, root, gids, max);
}

static int t_rounds(const void *s) {
  return ((const top *)s)->rounds;
}

static int t_nblocks(const void *s) {
  return blk_partners_nblocks(((const top *)s)->tree);
}

static int t_active(const void *s, int round, int gid) {
  const top *t = s;
  return blk_partners_active(t->tree, tree_round(t, round), gid);
}

static int t_in(const void *s, int round, int gid, int *gids, int max) {
  const top *t = s;
  if (round == t->m) return group_of(t, gid, gids, max);
  return blk_partners_in(t->tree, tree_round(t, round), gid, gids, max);
}

static int t_out(const void *s, int round, int gid, int *gids, int max) {
  const top *t = s;
  if (round == t->m - 1) return group_of(t, gid, gids, max);
  return blk_partners_out(t->tree, tree_round(t, round), gid, gids, max);
}

static void t_destroy(void *s) {
  top *t = s;
  blk_partners_destroy(t->tree);
  free(t);
}

static const blk_partners_ops top_ops = {
    BLK_PARTNERS_OPS_VERSION, t_rounds, t_nblocks, t_active, t_in, t_out, t_destroy};

int blk__top_create(const blk_partners_ops **ops, void **state, blk_partners *tree) {
  *state = NULL;
  int rounds = tree ? blk_partners_rounds(tree) : 0;
  if (!tree || rounds < 2 || rounds % 2) {
    blk_partners_destroy(tree);
    return blk__fail(BLK_EINVAL,
                     "partners: a top exchange needs a tree all-reduce of an even, nonzero "
                     "round count, not %d",
                     rounds);
  }
  top *t = blk__malloc(sizeof *t);
  if (!t) {
    blk_partners_destroy(tree);
    return blk__fail(BLK_ENOMEM, "partners: no memory for a top exchange");
  }
  *t = (top){tree, rounds / 2, rounds - 1};
  *ops = &top_ops;
  *state = t;
  return 0;
}

const blk_partners *blk__top_part(const void *state, int e, int *round) {
  const top *t = state;
  *round = e < t->m ? e : e + 1;
  return t->tree;
}
