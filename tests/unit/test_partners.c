/*
 * test_partners: the regular patterns against tables worked out by hand, explicit
 * rounds, bad input, a custom pattern (a ring) through the ops table, and custom
 * patterns too large to check or hold.
 *
 * A hand table has one string per callback round 0..R, one token per gid:
 *   x        the block is inactive (and has no partners)
 *   IN>OUT   the block is active; IN and OUT are its in- and out-partners, comma
 *            separated and in order (either list may be empty)
 * The tables below were written by hand from the rules in docs/patterns.md ("How the
 * rounds are made"), not computed.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blk/blk.h"
#include "blk/partners.h"
#include "check.h"

enum { MAXG = 64 };

static const char *parse_list(const char *s, int *list, int *n) {
  *n = 0;
  while (isdigit((unsigned char)*s)) {
    char *end = NULL;
    CHECK(*n < MAXG);
    list[(*n)++] = (int)strtol(s, &end, 10);
    s = end;
    if (*s == ',') s++;
  }
  return s;
}

static void check_list(const char *what, const char *name, int round, int gid, int got,
                       const int *gids, int want, const int *wants) {
  CHECK_MSG(got == want, "%s round %d gid %d: %s count %d, table says %d", name, round, gid, what,
            got, want);
  for (int i = 0; i < want; i++)
    CHECK_MSG(gids[i] == wants[i], "%s round %d gid %d: %s[%d] = %d, table says %d", name, round,
              gid, what, i, gids[i], wants[i]);
}

/* Every query of p against rows[0..rounds]. */
static void check_table(const blk_partners *p, const char *name, int nblocks, int rounds,
                        const char *const rows[]) {
  CHECK_EQ_INT(blk_partners_nblocks(p), nblocks);
  CHECK_EQ_INT(blk_partners_rounds(p), rounds);
  for (int r = 0; r <= rounds; r++) {
    const char *s = rows[r];
    for (int g = 0; g < nblocks; g++) {
      while (*s == ' ') s++;
      CHECK_MSG(*s != '\0', "%s round %d: table has no token for gid %d", name, r, g);
      int win[MAXG], wout[MAXG], nin = 0, nout = 0, active = 1;
      if (*s == 'x') {
        active = 0;
        s++;
      } else {
        s = parse_list(s, win, &nin);
        CHECK_MSG(*s == '>', "%s round %d gid %d: bad token", name, r, g);
        s = parse_list(s + 1, wout, &nout);
      }
      CHECK_MSG(*s == ' ' || *s == '\0', "%s round %d gid %d: bad token", name, r, g);
      CHECK_MSG(blk_partners_active(p, r, g) == active, "%s round %d gid %d: active %d, table %d",
                name, r, g, blk_partners_active(p, r, g), active);
      int got[MAXG];
      check_list("in", name, r, g, blk_partners_in(p, r, g, got, MAXG), got, nin, win);
      check_list("out", name, r, g, blk_partners_out(p, r, g, got, MAXG), got, nout, wout);
    }
    while (*s == ' ') s++;
    CHECK_MSG(*s == '\0', "%s round %d: table has more than %d tokens", name, r, nblocks);
  }
}

static void check_created(blk_pattern pattern, int dim, const int *divisions, int k, int contiguous,
                          const char *name, int nblocks, int rounds, const char *const rows[]) {
  blk_partners *p = NULL;
  CHECK_OK(blk_partners_create(&p, pattern, dim, divisions, k, contiguous));
  check_table(p, name, nblocks, rounds, rows);
  blk_partners_destroy(p);
}

static void check_explicit(blk_pattern pattern, int dim, const int *divisions, int nrounds,
                           const int *axes, const int *radices, int contiguous, const char *name,
                           int nblocks, const char *const rows[]) {
  blk_partners *p = NULL;
  CHECK_OK(
      blk_partners_create_rounds(&p, pattern, dim, divisions, nrounds, axes, radices, contiguous));
  check_table(p, name, nblocks, blk_partners_rounds(p), rows);
  blk_partners_destroy(p);
}

/* Every query of a and b agrees. */
static void check_same(const blk_partners *a, const blk_partners *b) {
  CHECK_EQ_INT(blk_partners_rounds(a), blk_partners_rounds(b));
  CHECK_EQ_INT(blk_partners_nblocks(a), blk_partners_nblocks(b));
  CHECK_EQ_INT(blk_partners_max_group(a), blk_partners_max_group(b));
  int R = blk_partners_rounds(a), n = blk_partners_nblocks(a);
  for (int e = -1; e <= R; e++) {
    CHECK_EQ_INT(blk_partners_round_axis(a, e), blk_partners_round_axis(b, e));
    CHECK_EQ_INT(blk_partners_round_radix(a, e), blk_partners_round_radix(b, e));
  }
  for (int r = 0; r <= R; r++)
    for (int g = 0; g < n; g++) {
      CHECK_EQ_INT(blk_partners_active(a, r, g), blk_partners_active(b, r, g));
      int ga[MAXG], gb[MAXG];
      int na = blk_partners_in(a, r, g, ga, MAXG), nb = blk_partners_in(b, r, g, gb, MAXG);
      CHECK_EQ_INT(na, nb);
      for (int i = 0; i < na; i++) CHECK_EQ_INT(ga[i], gb[i]);
      na = blk_partners_out(a, r, g, ga, MAXG);
      nb = blk_partners_out(b, r, g, gb, MAXG);
      CHECK_EQ_INT(na, nb);
      for (int i = 0; i < na; i++) CHECK_EQ_INT(ga[i], gb[i]);
    }
}

