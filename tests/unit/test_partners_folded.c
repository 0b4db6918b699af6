/*
 * test_partners_folded: patterns over a line of blocks whose count has a
 * large prime factor (patterns/partners_folded.h), checked by simulation.
 *
 *  - blk__fold_base against a search by hand: m is the largest count <= n
 *    whose prime factors are all <= max(k, 16), and m >= n / 2;
 *  - a count that needs no fold gives the regular pattern, list for list;
 *  - for counts that do (1..120, 1009, 1013, 2003 with k = 2, 3, 4, 8, 17;
 *    both orders; all four patterns): every sender is listed once by its
 *    receiver the next round; no list is longer than max(k, 16) (1009 with
 *    k = 2 was one round of 1009); extras (odd gids below 2r) are active
 *    only in the first and last rounds; the same sums as
 *    test_partners_invariants (merge: the root gets every block's value
 *    once; broadcast: every block gets the root's; swap and all-reduce:
 *    every block gets every value once);
 *  - routing: every block sends one item to every block, forwarding each
 *    to the out-partner blk_partners_round_position names; after the last
 *    round each item is at its destination;
 *  - what partners.h promises of blk_partners_create_folded (the public
 *    name of the same patterns, which this test creates them with): the
 *    fold round's lists (extra to stand-in, the rest to themselves, the
 *    stand-in receiving 2i then 2i+1), the unfold's (stand-in to itself
 *    then its extra), no axis, radix or step in those rounds and no
 *    coordinate position in any, and its errors.
 */
#include <stdlib.h>
#include <string.h>

#include "blk/blk.h"
#include "blk/partners.h"
#include "check.h"
#include "fold_reference.h"
#include "patterns/partners_folded.h"

static void check_base(int n, int k) {
  int m = blk__fold_base(n, k);
  CHECK_EQ_INT(BLK__FOLD_WIDTH, 16); /* (what fold_reference.h assumes) */
  CHECK_MSG(m >= 1 && m <= n && 2 * m >= n, "n %d k %d: m %d", n, k, m);
  CHECK_MSG(n - m == folded_count(n, k), "n %d k %d: m %d, by hand %d", n, k, m,
            n - folded_count(n, k));
}

/* Same lists as the regular pattern, round for round. */
static void check_same(const blk_partners *a, const blk_partners *b, int n) {
  int x[64], y[64];
  CHECK_EQ_INT(blk_partners_rounds(a), blk_partners_rounds(b));
  for (int r = 0; r <= blk_partners_rounds(a); r++)
    for (int g = 0; g < n; g++) {
      CHECK_EQ_INT(blk_partners_active(a, r, g), blk_partners_active(b, r, g));
      int na = blk_partners_in(a, r, g, x, 64), nb = blk_partners_in(b, r, g, y, 64);
      CHECK(na == nb && !memcmp(x, y, (size_t)(na < 64 ? na : 64) * sizeof *x));
      na = blk_partners_out(a, r, g, x, 64);
      nb = blk_partners_out(b, r, g, y, 64);
      CHECK(na == nb && !memcmp(x, y, (size_t)(na < 64 ? na : 64) * sizeof *x));
      if (r < blk_partners_rounds(a))
        CHECK_EQ_INT(blk_partners_round_position(a, r, g), blk_partners_round_position(b, r, g));
    }
}

