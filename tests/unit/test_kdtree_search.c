/*
 * test_kdtree_search: the k-d tree's quantile search, serially, against a
 * sort.
 *
 * For point sets that stress it (uniform; values spaced by powers of two,
 * which equal value ranges would take a round each; few distinct
 * coordinates; copies of whole points; signed zeros; all one point), every
 * axis, many targets and bins from 2 to 256, the search runs round by round
 * over a histogram of the set, and its cut is checked against the set
 * sorted in the node's order (x[a], x[a+1], ..., cyclically): the points
 * before position t go low and the rest high when the points are distinct;
 * with copies, low gets the nearer end of the target point's run (ties:
 * its start). Also: the count the search reports is the count the cut
 * gives, the cut's first value lies in the box, the rounds stay within the
 * bound of kdtree_search.h, and keys order doubles as the doubles do.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blk/blk.h"
#include "check.h"
#include "collectives/kdtree_search.h"

#define MAXN 400

static int g_dim, g_axis;
static double pts[MAXN][BLK_MAX_DIM];

static uint64_t rng = 88172645463325252u;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static double unit(void) {
  return (double)(next() >> 11) * 0x1p-53;
}

/* The node order of two points. */
static int order(const void *pa, const void *pb) {
  const double *a = pa, *b = pb;
  for (int i = 0, ax = g_axis; i < g_dim; i++, ax = (ax + 1) % g_dim) {
    if (a[ax] < b[ax]) return -1;
    if (a[ax] > b[ax]) return 1;
  }
  return 0;
}

static void test_keys(void) {
  double v[] = {-DBL_MAX, -1e300,   -2.5,    -1.0,   -DBL_MIN, -4.9e-324, -0.0,
                0.0,      4.9e-324, DBL_MIN, 1e-300, 0.5,      1.0,       1.0000000000000002,
                3.0,      1e300,    DBL_MAX};
  int n = (int)(sizeof v / sizeof v[0]);
  for (int i = 0; i < n; i++) {
    CHECK(blk__kd_value(blk__kd_key(v[i])) == v[i]);
    for (int j = 0; j < n; j++) {
      uint64_t ki = blk__kd_key(v[i]), kj = blk__kd_key(v[j]);
      CHECK_MSG((v[i] < v[j]) == (ki < kj) && (v[i] == v[j]) == (ki == kj), "%g vs %g", v[i], v[j]);
    }
  }
  CHECK(blk__kd_between(1.0, 2.0) == 1.5);
  CHECK(blk__kd_between(1.0, 1.0000000000000002) == 1.0000000000000002);
  CHECK(blk__kd_between(-DBL_MAX, DBL_MAX) == 0.0);
}

/* Runs the search for target t over pts[0..n) and checks its cut. */
static void run(int n, int bins, uint64_t t, const char *set) {
  blk_cbounds box = {g_dim, {0}, {0}};
  for (int a = 0; a < g_dim; a++) {
    box.min[a] = INFINITY;
    box.max[a] = -INFINITY;
    for (int i = 0; i < n; i++) {
      if (pts[i][a] < box.min[a]) box.min[a] = pts[i][a];
      if (pts[i][a] > box.max[a]) box.max[a] = pts[i][a];
    }
    box.min[a] -= 0.25; /* a box a little larger than the points, as a node's is */
  }
  blk__kd_search s;
  blk__kd_search_start(&s, &box, g_axis, t, (uint64_t)n);
  blk__kd_bin h[256];
  int bound = g_dim * (64 / (int)floor(log2(bins)) + 2);
  while (!s.done) {
    blk__kd_bins_clear(h, (size_t)bins);
    for (int i = 0; i < n; i++) {
      uint64_t key;
      int b = blk__kd_search_bin(&s, pts[i], bins, &key);
      if (b >= 0) blk__kd_bin_add(&h[b], key, 1);
    }
    CHECK_EQ_INT(blk__kd_search_step(&s, h, bins), 0);
    CHECK_MSG(s.rounds <= bound, "%s: %d rounds with %d bins, bound %d", set, s.rounds, bins,
              bound);
  }
  CHECK(s.cut.axis == g_axis && s.cut.m >= 1 && s.cut.m <= g_dim);
  CHECK(s.cut.v[0] >= box.min[g_axis] && s.cut.v[0] <= box.max[g_axis]);
  double sorted[MAXN][BLK_MAX_DIM];
  memcpy(sorted, pts, sizeof(double) * BLK_MAX_DIM * (size_t)n);
  qsort(sorted, (size_t)n, sizeof sorted[0], order);
  uint64_t low = 0;
  for (int i = 0; i < n; i++) {
    int lo = blk__kd_goes_low(&s.cut, sorted[i], g_dim);
    low += (uint64_t)lo;
    if (i > 0 && !blk__kd_goes_low(&s.cut, sorted[i - 1], g_dim))
      CHECK_MSG(!lo, "%s: the cut is not a cut of the order", set);
  }
  CHECK_EQ_INT(low, s.low);
  /* The run of points equal to the target one. */
  uint64_t first = t, end = t + 1;
  while (first > 0 && order(sorted[first - 1], sorted[t]) == 0) first--;
  while (end < (uint64_t)n && order(sorted[end], sorted[t]) == 0) end++;
  uint64_t want = first == t ? t : (t - first <= end - t ? first : end);
  CHECK_MSG(low == want, "%s, dim %d, axis %d, bins %d, target %llu: %llu low, expected %llu", set,
            g_dim, g_axis, bins, (unsigned long long)t, (unsigned long long)low,
            (unsigned long long)want);
}

static void fill(int kind, int n) {
  for (int i = 0; i < n; i++)
    for (int a = 0; a < g_dim; a++) {
      double u = unit();
      switch (kind) {
        case 0:
          pts[i][a] = u;
          break; /* uniform */
        case 1:
          pts[i][a] = ldexp(1.0, -(int)(next() % 1000));
          break; /* 2^-k */
        case 2:
          pts[i][a] = (double)(next() % 3) * 0.5;
          break; /* three values */
        case 3:
          pts[i][a] = i % 7 ? pts[i - i % 7][a] : u;
          break; /* copies */
        case 4:
          pts[i][a] = next() % 2 ? -0.0 : (next() % 2 ? 0.0 : u - 0.5);
          break;
        default:
          pts[i][a] = 0.25;
          break; /* one point */
      }
    }
}

int main(void) {
  test_keys();
  const char *names[] = {"uniform", "powers of two", "three values",
                         "copies",  "signed zeros",  "one point"};
  const int bins[] = {2, 3, 16, 256};
  int runs = 0;
  for (g_dim = 1; g_dim <= 4; g_dim++)
    for (int kind = 0; kind < 6; kind++) {
      int n = 50 + (int)(next() % 300);
      fill(kind, n);
      for (g_axis = 0; g_axis < g_dim; g_axis++)
        for (int b = 0; b < 4; b++)
          for (uint64_t t = 0; t < (uint64_t)n; t += 1 + next() % 23) {
            run(n, bins[b], t, names[kind]);
            runs++;
          }
    }
  printf("test_kdtree_search: ok (%d searches)\n", runs);
  return 0;
}