static void check_rounds_list(const blk_partners *p, int n, const int *axes, const int *radices) {
  CHECK_EQ_INT(blk_partners_rounds(p), n);
  for (int e = 0; e < n; e++) {
    CHECK_EQ_INT(blk_partners_round_axis(p, e), axes[e]);
    CHECK_EQ_INT(blk_partners_round_radix(p, e), radices[e]);
  }
  CHECK_EQ_INT(blk_partners_round_axis(p, -1), -1);
  CHECK_EQ_INT(blk_partners_round_axis(p, n), -1);
  CHECK_EQ_INT(blk_partners_round_radix(p, -1), -1);
  CHECK_EQ_INT(blk_partners_round_radix(p, n), -1);
}

/* ---- hand tables ---- */

static const int d8[] = {8}, d12[] = {12}, d7[] = {7}, d34[] = {3, 4};

/* 1D 8 blocks, k = 2: radices 2,2,2. contiguous steps 1,2,4; halving 4,2,1. */
static const char *const merge8_k2_c[] = {
    ">0 >0 >2 >2 >4 >4 >6 >6",
    "0,1>0 x 2,3>0 x 4,5>4 x 6,7>4 x",
    "0,2>0 x x x 4,6>0 x x x",
    "0,4> x x x x x x x",
};
static const char *const merge8_k2_h[] = {
    ">0 >1 >2 >3 >0 >1 >2 >3",
    "0,4>0 1,5>1 2,6>0 3,7>1 x x x x",
    "0,2>0 1,3>0 x x x x x x",
    "0,1> x x x x x x x",
};
static const char *const swap8_k2_c[] = {
    ">0,1 >0,1 >2,3 >2,3 >4,5 >4,5 >6,7 >6,7",
    "0,1>0,2 0,1>1,3 2,3>0,2 2,3>1,3 4,5>4,6 4,5>5,7 6,7>4,6 6,7>5,7",
    "0,2>0,4 1,3>1,5 0,2>2,6 1,3>3,7 4,6>0,4 5,7>1,5 4,6>2,6 5,7>3,7",
    "0,4> 1,5> 2,6> 3,7> 0,4> 1,5> 2,6> 3,7>",
};
static const char *const swap8_k2_h[] = {
    ">0,4 >1,5 >2,6 >3,7 >0,4 >1,5 >2,6 >3,7",
    "0,4>0,2 1,5>1,3 2,6>0,2 3,7>1,3 0,4>4,6 1,5>5,7 2,6>4,6 3,7>5,7",
    "0,2>0,1 1,3>0,1 0,2>2,3 1,3>2,3 4,6>4,5 5,7>4,5 4,6>6,7 5,7>6,7",
    "0,1> 0,1> 2,3> 2,3> 4,5> 4,5> 6,7> 6,7>",
};
static const char *const bcast8_k2_c[] = {
    ">0,4 x x x x x x x",
    "0>0,2 x x x 0>4,6 x x x",
    "0>0,1 x 0>2,3 x 4>4,5 x 4>6,7 x",
    "0> 0> 2> 2> 4> 4> 6> 6>",
};
static const char *const allreduce8_k2_c[] = {
    ">0 >0 >2 >2 >4 >4 >6 >6", "0,1>0 x 2,3>0 x 4,5>4 x 6,7>4 x", "0,2>0 x x x 4,6>0 x x x",
    "0,4>0,4 x x x x x x x",   "0>0,2 x x x 0>4,6 x x x",         "0>0,1 x 0>2,3 x 4>4,5 x 4>6,7 x",
    "0> 0> 2> 2> 4> 4> 6> 6>",
};

/* 1D 8 blocks, k = 4: radices 4,2. contiguous steps 1,4; halving 2,1. */
static const char *const merge8_k4_c[] = {
    ">0 >0 >0 >0 >4 >4 >4 >4",
    "0,1,2,3>0 x x x 4,5,6,7>0 x x x",
    "0,4> x x x x x x x",
};
static const char *const merge8_k4_h[] = {
    ">0 >1 >0 >1 >0 >1 >0 >1",
    "0,2,4,6>0 1,3,5,7>0 x x x x x x",
    "0,1> x x x x x x x",
};
static const char *const swap8_k4_c[] = {
    ">0,1,2,3 >0,1,2,3 >0,1,2,3 >0,1,2,3 >4,5,6,7 >4,5,6,7 >4,5,6,7 >4,5,6,7",
    ("0,1,2,3>0,4 0,1,2,3>1,5 0,1,2,3>2,6 0,1,2,3>3,7 "
     "4,5,6,7>0,4 4,5,6,7>1,5 4,5,6,7>2,6 4,5,6,7>3,7"),
    "0,4> 1,5> 2,6> 3,7> 0,4> 1,5> 2,6> 3,7>",
};
static const char *const swap8_k4_h[] = {
    ">0,2,4,6 >1,3,5,7 >0,2,4,6 >1,3,5,7 >0,2,4,6 >1,3,5,7 >0,2,4,6 >1,3,5,7",
    ("0,2,4,6>0,1 1,3,5,7>0,1 0,2,4,6>2,3 1,3,5,7>2,3 "
     "0,2,4,6>4,5 1,3,5,7>4,5 0,2,4,6>6,7 1,3,5,7>6,7"),
    "0,1> 0,1> 2,3> 2,3> 4,5> 4,5> 6,7> 6,7>",
};

