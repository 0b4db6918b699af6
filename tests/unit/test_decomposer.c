/*
 * test_decomposer: splits, ownership, ghosts, chosen divisions and bad input.
 *
 * References are computed by brute force here (scanning every block's
 * bounds, checking tiling properties, hand-worked tables), not by the
 * formulas decomposer.c uses.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "blk/blk.h"
#include "blk/bounds.h"
#include "blk/decomposer.h"
#include "check.h"

#define MAXB 512

static blk_bounds box(int dim, const int64_t *lo, const int64_t *hi) {
  blk_bounds b;
  CHECK_OK(blk_bounds_set(&b, dim, lo, hi));
  return b;
}

static blk_cbounds cbox(int dim, const double *lo, const double *hi) {
  blk_cbounds b;
  CHECK_OK(blk_cbounds_set(&b, dim, lo, hi));
  return b;
}

static uint64_t cells_of(int64_t lo, int64_t hi) {
  return (uint64_t)hi - (uint64_t)lo + 1;
}

/* Every split of n cells into d blocks: contiguous, tiling, sizes within one,
 * every cell owned by exactly one core, point_to_gid agrees with the scan. */
static void test_split_1d(void) {
  for (int n = 1; n <= 40; n++)
    for (int d = 1; d <= n; d++)
      for (int share = 0; share <= 1; share++) {
        int64_t lo = -7, hi = -7 + n - 1;
        blk_bounds dom = box(1, &lo, &hi);
        blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
        cfg.share_face[0] = share;
        blk_decomposer *dec = NULL;
        CHECK_OK(blk_decomposer_create(&dec, &dom, d, &cfg));
        int div = 0;
        blk_decomposer_divisions(dec, &div);
        CHECK_EQ_INT(div, d);
        blk_bounds core[64], ghost;
        int64_t smin = INT64_MAX, smax = 0;
        for (int g = 0; g < d; g++) {
          CHECK_OK(blk_decomposer_block_bounds(dec, g, &core[g], &ghost));
          CHECK(ghost.min[0] == core[g].min[0] && ghost.max[0] == core[g].max[0]);
          int64_t size = core[g].max[0] - core[g].min[0] + 1 - (share && g < d - 1 ? 1 : 0);
          CHECK_MSG(size >= 1, "n %d d %d block %d is empty", n, d, g);
          if (size < smin) smin = size;
          if (size > smax) smax = size;
          if (g == 0) CHECK_EQ_INT(core[g].min[0], lo);
          if (g > 0) CHECK_EQ_INT(core[g].min[0], core[g - 1].max[0] + (share ? 0 : 1));
        }
        CHECK_EQ_INT(core[d - 1].max[0], hi);
        CHECK_MSG(smax - smin <= 1, "n %d d %d sizes %lld..%lld", n, d, (long long)smin,
                  (long long)smax);
        for (int64_t x = lo - 2; x <= hi + 2; x++) {
          int owners = 0, best = -1;
          for (int g = 0; g < d; g++)
            if (blk_bounds_contains(&core[g], &x)) {
              owners++;
              best = g; /* with share_face the face belongs to the upper block */
            }
          int inside = x >= lo && x <= hi;
          if (inside) CHECK(share ? (owners == 1 || owners == 2) : owners == 1);
          CHECK_EQ_INT(blk_decomposer_point_to_gid(dec, &x), inside ? best : BLK_ENOTFOUND);
        }
        blk_decomposer_destroy(dec);
      }
}

/* The hand-worked case: 10 cells, 3 blocks. */
static void test_hand_1d(void) {
  int64_t lo = 0, hi = 9;
  blk_bounds dom = box(1, &lo, &hi);
  struct {
    int share, wrap;
    int64_t ghosts;
    int64_t core[3][2], ghosted[3][2];
  } cases[] = {
      {0, 0, 0, {{0, 2}, {3, 5}, {6, 9}}, {{0, 2}, {3, 5}, {6, 9}}},
      {1, 0, 0, {{0, 3}, {3, 6}, {6, 9}}, {{0, 3}, {3, 6}, {6, 9}}},
      {0, 0, 1, {{0, 2}, {3, 5}, {6, 9}}, {{0, 3}, {2, 6}, {5, 9}}},
      {1, 0, 1, {{0, 3}, {3, 6}, {6, 9}}, {{0, 4}, {2, 7}, {5, 9}}},
      {0, 1, 2, {{0, 2}, {3, 5}, {6, 9}}, {{-2, 4}, {1, 7}, {4, 11}}},
      {1, 1, 1, {{0, 3}, {3, 6}, {6, 9}}, {{-1, 4}, {2, 7}, {5, 10}}},
      {0, 0, 20, {{0, 2}, {3, 5}, {6, 9}}, {{0, 9}, {0, 9}, {0, 9}}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
    cfg.share_face[0] = cases[c].share;
    cfg.wrap[0] = cases[c].wrap;
    cfg.ghosts[0] = cases[c].ghosts;
    blk_decomposer *d = NULL;
    CHECK_OK(blk_decomposer_create(&d, &dom, 3, &cfg));
    for (int g = 0; g < 3; g++) {
      blk_bounds co, gh;
      CHECK_OK(blk_decomposer_block_bounds(d, g, &co, NULL));
      CHECK_OK(blk_decomposer_block_bounds(d, g, NULL, &gh));
      CHECK_EQ_INT(co.dim, 1);
      CHECK_EQ_INT(co.min[0], cases[c].core[g][0]);
      CHECK_EQ_INT(co.max[0], cases[c].core[g][1]);
      CHECK_EQ_INT(gh.min[0], cases[c].ghosted[g][0]);
      CHECK_EQ_INT(gh.max[0], cases[c].ghosted[g][1]);
    }
    /* The shared face belongs to the upper block. */
    int64_t x = 3;
    CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &x), 1);
    x = 2;
    CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &x), 0);
    x = 6;
    CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &x), 2);
    blk_decomposer_destroy(d);
  }
  /* point_to_gids by hand: share + ghosts 1, cell 3 is in all three
   * ghosted blocks' reach? [0,4] [2,7] [5,9]: cell 3 -> 0, 1. */
  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
  cfg.share_face[0] = 1;
  cfg.ghosts[0] = 1;
  blk_decomposer *d = NULL;
  CHECK_OK(blk_decomposer_create(&d, &dom, 3, &cfg));
  int gids[3] = {-9, -9, -9};
  int64_t x = 3;
  CHECK_EQ_INT(blk_decomposer_point_to_gids(d, &x, gids, 3), 2);
  CHECK_EQ_INT(gids[0], 0);
  CHECK_EQ_INT(gids[1], 1);
  CHECK_EQ_INT(gids[2], -9);
  x = 5;
  CHECK_EQ_INT(blk_decomposer_point_to_gids(d, &x, gids, 3), 2);
  CHECK_EQ_INT(gids[0], 1);
  CHECK_EQ_INT(gids[1], 2);
  x = 10;
  CHECK_EQ_INT(blk_decomposer_point_to_gids(d, &x, gids, 3), 0);
  blk_decomposer_destroy(d);
  /* With wrap and 2 ghosts, cell 0 is also in block 2's ghosts ([4, 11] holds 10). */
  blk_decomposer_config w = BLK_DECOMPOSER_CONFIG_INIT;
  w.wrap[0] = 1;
  w.ghosts[0] = 2;
  CHECK_OK(blk_decomposer_create(&d, &dom, 3, &w));
  x = 0;
  CHECK_EQ_INT(blk_decomposer_point_to_gids(d, &x, gids, 3), 2);
  CHECK_EQ_INT(gids[0], 0);
  CHECK_EQ_INT(gids[1], 2);
  x = 12; /* outside, but the image 2 is inside: blocks 0 ([-2,4]) and 1 ([1,7]) */
  CHECK_EQ_INT(blk_decomposer_point_to_gids(d, &x, gids, 3), 2);
  CHECK_EQ_INT(gids[0], 0);
  CHECK_EQ_INT(gids[1], 1);
  CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &x), BLK_ENOTFOUND); /* owner lookups do not wrap */
  blk_decomposer_destroy(d);
}

