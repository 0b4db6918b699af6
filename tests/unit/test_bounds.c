/* test_bounds: setting, validating, measuring and intersecting boxes. */
#include <math.h>
#include <stdint.h>

#include "blk/blk.h"
#include "blk/bounds.h"
#include "check.h"

static void test_set(void) {
  int64_t lo[BLK_MAX_DIM + 1] = {0, -5, 3, 0, 0, 0, 0, 0, 0};
  int64_t hi[BLK_MAX_DIM + 1] = {9, 5, 3, 0, 0, 0, 0, 0, 0};
  blk_bounds b;
  CHECK_OK(blk_bounds_set(&b, 3, lo, hi));
  CHECK_EQ_INT(b.dim, 3);
  CHECK_EQ_INT(b.min[1], -5);
  CHECK_EQ_INT(b.max[2], 3);
  CHECK_EQ_INT(b.min[3], 0);
  CHECK_OK(blk_bounds_set(&b, BLK_MAX_DIM, lo, hi));
  CHECK_ERR(blk_bounds_set(&b, 0, lo, hi), BLK_EINVAL, "dim = 0");
  CHECK_ERR(blk_bounds_set(&b, BLK_MAX_DIM + 1, lo, hi), BLK_EINVAL, "dim = 9");
  CHECK_ERR(blk_bounds_set(&b, -1, lo, hi), BLK_EINVAL, "dim = -1");
  CHECK_ERR(blk_bounds_set(NULL, 1, lo, hi), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_bounds_set(&b, 1, NULL, hi), BLK_EINVAL, "NULL");
  int64_t bad_lo[2] = {0, 7}, bad_hi[2] = {1, 6};
  b.dim = 42;
  CHECK_ERR(blk_bounds_set(&b, 2, bad_lo, bad_hi), BLK_EINVAL, "min[1] = 7 > max[1] = 6");
  CHECK_EQ_INT(b.dim, 42); /* untouched on failure */

  double clo[2] = {0.0, -1.5}, chi[2] = {1.0, 2.5};
  blk_cbounds cb;
  CHECK_OK(blk_cbounds_set(&cb, 2, clo, chi));
  CHECK_EQ_INT(cb.dim, 2);
  CHECK_NEAR(cb.min[1], -1.5, 0);
  CHECK_ERR(blk_cbounds_set(&cb, 9, clo, chi), BLK_EINVAL, "dim = 9");
  double nlo[2] = {0.0, NAN};
  CHECK_ERR(blk_cbounds_set(&cb, 2, nlo, chi), BLK_EINVAL, "min[1] = nan");
  CHECK_ERR(blk_cbounds_set(&cb, 2, clo, nlo), BLK_EINVAL, "max[1] = nan");
  double rlo[1] = {2.0}, rhi[1] = {1.0};
  CHECK_ERR(blk_cbounds_set(&cb, 1, rlo, rhi), BLK_EINVAL, "min[0] = 2 > max[0] = 1");
  double ilo[1] = {-INFINITY}, ihi[1] = {INFINITY};
  CHECK_OK(blk_cbounds_set(&cb, 1, ilo, ihi));
}

static void test_contains(void) {
  int64_t lo[2] = {-2, 10}, hi[2] = {2, 10};
  blk_bounds b;
  CHECK_OK(blk_bounds_set(&b, 2, lo, hi));
  int hits = 0;
  for (int64_t x = -5; x <= 5; x++)
    for (int64_t y = 8; y <= 12; y++) {
      int64_t p[2] = {x, y};
      int in = x >= -2 && x <= 2 && y == 10;
      CHECK_EQ_INT(blk_bounds_contains(&b, p), in);
      hits += in;
    }
  CHECK_EQ_INT(hits, 5);
  CHECK_EQ_INT(blk_bounds_contains(NULL, lo), 0);

  double clo[2] = {0, 0}, chi[2] = {1, 2};
  blk_cbounds cb;
  CHECK_OK(blk_cbounds_set(&cb, 2, clo, chi));
  double p1[2] = {0, 2}, p2[2] = {1, 2}, p3[2] = {1.0000001, 1}, p4[2] = {NAN, 1};
  double p5[2] = {0.5, -1e-300};
  CHECK_EQ_INT(blk_cbounds_contains(&cb, p1), 1); /* closed */
  CHECK_EQ_INT(blk_cbounds_contains(&cb, p2), 1);
  CHECK_EQ_INT(blk_cbounds_contains(&cb, p3), 0);
  CHECK_EQ_INT(blk_cbounds_contains(&cb, p4), 0);
  CHECK_EQ_INT(blk_cbounds_contains(&cb, p5), 0);
}