/* 1D 12 blocks, k = 4: radices 4,3. contiguous steps 1,4; halving 3,1. */
static const char *const merge12_k4_c[] = {
    ">0 >0 >0 >0 >4 >4 >4 >4 >8 >8 >8 >8",
    "0,1,2,3>0 x x x 4,5,6,7>0 x x x 8,9,10,11>0 x x x",
    "0,4,8> x x x x x x x x x x x",
};
static const char *const merge12_k4_h[] = {
    ">0 >1 >2 >0 >1 >2 >0 >1 >2 >0 >1 >2",
    "0,3,6,9>0 1,4,7,10>0 2,5,8,11>0 x x x x x x x x x",
    "0,1,2> x x x x x x x x x x x",
};
static const char *const swap12_k4_c[] = {
    (">0,1,2,3 >0,1,2,3 >0,1,2,3 >0,1,2,3 >4,5,6,7 >4,5,6,7 >4,5,6,7 >4,5,6,7 "
     ">8,9,10,11 >8,9,10,11 >8,9,10,11 >8,9,10,11"),
    ("0,1,2,3>0,4,8 0,1,2,3>1,5,9 0,1,2,3>2,6,10 0,1,2,3>3,7,11 "
     "4,5,6,7>0,4,8 4,5,6,7>1,5,9 4,5,6,7>2,6,10 4,5,6,7>3,7,11 "
     "8,9,10,11>0,4,8 8,9,10,11>1,5,9 8,9,10,11>2,6,10 8,9,10,11>3,7,11"),
    "0,4,8> 1,5,9> 2,6,10> 3,7,11> 0,4,8> 1,5,9> 2,6,10> 3,7,11> 0,4,8> 1,5,9> 2,6,10> 3,7,11>",
};
static const char *const swap12_k4_h[] = {
    (">0,3,6,9 >1,4,7,10 >2,5,8,11 >0,3,6,9 >1,4,7,10 >2,5,8,11 "
     ">0,3,6,9 >1,4,7,10 >2,5,8,11 >0,3,6,9 >1,4,7,10 >2,5,8,11"),
    ("0,3,6,9>0,1,2 1,4,7,10>0,1,2 2,5,8,11>0,1,2 0,3,6,9>3,4,5 1,4,7,10>3,4,5 2,5,8,11>3,4,5 "
     "0,3,6,9>6,7,8 1,4,7,10>6,7,8 2,5,8,11>6,7,8 0,3,6,9>9,10,11 1,4,7,10>9,10,11 "
     "2,5,8,11>9,10,11"),
    "0,1,2> 0,1,2> 0,1,2> 3,4,5> 3,4,5> 3,4,5> 6,7,8> 6,7,8> 6,7,8> 9,10,11> 9,10,11> 9,10,11>",
};
/* Explicit rounds 3 then 4 (not what k = 4 gives): steps 1,3. */
static const char *const merge12_r34_c[] = {
    ">0 >0 >0 >3 >3 >3 >6 >6 >6 >9 >9 >9",
    "0,1,2>0 x x 3,4,5>0 x x 6,7,8>0 x x 9,10,11>0 x x",
    "0,3,6,9> x x x x x x x x x x x",
};

/* 1D 7 blocks, k = 2: 7 is prime and larger than k, so one wider round of 7. */
static const char *const merge7_k2[] = {
    ">0 >0 >0 >0 >0 >0 >0",
    "0,1,2,3,4,5,6> x x x x x x",
};
static const char *const swap7_k2[] = {
    (">0,1,2,3,4,5,6 >0,1,2,3,4,5,6 >0,1,2,3,4,5,6 >0,1,2,3,4,5,6 >0,1,2,3,4,5,6 "
     ">0,1,2,3,4,5,6 >0,1,2,3,4,5,6"),
    ("0,1,2,3,4,5,6> 0,1,2,3,4,5,6> 0,1,2,3,4,5,6> 0,1,2,3,4,5,6> 0,1,2,3,4,5,6> "
     "0,1,2,3,4,5,6> 0,1,2,3,4,5,6>"),
};

/* 2D divisions {3,4}, k = 2, gid = x + 3y: rounds (axis 0, 3), (axis 1, 2), (axis 1, 2).
 * contiguous steps 1,1,2; halving 1,2,1. */
static const char *const merge34_k2_c[] = {
    ">0 >0 >0 >3 >3 >3 >6 >6 >6 >9 >9 >9",
    "0,1,2>0 x x 3,4,5>0 x x 6,7,8>6 x x 9,10,11>6 x x",
    "0,3>0 x x x x x 6,9>0 x x x x x",
    "0,6> x x x x x x x x x x x",
};
static const char *const merge34_k2_h[] = {
    ">0 >0 >0 >3 >3 >3 >6 >6 >6 >9 >9 >9",
    "0,1,2>0 x x 3,4,5>3 x x 6,7,8>0 x x 9,10,11>3 x x",
    "0,6>0 x x 3,9>0 x x x x x x x x",
    "0,3> x x x x x x x x x x x",
};