/* Domains near the int64 limits. */
static void test_large_1d(void) {
  const int64_t big = (int64_t)1 << 62;
  int64_t doms[3][2] = {{-big, big}, {INT64_MIN, INT64_MAX}, {INT64_MAX - 100, INT64_MAX}};
  int counts[] = {1, 2, 3, 7, 64, 1000, 65537};
  for (int k = 0; k < 3; k++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      int nb = counts[c];
      blk_bounds dom = box(1, &doms[k][0], &doms[k][1]);
      blk_decomposer *d = NULL;
      if ((uint64_t)nb > cells_of(doms[k][0], doms[k][1]) && k == 2) {
        CHECK_ERR(blk_decomposer_create(&d, &dom, nb, NULL), BLK_EINVAL, "do not fit");
        continue;
      }
      CHECK_OK(blk_decomposer_create(&d, &dom, nb, NULL));
      uint64_t smin = UINT64_MAX, smax = 0;
      int64_t prev_max = 0;
      for (int g = 0; g < nb; g++) {
        blk_bounds co;
        CHECK_OK(blk_decomposer_block_bounds(d, g, &co, NULL));
        CHECK(co.min[0] <= co.max[0]);
        uint64_t size = cells_of(co.min[0], co.max[0]);
        if (size < smin) smin = size;
        if (size > smax) smax = size;
        if (g == 0)
          CHECK(co.min[0] == doms[k][0]);
        else
          CHECK(co.min[0] == prev_max + 1);
        prev_max = co.max[0];
        if (nb <= 1000 || g % 97 == 0 || g == nb - 1) {
          CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &co.min[0]), g);
          CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &co.max[0]), g);
          int64_t mid = co.min[0] + (int64_t)((size - 1) / 2);
          CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &mid), g);
        }
      }
      CHECK(prev_max == doms[k][1]);
      CHECK_MSG(smax - smin <= 1, "sizes %llu..%llu", (unsigned long long)smin,
                (unsigned long long)smax);
      blk_decomposer_destroy(d);
    }

  /* 4 blocks of 2^63 + 1 cells, wrapped, 5 ghosts: by hand the blocks start
   * at -2^62, -2^61, 0, 2^61. */
  int64_t lo = -big, hi = big;
  blk_bounds dom = box(1, &lo, &hi);
  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
  cfg.wrap[0] = 1;
  cfg.ghosts[0] = 5;
  blk_decomposer *d = NULL;
  CHECK_OK(blk_decomposer_create(&d, &dom, 4, &cfg));
  int64_t starts[4] = {-big, -big / 2, 0, big / 2};
  for (int g = 0; g < 4; g++) {
    blk_bounds co, gh;
    CHECK_OK(blk_decomposer_block_bounds(d, g, &co, &gh));
    CHECK(co.min[0] == starts[g]);
    CHECK(co.max[0] == (g < 3 ? starts[g + 1] - 1 : big));
    CHECK(gh.min[0] == co.min[0] - 5);
    CHECK(gh.max[0] == co.max[0] + 5);
  }
  struct {
    int64_t p;
    int n, g0, g1;
  } pts[] = {
      {-big, 2, 0, 3},          {big - 4, 2, 0, 3},      {big - 5, 1, 3, -1},
      {-big + 4, 2, 0, 3},      {-big + 5, 1, 0, -1},    {-big / 2 + 4, 2, 0, 1},
      {-big / 2 + 5, 1, 1, -1}, {big + 1, 2, 0, 3},      {INT64_MAX, 2, 1, 2},
      {INT64_MIN, 2, 1, 2},     {big / 2 - 6, 1, 2, -1}, {big / 2 - 5, 2, 2, 3},
  };
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
    int gids[4] = {-1, -1, -1, -1};
    CHECK_EQ_INT(blk_decomposer_point_to_gids(d, &pts[i].p, gids, 4), pts[i].n);
    CHECK_EQ_INT(gids[0], pts[i].g0);
    CHECK_EQ_INT(gids[1], pts[i].g1);
  }
  blk_decomposer_destroy(d);

  /* Full int64 range, wrapped: no ghosts allowed past the range, none needed. */
  int64_t flo = INT64_MIN, fhi = INT64_MAX;
  blk_bounds full = box(1, &flo, &fhi);
  CHECK_OK(blk_decomposer_create(&d, &full, 3, NULL));
  blk_decomposer_destroy(d);
  blk_decomposer_config fw = BLK_DECOMPOSER_CONFIG_INIT;
  fw.wrap[0] = 1;
  CHECK_OK(blk_decomposer_create(&d, &full, 3, &fw));
  int gids[3];
  CHECK_EQ_INT(blk_decomposer_point_to_gids(d, &flo, gids, 3), 1);
  CHECK_EQ_INT(gids[0], 0);
  CHECK_EQ_INT(blk_decomposer_point_to_gids(d, &fhi, gids, 3), 1);
  CHECK_EQ_INT(gids[0], 2);
  blk_decomposer_destroy(d);

  /* A prime block count near INT_MAX allocates nothing per block. */
  CHECK_OK(blk_decomposer_create(&d, &dom, INT_MAX, NULL));
  int div = 0;
  blk_decomposer_divisions(d, &div);
  CHECK_EQ_INT(div, INT_MAX);
  blk_bounds last;
  CHECK_OK(blk_decomposer_block_bounds(d, INT_MAX - 1, &last, NULL));
  CHECK(last.max[0] == big);
  CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &last.min[0]), INT_MAX - 1);
  int64_t before = last.min[0] - 1;
  CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &before), INT_MAX - 2);
  blk_decomposer_destroy(d);
}

/* Every block's bounds, read once per decomposer for the scans below. */
static blk_bounds cores[MAXB], ghosts[MAXB];

static void load_bounds(const blk_decomposer *d) {
  CHECK(blk_decomposer_nblocks(d) <= MAXB);
  for (int g = 0; g < blk_decomposer_nblocks(d); g++)
    CHECK_OK(blk_decomposer_block_bounds(d, g, &cores[g], &ghosts[g]));
}

/* The brute-force owner: the largest gid whose core holds the cell (cores
 * overlap only in shared faces, which belong to the upper block). */
static int scan_owner(const blk_decomposer *d, const int64_t *pt) {
  int best = -1;
  for (int g = 0; g < blk_decomposer_nblocks(d); g++)
    if (blk_bounds_contains(&cores[g], pt)) best = g;
  return best;
}

/* Does the interval [lo, hi] hold p or, if wrapped, some p + k * n? */
static int holds(int64_t lo, int64_t hi, int64_t p, int wrap, int64_t n) {
  if (!wrap) return p >= lo && p <= hi;
  /* Every image that could land in [lo, hi], with a margin of one. */
  for (int64_t k = (lo - p) / n - 1; k <= (hi - p) / n + 1; k++) {
    int64_t q = p + k * n;
    if (q >= lo && q <= hi) return 1;
  }
  return 0;
}

static int scan_ghosted(const blk_decomposer *d, const blk_bounds *dom, const int64_t *pt,
                        int *out) {
  int n = 0, dim = blk_decomposer_dim(d);
  for (int g = 0; g < blk_decomposer_nblocks(d); g++) {
    int in = 1;
    for (int a = 0; a < dim && in; a++) {
      int w = blk_decomposer_wrap(d, a);
      int64_t ext = dom->max[a] - dom->min[a] + 1;
      if (!w && (pt[a] < dom->min[a] || pt[a] > dom->max[a])) in = 0;
      if (!holds(ghosts[g].min[a], ghosts[g].max[a], pt[a], w, ext)) in = 0;
    }
    if (in) out[n++] = g;
  }
  return n;
}