static void test_extent_count(void) {
  const int64_t big = (int64_t)1 << 62;
  int64_t lo[3] = {-big, 0, INT64_MIN}, hi[3] = {big, 0, INT64_MAX};
  blk_bounds b;
  CHECK_OK(blk_bounds_set(&b, 3, lo, hi));
  CHECK(blk_bounds_extent(&b, 0) == ((uint64_t)1 << 63) + 1);
  CHECK(blk_bounds_extent(&b, 1) == 1);
  CHECK(blk_bounds_extent(&b, 2) == UINT64_MAX); /* 2^64 saturates */
  CHECK(blk_bounds_extent(&b, 3) == 0);
  CHECK(blk_bounds_extent(&b, -1) == 0);
  uint64_t n = 0;
  CHECK_ERR(blk_bounds_count(&b, &n), BLK_EINVAL, "overflows uint64 at axis 2");

  int64_t lo2[3] = {-3, 1, 0}, hi2[3] = {3, 4, 99};
  CHECK_OK(blk_bounds_set(&b, 3, lo2, hi2));
  CHECK_OK(blk_bounds_count(&b, &n));
  CHECK(n == 7 * 4 * 100);
  /* 2^32 x 2^32 = 2^64 overflows, 2^32 x (2^32 - 1) does not. */
  int64_t lo3[2] = {0, 0}, hi3[2] = {((int64_t)1 << 32) - 1, ((int64_t)1 << 32) - 1};
  CHECK_OK(blk_bounds_set(&b, 2, lo3, hi3));
  CHECK_ERR(blk_bounds_count(&b, &n), BLK_EINVAL, "axis 1");
  hi3[1] -= 1;
  CHECK_OK(blk_bounds_set(&b, 2, lo3, hi3));
  CHECK_OK(blk_bounds_count(&b, &n));
  CHECK(n == (((uint64_t)1 << 32) * (((uint64_t)1 << 32) - 1)));
  /* Exactly UINT64_MAX cells: 3 x 5 x 17 x 257 x 641 x 65537 x 6700417. */
  int64_t f[7] = {3, 5, 17, 257, 641, 65537, 6700417}, z[7] = {0};
  for (int i = 0; i < 7; i++) f[i] -= 1;
  CHECK_OK(blk_bounds_set(&b, 7, z, f));
  CHECK_OK(blk_bounds_count(&b, &n));
  CHECK(n == UINT64_MAX);

  double clo[2] = {-1.5, 2}, chi[2] = {2.5, 2};
  blk_cbounds cb;
  CHECK_OK(blk_cbounds_set(&cb, 2, clo, chi));
  CHECK_NEAR(blk_cbounds_extent(&cb, 0), 4.0, 0);
  CHECK_NEAR(blk_cbounds_extent(&cb, 1), 0.0, 0);
  CHECK_NEAR(blk_cbounds_extent(&cb, 2), 0.0, 0);
}

static void test_intersect(void) {
  int64_t alo[2] = {0, 0}, ahi[2] = {9, 9}, blo[2] = {5, -3}, bhi[2] = {20, 4};
  blk_bounds a, b, r;
  CHECK_OK(blk_bounds_set(&a, 2, alo, ahi));
  CHECK_OK(blk_bounds_set(&b, 2, blo, bhi));
  CHECK_EQ_INT(blk_bounds_intersect(&r, &a, &b), 1);
  CHECK_EQ_INT(r.min[0], 5);
  CHECK_EQ_INT(r.max[0], 9);
  CHECK_EQ_INT(r.min[1], 0);
  CHECK_EQ_INT(r.max[1], 4);
  /* Brute force against cell membership. */
  for (int64_t x = -5; x <= 25; x++)
    for (int64_t y = -5; y <= 12; y++) {
      int64_t p[2] = {x, y};
      int both = blk_bounds_contains(&a, p) && blk_bounds_contains(&b, p);
      CHECK_EQ_INT(blk_bounds_contains(&r, p), both);
    }
  int64_t clo[2] = {10, 0}, chi[2] = {11, 0};
  blk_bounds c;
  CHECK_OK(blk_bounds_set(&c, 2, clo, chi));
  r.dim = 77;
  CHECK_EQ_INT(blk_bounds_intersect(&r, &a, &c), 0);
  CHECK_EQ_INT(r.dim, 77);
  int64_t slo[2] = {9, 9}, shi[2] = {15, 30};
  blk_bounds single;
  CHECK_OK(blk_bounds_set(&single, 2, slo, shi));
  CHECK_EQ_INT(blk_bounds_intersect(&r, &a, &single), 1); /* one cell */
  CHECK(r.min[0] == 9 && r.max[0] == 9 && r.min[1] == 9 && r.max[1] == 9);
  CHECK_EQ_INT(blk_bounds_intersect(&a, &a, &b), 1); /* aliasing */
  CHECK_EQ_INT(a.min[0], 5);
  blk_bounds one;
  CHECK_OK(blk_bounds_set(&one, 1, alo, ahi));
  CHECK_ERR(blk_bounds_intersect(&r, &one, &b), BLK_EINVAL, "dim 1 and 2");

  double dlo[1] = {0}, dhi[1] = {1}, elo[1] = {1}, ehi[1] = {2}, flo[1] = {1.5}, fhi[1] = {3};
  blk_cbounds cd, ce, cf, cr;
  CHECK_OK(blk_cbounds_set(&cd, 1, dlo, dhi));
  CHECK_OK(blk_cbounds_set(&ce, 1, elo, ehi));
  CHECK_OK(blk_cbounds_set(&cf, 1, flo, fhi));
  CHECK_EQ_INT(blk_cbounds_intersect(&cr, &cd, &ce), 1); /* touching faces */
  CHECK_NEAR(cr.min[0], 1, 0);
  CHECK_NEAR(cr.max[0], 1, 0);
  CHECK_EQ_INT(blk_cbounds_intersect(&cr, &cd, &cf), 0);
  CHECK_EQ_INT(blk_cbounds_intersect(&cr, &ce, &cf), 1);
  CHECK_NEAR(cr.min[0], 1.5, 0);
  CHECK_NEAR(cr.max[0], 2, 0);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_set();
  test_contains();
  test_extent_count();
  test_intersect();
  printf("test_bounds: ok\n");
  return 0;
}
