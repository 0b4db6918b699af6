/*
 * test_partners_choose: blk_partners_predict against costs counted by hand,
 * one constant of the model at a time, and blk_partners_choose against the
 * radix and order those counts make best.
 *
 * 8 blocks, merge, k = 2, contiguous: the active blocks per round are
 * 8, 4, 2, 1 (15 callbacks); the messages 4, 2, 1 (7, none to itself); on
 * 2 ranks (contiguous assigner, gids 0-3 and 4-7) only the last exchange
 * (4 -> 0) crosses, while halving order crosses in the first (4..7 -> 0..3).
 */
#include <math.h>

#include "blk/blk.h"
#include "blk/partners.h"
#include "check.h"

static blk_cost_model only(int which, double v) {
  blk_cost_model m = BLK_COST_MODEL_INIT;
  m.alpha = m.beta = m.callback = m.local = m.gamma = 0;
  double *c[] = {&m.alpha, &m.beta, &m.callback, &m.local, &m.gamma};
  *c[which] = v;
  return m;
}

enum { ALPHA, BETA, CALLBACK, LOCAL, GAMMA };

static double predict(blk_pattern pat, int n, int ranks, int k, int contiguous, size_t bytes,
                      blk_cost_model m, int split) {
  blk_partners *p;
  blk_assigner *a;
  CHECK_OK(blk_partners_create(&p, pat, 1, &n, k, contiguous));
  CHECK_OK(blk_assigner_create_contiguous(&a, ranks, n));
  double t = blk_partners_predict(p, a, bytes, &m, split);
  blk_assigner_destroy(a);
  blk_partners_destroy(p);
  return t;
}

/* The same for blk_partners_create_folded's pattern. */
static double predict_folded(blk_pattern pat, int n, int ranks, int k, int contiguous, size_t bytes,
                             blk_cost_model m, int split) {
  blk_partners *p;
  blk_assigner *a;
  CHECK_OK(blk_partners_create_folded(&p, pat, n, k, contiguous));
  CHECK_OK(blk_assigner_create_contiguous(&a, ranks, n));
  double t = blk_partners_predict(p, a, bytes, &m, split);
  blk_assigner_destroy(a);
  blk_partners_destroy(p);
  return t;
}

