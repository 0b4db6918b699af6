/*
 * test_assigner: contiguous and round-robin assignment of gids to ranks.
 *
 * Every gid is assigned exactly once and local_gids agrees with rank(); the
 * contiguous policy is checked against DIY's rule written out independently
 * (consecutive runs, the larger runs first, sizes within one) and against
 * DIY's closed formula; round robin against gid % nranks. A table
 * assigner answers exactly what its table says, for tables drawn at
 * random (ranks with no block included), and refuses bad tables.
 */
#include <limits.h>
#include <stddef.h>

#include "blk/assigner.h"
#include "blk/blk.h"
#include "check.h"

/* DIY ContiguousAssigner::rank, as a second reference. */
static int diy_contiguous_rank(int nranks, int nblocks, int gid) {
  int div = nblocks / nranks, mod = nblocks % nranks;
  int r = gid / (div + 1);
  if (r < mod) return r;
  return mod + (gid - (div + 1) * mod) / div;
}

static void check_consistent(const blk_assigner *a, int nranks, int nblocks, int contiguous) {
  CHECK_EQ_INT(blk_assigner_nranks(a), nranks);
  CHECK_EQ_INT(blk_assigner_nblocks(a), nblocks);
  int seen[16] = {0}, gids[16];
  int total = 0, next = 0, prev_count = INT_MAX, cmin = INT_MAX, cmax = 0;
  for (int r = 0; r < nranks; r++) {
    int n = blk_assigner_local_gids(a, r, gids, 16);
    CHECK_EQ_INT(n, blk_assigner_local_count(a, r));
    total += n;
    if (n < cmin) cmin = n;
    if (n > cmax) cmax = n;
    for (int i = 0; i < n; i++) {
      CHECK(gids[i] >= 0 && gids[i] < nblocks);
      CHECK_EQ_INT(blk_assigner_rank(a, gids[i]), r);
      seen[gids[i]]++;
      if (i > 0) CHECK(gids[i] > gids[i - 1]); /* ascending */
      if (contiguous)
        CHECK_EQ_INT(gids[i], next++);
      else
        CHECK_EQ_INT(gids[i], r + i * nranks);
    }
    if (contiguous) CHECK(n <= prev_count); /* the larger runs come first */
    prev_count = n;
  }
  CHECK_EQ_INT(total, nblocks);
  CHECK(cmax - cmin <= 1);
  for (int g = 0; g < nblocks; g++) {
    CHECK_EQ_INT(seen[g], 1);
    int want = contiguous ? diy_contiguous_rank(nranks, nblocks, g) : g % nranks;
    CHECK_EQ_INT(blk_assigner_rank(a, g), want);
  }
}

static void test_all_small(void) {
  for (int nranks = 1; nranks <= 5; nranks++)
    for (int nblocks = 1; nblocks <= 13; nblocks++) {
      blk_assigner *a = NULL;
      CHECK_OK(blk_assigner_create_contiguous(&a, nranks, nblocks));
      check_consistent(a, nranks, nblocks, 1);
      blk_assigner_destroy(a);
      CHECK_OK(blk_assigner_create_round_robin(&a, nranks, nblocks));
      check_consistent(a, nranks, nblocks, 0);
      blk_assigner_destroy(a);
    }
}