static void simulate(const blk_partners *p, blk_pattern pattern, int n, int k, const char *name) {
  int R = blk_partners_rounds(p), width = k > BLK__FOLD_WIDTH ? k : BLK__FOLD_WIDTH;
  int mg = blk_partners_max_group(p), m = blk__fold_base(n, k), r = n - m;
  CHECK_MSG(mg <= width, "%s: max_group %d", name, mg);
  int *gids = malloc((size_t)(mg + 1) * sizeof *gids);
  long long *value = calloc((size_t)n, sizeof *value), *before = calloc((size_t)n, sizeof *before);
  long long *count = calloc((size_t)n, sizeof *count), *cbefore = calloc((size_t)n, sizeof *count);
  int *sent = calloc((size_t)n * (size_t)n, sizeof *sent); /* sent[from * n + to], last round */
  int *outs = malloc((size_t)n * (size_t)(mg + 1) * sizeof *outs),
      *nouts = calloc((size_t)n, sizeof *nouts);
  /* Items: where the one from s to d is (at[s * n + d]). */
  int *at = malloc((size_t)n * (size_t)n * sizeof *at),
      *next = malloc((size_t)n * (size_t)n * sizeof *at);
  CHECK(gids && value && before && count && cbefore && sent && outs && nouts && at && next);
  for (int g = 0; g < n; g++) {
    value[g] = g + 1;
    count[g] = 1;
    for (int d = 0; d < n; d++) at[g * n + d] = g;
  }
  for (int rd = 0; rd <= R; rd++) {
    memcpy(before, value, (size_t)n * sizeof *value);
    memcpy(cbefore, count, (size_t)n * sizeof *count);
    for (int g = 0; g < n; g++) {
      int act = blk_partners_active(p, rd, g), extra = g < 2 * r && (g & 1);
      if (extra && rd > 0 && rd < R)
        CHECK_MSG(!act, "%s: extra %d active in round %d", name, g, rd);
      int nin = blk_partners_in(p, rd, g, gids, mg + 1);
      CHECK(nin <= mg && (act || !nin) && (rd > 0 || !nin));
      if (act && rd > 0) value[g] = count[g] = 0;
      for (int i = 0; i < nin; i++) {
        CHECK(gids[i] >= 0 && gids[i] < n);
        CHECK_MSG(sent[gids[i] * n + g] == 1, "%s: round %d: %d lists %d, which did not send", name,
                  rd, g, gids[i]);
        sent[gids[i] * n + g] = 0;
        value[g] += before[gids[i]];
        count[g] += cbefore[gids[i]];
      }
    }
    for (int i = 0; i < n * n; i++)
      CHECK_MSG(!sent[i], "%s: round %d: %d sent to %d, not received", name, rd, i / n, i % n);
    for (int g = 0; g < n; g++) {
      int *out = outs + (size_t)g * (size_t)(mg + 1);
      int nout = nouts[g] = blk_partners_out(p, rd, g, out, mg + 1);
      CHECK(nout <= mg && (blk_partners_active(p, rd, g) || !nout) && (rd < R || !nout));
      for (int i = 0; i < nout; i++) {
        CHECK(out[i] >= 0 && out[i] < n && !sent[g * n + out[i]]);
        sent[g * n + out[i]] = 1;
      }
    }
    if (pattern != BLK_SWAP || rd == R) continue;
    for (int s = 0; s < n; s++) /* every item to the member on its way */
      for (int d = 0; d < n; d++) {
        int g = at[s * n + d], j = blk_partners_round_position(p, rd, d);
        CHECK_MSG(j >= 0 && j < nouts[g], "%s: round %d gid %d: item for %d to place %d of %d",
                  name, rd, g, d, j, nouts[g]);
        next[s * n + d] = outs[(size_t)g * (size_t)(mg + 1) + (size_t)j];
      }
    memcpy(at, next, (size_t)n * (size_t)n * sizeof *at);
  }
  long long total = (long long)n * (n + 1) / 2;
  for (int g = 0; g < n; g++) {
    if (pattern == BLK_MERGE && g == 0) CHECK(value[0] == total && count[0] == n);
    if (pattern == BLK_BROADCAST) CHECK_MSG(value[g] == 1 && count[g] == 1, "%s: gid %d", name, g);
    if (pattern == BLK_SWAP || pattern == BLK_ALLREDUCE)
      CHECK_MSG(value[g] == total && count[g] == n, "%s: gid %d has %lld from %lld", name, g,
                value[g], count[g]);
    if (pattern == BLK_SWAP)
      for (int s = 0; s < n; s++)
        CHECK_MSG(at[s * n + g] == g, "%s: the item from %d for %d ended at %d", name, s, g,
                  at[s * n + g]);
  }
  free(next);
  free(at);
  free(nouts);
  free(outs);
  free(sent);
  free(cbefore);
  free(count);
  free(before);
  free(value);
  free(gids);
}