static void test_hand_tables(void) {
  check_created(BLK_MERGE, 1, d8, 2, 1, "merge8_k2_c", 8, 3, merge8_k2_c);
  check_created(BLK_MERGE, 1, d8, 2, 0, "merge8_k2_h", 8, 3, merge8_k2_h);
  check_created(BLK_SWAP, 1, d8, 2, 1, "swap8_k2_c", 8, 3, swap8_k2_c);
  check_created(BLK_SWAP, 1, d8, 2, 0, "swap8_k2_h", 8, 3, swap8_k2_h);
  check_created(BLK_BROADCAST, 1, d8, 2, 1, "bcast8_k2_c", 8, 3, bcast8_k2_c);
  check_created(BLK_ALLREDUCE, 1, d8, 2, 1, "allreduce8_k2_c", 8, 6, allreduce8_k2_c);
  check_created(BLK_MERGE, 1, d8, 4, 1, "merge8_k4_c", 8, 2, merge8_k4_c);
  check_created(BLK_MERGE, 1, d8, 4, 0, "merge8_k4_h", 8, 2, merge8_k4_h);
  check_created(BLK_SWAP, 1, d8, 4, 1, "swap8_k4_c", 8, 2, swap8_k4_c);
  check_created(BLK_SWAP, 1, d8, 4, 0, "swap8_k4_h", 8, 2, swap8_k4_h);
  check_created(BLK_MERGE, 1, d12, 4, 1, "merge12_k4_c", 12, 2, merge12_k4_c);
  check_created(BLK_MERGE, 1, d12, 4, 0, "merge12_k4_h", 12, 2, merge12_k4_h);
  check_created(BLK_SWAP, 1, d12, 4, 1, "swap12_k4_c", 12, 2, swap12_k4_c);
  check_created(BLK_SWAP, 1, d12, 4, 0, "swap12_k4_h", 12, 2, swap12_k4_h);
  for (int c = 0; c <= 1; c++) { /* one round: both orders agree */
    check_created(BLK_MERGE, 1, d7, 2, c, "merge7_k2", 7, 1, merge7_k2);
    check_created(BLK_SWAP, 1, d7, 2, c, "swap7_k2", 7, 1, swap7_k2);
  }
  check_created(BLK_MERGE, 2, d34, 2, 1, "merge34_k2_c", 12, 3, merge34_k2_c);
  check_created(BLK_MERGE, 2, d34, 2, 0, "merge34_k2_h", 12, 3, merge34_k2_h);
}

/* The axis and radix of each exchange round, as written out by hand. */
static void test_round_lists(void) {
  static const int a000[] = {0, 0, 0}, r222[] = {2, 2, 2};
  static const int a00[] = {0, 0}, r43[] = {4, 3}, r34[] = {3, 4}, r4334[] = {4, 3, 3, 4};
  static const int a0000[] = {0, 0, 0, 0};
  static const int a011[] = {0, 1, 1}, r322[] = {3, 2, 2};
  static const int a110[] = {1, 1, 0}, r223[] = {2, 2, 3};
  static const int a011110[] = {0, 1, 1, 1, 1, 0}, r322223[] = {3, 2, 2, 2, 2, 3};
  static const int a0[] = {0}, r7[] = {7};
  blk_partners *p = NULL;
  CHECK_OK(blk_partners_create(&p, BLK_BROADCAST, 1, d8, 2, 1));
  check_rounds_list(p, 3, a000, r222);
  CHECK_EQ_INT(blk_partners_max_group(p), 2);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, d12, 4, 0));
  check_rounds_list(p, 2, a00, r43);
  CHECK_EQ_INT(blk_partners_max_group(p), 4);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_BROADCAST, 1, d12, 4, 1));
  check_rounds_list(p, 2, a00, r34);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_ALLREDUCE, 1, d12, 4, 1));
  check_rounds_list(p, 4, a0000, r4334);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_SWAP, 2, d34, 2, 1));
  check_rounds_list(p, 3, a011, r322);
  CHECK_EQ_INT(blk_partners_max_group(p), 3);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_BROADCAST, 2, d34, 2, 0));
  check_rounds_list(p, 3, a110, r223);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_ALLREDUCE, 2, d34, 2, 1));
  check_rounds_list(p, 6, a011110, r322223);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, d7, 2, 1));
  check_rounds_list(p, 1, a0, r7);
  CHECK_EQ_INT(blk_partners_max_group(p), 7);
  blk_partners_destroy(p);

  /* Greedy factoring, by hand: 18 with k = 4 is 3,3,2 (DIY's FactorK divides by k instead
   * of j after a smaller factor and gives 3,4, which does not multiply to 18); 12 with
   * k = 8 is 6,2; 44 with k = 4 is 4,11; 25 with k = 3 is 5,5 (no j in [2,3) divides it,
   * so its smallest prime factor); 1009 is prime. */
  static const int d18[] = {18}, r332[] = {3, 3, 2}, d44[] = {44}, r4_11[] = {4, 11};
  static const int r62[] = {6, 2}, d25[] = {25}, r25[] = {5, 5}, d1009[] = {1009}, r1009[] = {1009};
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, d18, 4, 1));
  check_rounds_list(p, 3, a000, r332);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, d12, 8, 1));
  check_rounds_list(p, 2, a00, r62);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, d44, 4, 1));
  check_rounds_list(p, 2, a00, r4_11);
  CHECK_EQ_INT(blk_partners_max_group(p), 11);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, d25, 3, 1));
  check_rounds_list(p, 2, a00, r25);
  blk_partners_destroy(p);
  CHECK_OK(blk_partners_create(&p, BLK_SWAP, 1, d1009, 8, 0));
  check_rounds_list(p, 1, a0, r1009);
  blk_partners_destroy(p);
  /* A large k takes the trial-division path: 2*3*5*7*11*13 = 30030 with k = 1000: 1000
   * does not divide it, its largest divisor below 1000 is 910 (= 2*5*7*13), then 33 is
   * below k and taken whole. */
  static const int d30030[] = {30030}, r910_33[] = {910, 33};
  CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, d30030, 1000, 1));
  check_rounds_list(p, 2, a00, r910_33);
  blk_partners_destroy(p);
}