/* Walks every cell of dom widened by pad on each side. */
static int next_cell(int dim, const int64_t *lo, const int64_t *hi, int64_t *pt) {
  for (int a = 0; a < dim; a++) {
    if (pt[a] < hi[a]) {
      pt[a]++;
      return 1;
    }
    pt[a] = lo[a];
  }
  return 0;
}

static void check_lookups(const blk_decomposer *d, const blk_bounds *dom) {
  int dim = dom->dim, nb = blk_decomposer_nblocks(d);
  int64_t lo[BLK_MAX_DIM], hi[BLK_MAX_DIM], pt[BLK_MAX_DIM];
  for (int a = 0; a < dim; a++) {
    int64_t ext = dom->max[a] - dom->min[a] + 1;
    int64_t pad = blk_decomposer_wrap(d, a) ? ext + 2 : 2;
    lo[a] = pt[a] = dom->min[a] - pad;
    hi[a] = dom->max[a] + pad;
  }
  int ref[MAXB], got[MAXB];
  CHECK(nb <= MAXB);
  load_bounds(d);
  do {
    int inside = blk_bounds_contains(dom, pt);
    CHECK_EQ_INT(blk_decomposer_point_to_gid(d, pt), inside ? scan_owner(d, pt) : BLK_ENOTFOUND);
    int n = scan_ghosted(d, dom, pt, ref);
    int m = blk_decomposer_point_to_gids(d, pt, got, MAXB);
    CHECK_MSG(n == m, "point (%lld, %lld, %lld): %d gids, expected %d", (long long)pt[0],
              (long long)(dim > 1 ? pt[1] : 0), (long long)(dim > 2 ? pt[2] : 0), m, n);
    for (int i = 0; i < n; i++) CHECK_EQ_INT(got[i], ref[i]);
    if (inside) CHECK(n >= 1);
    if (n > 1) { /* a short buffer gets the first entries and the full count */
      int few[MAXB];
      few[n - 1] = -42;
      CHECK_EQ_INT(blk_decomposer_point_to_gids(d, pt, few, n - 1), n);
      for (int i = 0; i < n - 1; i++) CHECK_EQ_INT(few[i], ref[i]);
      CHECK_EQ_INT(few[n - 1], -42);
      CHECK_EQ_INT(blk_decomposer_point_to_gids(d, pt, NULL, 0), n);
    }
  } while (next_cell(dim, lo, hi, pt));
}

static void test_lookups_discrete(void) {
  struct {
    int dim;
    int64_t lo[3], hi[3];
    int nblocks;
    int div[3];
  } doms[] = {
      {1, {0}, {12}, 1, {0}},
      {1, {-3}, {9}, 5, {0}},
      {1, {5}, {11}, 7, {0}},
      {1, {0}, {4}, 2, {0}},
      {2, {0, 0}, {6, 4}, 6, {0, 0}},
      {2, {-2, 3}, {4, 7}, 12, {0, 0}},
      {2, {0, 0}, {6, 4}, 5, {1, 5}},
      {2, {0, 0}, {7, 7}, 1, {0, 0}},
      {3, {0, 0, 0}, {4, 3, 2}, 12, {0, 0, 0}},
      {3, {-1, 0, 2}, {3, 2, 6}, 8, {2, 2, 2}},
      {3, {0, 0, 0}, {3, 2, 4}, 60, {4, 3, 5}},
  };
  int64_t ghost_sets[][3] = {{0, 0, 0}, {1, 1, 1}, {2, 0, 3}, {5, 9, 1}, {13, 2, 40}};
  for (size_t k = 0; k < sizeof doms / sizeof doms[0]; k++) {
    blk_bounds dom = box(doms[k].dim, doms[k].lo, doms[k].hi);
    for (int wmask = 0; wmask < (1 << doms[k].dim); wmask++)
      for (int smask = 0; smask < (1 << doms[k].dim); smask += (doms[k].dim > 1 ? 3 : 1))
        for (size_t gs = 0; gs<sizeof ghost_sets / sizeof ghost_sets[0]; gs += doms[k].dim> 2
                                ? 2
                                : 1) { /* 3D: a subset, to stay fast */
          blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
          for (int a = 0; a < doms[k].dim; a++) {
            cfg.divisions[a] = doms[k].div[a];
            cfg.wrap[a] = (wmask >> a) & 1;
            cfg.share_face[a] = (smask >> a) & 1;
            cfg.ghosts[a] = ghost_sets[gs][a];
          }
          blk_decomposer *d = NULL;
          CHECK_OK(blk_decomposer_create(&d, &dom, doms[k].nblocks, &cfg));
          check_lookups(d, &dom);
          blk_decomposer_destroy(d);
        }
  }
}

/* Continuous: the same by brute force, on dyadic coordinates so the
 * reference's periodic images are exact. */
static int cholds(double lo, double hi, double p, int wrap, double len) {
  if (!wrap) return p >= lo && p <= hi;
  for (int k = -12; k <= 12; k++) {
    double q = p + k * len;
    if (q >= lo && q <= hi) return 1;
  }
  return 0;
}

static void check_clookups(const blk_decomposer *d, const blk_cbounds *dom, double step) {
  int dim = dom->dim, nb = blk_decomposer_nblocks(d);
  double lo[BLK_MAX_DIM], hi[BLK_MAX_DIM], pt[BLK_MAX_DIM];
  for (int a = 0; a < dim; a++) {
    double len = dom->max[a] - dom->min[a];
    double pad = blk_decomposer_wrap(d, a) ? len + 1 : 1;
    lo[a] = pt[a] = dom->min[a] - pad;
    hi[a] = dom->max[a] + pad;
  }
  int ref[MAXB], got[MAXB];
  static blk_cbounds co[MAXB], gh[MAXB];
  CHECK(nb <= MAXB);
  for (int g = 0; g < nb; g++) CHECK_OK(blk_decomposer_block_cbounds(d, g, &co[g], &gh[g]));
  for (;;) {
    int inside = blk_cbounds_contains(dom, pt);
    int owner = -1, n = 0;
    for (int g = 0; g < nb; g++) {
      if (blk_cbounds_contains(&co[g], pt)) owner = g; /* faces go to the upper block */
      int in = 1;
      for (int a = 0; a < dim && in; a++) {
        int w = blk_decomposer_wrap(d, a);
        if (!w && !(pt[a] >= dom->min[a] && pt[a] <= dom->max[a])) in = 0;
        if (!cholds(gh[g].min[a], gh[g].max[a], pt[a], w, dom->max[a] - dom->min[a])) in = 0;
      }
      if (in) ref[n++] = g;
    }
    CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(d, pt), inside ? owner : BLK_ENOTFOUND);
    int m = blk_decomposer_cpoint_to_gids(d, pt, got, MAXB);
    CHECK_MSG(m == n, "point (%g, %g): %d gids, expected %d", pt[0], dim > 1 ? pt[1] : 0.0, m, n);
    for (int i = 0; i < n; i++) CHECK_EQ_INT(got[i], ref[i]);
    int a = 0;
    for (; a < dim; a++) {
      if (pt[a] + step <= hi[a]) {
        pt[a] += step;
        break;
      }
      pt[a] = lo[a];
    }
    if (a == dim) break;
  }
}

