/*
 * test_partners_top: a tree all-reduce whose top is one exchange
 * (patterns/partners_top.h).
 *
 *  - 4 blocks, k = 2, against the table worked out by hand;
 *  - over counts 2..40 and 1009 (folded), k = 2, 3, 4 and 8, both
 *    orders: one round less than the tree; the rounds below the top and
 *    above it are the tree's, list for list, with their radices and
 *    positions; the top round is an exchange within the tree's top group;
 *    every message sent is listed by its receiver; and a simulation of who
 *    holds whose contribution ends with every block holding all of them,
 *    the top group's members each the whole after the top round;
 *  - a pattern of an odd round count, or none, is refused and freed (the
 *    sanitizer builds see a leak otherwise).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blk/blk.h"
#include "blk/partners.h"
#include "check.h"
#include "partners_checks.h"
#include "patterns/partners_top.h"

#define MAXG 1024

static int list_is(const blk_partners *p, int in, int r, int g, int n, const int *want) {
  int got[MAXG];
  int m = in ? blk_partners_in(p, r, g, got, MAXG) : blk_partners_out(p, r, g, got, MAXG);
  return m == n && (n == 0 || !memcmp(got, want, (size_t)n * sizeof *got));
}

/* 4 blocks, k = 2: levels {0,1} {2,3}, then {0,2}. The tree sends up,
 * the root 0 turns in round 2, and sends down; here 0 and 2 exchange
 * instead and each sends down its own pair. */
static void by_hand(void) {
  blk_partners *tree = NULL, *top = NULL;
  int n = 4;
  CHECK_OK(blk_partners_create(&tree, BLK_ALLREDUCE, 1, &n, 2, 1));
  CHECK_OK(blk__partners_create_top(&top, tree));
  CHECK_EQ_INT(blk_partners_rounds(top), 3);
  const int r0_out[4][1] = {{0}, {0}, {2}, {2}};
  const int r1_in[4][2] = {{0, 1}, {0}, {2, 3}, {0}}, r1_nin[4] = {2, 0, 2, 0};
  const int both[2] = {0, 2};
  const int r2_out[4][2] = {{0, 1}, {0}, {2, 3}, {0}};
  const int r3_in[4][1] = {{0}, {0}, {2}, {2}};
  for (int g = 0; g < 4; g++) {
    int top_member = g == 0 || g == 2;
    CHECK(list_is(top, 1, 0, g, 0, NULL));
    CHECK(list_is(top, 0, 0, g, 1, r0_out[g]));
    CHECK(list_is(top, 1, 1, g, r1_nin[g], r1_in[g]));
    CHECK(list_is(top, 0, 1, g, top_member ? 2 : 0, both));
    CHECK(list_is(top, 1, 2, g, top_member ? 2 : 0, both));
    CHECK(list_is(top, 0, 2, g, top_member ? 2 : 0, r2_out[g]));
    CHECK(list_is(top, 1, 3, g, 1, r3_in[g]));
    CHECK(list_is(top, 0, 3, g, 0, NULL));
    CHECK_EQ_INT(blk_partners_active(top, 1, g), top_member);
    CHECK_EQ_INT(blk_partners_active(top, 2, g), top_member);
    CHECK_EQ_INT(blk_partners_active(top, 3, g), 1);
  }
  CHECK_EQ_INT(blk_partners_round_radix(top, 1), 2);
  CHECK_EQ_INT(blk_partners_round_position(top, 1, 2), 1);
  blk_partners_destroy(top);
}

/* Who holds whose contribution (a bit set over at most 64 blocks' worth:
 * bit g % 64, enough to see a block left out for n <= 64; the 1009-block
 * case checks the structure only). */
static void simulate(const blk_partners *p, int n, int m) {
  if (n > 64) return;
  uint64_t *has = calloc((size_t)n, sizeof *has), *next = calloc((size_t)n, sizeof *next);
  uint64_t *sent = calloc((size_t)n * MAXG, sizeof *sent);
  CHECK(has && next && sent);
  for (int g = 0; g < n; g++) has[g] = (uint64_t)1 << g;
  const uint64_t all = n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
  int ids[MAXG];
  for (int r = 0; r <= blk_partners_rounds(p); r++) {
    /* receive what round r - 1 sent (sent[dst * MAXG + src]); merging
     * rounds combine, broadcasting ones take what comes */
    for (int g = 0; g < n; g++) {
      next[g] = has[g];
      if (r == 0) continue;
      int ni = blk_partners_in(p, r, g, ids, MAXG);
      uint64_t got = 0;
      for (int i = 0; i < ni; i++) got |= sent[(size_t)g * MAXG + (size_t)ids[i]];
      if (ni > 0) next[g] = r <= m ? next[g] | got : got;
    }
    memset(sent, 0, (size_t)n * MAXG * sizeof *sent);
    for (int g = 0; g < n; g++) {
      has[g] = next[g];
      if (r == m && blk_partners_active(p, r, g))
        CHECK_MSG(has[g] == all, "gid %d lacks a contribution after the top round", g);
      int no = blk_partners_out(p, r, g, ids, MAXG);
      for (int i = 0; i < no; i++) sent[(size_t)ids[i] * MAXG + (size_t)g] = has[g];
    }
  }
  for (int g = 0; g < n; g++) CHECK_MSG(has[g] == all, "n %d: gid %d ends without all", n, g);
  free(has);
  free(next);
  free(sent);
}