static void test_explicit_rounds(void) {
  static const int a000[] = {0, 0, 0}, r222[] = {2, 2, 2}, a00[] = {0, 0}, r43[] = {4, 3};
  static const int r34[] = {3, 4}, a011[] = {0, 1, 1}, r322[] = {3, 2, 2}, a0[] = {0}, r7[] = {7};
  static const int r42[] = {4, 2};
  check_explicit(BLK_MERGE, 1, d8, 3, a000, r222, 1, "explicit merge8_k2_c", 8, merge8_k2_c);
  check_explicit(BLK_SWAP, 1, d8, 3, a000, r222, 0, "explicit swap8_k2_h", 8, swap8_k2_h);
  check_explicit(BLK_MERGE, 1, d12, 2, a00, r43, 1, "explicit merge12_k4_c", 12, merge12_k4_c);
  check_explicit(BLK_MERGE, 1, d12, 2, a00, r34, 1, "explicit merge12_r34_c", 12, merge12_r34_c);
  check_explicit(BLK_MERGE, 1, d7, 1, a0, r7, 1, "explicit merge7", 7, merge7_k2);
  check_explicit(BLK_MERGE, 2, d34, 3, a011, r322, 1, "explicit merge34_k2_c", 12, merge34_k2_c);
  check_explicit(BLK_MERGE, 2, d34, 3, a011, r322, 0, "explicit merge34_k2_h", 12, merge34_k2_h);

  /* The same rounds as k gives agree with it on every query, for every pattern. */
  static const struct {
    int dim;
    const int *div;
    int k, nrounds;
    const int *axes, *radices;
  } same[] = {
      {1, d8, 2, 3, a000, r222}, {1, d8, 4, 2, a00, r42},    {1, d12, 4, 2, a00, r43},
      {1, d7, 2, 1, a0, r7},     {2, d34, 2, 3, a011, r322},
  };
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
    for (int pat = BLK_MERGE; pat <= BLK_ALLREDUCE; pat++)
      for (int c = 0; c <= 1; c++) {
        blk_partners *a = NULL, *b = NULL;
        CHECK_OK(blk_partners_create(&a, (blk_pattern)pat, same[i].dim, same[i].div, same[i].k, c));
        CHECK_OK(blk_partners_create_rounds(&b, (blk_pattern)pat, same[i].dim, same[i].div,
                                            same[i].nrounds, same[i].axes, same[i].radices, c));
        check_same(a, b);
        blk_partners_destroy(a);
        blk_partners_destroy(b);
      }

  /* No rounds: every division 1 gives a single block that is active in round 0 only. */
  static const int d111[] = {1, 1, 1};
  for (int pat = BLK_MERGE; pat <= BLK_ALLREDUCE; pat++) {
    blk_partners *p = NULL, *q = NULL;
    CHECK_OK(blk_partners_create_rounds(&p, (blk_pattern)pat, 3, d111, 0, NULL, NULL, 1));
    CHECK_OK(blk_partners_create(&q, (blk_pattern)pat, 3, d111, 2, 0));
    static const char *const one[] = {">"};
    check_table(p, "single block", 1, 0, one);
    check_table(q, "single block", 1, 0, one);
    CHECK_EQ_INT(blk_partners_max_group(p), 0);
    CHECK_EQ_INT(blk_partners_round_axis(p, 0), -1);
    blk_partners_destroy(p);
    blk_partners_destroy(q);
  }
}