#define NEAR(x, want) \
  CHECK_MSG(fabs((x) - (want)) < 1e-9, "%s = %g, want %g", #x, (x), (double)(want))

int main(void) {
  NEAR(predict(BLK_MERGE, 8, 1, 2, 1, 10, only(CALLBACK, 1), 0), 15);
  NEAR(predict(BLK_MERGE, 8, 1, 2, 1, 10, only(LOCAL, 1), 0), 7);
  NEAR(predict(BLK_MERGE, 8, 1, 2, 1, 10, only(GAMMA, 1), 0), 70);
  NEAR(predict(BLK_MERGE, 8, 1, 2, 1, 10, only(ALPHA, 1), 0), 0); /* one rank: nothing crosses */
  blk_cost_model two = only(CALLBACK, 1);
  two.threads = 2;
  NEAR(predict(BLK_MERGE, 8, 1, 2, 1, 10, two, 0), 7.5);
  /* 2 ranks: a rank's share is half of each round's work. */
  NEAR(predict(BLK_MERGE, 8, 2, 2, 1, 10, only(CALLBACK, 1), 0), 7.5);
  NEAR(predict(BLK_MERGE, 8, 2, 2, 1, 10, only(ALPHA, 1), 0), 1);
  NEAR(predict(BLK_MERGE, 8, 2, 2, 0, 10, only(ALPHA, 1), 0), 1);
  NEAR(predict(BLK_MERGE, 8, 2, 2, 1, 10, only(BETA, 1), 0), 0.5 * 10);
  NEAR(predict(BLK_MERGE, 8, 2, 2, 0, 10, only(BETA, 1), 0), 0.5 * 4 * 10);
  /* Swap of 4 blocks, k = 2: every block sends one message a round, 2 rounds;
   * split, each is half the bytes. */
  NEAR(predict(BLK_SWAP, 4, 1, 2, 1, 8, only(LOCAL, 1), 0), 8);
  NEAR(predict(BLK_SWAP, 4, 1, 2, 1, 8, only(GAMMA, 1), 0), 64);
  NEAR(predict(BLK_SWAP, 4, 1, 2, 1, 8, only(GAMMA, 1), 1), 32);
  /* All-reduce = merge + broadcast: 8, 4, 2, 1, 2, 4, 8 active. */
  NEAR(predict(BLK_ALLREDUCE, 8, 1, 2, 1, 10, only(CALLBACK, 1), 0), 29);

  /* Folded: 17 blocks, k = 2, a swap: gid 1 folds into 0, 16 run four
   * rounds of 2, 0 gives 1 its part. Callbacks: 17 in the fold, 16 in each
   * of the five inner rounds, 17 in the last; messages (not to itself): 1,
   * then 16 in each of four exchanges, then 1. Unfolded it is one round of
   * 17: 17 + 17 callbacks, 17 * 16 messages. */
  NEAR(predict_folded(BLK_SWAP, 17, 1, 2, 1, 8, only(CALLBACK, 1), 0), 17 + 5 * 16 + 17);
  NEAR(predict_folded(BLK_SWAP, 17, 1, 2, 1, 8, only(LOCAL, 1), 0), 1 + 4 * 16 + 1);
  NEAR(predict(BLK_SWAP, 17, 1, 2, 1, 8, only(LOCAL, 1), 0), 17 * 16);
  /* A merge folds only: 17, then 16, 8, 4, 2, 1. */
  NEAR(predict_folded(BLK_MERGE, 17, 1, 2, 1, 8, only(CALLBACK, 1), 0), 17 + 31);

  blk_assigner *a;
  int k = 0, c = -1;
  /* Callbacks only: the fewest rounds. 12 blocks: k = 12 is 12 + 1
   * callbacks; 6 (6, 2) 15; 4 (4, 3) 16; 2 (2, 2, 3) 22. */
  blk_cost_model m = only(CALLBACK, 1);
  CHECK_OK(blk_assigner_create_contiguous(&a, 1, 12));
  CHECK_OK(blk_partners_choose(BLK_MERGE, a, 100, &m, 0, &k, &c));
  CHECK(k == 12 && c == 1);
  blk_assigner_destroy(a);
  /* Bytes between ranks only: 8 blocks on 2 ranks, contiguous order with
   * k = 2 or 4 sends one message across; halving or k = 8 four. */
  m = only(BETA, 1);
  CHECK_OK(blk_assigner_create_contiguous(&a, 2, 8));
  CHECK_OK(blk_partners_choose(BLK_MERGE, a, 1000, &m, 0, &k, &c));
  CHECK(k == 2 && c == 1);
  /* Under a round-robin assigner the same job wants halving: its first
   * exchanges (gid distance 4, then 2) stay on a rank. */
  blk_assigner *rr;
  CHECK_OK(blk_assigner_create_round_robin(&rr, 2, 8));
  CHECK_OK(blk_partners_choose(BLK_MERGE, rr, 1000, &m, 0, &k, &c));
  CHECK(k == 2 && c == 0);
  blk_assigner_destroy(rr);
  /* 1009 blocks (a prime), 1 KiB each: choose models the folded pattern,
   * which the defaults price at a twentieth of the one round of 1009 (its
   * 1009^2 messages). */
  blk_assigner *big;
  CHECK_OK(blk_assigner_create_contiguous(&big, 2, 1009));
  CHECK_OK(blk_partners_choose(BLK_SWAP, big, 1024, NULL, 1, &k, &c));
  blk_cost_model dm = BLK_COST_MODEL_INIT;
  double chosen = predict_folded(BLK_SWAP, 1009, 2, k, c, 1024, dm, 1);
  CHECK(chosen > 0 && 10 * chosen < predict(BLK_SWAP, 1009, 2, k, c, 1024, dm, 1));
  for (int kk = 2; kk <= 16; kk++)
    for (int cc = 0; cc <= 1; cc++)
      CHECK(chosen <= predict_folded(BLK_SWAP, 1009, 2, kk, cc, 1024, dm, 1));
  blk_assigner_destroy(big);
  /* The defaults choose something in range. */
  CHECK_OK(blk_partners_choose(BLK_SWAP, a, 1 << 20, NULL, 1, &k, &c));
  CHECK(k >= 2 && k <= 8 && (c == 0 || c == 1));

  /* Errors. */
  blk_log_set_level(BLK_LOG_NONE);
  CHECK_EQ_INT(blk_partners_choose(BLK_MERGE, NULL, 1, NULL, 0, &k, &c), BLK_EINVAL);
  CHECK_EQ_INT(blk_partners_choose(BLK_MERGE, a, 1, NULL, 0, NULL, &c), BLK_EINVAL);
  m = only(ALPHA, -1);
  CHECK_EQ_INT(blk_partners_choose(BLK_MERGE, a, 1, &m, 0, &k, &c), BLK_EINVAL);
  m = only(BETA, NAN);
  CHECK_EQ_INT(blk_partners_choose(BLK_MERGE, a, 1, &m, 0, &k, &c), BLK_EINVAL);
  m = only(ALPHA, 1);
  m.threads = 0;
  CHECK_EQ_INT(blk_partners_choose(BLK_MERGE, a, 1, &m, 0, &k, &c), BLK_EINVAL);
  m.threads = 1;
  m.version = 0;
  CHECK_EQ_INT(blk_partners_choose(BLK_MERGE, a, 1, &m, 0, &k, &c), BLK_EINVAL);
  CHECK_EQ_INT(blk_partners_choose((blk_pattern)9, a, 1, NULL, 0, &k, &c), BLK_EINVAL);
  blk_partners *p;
  int twelve = 12;
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, &twelve, 2, 1));
  CHECK(blk_partners_predict(p, a, 1, NULL, 0) == -1); /* 12 blocks, 8 assigned */
  CHECK(blk_partners_predict(NULL, a, 1, NULL, 0) == -1);
  blk_partners_destroy(p);
  blk_assigner_destroy(a);
  /* One block: nothing to choose between. */
  CHECK_OK(blk_assigner_create_contiguous(&a, 1, 1));
  CHECK_OK(blk_partners_choose(BLK_MERGE, a, 1, NULL, 0, &k, &c));
  CHECK(k == 2 && c == 1);
  blk_assigner_destroy(a);
  printf("test_partners_choose: ok\n");
  return 0;
}
