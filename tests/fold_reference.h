/*
 * fold_reference.h: the folding rule of blk's collectives worked out by
 * brute force, for tests to check blk's arithmetic against: n blocks whose
 * count has a prime factor above max(k, 16) run their rounds over the
 * largest m <= n without one, the n - m gids 2i+1 (i < n - m) folded into
 * gid 2i first.
 */
#ifndef BLK_TEST_FOLD_REFERENCE_H
#define BLK_TEST_FOLD_REFERENCE_H

static inline int largest_prime_factor(int n) {
  int big = 1;
  for (int f = 2; f <= n; f++)
    while (n % f == 0) {
      big = f;
      n /= f;
    }
  return big;
}

/* n - m: how many gids are folded. */
static inline int folded_count(int n, int k) {
  int m = n, bound = k > 16 ? k : 16;
  while (largest_prime_factor(m) > bound) m--;
  return n - m;
}

#endif