/* The fold and unfold rounds as partners.h describes them, by hand. */
static void check_fold_rounds(const blk_partners *p, blk_pattern pattern, int n, int k) {
  int R = blk_partners_rounds(p), r = n - blk__fold_base(n, k), g2[2];
  int in = pattern != BLK_BROADCAST, out = pattern != BLK_MERGE;
  for (int e = 0; e < R; e++) {
    int fold = (in && e == 0) || (out && e == R - 1);
    CHECK_EQ_INT(blk_partners_round_axis(p, e) < 0, fold);
    CHECK_EQ_INT(blk_partners_round_radix(p, e) < 0, fold);
    CHECK_EQ_INT(blk_partners_round_step(p, e) < 0, fold);
    CHECK_EQ_INT(blk_partners_round_coord_position(p, e, 0), -1);
  }
  for (int g = 0; g < n; g++) {
    int extra = g < 2 * r && (g & 1), stand_in = g < 2 * r && !(g & 1);
    if (in) {
      CHECK(blk_partners_active(p, 0, g));
      CHECK_EQ_INT(blk_partners_out(p, 0, g, g2, 2), 1);
      CHECK_EQ_INT(g2[0], extra ? g - 1 : g);
      CHECK_EQ_INT(blk_partners_in(p, 1, g, g2, 2), extra ? 0 : stand_in ? 2 : 1);
      if (!extra) CHECK_EQ_INT(g2[0], g);
      if (stand_in) CHECK_EQ_INT(g2[1], g + 1);
    }
    if (out) {
      CHECK(blk_partners_active(p, R, g));
      CHECK_EQ_INT(blk_partners_active(p, R - 1, g), !extra);
      CHECK_EQ_INT(blk_partners_out(p, R - 1, g, g2, 2), extra ? 0 : stand_in ? 2 : 1);
      if (!extra) CHECK_EQ_INT(g2[0], g);
      if (stand_in) CHECK_EQ_INT(g2[1], g + 1);
      CHECK_EQ_INT(blk_partners_in(p, R, g, g2, 2), 1);
      CHECK_EQ_INT(g2[0], extra ? g - 1 : g);
    }
  }
  if (pattern == BLK_MERGE) CHECK_EQ_INT(blk_partners_active(p, R, 0), 1);
  if (pattern == BLK_BROADCAST) CHECK_EQ_INT(blk_partners_active(p, 0, 1), 0);
}

static void check_errors(void) {
  blk_partners *p = (blk_partners *)&p;
  CHECK_EQ_INT(blk_partners_create_folded(NULL, BLK_MERGE, 7, 2, 1), BLK_EINVAL);
  CHECK_EQ_INT(blk_partners_create_folded(&p, (blk_pattern)4, 1009, 2, 1), BLK_EINVAL);
  CHECK(p == NULL);
  CHECK_EQ_INT(blk_partners_create_folded(&p, BLK_SWAP, 0, 2, 1), BLK_EINVAL);
  CHECK_EQ_INT(blk_partners_create_folded(&p, BLK_SWAP, 1009, 1, 1), BLK_EINVAL);
  CHECK_EQ_INT(blk_partners_create_folded(&p, BLK_SWAP, 1009, 2, 2), BLK_EINVAL);
  CHECK_EQ_INT(blk_partners_create_folded(&p, BLK_SWAP, 7, 2, -1), BLK_EINVAL);
  CHECK(p == NULL);
}

int main(void) {
  check_errors();
  static const int radices[] = {2, 3, 4, 8, 17};
  static const int big[] = {1009, 1013, 2003};
  for (int n = 1; n <= 2100; n++)
    for (size_t ki = 0; ki < sizeof radices / sizeof *radices; ki++) check_base(n, radices[ki]);
  CHECK_EQ_INT(blk__fold_base(1009, 2), 1008);
  int folded = 0;
  for (int n = 1; n <= 120 + 3; n++) {
    int nn = n <= 120 ? n : big[n - 121];
    for (size_t ki = 0; ki < sizeof radices / sizeof *radices; ki++)
      for (int pat = 0; pat < 4; pat++)
        for (int contiguous = 0; contiguous < 2; contiguous++) {
          int k = radices[ki];
          blk_partners *p = NULL, *q = NULL;
          CHECK_EQ_INT(blk_partners_create_folded(&p, (blk_pattern)pat, nn, k, contiguous), 0);
          char name[96];
          snprintf(name, sizeof name, "n %d k %d pattern %d contiguous %d", nn, k, pat, contiguous);
          if (blk__fold_base(nn, k) == nn) {
            CHECK_EQ_INT(blk_partners_create(&q, (blk_pattern)pat, 1, &nn, k, contiguous), 0);
            check_same(p, q, nn);
            blk_partners_destroy(q);
          } else if (nn <= 120 || (pat == BLK_SWAP && k == 2) || pat == BLK_ALLREDUCE) {
            simulate(p, (blk_pattern)pat, nn, k, name);
            check_fold_rounds(p, (blk_pattern)pat, nn, k);
            folded++;
          }
          blk_partners_destroy(p);
        }
  }
  CHECK(folded > 100);
  printf("test_partners_folded: %d folded patterns checked\n", folded);
  return 0;
}
