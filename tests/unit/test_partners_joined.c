/*
 * test_partners_joined: two patterns run as one (patterns/partners_joined.h).
 *
 *  - a merge joined to a broadcast is the all-reduce: against
 *    blk_partners_create_folded(BLK_ALLREDUCE), which partners.h defines as
 *    exactly that, list for list, activity, and each exchange round's
 *    radix and positions, over counts 1..40 and 1009 (folded) with k = 2,
 *    3, 4 and 8, both orders;
 *  - SPLIT's shape, a swap joined to a swap: the round counts add, the
 *    joint round receives the first's last messages and sends the second's
 *    first, and every message sent in a round is listed by its receiver in
 *    the next;
 *  - blk__partners_joined_first gives the first pattern of a joined one,
 *    NULL for any other;
 *  - patterns over different counts are refused, and both are freed (the
 *    sanitizer builds see a leak otherwise).
 */
#include <stdlib.h>
#include <string.h>

#include "blk/blk.h"
#include "blk/partners.h"
#include "check.h"
#include "partners_checks.h"
#include "patterns/partners_joined.h"

#define MAXG 1024

static void check_lists(const blk_partners *a, const blk_partners *b, int r, int g) {
  static int x[MAXG], y[MAXG];
  CHECK_EQ_INT(blk_partners_active(a, r, g), blk_partners_active(b, r, g));
  int na = blk_partners_in(a, r, g, x, MAXG), nb = blk_partners_in(b, r, g, y, MAXG);
  CHECK_MSG(na == nb && !memcmp(x, y, (size_t)na * sizeof *x), "round %d gid %d: in lists", r, g);
  na = blk_partners_out(a, r, g, x, MAXG);
  nb = blk_partners_out(b, r, g, y, MAXG);
  CHECK_MSG(na == nb && !memcmp(x, y, (size_t)na * sizeof *x), "round %d gid %d: out lists", r, g);
}

static void merge_then_broadcast(int n, int k, int contiguous) {
  blk_partners *merge = NULL, *bcast = NULL, *joined = NULL, *ref = NULL;
  CHECK_OK(blk_partners_create_folded(&merge, BLK_MERGE, n, k, contiguous));
  CHECK_OK(blk_partners_create_folded(&bcast, BLK_BROADCAST, n, k, contiguous));
  CHECK_OK(blk_partners_create_folded(&ref, BLK_ALLREDUCE, n, k, contiguous));
  int r1 = blk_partners_rounds(merge);
  CHECK_OK(blk__partners_create_joined(&joined, merge, bcast));
  CHECK(blk__partners_joined_first(joined) == merge);
  CHECK(blk__partners_joined_first(ref) == NULL);
  CHECK_EQ_INT(blk_partners_rounds(joined), blk_partners_rounds(ref));
  CHECK_EQ_INT(blk_partners_nblocks(joined), n);
  CHECK_EQ_INT(blk_partners_max_group(joined), blk_partners_max_group(ref));
  for (int r = 0; r <= blk_partners_rounds(ref); r++)
    for (int g = 0; g < n; g++) {
      check_lists(joined, ref, r, g);
      if (r == blk_partners_rounds(ref)) continue;
      CHECK_EQ_INT(blk_partners_round_radix(joined, r), blk_partners_round_radix(ref, r));
      CHECK_EQ_INT(blk_partners_round_step(joined, r), blk_partners_round_step(ref, r));
      /* (the all-reduce's position in its broadcast half is the merge's, backwards) */
      const blk_partners *half = r < r1 ? merge : bcast;
      CHECK_EQ_INT(blk_partners_round_position(joined, r, g),
                   blk_partners_round_position(half, r < r1 ? r : r - r1, g));
    }
  blk_partners_destroy(joined);
  blk_partners_destroy(ref);
}

static void swap_then_swap(int n, int k) {
  blk_partners *a = NULL, *b = NULL, *c = NULL, *d = NULL, *joined = NULL;
  CHECK_OK(blk_partners_create(&a, BLK_SWAP, 1, &n, k, 0));
  CHECK_OK(blk_partners_create(&b, BLK_SWAP, 1, &n, k, 1));
  CHECK_OK(blk_partners_create(&c, BLK_SWAP, 1, &n, k, 0));
  CHECK_OK(blk_partners_create(&d, BLK_SWAP, 1, &n, k, 1));
  int r1 = blk_partners_rounds(a), r2 = blk_partners_rounds(b);
  CHECK_OK(blk__partners_create_joined(&joined, a, b));
  CHECK_EQ_INT(blk_partners_rounds(joined), r1 + r2);
  static int x[MAXG], y[MAXG];
  for (int g = 0; g < n; g++) {
    /* the joint round: the first's last receive, the second's first send */
    int nj = blk_partners_in(joined, r1, g, x, MAXG), nc = blk_partners_in(c, r1, g, y, MAXG);
    CHECK(nj == nc && !memcmp(x, y, (size_t)nj * sizeof *x));
    nj = blk_partners_out(joined, r1, g, x, MAXG);
    nc = blk_partners_out(d, 0, g, y, MAXG);
    CHECK(nj == nc && !memcmp(x, y, (size_t)nj * sizeof *x));
    for (int r = 0; r < r1 + r2; r++) {
      int radix = r < r1 ? blk_partners_round_radix(c, r) : blk_partners_round_radix(d, r - r1);
      CHECK_EQ_INT(blk_partners_round_radix(joined, r), radix);
    }
  }
  check_listed_by_receivers(joined, n);
  blk_partners_destroy(joined);
  blk_partners_destroy(c);
  blk_partners_destroy(d);
}

int main(void) {
  static const int radices[] = {2, 3, 4, 8};
  for (int n = 1; n <= 41; n++) {
    int nn = n <= 40 ? n : 1009;
    for (size_t ki = 0; ki < sizeof radices / sizeof *radices; ki++) {
      for (int contiguous = 0; contiguous < 2; contiguous++)
        merge_then_broadcast(nn, radices[ki], contiguous);
      if (nn <= 40) swap_then_swap(nn, radices[ki]);
    }
  }
  blk_partners *a = NULL, *b = NULL, *out = NULL;
  int six = 6, seven = 7;
  CHECK_OK(blk_partners_create(&a, BLK_SWAP, 1, &six, 2, 0));
  CHECK_OK(blk_partners_create(&b, BLK_SWAP, 1, &seven, 2, 0));
  CHECK_ERR(blk__partners_create_joined(&out, a, b), BLK_EINVAL, "joining a pattern of 6 blocks");
  CHECK(out == NULL);
  printf("test_partners_joined: passed\n");
  return 0;
}