static void test_by_hand(void) {
  /* 10 blocks on 4 ranks: 3, 3, 2, 2. */
  blk_assigner *a = NULL;
  CHECK_OK(blk_assigner_create_contiguous(&a, 4, 10));
  int want[10] = {0, 0, 0, 1, 1, 1, 2, 2, 3, 3};
  for (int g = 0; g < 10; g++) CHECK_EQ_INT(blk_assigner_rank(a, g), want[g]);
  int gids[3] = {-1, -1, -1};
  CHECK_EQ_INT(blk_assigner_local_gids(a, 2, gids, 3), 2);
  CHECK_EQ_INT(gids[0], 6);
  CHECK_EQ_INT(gids[1], 7);
  CHECK_EQ_INT(gids[2], -1);
  /* A short buffer: the full count, only max written. */
  gids[1] = -7;
  CHECK_EQ_INT(blk_assigner_local_gids(a, 0, gids, 1), 3);
  CHECK_EQ_INT(gids[0], 0);
  CHECK_EQ_INT(gids[1], -7);
  CHECK_EQ_INT(blk_assigner_local_gids(a, 0, NULL, 0), 3);
  blk_assigner_destroy(a);

  /* Fewer blocks than ranks: the last ranks own none. */
  CHECK_OK(blk_assigner_create_contiguous(&a, 5, 3));
  CHECK_EQ_INT(blk_assigner_local_count(a, 3), 0);
  CHECK_EQ_INT(blk_assigner_local_count(a, 4), 0);
  CHECK_EQ_INT(blk_assigner_local_gids(a, 4, gids, 3), 0);
  CHECK_EQ_INT(blk_assigner_rank(a, 2), 2);
  blk_assigner_destroy(a);
  CHECK_OK(blk_assigner_create_round_robin(&a, 5, 3));
  CHECK_EQ_INT(blk_assigner_local_count(a, 4), 0);
  CHECK_EQ_INT(blk_assigner_rank(a, 2), 2);
  blk_assigner_destroy(a);

  /* Large counts stay in int range. */
  CHECK_OK(blk_assigner_create_contiguous(&a, 7, INT_MAX));
  long long sum = 0;
  for (int r = 0; r < 7; r++) sum += blk_assigner_local_count(a, r);
  CHECK(sum == INT_MAX);
  CHECK_EQ_INT(blk_assigner_rank(a, INT_MAX - 1), 6);
  CHECK_EQ_INT(blk_assigner_rank(a, 0), 0);
  CHECK_EQ_INT(blk_assigner_local_gids(a, 6, gids, 1), INT_MAX / 7);
  CHECK_EQ_INT(gids[0], INT_MAX - INT_MAX / 7);
  CHECK_EQ_INT(blk_assigner_rank(a, INT_MAX - INT_MAX / 7), 6);
  CHECK_EQ_INT(blk_assigner_rank(a, INT_MAX - INT_MAX / 7 - 1), 5);
  blk_assigner_destroy(a);
  CHECK_OK(blk_assigner_create_round_robin(&a, 7, INT_MAX));
  CHECK_EQ_INT(blk_assigner_rank(a, INT_MAX - 1), (INT_MAX - 1) % 7);
  CHECK_EQ_INT(blk_assigner_local_count(a, 0), INT_MAX / 7 + 1);
  blk_assigner_destroy(a);
}

static void test_errors(void) {
  static max_align_t poison;
  blk_assigner *a = (blk_assigner *)(void *)&poison; /* reset to NULL on failure */
  CHECK_ERR(blk_assigner_create_contiguous(&a, 0, 4), BLK_EINVAL, "nranks = 0");
  CHECK(a == NULL);
  CHECK_ERR(blk_assigner_create_contiguous(&a, 2, 0), BLK_EINVAL, "nblocks = 0");
  CHECK_ERR(blk_assigner_create_round_robin(&a, -1, 4), BLK_EINVAL, "nranks = -1");
  CHECK_ERR(blk_assigner_create_round_robin(&a, 3, -5), BLK_EINVAL, "nblocks = -5");
  CHECK_ERR(blk_assigner_create_round_robin(NULL, 3, 5), BLK_EINVAL, "NULL");
  CHECK_OK(blk_assigner_create_round_robin(&a, 3, 5));
  int gids[4];
  /* No such block or rank: BLK_ENOTFOUND. Called wrong: BLK_EINVAL, which
   * wins when a call is both. */
  CHECK_ERR(blk_assigner_rank(a, 5), BLK_ENOTFOUND, "gid 5 is outside 0..4");
  CHECK_ERR(blk_assigner_rank(a, -1), BLK_ENOTFOUND, "gid -1");
  CHECK_ERR(blk_assigner_rank(NULL, 0), BLK_EINVAL, "NULL assigner");
  CHECK_ERR(blk_assigner_local_count(a, 3), BLK_ENOTFOUND, "rank 3 is outside 0..2");
  CHECK_ERR(blk_assigner_local_count(NULL, 0), BLK_EINVAL, "NULL assigner");
  CHECK_ERR(blk_assigner_local_gids(a, -1, gids, 4), BLK_ENOTFOUND, "rank -1");
  CHECK_ERR(blk_assigner_local_gids(a, 0, gids, -1), BLK_EINVAL, "max = -1");
  CHECK_ERR(blk_assigner_local_gids(a, 0, NULL, 2), BLK_EINVAL, "gids is NULL");
  CHECK_ERR(blk_assigner_local_gids(a, 7, gids, -1), BLK_EINVAL, "max = -1");
  CHECK_ERR(blk_assigner_local_gids(NULL, 0, gids, 4), BLK_EINVAL, "NULL assigner");
  for (int g = -2; g < 8; g++) /* every gid in range has a rank; none outside */
    CHECK_EQ_INT(blk_assigner_rank(a, g), g >= 0 && g < 5 ? g % 3 : BLK_ENOTFOUND);
  blk_assigner_destroy(a);
  blk_assigner_destroy(NULL);
}

