/*
 * test_partners_pipeline: the pipelined k-nomial tree
 * (patterns/partners_pipeline.h).
 *
 *  - parents and tree depths (through the rounds of one segment) worked out
 *    by hand (8 and 5 blocks with k = 2, 10 and 9 with k = 3);
 *  - the whole schedule of 2 blocks in 3 segments, round by round, by hand;
 *  - for n = 1..70 with k = 2, 3, 4, 7 and 1, 2, 5 segments: the pattern
 *    passes blk_partners_create_custom's checks (counts, ranges, round 0 and
 *    R, as many messages sent as received; also at 127, 128, 129 and 1000
 *    blocks), no list is longer than blk_partners_max_group, a sender names
 *    the segment its receiver expects, and a simulation of the all-reduce
 *    (every block adding what comes up from a child into its segment,
 *    copying what comes down from its parent; also at 128 and 129 blocks)
 *    leaves every segment of every block with every block's contribution
 *    exactly once;
 *  - bad arguments.
 */
#include <stdlib.h>
#include <string.h>

#include "blk/blk.h"
#include "blk/partners.h"
#include "check.h"
#include "patterns/partners_pipeline.h"

static void check_parents(int n, int k, const int *want_parent, int want_rounds_s1) {
  blk__pipeline t;
  CHECK_OK(blk__pipeline_init(&t, n, k, 1));
  for (int g = 0; g < n; g++)
    CHECK_MSG(blk__pipeline_parent(&t, g) == want_parent[g],
              "n %d k %d: parent of %d is %d, not %d", n, k, g, blk__pipeline_parent(&t, g),
              want_parent[g]);
  /* one segment: R = 2H */
  CHECK_EQ_INT(blk__pipeline_rounds(&t), want_rounds_s1);
}

static void by_hand(void) {
  /* 8 blocks, k = 2: 1, 2, 4 under 0; 3 under 2; 5, 6 under 4; 7 under 6: 3 levels */
  static const int p8[] = {-1, 0, 0, 2, 0, 4, 4, 6};
  check_parents(8, 2, p8, 6);
  /* 5 blocks, k = 2: 4's subtree is 4 alone (5..7 are missing); 2 -> 3 is the deepest */
  static const int p5[] = {-1, 0, 0, 2, 0};
  check_parents(5, 2, p5, 4);
  /* 10 blocks, k = 3: 1, 2, 3, 6, 9 under 0; 4, 5 under 3; 7, 8 under 6 */
  static const int p10[] = {-1, 0, 0, 0, 3, 3, 0, 6, 6, 0};
  check_parents(10, 3, p10, 4);
  /* 9 blocks, k = 3: 8 = 22 in base 3 has two digits, as deep as any */
  static const int p9[] = {-1, 0, 0, 0, 3, 3, 0, 6, 6};
  check_parents(9, 3, p9, 4);

  /* 2 blocks, 3 segments, R = 3 - 1 + 2 = 4. Up: 1 sends s in round s. The
   * root has s in round s + 1 and sends it down then; 1 gets it in s + 2. */
  blk_partners *p = NULL;
  CHECK_OK(blk__partners_create_pipeline(&p, 2, 2, 3));
  CHECK_EQ_INT(blk_partners_rounds(p), 4);
  /* per round: gid 0's in, out; gid 1's in, out (-1: none) */
  static const int table[5][4] = {
      {-1, -1, -1, 0}, {1, 1, -1, 0}, {1, 1, 0, 0}, {1, 1, 0, -1}, {-1, -1, 0, -1}};
  blk__pipeline t;
  CHECK_OK(blk__pipeline_init(&t, 2, 2, 3));
  for (int r = 0; r <= 4; r++)
    for (int g = 0; g < 2; g++) {
      int x[4], nin = blk_partners_in(p, r, g, x, 4);
      CHECK_MSG(nin == (table[r][2 * g] >= 0) && (!nin || x[0] == table[r][2 * g]),
                "round %d gid %d: %d in", r, g, nin);
      int nout = blk_partners_out(p, r, g, x, 4);
      CHECK_MSG(nout == (table[r][2 * g + 1] >= 0) && (!nout || x[0] == table[r][2 * g + 1]),
                "round %d gid %d: %d out", r, g, nout);
      CHECK_EQ_INT(blk_partners_active(p, r, g), nin + nout > 0);
    }
  CHECK_EQ_INT(blk__pipeline_segment(&t, 0, 1, 0), 0);
  CHECK_EQ_INT(blk__pipeline_segment(&t, 2, 1, 0), 2);
  CHECK_EQ_INT(blk__pipeline_segment(&t, 3, 1, 0), -1);
  CHECK_EQ_INT(blk__pipeline_segment(&t, 0, 0, 1), -1); /* the root has nothing yet */
  CHECK_EQ_INT(blk__pipeline_segment(&t, 1, 0, 1), 0);
  CHECK_EQ_INT(blk__pipeline_segment(&t, 3, 0, 1), 2);
  CHECK_EQ_INT(blk__pipeline_segment(&t, 1, 1, 1), -1); /* nobody sends itself */
  blk_partners_destroy(p);
}