/* Out-of-range queries answer "nothing" and never touch gids; short buffers truncate. */
static void test_queries(void) {
  blk_partners *p = NULL;
  CHECK_OK(blk_partners_create(&p, BLK_SWAP, 1, d8, 4, 1));
  int gids[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
  static const int bad[][2] = {{-1, 0}, {3, 0}, {0, -1}, {0, 8}, {1, 100}, {-5, -5}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_EQ_INT(blk_partners_active(p, bad[i][0], bad[i][1]), 0);
    CHECK_EQ_INT(blk_partners_in(p, bad[i][0], bad[i][1], gids, 8), 0);
    CHECK_EQ_INT(blk_partners_out(p, bad[i][0], bad[i][1], gids, 8), 0);
  }
  for (int i = 0; i < 8; i++) CHECK_EQ_INT(gids[i], -7);
  /* swap8_k4_c round 1 gid 5: in 4,5,6,7; out 1,5 */
  CHECK_EQ_INT(blk_partners_in(p, 1, 5, gids, 2), 4);
  CHECK_EQ_INT(gids[0], 4);
  CHECK_EQ_INT(gids[1], 5);
  CHECK_EQ_INT(gids[2], -7);
  CHECK_EQ_INT(blk_partners_in(p, 1, 5, NULL, 0), 4);
  CHECK_EQ_INT(blk_partners_in(p, 1, 5, NULL, 5), 4);
  CHECK_EQ_INT(blk_partners_out(p, 1, 5, gids, -1), 2);
  CHECK_EQ_INT(gids[2], -7);
  blk_partners_destroy(p);

  CHECK_EQ_INT(blk_partners_rounds(NULL), 0);
  CHECK_EQ_INT(blk_partners_nblocks(NULL), 0);
  CHECK_EQ_INT(blk_partners_active(NULL, 0, 0), 0);
  CHECK_EQ_INT(blk_partners_in(NULL, 0, 0, gids, 8), 0);
  CHECK_EQ_INT(blk_partners_out(NULL, 0, 0, gids, 8), 0);
  CHECK_EQ_INT(blk_partners_max_group(NULL), 0);
  CHECK_EQ_INT(blk_partners_round_axis(NULL, 0), -1);
  CHECK_EQ_INT(blk_partners_round_radix(NULL, 0), -1);
  blk_partners_destroy(NULL);
}

static void test_bad_input(void) {
  blk_partners *p = (blk_partners *)&p; /* must come back NULL */
  static const int d2[] = {2, 3}, dz[] = {4, 0}, dneg[] = {-3}, dbig[] = {65536, 65536};
  CHECK_ERR(blk_partners_create(NULL, BLK_MERGE, 1, d8, 2, 1), BLK_EINVAL, "out is NULL");
  CHECK_ERR(blk_partners_create(&p, (blk_pattern)4, 1, d8, 2, 1), BLK_EINVAL, "pattern = 4");
  CHECK(p == NULL);
  CHECK_ERR(blk_partners_create(&p, (blk_pattern)-1, 1, d8, 2, 1), BLK_EINVAL, "pattern = -1");
  CHECK_ERR(blk_partners_create(&p, BLK_MERGE, 0, d8, 2, 1), BLK_EINVAL, "dim = 0");
  CHECK_ERR(blk_partners_create(&p, BLK_MERGE, 9, d8, 2, 1), BLK_EINVAL, "dim = 9");
  CHECK_ERR(blk_partners_create(&p, BLK_MERGE, 1, NULL, 2, 1), BLK_EINVAL, "divisions is NULL");
  CHECK_ERR(blk_partners_create(&p, BLK_MERGE, 2, dz, 2, 1), BLK_EINVAL, "divisions[1] = 0");
  CHECK_ERR(blk_partners_create(&p, BLK_SWAP, 1, dneg, 2, 1), BLK_EINVAL, "divisions[0] = -3");
  CHECK_ERR(blk_partners_create(&p, BLK_MERGE, 2, dbig, 2, 1), BLK_EINVAL, "4294967296");
  CHECK_ERR(blk_partners_create(&p, BLK_MERGE, 1, d8, 1, 1), BLK_EINVAL, "k = 1");
  CHECK_ERR(blk_partners_create(&p, BLK_MERGE, 1, d8, -4, 1), BLK_EINVAL, "k = -4");
  CHECK_ERR(blk_partners_create(&p, BLK_MERGE, 1, d8, 2, 2), BLK_EINVAL, "contiguous = 2");
  CHECK(p == NULL);

  static const int a0[] = {0}, a01[] = {0, 1}, a02[] = {0, 2}, a0m[] = {0, -1};
  static const int r2[] = {2}, r23[] = {2, 3}, r21[] = {2, 1}, r4[] = {4}, r222[] = {2, 2, 2};
  static const int a000[] = {0, 0, 0}, a0000[] = {0, 0, 0, 0}, r2222[] = {2, 2, 2, 2};
  CHECK_ERR(blk_partners_create_rounds(NULL, BLK_MERGE, 1, d8, 1, a0, r2, 1), BLK_EINVAL,
            "out is NULL");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 1, d8, -1, a0, r2, 1), BLK_EINVAL,
            "nrounds = -1");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 2, d2, 2, NULL, r23, 1), BLK_EINVAL,
            "axes is NULL");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 2, d2, 2, a01, NULL, 1), BLK_EINVAL,
            "radices is NULL");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 2, d2, 2, a02, r23, 1), BLK_EINVAL,
            "axes[1] = 2");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 2, d2, 2, a0m, r23, 1), BLK_EINVAL,
            "axes[1] = -1");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 2, d2, 2, a01, r21, 1), BLK_EINVAL,
            "radices[1] = 1");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 2, d2, 1, a0, r2, 1), BLK_EINVAL,
            "radices of axis 1 multiply to 1, not divisions[1] = 3");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 1, d8, 1, a0, r4, 1), BLK_EINVAL,
            "radices of axis 0 multiply to 4, not divisions[0] = 8");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 1, d8, 4, a0000, r2222, 1), BLK_EINVAL,
            "multiply to 16 by round 3, more than divisions[0] = 8");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 1, d12, 3, a000, r222, 1), BLK_EINVAL,
            "multiply to 8, not divisions[0] = 12");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 2, d2, 0, NULL, NULL, 1), BLK_EINVAL,
            "nrounds = 0 but divisions[0] = 2 needs rounds");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 1, d8, 3, a000, r222, 7), BLK_EINVAL,
            "contiguous = 7");
  CHECK_ERR(blk_partners_create_rounds(&p, (blk_pattern)9, 1, d8, 3, a000, r222, 1), BLK_EINVAL,
            "pattern = 9");
  CHECK_ERR(blk_partners_create_rounds(&p, BLK_MERGE, 1, dneg, 1, a0, r2, 1), BLK_EINVAL,
            "divisions[0] = -3");
  CHECK(p == NULL);
}

/* ---- a custom pattern: a ring, each block passing what it last received to the next ---- */

enum { RING_OK, RING_IN_ROUND0, RING_OUT_LAST, RING_BAD_GID, RING_INACTIVE, RING_UNEVEN };

typedef struct ring {
  int n;
  int bug;
  int destroyed;
} ring;

static int ring_rounds(const void *state) {
  const ring *r = state;
  return r->n - 1;
}

static int ring_nblocks(const void *state) {
  const ring *r = state;
  return r->n;
}

static int ring_active(const void *state, int round, int gid) {
  const ring *r = state;
  (void)round;
  return !(r->bug == RING_INACTIVE && gid == 1);
}