static void test_lookups_continuous(void) {
  struct {
    int dim;
    double lo[2], hi[2];
    int nblocks;
    int div[2];
  } doms[] = {
      {1, {0}, {1}, 4, {0}},           {1, {-2}, {6}, 8, {0}},
      {1, {-2}, {6}, 1, {0}},          {1, {0}, {4}, 2, {0}},
      {2, {-2, 0}, {6, 4}, 8, {0, 0}}, {2, {0, 0}, {4, 4}, 16, {0, 0}},
      {2, {0, 0}, {8, 2}, 4, {4, 1}},
  };
  double widths[][2] = {{0, 0}, {0.25, 0.5}, {1, 0}, {3, 1.5}, {8, 20}};
  for (size_t k = 0; k < sizeof doms / sizeof doms[0]; k++) {
    blk_cbounds dom = cbox(doms[k].dim, doms[k].lo, doms[k].hi);
    for (int wmask = 0; wmask < (1 << doms[k].dim); wmask++)
      for (size_t ws = 0; ws < sizeof widths / sizeof widths[0]; ws++) {
        blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
        for (int a = 0; a < doms[k].dim; a++) {
          cfg.divisions[a] = doms[k].div[a];
          cfg.wrap[a] = (wmask >> a) & 1;
          cfg.ghost_width[a] = widths[ws][a];
        }
        blk_decomposer *d = NULL;
        CHECK_OK(blk_decomposer_create_continuous(&d, &dom, doms[k].nblocks, &cfg));
        check_clookups(d, &dom, 0.125);
        blk_decomposer_destroy(d);
      }
  }
}

/* The largest double below a positive x (nextafter without libm: the
 * tests link only blk). */
static double prev_double(double x) {
  if (x == 0) return -DBL_TRUE_MIN;
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  if (x > 0)
    bits--;
  else
    bits++;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* Block faces at doubles that are not round: for many domains and counts,
 * the blocks tile the domain exactly, and the owner lookup agrees with the
 * bounds on both sides of every face. */
static void test_continuous_faces(void) {
  double doms[][2] = {{0, 1},        {-3.7, 11.3},           {0.1, 0.7},
                      {-1e-3, 2e-3}, {1e6 + 0.3, 1e6 + 7.9}, {-5.5e10, -1.25e10}};
  for (size_t k = 0; k < sizeof doms / sizeof doms[0]; k++)
    for (int nb = 1; nb <= 60; nb++) {
      blk_cbounds dom = cbox(1, &doms[k][0], &doms[k][1]);
      blk_decomposer *d = NULL;
      CHECK_OK(blk_decomposer_create_continuous(&d, &dom, nb, NULL));
      double prev = doms[k][0];
      for (int g = 0; g < nb; g++) {
        blk_cbounds co;
        CHECK_OK(blk_decomposer_block_cbounds(d, g, &co, NULL));
        CHECK(co.min[0] == prev);
        CHECK(co.max[0] > co.min[0]);
        prev = co.max[0];
        CHECK_MSG(blk_decomposer_cpoint_to_gid(d, &co.min[0]) == g, "dom %zu nb %d block %d", k, nb,
                  g);
        double below = prev_double(co.max[0]);
        CHECK_MSG(blk_decomposer_cpoint_to_gid(d, &below) == g, "dom %zu nb %d block %d", k, nb, g);
        int gids[3];
        int n = blk_decomposer_cpoint_to_gids(d, &co.min[0], gids, 3);
        CHECK(n == (g > 0 ? 2 : 1) && gids[n - 1] == g);
      }
      CHECK(prev == doms[k][1]);
      CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(d, &doms[k][1]), nb - 1);
      double past = doms[k][1] + fabs(doms[k][1]) * 1e-15 + 1e-300;
      CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(d, &past), BLK_ENOTFOUND);
      blk_decomposer_destroy(d);
    }
}

/* Owner lookups on axes of extreme lengths, where a guess of the form
 * (x - min) * blocks / length would overflow or lose all precision: a few
 * subnormal steps long, one normal step at DBL_MIN, and almost the whole
 * double range. Each nonempty block's first point and the last point before
 * its end must map to it; the blocks come from block_cbounds. */
static void test_continuous_extremes(void) {
  double doms[][2] = {{0, 1000 * DBL_TRUE_MIN},
                      {-7 * DBL_TRUE_MIN, 5 * DBL_TRUE_MIN},
                      {0, DBL_MIN},
                      {1e-300, 3e-300},
                      {-8e307, 8e307},
                      {1, 1 + 64 * DBL_EPSILON}};
  int counts[] = {1, 2, 7, 60, 1000, 65537};
  for (size_t k = 0; k < sizeof doms / sizeof doms[0]; k++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      int nb = counts[c];
      blk_cbounds dom = cbox(1, &doms[k][0], &doms[k][1]);
      blk_decomposer *d = NULL;
      CHECK_OK(blk_decomposer_create_continuous(&d, &dom, nb, NULL));
      for (int g = 0; g<nb; g += nb> 1000 ? 97 : 1) {
        blk_cbounds co;
        CHECK_OK(blk_decomposer_block_cbounds(d, g, &co, NULL));
        if (!(co.min[0] < co.max[0])) continue; /* empty: more blocks than doubles */
        double below = prev_double(co.max[0]);
        CHECK_MSG(blk_decomposer_cpoint_to_gid(d, &co.min[0]) == g, "dom %zu nb %d block %d", k, nb,
                  g);
        CHECK_MSG(blk_decomposer_cpoint_to_gid(d, &below) == g, "dom %zu nb %d block %d", k, nb, g);
      }
      CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(d, &doms[k][1]), nb - 1);
      blk_decomposer_destroy(d);
    }
}

static void test_hand_continuous(void) {
  double lo = 0, hi = 1;
  blk_cbounds dom = cbox(1, &lo, &hi);
  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
  cfg.ghost_width[0] = 0.125;
  blk_decomposer *d = NULL;
  CHECK_OK(blk_decomposer_create_continuous(&d, &dom, 4, &cfg));
  CHECK_EQ_INT(blk_decomposer_is_continuous(d), 1);
  double from[5] = {0, 0.25, 0.5, 0.75, 1};
  for (int g = 0; g < 4; g++) {
    blk_cbounds co, gh;
    CHECK_OK(blk_decomposer_block_cbounds(d, g, &co, &gh));
    CHECK_NEAR(co.min[0], from[g], 0);
    CHECK_NEAR(co.max[0], from[g + 1], 0);
    CHECK_NEAR(gh.min[0], g == 0 ? 0 : from[g] - 0.125, 0);
    CHECK_NEAR(gh.max[0], g == 3 ? 1 : from[g + 1] + 0.125, 0);
  }
  enum { NONE = BLK_ENOTFOUND };
  struct {
    double p;
    int gid;
  } pts[] = {{0, 0},   {-0.0, 0},     {0.2499, 0},       {0.25, 1},   {0.5, 2},        {0.9, 3},
             {1.0, 3}, {-1e-9, NONE}, {1.0000001, NONE}, {NAN, NONE}, {INFINITY, NONE}};
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
    CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(d, &pts[i].p), pts[i].gid);
  int gids[4];
  double p = NAN;
  CHECK_EQ_INT(blk_decomposer_cpoint_to_gids(d, &p, gids, 4), 0);
  p = 0.25; /* on a face: both closed cores */
  CHECK_EQ_INT(blk_decomposer_cpoint_to_gids(d, &p, gids, 4), 2);
  CHECK_EQ_INT(gids[0], 0);
  CHECK_EQ_INT(gids[1], 1);
  blk_decomposer_destroy(d);

  /* Wrapped: block 0's ghosts reach below 0, block 3's above 1. */
  cfg.wrap[0] = 1;
  CHECK_OK(blk_decomposer_create_continuous(&d, &dom, 4, &cfg));
  blk_cbounds gh;
  CHECK_OK(blk_decomposer_block_cbounds(d, 0, NULL, &gh));
  CHECK_NEAR(gh.min[0], -0.125, 0);
  CHECK_OK(blk_decomposer_block_cbounds(d, 3, NULL, &gh));
  CHECK_NEAR(gh.max[0], 1.125, 0);
  p = 0.0625;
  CHECK_EQ_INT(blk_decomposer_cpoint_to_gids(d, &p, gids, 4), 2);
  CHECK_EQ_INT(gids[0], 0);
  CHECK_EQ_INT(gids[1], 3);
  p = 3.0625; /* an image of 0.0625 */
  CHECK_EQ_INT(blk_decomposer_cpoint_to_gids(d, &p, gids, 4), 2);
  CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(d, &p), BLK_ENOTFOUND);
  p = INFINITY;
  CHECK_EQ_INT(blk_decomposer_cpoint_to_gids(d, &p, gids, 4), 0);
  blk_decomposer_destroy(d);

  /* 3 blocks on [0, 1]: boundaries at 1/3 and 2/3 as doubles; the tiling is
   * exact and lookups agree with the bounds on both sides of each face. */
  CHECK_OK(blk_decomposer_create_continuous(&d, &dom, 3, NULL));
  for (int g = 0; g < 3; g++) {
    blk_cbounds co;
    CHECK_OK(blk_decomposer_block_cbounds(d, g, &co, NULL));
    CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(d, &co.min[0]), g);
    double below = prev_double(co.max[0]);
    CHECK_EQ_INT(blk_decomposer_cpoint_to_gid(d, &below), g);
    if (g < 2) {
      blk_cbounds nx;
      CHECK_OK(blk_decomposer_block_cbounds(d, g + 1, &nx, NULL));
      CHECK(nx.min[0] == co.max[0]);
    }
  }
  blk_decomposer_destroy(d);
}