/* The ops as a custom pattern, so create runs its checks on them. */
static void check_as_custom(int n, int k, int S) {
  const blk_partners_ops *ops = NULL;
  void *state = NULL;
  blk__pipeline t;
  int group = 0;
  CHECK_OK(blk__pipeline_init(&t, n, k, S));
  CHECK_OK(blk__pipeline_create(&ops, &state, &t, &group));
  blk_partners *p = NULL;
  CHECK_OK(blk_partners_create_custom(&p, ops, state));
  CHECK_MSG(blk_partners_max_group(p) <= group, "n %d k %d S %d: a list of %d, max_group %d", n, k,
            S, blk_partners_max_group(p), group);
  blk_partners_destroy(p);
}

/* Block g's contribution is a 1 in slot g of each of its segments; a
 * message is a copy of the sender's segment. At the end every slot of
 * every segment of every block must be 1. */
static void simulate(int n, int k, int S) {
  blk_partners *p = NULL;
  CHECK_OK(blk__partners_create_pipeline(&p, n, k, S));
  blk__pipeline t;
  CHECK_OK(blk__pipeline_init(&t, n, k, S));
  int R = blk_partners_rounds(p), group = blk_partners_max_group(p);
  CHECK_EQ_INT(R, n == 1 ? 0 : blk__pipeline_rounds(&t));
  size_t N = (size_t)n, segs = (size_t)S;
  /* have[(g S + s) N + c]: how often segment s of block g holds c's value;
   * messages by (receiver, sender), one a round at most on an edge */
  int *have = calloc(N * segs * N, sizeof *have);
  int *sent = calloc(N * N * N, sizeof *sent), *next = calloc(N * N * N, sizeof *next);
  int *sent_seg = malloc(N * N * sizeof *sent_seg), *next_seg = malloc(N * N * sizeof *next_seg);
  int *list = malloc((size_t)(group + 1) * sizeof *list);
  CHECK(have && sent && next && sent_seg && next_seg && list);
  for (size_t g = 0; g < N; g++)
    for (size_t s = 0; s < segs; s++) have[(g * segs + s) * N + g] = 1;
  for (size_t i = 0; i < N * N; i++) sent_seg[i] = -1;
  for (int r = 0; r <= R; r++) {
    for (size_t i = 0; i < N * N; i++) next_seg[i] = -1;
    for (int g = 0; g < n; g++) {
      int nin = blk_partners_in(p, r, g, list, group + 1);
      CHECK(nin <= group);
      for (int i = 0; i < nin; i++) {
        int src = list[i], s = blk__pipeline_segment(&t, r - 1, src, g);
        size_t slot = (size_t)g * N + (size_t)src;
        CHECK_MSG(s >= 0 && sent_seg[slot] == s,
                  "n %d k %d S %d round %d: %d from %d: segment %d, sent %d", n, k, S, r, g, src, s,
                  sent_seg[slot]);
        sent_seg[slot] = -2; /* received */
        int *mine = have + ((size_t)g * segs + (size_t)s) * N, *in = sent + slot * N;
        if (src == blk__pipeline_parent(&t, g))
          memcpy(mine, in, N * sizeof *mine);
        else
          for (size_t c = 0; c < N; c++) mine[c] += in[c];
      }
      int nout = blk_partners_out(p, r, g, list, group + 1);
      CHECK(nout <= group);
      CHECK_EQ_INT(blk_partners_active(p, r, g), n == 1 || nin + nout > 0);
      for (int i = 0; i < nout; i++) {
        int dst = list[i], s = blk__pipeline_segment(&t, r, g, dst);
        CHECK(s >= 0 && dst != g);
        size_t slot = (size_t)dst * N + (size_t)g;
        next_seg[slot] = s;
        memcpy(next + slot * N, have + ((size_t)g * segs + (size_t)s) * N, N * sizeof *next);
      }
    }
    for (size_t i = 0; i < N * N; i++)
      CHECK_MSG(sent_seg[i] < 0, /* -1 not sent, -2 received */
                "n %d k %d S %d: a message of round %d never received", n, k, S, r - 1);
    int *swap = sent;
    sent = next;
    next = swap;
    memcpy(sent_seg, next_seg, N * N * sizeof *sent_seg);
  }
  for (size_t i = 0; i < N * N; i++) CHECK(sent_seg[i] == -1); /* the last round sends nothing */
  for (size_t g = 0; g < N; g++)
    for (size_t s = 0; s < segs; s++)
      for (size_t c = 0; c < N; c++)
        CHECK_MSG(have[(g * segs + s) * N + c] == 1,
                  "n %d k %d S %d: gid %zu segment %zu holds gid %zu's value %d times", n, k, S, g,
                  s, c, have[(g * segs + s) * N + c]);
  free(have);
  free(sent);
  free(next);
  free(sent_seg);
  free(next_seg);
  free(list);
  blk_partners_destroy(p);
}

