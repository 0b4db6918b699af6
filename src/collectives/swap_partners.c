/*
 * swap_partners.c: the folded swap partners kept between calls, and their
 * rounds inside a rank merged; see swap_partners.h.
 */
#include "collectives/swap_partners.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "patterns/partners_folded.h"

/* More rounds than n < 2^31 blocks have, folded or not. */
#define MAX_ROUNDS 34

typedef struct kept_swap {
  blk_partners *p; /* NULL: none yet */
  int n, k, contiguous;
  /* p with rounds inside a rank merged, made for these radices; NULL: none */
  blk_partners *merged;
  int nmerged, radices[MAX_ROUNDS];
} kept_swap;

static void kept_free(void *mem) {
  kept_swap *ks = mem;
  blk_partners_destroy(ks->merged);
  blk_partners_destroy(ks->p);
  free(ks);
}

/* The kept record of owner with the partners for (n, k, contiguous), made
 * if they are new (*made); NULL on failure, with the detail set (*rc). */
static kept_swap *kept_of(blk_master *m, const void *owner, int n, int k, int contiguous, int *made,
                          int *rc) {
  *made = 0;
  *rc = BLK_OK;
  blk__kept *kept = blk__op_kept(&m->op, owner, kept_free);
  kept_swap *ks = kept->mem;
  if (!ks && !(ks = kept->mem = blk__calloc(1, sizeof *ks))) {
    *rc = blk__fail(BLK_ENOMEM, "no memory to keep a collective's partners");
    return NULL;
  }
  if (!ks->p || ks->n != n || ks->k != k || ks->contiguous != contiguous) {
    blk_partners_destroy(ks->merged);
    blk_partners_destroy(ks->p);
    *ks = (kept_swap){0};
    blk_partners *p = NULL;
    if ((*rc = blk__partners_create_folding(&p, BLK_SWAP, n, k, contiguous))) return NULL;
    *ks = (kept_swap){.p = p, .n = n, .k = k, .contiguous = contiguous};
    *made = 1;
  }
  return ks;
}

int blk__swap_partners_kept(blk_master *m, const void *owner, int n, int k, int contiguous,
                            const blk_partners **out, int *made) {
  int rc;
  kept_swap *ks = kept_of(m, owner, n, k, contiguous, made, &rc);
  *out = ks ? ks->p : NULL;
  return rc;
}

/* Whether every block's group of `size` members `step` apart (the gids
 * base + i * step, i < size, that agree with it in every other digit) lies
 * on one rank of a: each member on the rank of the one before it. */
static int group_local(const blk_assigner *a, int n, int step, int size) {
  for (int g = 0; g + step < n; g++)
    if ((g / step) % size != size - 1 && blk_assigner_rank(a, g) != blk_assigner_rank(a, g + step))
      return 0;
  return 1;
}

/* The rounds blk__swap_partners_merged_kept runs instead of p's: their radices into radices[]
 * and their count, or -1 to run p's as they are (folded, or more rounds than radices[] holds).
 * n <= BLK__MERGED_DIRECT_MAX with all n blocks on one rank, or with `stored`: one round of n.
 * Otherwise p's rounds in
 * order, each run of consecutive ones whose groups lie on one rank merged greedily while the
 * merged group has at most BLK__MERGED_GROUP_MAX members. In either order consecutive rounds
 * are consecutive digits of the gid, so a merged group is the gids that differ only in those
 * digits: `size` members, the smaller of the rounds' steps apart. */
static int merge_rounds(const blk_partners *p, const blk_assigner *a, int n, int stored,
                        int *radices) {
  int rounds = blk_partners_rounds(p);
  /* All n on one rank: the group of n members 1 apart, folded or not. */
  if (rounds > 1 && n <= BLK__MERGED_DIRECT_MAX && (stored || group_local(a, n, 1, n))) {
    radices[0] = n;
    return 1;
  }
  if (rounds > MAX_ROUNDS) return -1;
  for (int e = 0; e < rounds; e++)
    if (blk_partners_round_radix(p, e) < 2) return -1; /* a fold round */
  int merged = 0, size = 0, step = 0;
  for (int e = 0; e < rounds; e++) {
    int r = blk_partners_round_radix(p, e), s = blk_partners_round_step(p, e);
    int both = s < step ? s : step;
    if (merged && size <= BLK__MERGED_GROUP_MAX / r && group_local(a, n, both, size * r)) {
      size *= r;
      step = both;
      radices[merged - 1] = size;
      continue;
    }
    radices[merged++] = r;
    size = r;
    step = s;
  }
  return merged;
}

int blk__swap_partners_merged_kept(blk_master *m, const void *owner, const blk_assigner *a, int n,
                                   int k, int contiguous, int stored, const blk_partners **out,
                                   int *made) {
  int rc;
  kept_swap *ks = kept_of(m, owner, n, k, contiguous, made, &rc);
  *out = ks ? ks->p : NULL;
  if (!ks || blk_partners_rounds(ks->p) < 2) return rc; /* (one round: nothing to merge) */
  int radices[MAX_ROUNDS];
  int merged = merge_rounds(ks->p, a, n, stored, radices);
  if (merged < 0 || merged == blk_partners_rounds(ks->p)) return BLK_OK; /* as k made them */
  if (!ks->merged || ks->nmerged != merged ||
      memcmp(ks->radices, radices, (size_t)merged * sizeof *radices) != 0) {
    blk_partners_destroy(ks->merged);
    ks->merged = NULL;
    const int axes[MAX_ROUNDS] = {0}; /* one axis */
    blk_partners *p = NULL;
    rc = blk_partners_create_rounds(&p, BLK_SWAP, 1, &n, merged, axes, radices, contiguous);
    if (rc) {
      *out = NULL;
      return rc;
    }
    ks->merged = p;
    ks->nmerged = merged;
    memcpy(ks->radices, radices, (size_t)merged * sizeof *radices);
    *made = 1;
  }
  *out = ks->merged;
  return BLK_OK;
}