static void test_coords_4d(void) {
  int64_t lo[4] = {0, 0, 0, 0}, hi[4] = {9, 9, 9, 9};
  blk_bounds dom = box(4, lo, hi);
  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
  cfg.divisions[0] = 3;
  cfg.divisions[1] = 2;
  cfg.divisions[2] = 4;
  cfg.divisions[3] = 5;
  blk_decomposer *d = NULL;
  CHECK_OK(blk_decomposer_create(&d, &dom, 120, &cfg));
  CHECK_EQ_INT(blk_decomposer_dim(d), 4);
  CHECK_EQ_INT(blk_decomposer_nblocks(d), 120);
  int seen[120] = {0}, expect = 0;
  for (int c3 = 0; c3 < 5; c3++)
    for (int c2 = 0; c2 < 4; c2++)
      for (int c1 = 0; c1 < 2; c1++)
        for (int c0 = 0; c0 < 3; c0++) { /* axis 0 fastest: gids count up */
          int c[4] = {c0, c1, c2, c3}, back[4];
          int gid = blk_decomposer_coords_to_gid(d, c);
          CHECK_EQ_INT(gid, expect++);
          seen[gid]++;
          blk_decomposer_gid_to_coords(d, gid, back);
          for (int a = 0; a < 4; a++) CHECK_EQ_INT(back[a], c[a]);
          /* The block's core holds its own corner cells. */
          blk_bounds co;
          CHECK_OK(blk_decomposer_block_bounds(d, gid, &co, NULL));
          CHECK_EQ_INT(blk_decomposer_point_to_gid(d, co.min), gid);
          CHECK_EQ_INT(blk_decomposer_point_to_gid(d, co.max), gid);
        }
  for (int g = 0; g < 120; g++) CHECK_EQ_INT(seen[g], 1);
  int bad[4] = {3, 0, 0, 0}, neg[4] = {0, -1, 0, 0}, out[4];
  CHECK_EQ_INT(blk_decomposer_coords_to_gid(d, bad), BLK_ENOTFOUND);
  CHECK_EQ_INT(blk_decomposer_coords_to_gid(d, neg), BLK_ENOTFOUND);
  blk_decomposer_gid_to_coords(d, 120, out);
  for (int a = 0; a < 4; a++) CHECK_EQ_INT(out[a], -1);
  blk_decomposer_gid_to_coords(d, -1, out);
  CHECK_EQ_INT(out[3], -1);
  blk_decomposer_config got;
  blk_decomposer_get_config(d, &got);
  CHECK_EQ_INT(got.version, BLK_DECOMPOSER_CONFIG_VERSION);
  CHECK_EQ_INT(got.divisions[3], 5);
  CHECK_EQ_INT(got.divisions[4], 0);
  /* A config the decomposer handed back is good input; one cleared by hand
   * (version 0) or from an unknown layout is refused, naming the version. */
  blk_decomposer *again = NULL;
  CHECK_OK(blk_decomposer_create(&again, &dom, 120, &got));
  blk_decomposer_destroy(again);
  blk_decomposer_config cleared;
  memset(&cleared, 0, sizeof cleared);
  CHECK_ERR(blk_decomposer_create(&again, &dom, 120, &cleared), BLK_EINVAL, "version 0");
  CHECK(again == NULL);
  CHECK_OK(blk_decomposer_config_init(&cleared, BLK_DECOMPOSER_CONFIG_VERSION));
  CHECK_EQ_INT(cleared.version, BLK_DECOMPOSER_CONFIG_VERSION);
  CHECK_EQ_INT(cleared.divisions[0], 0);
  CHECK_ERR(blk_decomposer_config_init(&cleared, 2), BLK_EINVAL, "version 2");
  CHECK_ERR(blk_decomposer_config_init(NULL, 1), BLK_EINVAL, "NULL");
  blk_bounds dd;
  CHECK_OK(blk_decomposer_domain(d, &dd));
  CHECK_EQ_INT(dd.max[3], 9);
  blk_cbounds cd;
  CHECK_ERR(blk_decomposer_cdomain(d, &cd), BLK_EINVAL, "discrete");
  blk_decomposer_destroy(d);
}