static void against_tree(int n, int k, int contiguous) {
  blk_partners *tree = NULL, *ref = NULL, *top = NULL;
  CHECK_OK(blk_partners_create_folded(&tree, BLK_ALLREDUCE, n, k, contiguous));
  CHECK_OK(blk_partners_create_folded(&ref, BLK_ALLREDUCE, n, k, contiguous));
  int T = blk_partners_rounds(ref), m = T / 2;
  CHECK_OK(blk__partners_create_top(&top, tree));
  CHECK_EQ_INT(blk_partners_rounds(top), T - 1);
  CHECK_EQ_INT(blk_partners_nblocks(top), n);
  static int x[MAXG], y[MAXG];
  for (int r = 0; r <= T - 1; r++) {
    int tr = r < m ? r : r + 1; /* the tree's round */
    for (int g = 0; g < n; g++) {
      CHECK_EQ_INT(blk_partners_active(top, r, g), blk_partners_active(ref, tr, g));
      int a = blk_partners_in(top, r, g, x, MAXG), b = blk_partners_in(ref, tr, g, y, MAXG);
      if (r != m)
        CHECK_MSG(a == b && !memcmp(x, y, (size_t)a * sizeof *x), "n %d k %d round %d gid %d: in",
                  n, k, r, g);
      a = blk_partners_out(top, r, g, x, MAXG);
      b = blk_partners_out(ref, tr, g, y, MAXG);
      if (r != m - 1)
        CHECK_MSG(a == b && !memcmp(x, y, (size_t)a * sizeof *x), "n %d k %d round %d gid %d: out",
                  n, k, r, g);
      if (r == m - 1 && b == 1) { /* a top member: to the root's group, itself among them */
        int nb = blk_partners_in(ref, m, y[0], y, MAXG), self = 0;
        CHECK(a == nb && !memcmp(x, y, (size_t)a * sizeof *x));
        for (int i = 0; i < a; i++) self += x[i] == g;
        CHECK_EQ_INT(self, 1);
        int c = blk_partners_in(top, m, g, y, MAXG);
        CHECK(c == a && !memcmp(x, y, (size_t)a * sizeof *x));
      } else if (r == m - 1) {
        CHECK_EQ_INT(a, 0);
        CHECK_EQ_INT(blk_partners_in(top, m, g, y, MAXG), 0);
      }
      if (r == T - 1) continue;
      int e = r < m ? r : r + 1; /* the tree's exchange round */
      CHECK_EQ_INT(blk_partners_round_radix(top, r), blk_partners_round_radix(ref, e));
      CHECK_EQ_INT(blk_partners_round_step(top, r), blk_partners_round_step(ref, e));
      CHECK_EQ_INT(blk_partners_round_position(top, r, g), blk_partners_round_position(ref, e, g));
    }
  }
  check_listed_by_receivers(top, n);
  simulate(top, n, m);
  blk_partners_destroy(top);
  blk_partners_destroy(ref);
}

int main(void) {
  by_hand();
  static const int radices[] = {2, 3, 4, 8};
  for (int n = 2; n <= 41; n++) {
    int nn = n <= 40 ? n : 1009;
    for (size_t ki = 0; ki < sizeof radices / sizeof *radices; ki++)
      for (int contiguous = 0; contiguous < 2; contiguous++)
        against_tree(nn, radices[ki], contiguous);
  }
  blk_partners *one = NULL, *swap = NULL, *out = NULL;
  int n1 = 1, n7 = 7;
  CHECK_OK(blk_partners_create(&one, BLK_ALLREDUCE, 1, &n1, 2, 1));
  CHECK_ERR(blk__partners_create_top(&out, one), BLK_EINVAL, "not 0");
  CHECK(out == NULL);
  CHECK_OK(blk_partners_create(&swap, BLK_SWAP, 1, &n7, 2, 1));
  CHECK_ERR(blk__partners_create_top(&out, swap), BLK_EINVAL, "not 1");
  CHECK(out == NULL);
  printf("test_partners_top: passed\n");
  return 0;
}