static int ring_in(const void *state, int round, int gid, int *gids, int max) {
  const ring *r = state;
  if (round == 0 && r->bug != RING_IN_ROUND0) return 0;
  if (max > 0) gids[0] = (gid + r->n - 1) % r->n;
  return r->bug == RING_UNEVEN && gid == 0 && round == 1 ? 0 : 1;
}

static int ring_out(const void *state, int round, int gid, int *gids, int max) {
  const ring *r = state;
  if (round == r->n - 1 && r->bug != RING_OUT_LAST) return 0;
  if (max > 0) gids[0] = r->bug == RING_BAD_GID && gid == 2 ? r->n : (gid + 1) % r->n;
  return 1;
}

static void ring_destroy(void *state) {
  ring *r = state;
  r->destroyed++;
}

static const blk_partners_ops ring_ops = {BLK_PARTNERS_OPS_VERSION,
                                          ring_rounds,
                                          ring_nblocks,
                                          ring_active,
                                          ring_in,
                                          ring_out,
                                          ring_destroy};

/* A star: every block sends to gid 0 in round 0; more partners than blk's first guess. */
static int star_rounds(const void *state) {
  (void)state;
  return 1;
}

static int star_nblocks(const void *state) {
  return *(const int *)state;
}

static int star_active(const void *state, int round, int gid) {
  (void)state;
  return round == 0 || gid == 0;
}

static int star_in(const void *state, int round, int gid, int *gids, int max) {
  int n = *(const int *)state;
  if (round == 0 || gid != 0) return 0;
  for (int i = 0; i < n && i < max; i++) gids[i] = i;
  return n;
}

static int star_out(const void *state, int round, int gid, int *gids, int max) {
  (void)state, (void)gid;
  if (round == 1) return 0;
  if (max > 0) gids[0] = 0;
  return 1;
}

static void test_custom(void) {
  ring rg = {5, RING_OK, 0};
  blk_partners *p = NULL;
  CHECK_OK(blk_partners_create_custom(&p, &ring_ops, &rg));
  static const char *const ring5[] = {
      ">1 >2 >3 >4 >0",      "4>1 0>2 1>3 2>4 3>0", "4>1 0>2 1>3 2>4 3>0",
      "4>1 0>2 1>3 2>4 3>0", "4> 0> 1> 2> 3>",
  };
  check_table(p, "ring5", 5, 4, ring5);
  CHECK_EQ_INT(blk_partners_max_group(p), 1);
  CHECK_EQ_INT(blk_partners_round_axis(p, 0), -1);
  CHECK_EQ_INT(blk_partners_round_radix(p, 0), -1);
  CHECK_EQ_INT(blk_partners_active(p, 5, 0), 0);
  CHECK_EQ_INT(blk_partners_in(p, 1, 5, NULL, 0), 0);

  /* All-gather around the ring: after n-1 rounds every block has every value. */
  long long carry[5], next[5], total[5];
  for (int g = 0; g < 5; g++) carry[g] = total[g] = g + 1;
  for (int r = 1; r <= blk_partners_rounds(p); r++) {
    for (int g = 0; g < 5; g++) {
      int from = -1;
      CHECK_EQ_INT(blk_partners_in(p, r, g, &from, 1), 1);
      next[g] = carry[from];
      total[g] += next[g];
    }
    memcpy(carry, next, sizeof carry);
  }
  for (int g = 0; g < 5; g++) CHECK_EQ_INT(total[g], 15);
  CHECK_EQ_INT(rg.destroyed, 0);
  blk_partners_destroy(p);
  CHECK_EQ_INT(rg.destroyed, 1);

  int nstar = 40;
  static const blk_partners_ops star_ops = {
      BLK_PARTNERS_OPS_VERSION, star_rounds, star_nblocks, star_active, star_in, star_out, NULL};
  CHECK_OK(blk_partners_create_custom(&p, &star_ops, &nstar));
  CHECK_EQ_INT(blk_partners_max_group(p), 40);
  int gids[40];
  CHECK_EQ_INT(blk_partners_in(p, 1, 0, gids, 40), 40);
  CHECK_EQ_INT(gids[39], 39);
  blk_partners_destroy(p); /* destroy NULL in the ops: the state is not blk's to free */

  /* Broken patterns are refused at create, naming what is wrong; the state stays ours. */
  static const struct {
    int bug;
    const char *text;
  } broken[] = {
      {RING_IN_ROUND0, "in_partners(round 0, gid 0) returned 1 partners; round 0 receives"},
      {RING_OUT_LAST, "out_partners(round 4, gid 0) returned 1 partners; the last round"},
      {RING_BAD_GID, "out_partners(round 0, gid 2) lists gid 5, outside 0..4"},
      {RING_UNEVEN, "sends 5 messages in round 0 but receives 4 in round 1"},
  };
  for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
    ring bad = {5, broken[i].bug, 0};
    p = (blk_partners *)&p;
    CHECK_ERR(blk_partners_create_custom(&p, &ring_ops, &bad), BLK_EINVAL, broken[i].text);
    CHECK(p == NULL);
    CHECK_EQ_INT(bad.destroyed, 0);
  }
  /* gid 1 is inactive but lists partners (none in round 0, so its out-list is the first
   * complaint). */
  ring inactive = {5, RING_INACTIVE, 0};
  CHECK_ERR(blk_partners_create_custom(&p, &ring_ops, &inactive), BLK_EINVAL,
            "out_partners(round 0, gid 1) returned 1 partners for an inactive block");

  ring one = {0, RING_OK, 0};
  CHECK_ERR(blk_partners_create_custom(&p, &ring_ops, &one), BLK_EINVAL, "rounds() = -1");
  CHECK_ERR(blk_partners_create_custom(NULL, &ring_ops, &rg), BLK_EINVAL, "out is NULL");
  CHECK_ERR(blk_partners_create_custom(&p, NULL, &rg), BLK_EINVAL, "ops is NULL");
  static const char *const names[] = {"rounds", "nblocks", "active", "in_partners", "out_partners"};
  for (int i = 0; i < 5; i++) {
    blk_partners_ops ops = ring_ops;
    if (i == 0) ops.rounds = NULL;
    if (i == 1) ops.nblocks = NULL;
    if (i == 2) ops.active = NULL;
    if (i == 3) ops.in_partners = NULL;
    if (i == 4) ops.out_partners = NULL;
    char text[64];
    snprintf(text, sizeof text, "ops->%s is NULL", names[i]);
    CHECK_ERR(blk_partners_create_custom(&p, &ops, &rg), BLK_EINVAL, text);
  }
  blk_partners_ops unversioned = ring_ops;
  unversioned.version = 0;
  CHECK_ERR(blk_partners_create_custom(&p, &unversioned, &rg), BLK_EINVAL, "ops->version = 0");
  unversioned.version = BLK_PARTNERS_OPS_VERSION + 1;
  CHECK_ERR(blk_partners_create_custom(&p, &unversioned, &rg), BLK_EINVAL, "this blk knows 1..");
  int zero = 0;
  CHECK_ERR(blk_partners_create_custom(&p, &star_ops, &zero), BLK_EINVAL, "nblocks() = 0");
  CHECK(p == NULL);
}