/* Chosen divisions, worked out by hand with the rule in decomposer.h. */
static void test_chosen_divisions(void) {
  struct {
    int dim;
    int64_t cells[4];
    int nblocks;
    int given[4];
    int want[4];
  } t[] = {
      {2, {100, 100}, 12, {0, 0}, {4, 3}},
      {2, {100, 100}, 7, {0, 0}, {7, 1}},
      {3, {10, 10, 10}, 8, {0, 0, 0}, {2, 2, 2}},
      {2, {100, 100}, 44, {0, 0}, {11, 4}},
      {1, {1000}, 12, {0}, {12}},
      {1, {1000}, 997, {0}, {997}},
      {2, {100, 100}, 1, {0, 0}, {1, 1}},
      {2, {200, 100}, 8, {0, 0}, {4, 2}},
      {2, {100, 200}, 8, {0, 0}, {2, 4}},
      {3, {64, 64, 64}, 64, {0, 0, 0}, {4, 4, 4}},
      {3, {60, 60, 60}, 12, {0, 3, 0}, {2, 3, 2}},
      {2, {100, 100}, 12, {3, 0}, {3, 4}},
      {2, {100, 100}, 12, {0, 2}, {6, 2}},
      {3, {100, 100, 100}, 20, {0, 0, 5}, {2, 2, 5}},
      {3, {100, 100, 100}, 30, {0, 0, 0}, {5, 3, 2}},
      {4, {10, 10, 10, 10}, 16, {0, 0, 0, 0}, {2, 2, 2, 2}},
      {2, {6, 4}, 12, {0, 0}, {6, 2}},
      {2, {3, 8}, 24, {0, 0}, {3, 8}}, /* greedy would give 3 to axis 1; it backs up */
      {2, {8, 3}, 24, {0, 0}, {8, 3}},
      {2, {1, 50}, 10, {0, 0}, {1, 10}},
      {2, {100, 100}, 6, {2, 3}, {2, 3}},
      {2, {100, 67}, 12, {0, 0}, {3, 4}}, /* 100/3 < 67/2 decides the last 2 */
  };
  for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
    int64_t lo[4] = {0, -5, 7, 0}, hi[4];
    for (int a = 0; a < t[k].dim; a++) hi[a] = lo[a] + t[k].cells[a] - 1;
    blk_bounds dom = box(t[k].dim, lo, hi);
    blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
    for (int a = 0; a < t[k].dim; a++) cfg.divisions[a] = t[k].given[a];
    blk_decomposer *d = NULL;
    CHECK_OK(blk_decomposer_create(&d, &dom, t[k].nblocks, &cfg));
    int div[4];
    blk_decomposer_divisions(d, div);
    for (int a = 0; a < t[k].dim; a++)
      CHECK_MSG(div[a] == t[k].want[a], "case %zu: divisions[%d] = %d, expected %d", k, a, div[a],
                t[k].want[a]);
    blk_decomposer_destroy(d);
  }
  /* Continuous: extents by length. */
  double clo[2] = {0, 0}, chi[2] = {4, 1}, sq[2] = {1, 1};
  blk_cbounds cdom = cbox(2, clo, chi), csq = cbox(2, clo, sq);
  blk_decomposer *d = NULL;
  int div[2];
  CHECK_OK(blk_decomposer_create_continuous(&d, &cdom, 8, NULL));
  blk_decomposer_divisions(d, div);
  CHECK(div[0] == 8 && div[1] == 1);
  blk_decomposer_destroy(d);
  CHECK_OK(blk_decomposer_create_continuous(&d, &csq, 12, NULL));
  blk_decomposer_divisions(d, div);
  CHECK(div[0] == 4 && div[1] == 3);
  blk_decomposer_destroy(d);
  /* A huge power of two over a big 2D domain. */
  int64_t blo[2] = {0, 0}, bhi[2] = {INT32_MAX, INT32_MAX};
  blk_bounds bdom = box(2, blo, bhi);
  CHECK_OK(blk_decomposer_create(&d, &bdom, 1 << 30, NULL));
  blk_decomposer_divisions(d, div);
  CHECK(div[0] == 1 << 15 && div[1] == 1 << 15);
  blk_decomposer_destroy(d);
}

/* Chosen divisions exist exactly when some split fits (at least one cell
 * per block on every axis): checked against an exhaustive search over all
 * 3D grids of up to 6x6x6 cells. */
static void test_chosen_fit(void) {
  for (int x = 1; x <= 6; x++)
    for (int y = 1; y <= 6; y++)
      for (int z = 1; z <= 6; z++) {
        int64_t lo[3] = {0, 0, 0}, hi[3] = {x - 1, y - 1, z - 1};
        blk_bounds dom = box(3, lo, hi);
        for (int n = 1; n <= x * y * z + 2; n++) {
          int fits = 0;
          for (int a = 1; a <= x && !fits; a++)
            for (int b = 1; b <= y && !fits; b++)
              if (n % (a * b) == 0 && n / (a * b) <= z) fits = 1;
          blk_decomposer *d = NULL;
          int rc = blk_decomposer_create(&d, &dom, n, NULL);
          CHECK_MSG((rc == 0) == fits, "%dx%dx%d cells, %d blocks: rc %d, fits %d", x, y, z, n, rc,
                    fits);
          if (rc == 0) {
            int div[3];
            blk_decomposer_divisions(d, div);
            CHECK(div[0] <= x && div[1] <= y && div[2] <= z && div[0] * div[1] * div[2] == n);
          } else {
            CHECK(strstr(blk_last_error(), "do not fit") != NULL);
          }
          blk_decomposer_destroy(d);
        }
      }
}

/* The largest block counts cost nothing (the decomposer keeps no per-block
 * state), and given divisions whose product passes INT_MAX are named as such
 * (they used to be reported as a division that did not divide 1 block). */
static void test_huge(void) {
  int64_t lo[BLK_MAX_DIM] = {0}, hi[BLK_MAX_DIM];
  for (int a = 0; a < BLK_MAX_DIM; a++) hi[a] = INT64_MAX;
  blk_decomposer *d = NULL;
  blk_bounds line = box(1, lo, hi);
  CHECK_OK(blk_decomposer_create(&d, &line, INT_MAX, NULL)); /* a prime */
  blk_bounds core;
  CHECK_OK(blk_decomposer_block_bounds(d, INT_MAX - 1, &core, NULL));
  CHECK(core.max[0] == INT64_MAX);
  CHECK_EQ_INT(blk_decomposer_point_to_gid(d, &hi[0]), INT_MAX - 1);
  blk_decomposer_destroy(d);

  blk_bounds plane = box(2, lo, hi);
  CHECK_OK(blk_decomposer_create(&d, &plane, 1 << 30, NULL));
  int div[BLK_MAX_DIM];
  blk_decomposer_divisions(d, div);
  CHECK_EQ_INT(div[0], 32768);
  CHECK_EQ_INT(div[1], 32768);
  CHECK_OK(blk_decomposer_block_bounds(d, (1 << 30) - 1, &core, NULL));
  CHECK(core.max[0] == INT64_MAX && core.max[1] == INT64_MAX);
  int gids[4];
  CHECK_EQ_INT(blk_decomposer_point_to_gids(d, hi, gids, 4), 1);
  CHECK_EQ_INT(gids[0], (1 << 30) - 1);
  blk_decomposer_destroy(d);

  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
  cfg.divisions[0] = cfg.divisions[1] = 65536;
  CHECK_ERR(blk_decomposer_create(&d, &plane, 65536, &cfg), BLK_EINVAL,
            "divisions 65536x65536 multiply to more than INT_MAX = 2147483647 blocks "
            "(nblocks = 65536)");
  CHECK(d == NULL);
  cfg.divisions[0] = INT_MAX;
  cfg.divisions[1] = 2;
  CHECK_ERR(blk_decomposer_create(&d, &plane, INT_MAX, &cfg), BLK_EINVAL,
            "divisions 2147483647x2 multiply to more than INT_MAX");
  blk_bounds cube8 = box(BLK_MAX_DIM, lo, hi);
  blk_decomposer_config c8 = BLK_DECOMPOSER_CONFIG_INIT;
  for (int a = 0; a < 4; a++) c8.divisions[a] = 256; /* 2^32; the other axes free */
  CHECK_ERR(blk_decomposer_create(&d, &cube8, 1 << 30, &c8), BLK_EINVAL,
            "divisions 256x256x256x256x0x0x0x0 multiply to more than INT_MAX");
}

