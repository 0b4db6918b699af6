/*
 * paired.h: two configurations compared repetition by repetition. Header-only
 * (static inline), not part of blk's API.
 *
 * On a shared virtual machine the time of one operation moves by ±20-30%
 * between processes and between minutes (docs/performance.md 13.1, 13.4):
 * two configurations timed in separate loops or separate runs differ by as
 * much as the noise, so a 10% question cannot be answered. Timed in pairs,
 * one repetition of each back to back (in alternating order, so neither
 * always goes first), both meet the same state of the machine, and the
 * ratio of a pair cancels it. The summary is the median of the pairs'
 * ratios, with the distribution-free 95% interval of that median (the order
 * statistics about n/2 ± 0.98 sqrt(n) of the sorted ratios), which needs no
 * assumption about how the times are distributed. It does assume the pairs
 * independent; pairs in one process are not quite, so compare processes too.
 */
#ifndef BLK_BENCH_PAIRED_H
#define BLK_BENCH_PAIRED_H

#include <math.h>
#include <stdlib.h>

typedef struct paired {
  double median; /* of b[i] / a[i] */
  double lo, hi; /* its 95% interval (the whole range when n < 6) */
  double a_median, b_median;
} paired;

static inline int paired_cmp(const void *x, const void *y) {
  double u = *(const double *)x, v = *(const double *)y;
  return u < v ? -1 : u > v;
}

static inline double paired_median_sorted(const double *v, int n) {
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The summary of n >= 1 pairs of times; scratch holds 3 n doubles. */
static inline paired paired_summary(const double *a, const double *b, int n, double *scratch) {
  double *ratio = scratch, *sa = scratch + n, *sb = scratch + 2 * n;
  for (int i = 0; i < n; i++) {
    /* (A time of 0, below the clock, must still sort: no NaN.) */
    ratio[i] = a[i] > 0 ? b[i] / a[i] : b[i] > 0 ? INFINITY : 1.0;
    sa[i] = a[i];
    sb[i] = b[i];
  }
  qsort(ratio, (size_t)n, sizeof *ratio, paired_cmp);
  qsort(sa, (size_t)n, sizeof *sa, paired_cmp);
  qsort(sb, (size_t)n, sizeof *sb, paired_cmp);
  paired s;
  s.median = paired_median_sorted(ratio, n);
  s.a_median = paired_median_sorted(sa, n);
  s.b_median = paired_median_sorted(sb, n);
  double half = 0.98 * sqrt((double)n);
  /* 1-based order statistics floor(n/2 - half) and ceil(1 + n/2 + half). */
  int lo = (int)floor(n / 2.0 - half) - 1, hi = (int)ceil(n / 2.0 + half);
  if (lo < 0 || n < 6) lo = 0;
  if (hi > n - 1 || n < 6) hi = n - 1;
  s.lo = ratio[lo];
  s.hi = ratio[hi];
  return s;
}

#endif
