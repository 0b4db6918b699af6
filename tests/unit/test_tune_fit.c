/*
 * test_tune_fit: what blk-tune's cost-model fit rests on.
 *
 * 1. blk_partners_predict is linear in the model's constants (with threads
 *    fixed): blk-tune takes a run's features as its predictions with one
 *    constant at a time set to 1, so a model's prediction must equal their
 *    sum weighted by its constants, for merges and swaps, both orders, on
 *    1-3 ranks.
 * 2. tune_nnls (bench/tune_fit.h) recovers known non-negative constants of
 *    very different magnitudes from exact times, and where the best fit
 *    wants a negative constant it returns non-negative ones no worse than a
 *    brute-force search of a fine grid over c >= 0.
 */
#include <math.h>
#include <stdlib.h>

#include "../../bench/tune_fit.h"
#include "blk/blk.h"
#include "check.h"

static void check_linear(void) {
  int checked = 0;
  for (int ranks = 1; ranks <= 3; ranks++)
    for (int split = 0; split < 2; split++)
      for (int k = 2; k <= 5; k++)
        for (int contiguous = 0; contiguous < 2; contiguous++) {
          int n = 37;
          blk_partners *p;
          blk_assigner *a;
          CHECK_OK(blk_partners_create(&p, split ? BLK_SWAP : BLK_MERGE, 1, &n, k, contiguous));
          CHECK_OK(blk_assigner_create_contiguous(&a, ranks, n));
          blk_cost_model m = {BLK_COST_MODEL_VERSION, 3e-6, 2e-10, 4e-7, 5e-8, 7e-11, 1};
          double c[5] = {m.alpha, m.beta, m.callback, m.local, m.gamma}, sum = 0;
          for (int j = 0; j < 5; j++) {
            blk_cost_model unit = {BLK_COST_MODEL_VERSION, 0, 0, 0, 0, 0, 1};
            double *u[5] = {&unit.alpha, &unit.beta, &unit.callback, &unit.local, &unit.gamma};
            *u[j] = 1;
            double f = blk_partners_predict(p, a, 4096, &unit, split);
            CHECK(f >= 0);
            sum += f * c[j];
          }
          double t = blk_partners_predict(p, a, 4096, &m, split);
          CHECK_MSG(fabs(t - sum) <= 1e-12 * t, "ranks %d split %d k %d: %g against %g", ranks,
                    split, k, t, sum);
          blk_partners_destroy(p);
          blk_assigner_destroy(a);
          checked++;
        }
  CHECK_EQ_INT(checked, 48);
}

/* A deterministic sequence in [0, 1). */
static double next(unsigned *state) {
  *state = *state * 1103515245u + 12345u;
  return (double)(*state >> 8) / 16777216.0;
}

static void check_recovery(void) {
  /* Features of the magnitudes blk-tune sees: rounds, bytes, callbacks,
   * messages, bytes; constants from seconds down to 1e-10 s a byte, one 0. */
  enum { N = 60, P = 5 };
  const double truth[P] = {4e-6, 1.5e-10, 3e-7, 0, 9e-11};
  double X[N * P], y[N], w[N], c[P];
  unsigned st = 7;
  for (int i = 0; i < N; i++) {
    double bytes = pow(2, 10 + 14 * next(&st));
    X[i * P + 0] = 1 + floor(8 * next(&st));
    X[i * P + 1] = bytes * (1 + 4 * next(&st));
    X[i * P + 2] = 2 + floor(60 * next(&st));
    X[i * P + 3] = 1 + floor(40 * next(&st));
    X[i * P + 4] = bytes * (2 + 6 * next(&st));
    y[i] = 0;
    for (int j = 0; j < P; j++) y[i] += X[i * P + j] * truth[j];
    w[i] = 1 / (y[i] * y[i]);
  }
  double res = tune_nnls(X, y, w, N, P, c);
  CHECK_MSG(res < 1e-20, "residual %g of exact times", res);
  for (int j = 0; j < P; j++)
    CHECK_MSG(fabs(c[j] - truth[j]) <= (truth[j] ? 1e-6 * truth[j] : 1e-12),
              "constant %d: %g, expected %g", j, c[j], truth[j]);
}

static void check_nonnegative(void) {
  /* y = 2 x0 - 3 x1 exactly: the unconstrained fit has c1 = -3 < 0. */
  enum { N = 20, P = 2 };
  double X[N * P], y[N], w[N], c[P];
  for (int i = 0; i < N; i++) {
    X[i * P + 0] = 1 + i;
    X[i * P + 1] = 1 + (i * 7) % 5;
    y[i] = 2 * X[i * P + 0] - 3 * X[i * P + 1];
    w[i] = 1;
  }
  double res = tune_nnls(X, y, w, N, P, c);
  CHECK(c[0] >= 0 && c[1] >= 0);
  CHECK_NEAR(res, tune_residual(X, y, w, N, P, c), 1e-9 * res);
  double grid = INFINITY;
  for (int a = 0; a <= 800; a++)
    for (int b = 0; b <= 800; b++) {
      double g[P] = {a * 0.01, b * 0.01};
      grid = fmin(grid, tune_residual(X, y, w, N, P, g));
    }
  CHECK_MSG(res <= grid * (1 + 1e-9), "fit residual %g, a grid point has %g", res, grid);
}

int main(void) {
  check_linear();
  check_recovery();
  check_nonnegative();
  return 0;
}