static void test_errors(void) {
  int64_t lo[2] = {0, 0}, hi[2] = {9, 9};
  blk_bounds dom = box(2, lo, hi);
  static max_align_t poison;
  blk_decomposer *d = (blk_decomposer *)(void *)&poison; /* reset to NULL on failure */
  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;

  blk_bounds bad = dom;
  bad.dim = 0;
  CHECK_ERR(blk_decomposer_create(&d, &bad, 4, NULL), BLK_EINVAL, "dim = 0");
  CHECK(d == NULL);
  bad.dim = BLK_MAX_DIM + 1;
  CHECK_ERR(blk_decomposer_create(&d, &bad, 4, NULL), BLK_EINVAL, "dim = 9");
  bad = dom;
  bad.min[1] = 5;
  bad.max[1] = 3;
  CHECK_ERR(blk_decomposer_create(&d, &bad, 4, NULL), BLK_EINVAL, "min[1] = 5 > max[1] = 3");
  CHECK_ERR(blk_decomposer_create(&d, &dom, 0, NULL), BLK_EINVAL, "nblocks = 0");
  CHECK_ERR(blk_decomposer_create(&d, &dom, -3, NULL), BLK_EINVAL, "nblocks = -3");
  CHECK_ERR(blk_decomposer_create(&d, NULL, 4, NULL), BLK_EINVAL, "domain is NULL");
  CHECK_ERR(blk_decomposer_create(NULL, &dom, 4, NULL), BLK_EINVAL, "out is NULL");

  cfg.divisions[1] = -2;
  CHECK_ERR(blk_decomposer_create(&d, &dom, 4, &cfg), BLK_EINVAL, "divisions[1] = -2");
  cfg.divisions[1] = 4;
  CHECK_ERR(blk_decomposer_create(&d, &dom, 7, &cfg), BLK_EINVAL,
            "divisions[1] = 4 does not divide the 7 blocks left");
  cfg.divisions[0] = 2;
  cfg.divisions[1] = 3;
  CHECK_ERR(blk_decomposer_create(&d, &dom, 12, &cfg), BLK_EINVAL,
            "divisions 2x3 make 6 blocks, not nblocks = 12");
  cfg.divisions[0] = 4;
  CHECK_ERR(blk_decomposer_create(&d, &dom, 6, &cfg), BLK_EINVAL,
            "divisions[0] = 4 does not divide the 6 blocks left");
  cfg.divisions[0] = 11;
  cfg.divisions[1] = 1;
  CHECK_ERR(blk_decomposer_create(&d, &dom, 11, &cfg), BLK_EINVAL,
            "divisions[0] = 11 but axis 0 has only 10 cells");
  cfg.divisions[0] = cfg.divisions[1] = 0;

  /* More blocks than cells, or no split that fits. */
  int64_t l1 = 0, h1 = 9;
  blk_bounds line = box(1, &l1, &h1);
  CHECK_ERR(blk_decomposer_create(&d, &line, 11, NULL), BLK_EINVAL, "11 blocks do not fit");
  CHECK_ERR(blk_decomposer_create(&d, &dom, 101, NULL), BLK_EINVAL, "101 blocks do not fit");
  int64_t l3[2] = {0, 0}, h3[2] = {2, 2};
  blk_bounds small = box(2, l3, h3);
  CHECK_ERR(blk_decomposer_create(&d, &small, 10, NULL), BLK_EINVAL, "3x3 cells");
  int64_t h43[2] = {3, 2};
  blk_bounds s43 = box(2, l3, h43);
  CHECK_ERR(blk_decomposer_create(&d, &s43, 13, NULL), BLK_EINVAL, "13 blocks");
  CHECK_OK(blk_decomposer_create(&d, &s43, 12, NULL)); /* 4x3 fits exactly */
  blk_decomposer_destroy(d);

  cfg.ghosts[0] = -1;
  CHECK_ERR(blk_decomposer_create(&d, &dom, 4, &cfg), BLK_EINVAL, "ghosts[0] = -1 is negative");
  cfg.ghosts[0] = 0;
  cfg.ghost_width[0] = 0.5;
  CHECK_ERR(blk_decomposer_create(&d, &dom, 4, &cfg), BLK_EINVAL,
            "ghost_width[0] = 0.5 set on a discrete domain");
  cfg.ghost_width[0] = NAN;
  CHECK_ERR(blk_decomposer_create(&d, &dom, 4, &cfg), BLK_EINVAL, "ghost_width[0] = nan");
  cfg.ghost_width[0] = 0;

  /* Wrapped ghosts past the int64 range. */
  int64_t elo = INT64_MIN + 1, ehi = 0;
  blk_bounds edge = box(1, &elo, &ehi);
  blk_decomposer_config w = BLK_DECOMPOSER_CONFIG_INIT;
  w.wrap[0] = 1;
  w.ghosts[0] = 2;
  CHECK_ERR(blk_decomposer_create(&d, &edge, 2, &w), BLK_EINVAL, "past the int64 range");
  w.ghosts[0] = 1;
  CHECK_OK(blk_decomposer_create(&d, &edge, 2, &w));
  blk_bounds gh;
  CHECK_OK(blk_decomposer_block_bounds(d, 0, NULL, &gh));
  CHECK(gh.min[0] == INT64_MIN);
  blk_decomposer_destroy(d);
  w.wrap[0] = 0;
  w.ghosts[0] = INT64_MAX; /* clamped: fine without wrap */
  CHECK_OK(blk_decomposer_create(&d, &edge, 2, &w));
  blk_decomposer_destroy(d);

  /* Continuous. */
  double clo[2] = {0, 0}, chi[2] = {1, 1};
  blk_cbounds cdom = cbox(2, clo, chi);
  blk_decomposer_config c = BLK_DECOMPOSER_CONFIG_INIT;
  c.ghosts[0] = 2;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 4, &c), BLK_EINVAL,
            "ghosts[0] = 2 set on a continuous domain");
  c.ghosts[0] = 0;
  c.share_face[1] = 1;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 4, &c), BLK_EINVAL, "share_face[1] = 1");
  c.share_face[1] = 0;
  c.ghost_width[1] = -0.5;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 4, &c), BLK_EINVAL,
            "ghost_width[1] = -0.5 is negative");
  c.ghost_width[1] = NAN;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 4, &c), BLK_EINVAL,
            "ghost_width[1] = nan is not finite");
  c.ghost_width[1] = INFINITY;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 4, &c), BLK_EINVAL, "not finite");
  c.ghost_width[1] = DBL_MAX;
  c.wrap[1] = 1;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 4, &c), BLK_EINVAL,
            "out of the finite doubles");
  c.ghost_width[1] = 0;
  c.wrap[1] = 0;
  c.divisions[0] = -1;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 4, &c), BLK_EINVAL, "divisions[0] = -1");
  c.divisions[0] = 3;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 4, &c), BLK_EINVAL,
            "divisions[0] = 3 does not divide the 4 blocks left");
  c.divisions[0] = 0;
  blk_cbounds cbad = cdom;
  cbad.min[0] = NAN;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cbad, 4, NULL), BLK_EINVAL, "min[0] = nan");
  cbad = cdom;
  cbad.max[1] = INFINITY;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cbad, 4, NULL), BLK_EINVAL, "must be finite");
  cbad = cdom;
  cbad.min[0] = -DBL_MAX;
  cbad.max[0] = DBL_MAX;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cbad, 4, NULL), BLK_EINVAL, "is not finite");
  cbad = cdom;
  cbad.min[0] = 2;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cbad, 4, NULL), BLK_EINVAL, "min[0] = 2 > max");
  cbad.dim = 0;
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cbad, 4, NULL), BLK_EINVAL, "dim = 0");
  CHECK_ERR(blk_decomposer_create_continuous(&d, &cdom, 0, NULL), BLK_EINVAL, "nblocks = 0");
  CHECK_ERR(blk_decomposer_create_continuous(&d, NULL, 4, NULL), BLK_EINVAL, "domain is NULL");
  CHECK(d == NULL);

  /* Queries of the wrong kind or with a bad gid. */
  blk_decomposer *dd = NULL, *cd = NULL;
  CHECK_OK(blk_decomposer_create(&dd, &dom, 12, NULL));
  CHECK_OK(blk_decomposer_create_continuous(&cd, &cdom, 4, NULL));
  blk_bounds bb;
  blk_cbounds cb;
  CHECK_ERR(blk_decomposer_block_bounds(dd, 12, &bb, NULL), BLK_ENOTFOUND,
            "gid 12 is outside 0..11");
  CHECK_ERR(blk_decomposer_block_bounds(dd, -1, &bb, NULL), BLK_ENOTFOUND, "gid -1");
  CHECK_ERR(blk_decomposer_block_bounds(cd, 0, &bb, NULL), BLK_EINVAL, "continuous decomposer");
  CHECK_ERR(blk_decomposer_block_cbounds(dd, 0, &cb, NULL), BLK_EINVAL, "discrete decomposer");
  int64_t ip[2] = {1, 1};
  double fp[2] = {0.5, 0.5};
  int gids[4];
  CHECK_ERR(blk_decomposer_point_to_gid(cd, ip), BLK_EINVAL, "continuous decomposer");
  CHECK_ERR(blk_decomposer_cpoint_to_gid(dd, fp), BLK_EINVAL, "discrete decomposer");
  CHECK_ERR(blk_decomposer_point_to_gids(cd, ip, gids, 4), BLK_EINVAL, "continuous");
  CHECK_ERR(blk_decomposer_cpoint_to_gids(dd, fp, gids, 4), BLK_EINVAL, "discrete");
  CHECK_ERR(blk_decomposer_point_to_gids(dd, ip, gids, -1), BLK_EINVAL, "max = -1");
  CHECK_ERR(blk_decomposer_point_to_gids(dd, ip, NULL, 3), BLK_EINVAL, "gids is NULL");
  CHECK_ERR(blk_decomposer_point_to_gids(dd, NULL, gids, 3), BLK_EINVAL, "NULL");
  CHECK_EQ_INT(blk_decomposer_wrap(dd, 5), 0);
  CHECK_EQ_INT(blk_decomposer_wrap(dd, -1), 0);
  blk_decomposer_destroy(dd);
  blk_decomposer_destroy(cd);
  blk_decomposer_destroy(NULL);
}