static void errors(void) {
  blk__pipeline t;
  blk_log_set_level(BLK_LOG_NONE);
  CHECK_ERR(blk__pipeline_init(&t, 0, 2, 1), BLK_EINVAL, "0 blocks");
  CHECK_ERR(blk__pipeline_init(&t, 4, 1, 1), BLK_EINVAL, "k = 1");
  CHECK_ERR(blk__pipeline_init(&t, 4, 2, 0), BLK_EINVAL, "0 segments");
  CHECK_ERR(blk__pipeline_init(&t, 4, 2, 2147483647), BLK_EINVAL, "too many rounds");
  blk_partners *p = (blk_partners *)&t;
  CHECK_ERR(blk__partners_create_pipeline(&p, 4, 2, 0), BLK_EINVAL, "0 segments");
  CHECK(p == NULL);
  blk_log_set_level(BLK_LOG_WARN);
}

int main(void) {
  by_hand();
  static const int ks[] = {2, 3, 4, 7}, segs[] = {1, 2, 5}, big[] = {127, 128, 129, 1000};
  for (int ki = 0; ki < 4; ki++)
    for (int si = 0; si < 3; si++) {
      for (int n = 1; n <= 70; n++) {
        check_as_custom(n, ks[ki], segs[si]);
        simulate(n, ks[ki], segs[si]);
      }
      for (int i = 0; i < 4; i++) check_as_custom(big[i], ks[ki], segs[si]);
    }
  simulate(129, 2, 3);
  simulate(128, 4, 2);
  errors();
  printf("test_partners_pipeline: ok\n");
  return 0;
}
