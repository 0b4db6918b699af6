/*
 * tune_fit.h: non-negative weighted least squares for a handful of
 * unknowns, as blk-tune fits blk_cost_model's constants to its timings.
 * Header-only (static inline), not part of blk's API.
 *
 * tune_nnls finds c >= 0 minimising sum_i w_i (X_i . c - y_i)^2 for rows X_i
 * of p features (p <= TUNE_FIT_MAX). With so few unknowns it is solved
 * exactly by trying every subset of them left free (the others held at 0):
 * the unconstrained least squares on the subset, kept when every
 * coefficient comes out >= 0; the best kept one is the answer (the empty
 * subset, all zeros, is always a candidate). 2^p small solves.
 */
#ifndef BLK_TUNE_FIT_H
#define BLK_TUNE_FIT_H

#include <math.h>
#include <stddef.h>

#define TUNE_FIT_MAX 8

/* Solves the q x q system a x = b in place (Gaussian elimination with
 * partial pivoting); returns 0, or -1 when it is singular. */
static inline int tune_solve(double a[TUNE_FIT_MAX][TUNE_FIT_MAX], double *b, double *x, int q) {
  for (int c = 0; c < q; c++) {
    int piv = c;
    for (int r = c + 1; r < q; r++)
      if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
    if (!(fabs(a[piv][c]) > 1e-300)) return -1;
    for (int j = 0; j < q; j++) {
      double t = a[c][j];
      a[c][j] = a[piv][j];
      a[piv][j] = t;
    }
    double t = b[c];
    b[c] = b[piv];
    b[piv] = t;
    for (int r = c + 1; r < q; r++) {
      double f = a[r][c] / a[c][c];
      for (int j = c; j < q; j++) a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  for (int c = q - 1; c >= 0; c--) {
    double s = b[c];
    for (int j = c + 1; j < q; j++) s -= a[c][j] * x[j];
    x[c] = s / a[c][c];
  }
  return 0;
}

/* The weighted squared residual of c. */
static inline double tune_residual(const double *X, const double *y, const double *w, int n, int p,
                                   const double *c) {
  double s = 0;
  for (int i = 0; i < n; i++) {
    double e = -y[i];
    for (int j = 0; j < p; j++) e += X[(size_t)i * (size_t)p + (size_t)j] * c[j];
    s += w[i] * e * e;
  }
  return s;
}

/* X: n rows of p features (row-major), y: n targets, w: n weights > 0.
 * Writes the p coefficients to c; returns the weighted squared residual.
 * Features are scaled to unit size inside, so constants of very different
 * magnitudes (seconds per round, per byte) are fitted alike. */
static inline double tune_nnls(const double *X, const double *y, const double *w, int n, int p,
                               double *c) {
  double scale[TUNE_FIT_MAX];
  for (int j = 0; j < p; j++) {
    double s = 0;
    for (int i = 0; i < n; i++) s = fmax(s, fabs(X[(size_t)i * (size_t)p + (size_t)j]));
    scale[j] = s > 0 ? s : 1;
    c[j] = 0;
  }
  double best = tune_residual(X, y, w, n, p, c);
  for (unsigned set = 1; set < (1u << p); set++) {
    int idx[TUNE_FIT_MAX], q = 0;
    for (int j = 0; j < p; j++)
      if (set & (1u << j)) idx[q++] = j;
    double a[TUNE_FIT_MAX][TUNE_FIT_MAX] = {{0}}, b[TUNE_FIT_MAX] = {0}, x[TUNE_FIT_MAX];
    for (int i = 0; i < n; i++)
      for (int r = 0; r < q; r++) {
        double xr = X[(size_t)i * (size_t)p + (size_t)idx[r]] / scale[idx[r]];
        b[r] += w[i] * xr * y[i];
        for (int s = 0; s < q; s++)
          a[r][s] += w[i] * xr * X[(size_t)i * (size_t)p + (size_t)idx[s]] / scale[idx[s]];
      }
    if (tune_solve(a, b, x, q)) continue;
    int ok = 1;
    for (int r = 0; r < q; r++) ok &= x[r] >= 0;
    if (!ok) continue;
    double cand[TUNE_FIT_MAX] = {0};
    for (int r = 0; r < q; r++) cand[idx[r]] = x[r] / scale[idx[r]];
    double res = tune_residual(X, y, w, n, p, cand);
    if (res < best) {
      best = res;
      for (int j = 0; j < p; j++) c[j] = cand[j];
    }
  }
  return best;
}

#endif