/* Sets a detail that test_not_found expects a missed lookup to leave alone. */
static void set_known_detail(void) {
  blk_bounds dom;
  CHECK_ERR(blk_decomposer_domain(NULL, &dom), BLK_EINVAL, "domain of a NULL decomposer");
}

/* A lookup's gid g for a point inside its domain or not: a hit must lie in
 * the core of the block it names (in_core), a miss must be BLK_ENOTFOUND and
 * leave the detail as set_known_detail left it. */
static void check_lookup(int g, int inside, int in_core) {
  if (inside) {
    CHECK_MSG(in_core, "gid %d does not hold the point", g);
  } else {
    CHECK_EQ_INT(g, BLK_ENOTFOUND);
    CHECK(strstr(blk_last_error(), "domain of a NULL decomposer") != NULL);
  }
}

/* "No such block" and "called wrong" come back as different codes: a point
 * outside the domain (or NaN), a gid or coordinates outside the grid give
 * BLK_ENOTFOUND; NULL arguments and the query of the other kind give
 * BLK_EINVAL. A missed point or coordinate lookup leaves the detail as it was
 * (documented: a miss costs what a hit does). Each miss is checked against
 * the domain by hand, each hit against the block's own bounds. */
static void test_not_found(void) {
  int64_t lo[2] = {0, -5}, hi[2] = {9, 4};
  double clo[2] = {-1, 0}, chi[2] = {1, 3};
  blk_bounds dom = box(2, lo, hi);
  blk_cbounds cdom = cbox(2, clo, chi);
  blk_decomposer_config wrap = BLK_DECOMPOSER_CONFIG_INIT;
  wrap.wrap[0] = 1; /* owner lookups do not wrap: a wrapped axis changes nothing here */
  blk_decomposer *dd = NULL, *cd = NULL;
  CHECK_OK(blk_decomposer_create(&dd, &dom, 6, &wrap));
  CHECK_OK(blk_decomposer_create_continuous(&cd, &cdom, 6, &wrap));

  /* Pairs of a cell and a point, each outside or inside its domain. */
  int64_t ipts[][2] = {{-1, 0}, {10, 0}, {0, -6}, {0, 5}, {INT64_MIN, INT64_MAX},
                       {3, 99}, {4, 0},  {0, -5}, {9, 4}};
  double cpts[][2] = {{-1.5, 1}, {1.0000001, 1}, {0, -1e-300}, {0, 3.5}, {NAN, 1},
                      {0, NAN},  {-INFINITY, 0}, {-1, 0},      {1, 3}};
  for (size_t i = 0; i < sizeof ipts / sizeof ipts[0]; i++) {
    const int64_t *ip = ipts[i];
    const double *cp = cpts[i];
    int in = ip[0] >= lo[0] && ip[0] <= hi[0] && ip[1] >= lo[1] && ip[1] <= hi[1];
    int cin = cp[0] >= clo[0] && cp[0] <= chi[0] && cp[1] >= clo[1] && cp[1] <= chi[1]; /* NaN: 0 */
    blk_bounds co;
    blk_cbounds cco;
    set_known_detail();
    int g = blk_decomposer_point_to_gid(dd, ip);
    check_lookup(
        g, in,
        g >= 0 && !blk_decomposer_block_bounds(dd, g, &co, NULL) && blk_bounds_contains(&co, ip));
    g = blk_decomposer_cpoint_to_gid(cd, cp);
    check_lookup(g, cin,
                 g >= 0 && !blk_decomposer_block_cbounds(cd, g, &cco, NULL) &&
                     blk_cbounds_contains(&cco, cp));
  }

  /* Called wrong: BLK_EINVAL with a detail, even where the point is outside. */
  int64_t iout[2] = {-1, 0};
  double cout[2] = {5, 5};
  CHECK_ERR(blk_decomposer_point_to_gid(NULL, iout), BLK_EINVAL, "NULL decomposer");
  CHECK_ERR(blk_decomposer_point_to_gid(dd, NULL), BLK_EINVAL, "NULL point");
  CHECK_ERR(blk_decomposer_point_to_gid(cd, iout), BLK_EINVAL, "continuous decomposer");
  CHECK_ERR(blk_decomposer_cpoint_to_gid(NULL, cout), BLK_EINVAL, "NULL decomposer");
  CHECK_ERR(blk_decomposer_cpoint_to_gid(cd, NULL), BLK_EINVAL, "NULL point");
  CHECK_ERR(blk_decomposer_cpoint_to_gid(dd, cout), BLK_EINVAL, "discrete decomposer");

  /* Grid coordinates on and around the grid: on it, the gid by the formula
   * in decomposer.h; off it, no block. */
  int div[2];
  blk_decomposer_divisions(dd, div);
  CHECK(div[0] * div[1] == 6);
  for (int c1 = -1; c1 <= div[1]; c1++)
    for (int c0 = -1; c0 <= div[0]; c0++) {
      int c[2] = {c0, c1};
      int on_grid = c0 >= 0 && c0 < div[0] && c1 >= 0 && c1 < div[1];
      CHECK_EQ_INT(blk_decomposer_coords_to_gid(dd, c), on_grid ? c0 + div[0] * c1 : BLK_ENOTFOUND);
    }
  int zero[2] = {0, 0};
  CHECK_ERR(blk_decomposer_coords_to_gid(NULL, zero), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_decomposer_coords_to_gid(dd, NULL), BLK_EINVAL, "NULL");
  blk_bounds bb;
  blk_cbounds cb;
  CHECK_ERR(blk_decomposer_block_bounds(dd, 6, &bb, NULL), BLK_ENOTFOUND, "gid 6 is outside 0..5");
  CHECK_ERR(blk_decomposer_block_cbounds(cd, -2, &cb, NULL), BLK_ENOTFOUND, "gid -2");
  CHECK_ERR(blk_decomposer_block_bounds(NULL, 0, &bb, NULL), BLK_EINVAL, "NULL decomposer");
  CHECK_ERR(blk_decomposer_block_cbounds(dd, 99, &cb, NULL), BLK_EINVAL, "discrete decomposer");
  blk_decomposer_destroy(dd);
  blk_decomposer_destroy(cd);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_split_1d();
  test_hand_1d();
  test_large_1d();
  test_lookups_discrete();
  test_lookups_continuous();
  test_hand_continuous();
  test_continuous_faces();
  test_continuous_extremes();
  test_coords_4d();
  test_chosen_divisions();
  test_chosen_fit();
  test_errors();
  test_not_found();
  test_huge();
  printf("test_decomposer: ok\n");
  return 0;
}