/* A custom pattern of any size, whose gid 0 lists `list` out-partners in
 * round 0 (gids 0, 1, ...) and nothing else. */
typedef struct huge {
  int rounds, nblocks, list;
} huge;

static int huge_rounds(const void *state) {
  return ((const huge *)state)->rounds;
}

static int huge_nblocks(const void *state) {
  return ((const huge *)state)->nblocks;
}

static int huge_active(const void *state, int round, int gid) {
  (void)state, (void)round, (void)gid;
  return 1;
}

static int huge_in(const void *state, int round, int gid, int *gids, int max) {
  (void)state, (void)round, (void)gid, (void)gids, (void)max;
  return 0;
}

static int huge_out(const void *state, int round, int gid, int *gids, int max) {
  int n = round == 0 && gid == 0 ? ((const huge *)state)->list : 0;
  for (int i = 0; i < n && i < max; i++) gids[i] = i;
  return n;
}

static const blk_partners_ops huge_ops = {
    BLK_PARTNERS_OPS_VERSION, huge_rounds, huge_nblocks, huge_active, huge_in, huge_out, NULL};

/* Custom patterns too large to check or to hold are refused at once, naming
 * the values; before, each of these ran create's check for half a minute or
 * more (or forever), or grew its scratch to gigabytes. */
static void test_huge_custom(void) {
  blk_partners *p = NULL;
  huge h = {INT_MAX, 1, 0}; /* a driver's round R + 1 would overflow */
  CHECK_ERR(blk_partners_create_custom(&p, &huge_ops, &h), BLK_EINVAL,
            "rounds() = 2147483647, must be below INT_MAX");
  h = (huge){3, INT_MAX, 0};
  CHECK_ERR(blk_partners_create_custom(&p, &huge_ops, &h), BLK_EINVAL,
            "rounds() = 3 over nblocks() = 2147483647: checking it takes (rounds + 1) x nblocks "
            "= 8589934588 calls");
  h = (huge){2, 1431655766, 0}; /* 3 x that is just past 2^32 */
  CHECK_ERR(blk_partners_create_custom(&p, &huge_ops, &h), BLK_EINVAL, "= 4294967298 calls");
  h = (huge){1, 4, INT_MAX}; /* no list can be longer than nblocks */
  CHECK_ERR(blk_partners_create_custom(&p, &huge_ops, &h), BLK_EINVAL,
            "out_partners(round 0, gid 0) returned 2147483647 partners, more than the 4 blocks");
  CHECK(p == NULL);
  h = (huge){1, 4, 4}; /* the largest list passes (and the totals then differ) */
  CHECK_ERR(blk_partners_create_custom(&p, &huge_ops, &h), BLK_EINVAL,
            "sends 4 messages in round 0 but receives 0 in round 1");

  /* A list the process cannot hold: 2^30 partners (4 GiB) under a 1 GiB
   * RLIMIT_DATA, in a child so this process keeps its limit. */
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit r;
    if (getrlimit(RLIMIT_DATA, &r) != 0) _exit(10);
    r.rlim_cur = (rlim_t)1 << 30;
    if (setrlimit(RLIMIT_DATA, &r) != 0) _exit(11);
    h = (huge){1, 1 << 30, 1 << 30};
    if (blk_partners_create_custom(&p, &huge_ops, &h) != BLK_ENOMEM) _exit(12);
    if (!strstr(blk_last_error(),
                "out_partners(round 0, gid 0) lists 1073741824 partners: 1073741824 x 4 bytes = "
                "4294967296 bytes, more than this process can have: 1073741824 bytes "
                "(RLIMIT_DATA)"))
      _exit(13);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_hand_tables();
  test_round_lists();
  test_explicit_rounds();
  test_queries();
  test_bad_input();
  test_custom();
  test_huge_custom();
  printf("test_partners: ok\n");
  return 0;
}