/* INT_MAX blocks over 1..INT_MAX ranks: the gid arithmetic of both policies
 * stays inside int (products like rank * (b + 1) never pass nblocks) and
 * every answer is O(1), whatever the count. */
static void test_huge(void) {
  static const int nranks[] = {1, 2, 3, 7, 65536, 46341, INT_MAX - 1, INT_MAX};
  for (size_t i = 0; i < sizeof nranks / sizeof nranks[0]; i++)
    for (int contiguous = 0; contiguous <= 1; contiguous++) {
      int n = nranks[i], nb = INT_MAX;
      blk_assigner *a = NULL;
      CHECK_OK(contiguous ? blk_assigner_create_contiguous(&a, n, nb)
                          : blk_assigner_create_round_robin(&a, n, nb));
      int ranks[] = {0, 1, n / 2, n - 2, n - 1};
      int prev = -2;      /* the last rank checked */
      long long next = 0; /* contiguous: the first gid of the rank after it */
      for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++) {
        int rank = ranks[r];
        if (rank < 0 || rank >= n || rank == prev) continue;
        int count = blk_assigner_local_count(a, rank);
        CHECK(count == nb / n || count == nb / n + 1);
        int gids[2];
        CHECK_EQ_INT(blk_assigner_local_gids(a, rank, gids, count < 2 ? count : 2), count);
        CHECK_EQ_INT(blk_assigner_rank(a, gids[0]), rank);
        if (contiguous) {
          if (rank == n - 1) CHECK_EQ_INT((long long)gids[0] + count, nb);
          if (prev == rank - 1) CHECK_EQ_INT(gids[0], next);
          next = (long long)gids[0] + count;
          CHECK_EQ_INT(blk_assigner_rank(a, (int)(next - 1)), rank);
        } else {
          CHECK_EQ_INT(gids[0], rank);
          CHECK_EQ_INT(blk_assigner_rank(a, rank + (count - 1) * n), rank);
        }
        prev = rank;
      }
      blk_assigner_destroy(a);
    }
}

static void test_table(void) {
  unsigned seed = 12345;
  for (int trial = 0; trial < 200; trial++) {
    int nranks = 1 + trial % 6, nblocks = 1 + (trial * 7) % 23;
    int ranks[23];
    for (int g = 0; g < nblocks; g++) {
      seed = seed * 1103515245u + 12345u;
      ranks[g] = (int)((seed >> 16) % (unsigned)nranks);
    }
    blk_assigner *a = NULL;
    CHECK_OK(blk_assigner_create_table(&a, nranks, nblocks, ranks));
    CHECK_EQ_INT(blk_assigner_nranks(a), nranks);
    CHECK_EQ_INT(blk_assigner_nblocks(a), nblocks);
    int total = 0;
    for (int r = 0; r < nranks; r++) {
      int gids[23], want = 0;
      for (int g = 0; g < nblocks; g++) want += ranks[g] == r;
      CHECK_EQ_INT(blk_assigner_local_count(a, r), want);
      CHECK_EQ_INT(blk_assigner_local_gids(a, r, gids, 23), want);
      for (int i = 0, g = 0; i < want; i++, g++) {
        while (ranks[g] != r) g++; /* the i-th gid of rank r, ascending */
        CHECK_EQ_INT(gids[i], g);
      }
      total += want;
    }
    CHECK_EQ_INT(total, nblocks);
    for (int g = 0; g < nblocks; g++) CHECK_EQ_INT(blk_assigner_rank(a, g), ranks[g]);
    CHECK_ERR(blk_assigner_rank(a, nblocks), BLK_ENOTFOUND, "outside");
    blk_assigner_destroy(a);
  }
  blk_assigner *a = (blk_assigner *)&a;
  int bad[3] = {0, 3, 1};
  CHECK_ERR(blk_assigner_create_table(&a, 3, 3, bad), BLK_EINVAL, "gid 1 has rank 3");
  CHECK(a == NULL);
  CHECK_ERR(blk_assigner_create_table(&a, 3, 3, NULL), BLK_EINVAL, "ranks is NULL");
  CHECK_ERR(blk_assigner_create_table(&a, 0, 3, bad), BLK_EINVAL, "nranks = 0");
  CHECK_ERR(blk_assigner_create_table(NULL, 3, 3, bad), BLK_EINVAL, "out is NULL");
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_all_small();
  test_by_hand();
  test_errors();
  test_huge();
  test_table();
  printf("test_assigner: ok\n");
  return 0;
}
