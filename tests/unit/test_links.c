/*
 * test_links: regular links of a decomposer's blocks.
 *
 * Counts for interior, edge and corner blocks by hand; each link's neighbour
 * checked independently by looking up the cell just past the block's core in
 * that direction (wrapped by hand); wrap flags; the degenerate wrapped axes
 * with 1 and 2 divisions; and symmetry: for every link of A to B in
 * direction dir, B has exactly one link back to A in direction -dir, and
 * blk_link_find_reverse finds it.
 */
#include <stdlib.h>

#include "blk/assigner.h"
#include "blk/blk.h"
#include "blk/decomposer.h"
#include "blk/link.h"
#include "check.h"

static blk_link poison; /* a non-NULL *links that calls must reset */

static blk_decomposer *make(int dim, const int64_t *cells, int nblocks, const int *div,
                            const int *wrap) {
  int64_t lo[BLK_MAX_DIM], hi[BLK_MAX_DIM];
  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
  for (int a = 0; a < dim; a++) {
    lo[a] = -3 * a;
    hi[a] = lo[a] + cells[a] - 1;
    cfg.divisions[a] = div ? div[a] : 0;
    cfg.wrap[a] = wrap ? wrap[a] : 0;
  }
  blk_bounds dom;
  CHECK_OK(blk_bounds_set(&dom, dim, lo, hi));
  blk_decomposer *d = NULL;
  CHECK_OK(blk_decomposer_create(&d, &dom, nblocks, &cfg));
  return d;
}

static int link_count(const blk_decomposer *d, const blk_assigner *a, int gid) {
  blk_link *l = NULL;
  int n = -1;
  CHECK_OK(blk_decomposer_links(d, a, gid, &l, &n));
  blk_links_free(l);
  return n;
}

/* Every link of every block against an independent neighbour lookup, the
 * fixed direction order, and the reverse-link symmetry. */
static void check_all(const blk_decomposer *d, const blk_assigner *as) {
  int nb = blk_decomposer_nblocks(d), dim = blk_decomposer_dim(d);
  blk_bounds dom;
  CHECK_OK(blk_decomposer_domain(d, &dom));
  blk_link **links = calloc((size_t)nb, sizeof *links);
  int *counts = calloc((size_t)nb, sizeof *counts);
  CHECK(links && counts);
  for (int g = 0; g < nb; g++) {
    CHECK_OK(blk_decomposer_links(d, as, g, &links[g], &counts[g]));
    blk_bounds core;
    CHECK_OK(blk_decomposer_block_bounds(d, g, &core, NULL));
    int prev_key = -1, expect = 1;
    for (int a = 0; a < dim; a++) {
      int div[BLK_MAX_DIM];
      blk_decomposer_divisions(d, div);
      int left = 0, right = 0; /* directions -1 and +1 exist on this axis */
      int c[BLK_MAX_DIM];
      blk_decomposer_gid_to_coords(d, g, c);
      int w = blk_decomposer_wrap(d, a);
      left = w || c[a] > 0;
      right = w || c[a] < div[a] - 1;
      expect *= 1 + left + right;
    }
    CHECK_EQ_INT(counts[g], expect - 1);
    for (int i = 0; i < counts[g]; i++) {
      const blk_link *l = &links[g][i];
      /* Order: base-3 key with axis 0 least significant, strictly rising. */
      int key = 0, nonzero = 0;
      for (int a = dim - 1; a >= 0; a--) {
        CHECK(l->dir[a] >= -1 && l->dir[a] <= 1);
        key = key * 3 + l->dir[a] + 1;
        nonzero |= l->dir[a] != 0;
      }
      CHECK(nonzero);
      CHECK(key > prev_key);
      prev_key = key;
      for (int a = dim; a < BLK_MAX_DIM; a++) CHECK(l->dir[a] == 0 && l->wrap[a] == 0);
      /* The neighbour owns the cell just past the core in direction dir. */
      int64_t probe[BLK_MAX_DIM];
      for (int a = 0; a < dim; a++) {
        int64_t p = l->dir[a] < 0 ? core.min[a] - 1 : l->dir[a] > 0 ? core.max[a] + 1 : core.min[a];
        int64_t ext = dom.max[a] - dom.min[a] + 1;
        int crossed = 0;
        if (p < dom.min[a]) {
          p += ext;
          crossed = -1;
        } else if (p > dom.max[a]) {
          p -= ext;
          crossed = 1;
        }
        CHECK_EQ_INT(l->wrap[a], crossed);
        if (crossed) CHECK(blk_decomposer_wrap(d, a));
        probe[a] = p;
      }
      CHECK_EQ_INT(l->gid, blk_decomposer_point_to_gid(d, probe));
      CHECK_EQ_INT(l->rank, blk_assigner_rank(as, l->gid));
      blk_bounds nb_core;
      CHECK_OK(blk_decomposer_block_bounds(d, l->gid, &nb_core, NULL));
      for (int a = 0; a < dim; a++) {
        CHECK(l->bounds.min[a] == nb_core.min[a]);
        CHECK(l->bounds.max[a] == nb_core.max[a]);
      }
      CHECK_EQ_INT(l->bounds.dim, dim);
      CHECK_EQ_INT(l->cbounds.dim, 0);
    }
  }
  /* Symmetry. */
  int total = 0;
  for (int g = 0; g < nb; g++)
    for (int i = 0; i < counts[g]; i++) {
      const blk_link *l = &links[g][i];
      const blk_link *back = links[l->gid];
      int n = 0, at = -1;
      for (int j = 0; j < counts[l->gid]; j++) {
        int rev = back[j].gid == g;
        for (int a = 0; a < dim; a++) rev = rev && back[j].dir[a] == -l->dir[a];
        if (rev) {
          n++;
          at = j;
        }
      }
      CHECK_MSG(n == 1, "gid %d link %d to %d: %d reverse links", g, i, l->gid, n);
      CHECK_EQ_INT(blk_link_find_reverse(back, counts[l->gid], g, l->dir, dim), at);
      /* The wrap crossings mirror too. */
      for (int a = 0; a < dim; a++) CHECK_EQ_INT(back[at].wrap[a], -l->wrap[a]);
      total++;
    }
  int total_back = 0;
  for (int g = 0; g < nb; g++) total_back += counts[g];
  CHECK_EQ_INT(total, total_back);
  for (int g = 0; g < nb; g++) blk_links_free(links[g]);
  free(links);
  free(counts);
}

static void test_counts(void) {
  blk_assigner *as = NULL;
  /* 2D 4x3, no wrap: interior 8, edge 5, corner 3. */
  int64_t c2[2] = {8, 6};
  int d2[2] = {4, 3};
  blk_decomposer *d = make(2, c2, 12, d2, NULL);
  CHECK_OK(blk_assigner_create_contiguous(&as, 3, 12));
  int c[2] = {1, 1};
  CHECK_EQ_INT(link_count(d, as, blk_decomposer_coords_to_gid(d, c)), 8);
  c[0] = 1, c[1] = 0;
  CHECK_EQ_INT(link_count(d, as, blk_decomposer_coords_to_gid(d, c)), 5);
  c[0] = 3, c[1] = 1;
  CHECK_EQ_INT(link_count(d, as, blk_decomposer_coords_to_gid(d, c)), 5);
  c[0] = 0, c[1] = 0;
  CHECK_EQ_INT(link_count(d, as, blk_decomposer_coords_to_gid(d, c)), 3);
  c[0] = 3, c[1] = 2;
  CHECK_EQ_INT(link_count(d, as, blk_decomposer_coords_to_gid(d, c)), 3);

  /* The fixed order of an interior block's 8 links, by hand. */
  blk_link *l = NULL;
  int n = 0;
  c[0] = 1, c[1] = 1;
  int gid = blk_decomposer_coords_to_gid(d, c); /* 5 */
  CHECK_EQ_INT(gid, 5);
  CHECK_OK(blk_decomposer_links(d, as, gid, &l, &n));
  int want_dir[8][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {1, 0}, {-1, 1}, {0, 1}, {1, 1}};
  int want_gid[8] = {0, 1, 2, 4, 6, 8, 9, 10};
  int want_rank[8] = {0, 0, 0, 1, 1, 2, 2, 2};
  CHECK_EQ_INT(n, 8);
  for (int i = 0; i < 8; i++) {
    CHECK_EQ_INT(l[i].dir[0], want_dir[i][0]);
    CHECK_EQ_INT(l[i].dir[1], want_dir[i][1]);
    CHECK_EQ_INT(l[i].gid, want_gid[i]);
    CHECK_EQ_INT(l[i].rank, want_rank[i]);
    CHECK_EQ_INT(l[i].wrap[0], 0);
    CHECK_EQ_INT(l[i].wrap[1], 0);
  }
  int up[2] = {0, 1};
  CHECK_EQ_INT(blk_link_find_reverse(l, n, 1, up, 2), 1); /* 1 sent up; arrives from below */
  CHECK_EQ_INT(blk_link_find_reverse(l, n, 1, c, 2), BLK_ENOTFOUND);
  CHECK_EQ_INT(blk_link_find_reverse(l, n, 3, up, 2), BLK_ENOTFOUND);    /* 3 is no neighbour */
  CHECK_EQ_INT(blk_link_find_reverse(NULL, 0, 1, up, 2), BLK_ENOTFOUND); /* no links at all */
  CHECK_ERR(blk_link_find_reverse(NULL, n, 1, up, 2), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_link_find_reverse(l, -1, 1, up, 2), BLK_EINVAL, "count = -1");
  CHECK_ERR(blk_link_find_reverse(l, n, 1, NULL, 2), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_link_find_reverse(l, n, 1, up, BLK_MAX_DIM + 1), BLK_EINVAL, "dim = 9");
  blk_links_free(l);
  check_all(d, as);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);

  /* 3D 3x3x3: interior 26, face 17, edge 11, corner 7. */
  int64_t c3[3] = {6, 6, 6};
  d = make(3, c3, 27, NULL, NULL);
  CHECK_OK(blk_assigner_create_round_robin(&as, 4, 27));
  int p[4][3] = {{1, 1, 1}, {1, 1, 0}, {1, 0, 0}, {0, 0, 0}};
  int want[4] = {26, 17, 11, 7};
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(link_count(d, as, blk_decomposer_coords_to_gid(d, p[i])), want[i]);
  check_all(d, as);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);
}

static void test_wrap(void) {
  blk_assigner *as = NULL;
  /* 2D 4x3 wrapped on axis 0 only. */
  int64_t c2[2] = {8, 6};
  int d2[2] = {4, 3}, w0[2] = {1, 0}, w01[2] = {1, 1};
  blk_decomposer *d = make(2, c2, 12, d2, w0);
  CHECK_OK(blk_assigner_create_contiguous(&as, 2, 12));
  blk_link *l = NULL;
  int n = 0, c[2] = {0, 1};
  CHECK_OK(blk_decomposer_links(d, as, blk_decomposer_coords_to_gid(d, c), &l, &n));
  CHECK_EQ_INT(n, 8);
  /* (-1, 0) is link 3: block (3, 1) = gid 7, across the low side. */
  CHECK_EQ_INT(l[3].dir[0], -1);
  CHECK_EQ_INT(l[3].dir[1], 0);
  CHECK_EQ_INT(l[3].gid, 7);
  CHECK_EQ_INT(l[3].wrap[0], -1);
  CHECK_EQ_INT(l[3].wrap[1], 0);
  CHECK_EQ_INT(l[4].gid, 5);
  CHECK_EQ_INT(l[4].wrap[0], 0);
  blk_links_free(l);
  c[0] = 3, c[1] = 0;
  CHECK_OK(blk_decomposer_links(d, as, blk_decomposer_coords_to_gid(d, c), &l, &n));
  CHECK_EQ_INT(n, 5); /* dy = -1 leaves the domain */
  /* (+1, 0) is link 1 here: (-1,0), (+1,0), (-1,1), (0,1), (+1,1). */
  CHECK_EQ_INT(l[1].dir[0], 1);
  CHECK_EQ_INT(l[1].gid, 0);
  CHECK_EQ_INT(l[1].wrap[0], 1);
  CHECK_EQ_INT(l[4].gid, 4);
  CHECK_EQ_INT(l[4].wrap[0], 1);
  blk_links_free(l);
  check_all(d, as);
  blk_decomposer_destroy(d);

  /* Fully wrapped: every block has 8. */
  d = make(2, c2, 12, d2, w01);
  for (int g = 0; g < 12; g++) CHECK_EQ_INT(link_count(d, as, g), 8);
  check_all(d, as);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);

  /* 3D with wrap on two axes, and a 4D fully wrapped grid. */
  int64_t c3[3] = {5, 6, 7};
  int d3[3] = {5, 3, 2}, w3[3] = {1, 0, 1};
  d = make(3, c3, 30, d3, w3);
  CHECK_OK(blk_assigner_create_round_robin(&as, 3, 30));
  check_all(d, as);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);
  int64_t c4[4] = {3, 3, 3, 3};
  int d4[4] = {3, 3, 3, 3}, w4[4] = {1, 1, 1, 1};
  d = make(4, c4, 81, d4, w4);
  CHECK_OK(blk_assigner_create_contiguous(&as, 5, 81));
  CHECK_EQ_INT(link_count(d, as, 40), 80);
  check_all(d, as);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);
}

static void test_degenerate(void) {
  blk_assigner *as = NULL;
  /* One block, wrapped: links to itself, one per direction. */
  int64_t c1 = 10;
  int one = 1, w = 1;
  blk_decomposer *d = make(1, &c1, 1, &one, &w);
  CHECK_OK(blk_assigner_create_contiguous(&as, 1, 1));
  blk_link *l = NULL;
  int n = 0;
  CHECK_OK(blk_decomposer_links(d, as, 0, &l, &n));
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT(l[0].gid, 0);
  CHECK_EQ_INT(l[0].dir[0], -1);
  CHECK_EQ_INT(l[0].wrap[0], -1);
  CHECK_EQ_INT(l[1].gid, 0);
  CHECK_EQ_INT(l[1].dir[0], 1);
  CHECK_EQ_INT(l[1].wrap[0], 1);
  /* What block 0 sends along +1 arrives on its -1 link. */
  int plus = 1;
  CHECK_EQ_INT(blk_link_find_reverse(l, n, 0, &plus, 1), 0);
  blk_links_free(l);
  check_all(d, as);
  blk_decomposer_destroy(d);

  /* One block, no wrap: no links, NULL array. */
  int nowrap = 0;
  d = make(1, &c1, 1, &one, &nowrap);
  l = &poison;
  CHECK_OK(blk_decomposer_links(d, as, 0, &l, &n));
  CHECK_EQ_INT(n, 0);
  CHECK(l == NULL);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);

  /* Two blocks, wrapped: each reaches the other both ways. */
  int two = 2;
  d = make(1, &c1, 2, &two, &w);
  CHECK_OK(blk_assigner_create_round_robin(&as, 2, 2));
  CHECK_OK(blk_decomposer_links(d, as, 0, &l, &n));
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT(l[0].gid, 1);
  CHECK_EQ_INT(l[0].wrap[0], -1);
  CHECK_EQ_INT(l[1].gid, 1);
  CHECK_EQ_INT(l[1].wrap[0], 0);
  CHECK_EQ_INT(l[1].rank, 1);
  blk_links_free(l);
  check_all(d, as);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);

  /* 2D with a 1-division and a 2-division wrapped axis: 8 links each. */
  int64_t c2[2] = {4, 4};
  int d2[2] = {1, 2}, w2[2] = {1, 1};
  d = make(2, c2, 2, d2, w2);
  CHECK_OK(blk_assigner_create_contiguous(&as, 1, 2));
  CHECK_OK(blk_decomposer_links(d, as, 0, &l, &n));
  CHECK_EQ_INT(n, 8);
  int self = 0;
  for (int i = 0; i < n; i++) self += l[i].gid == 0;
  CHECK_EQ_INT(self, 2); /* (-1, 0) and (+1, 0) */
  blk_links_free(l);
  check_all(d, as);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);

  /* 3D: 1 x 2 x 3, all wrapped, and mixed. */
  int64_t c3[3] = {4, 4, 6};
  int d3[3] = {1, 2, 3}, w3[3] = {1, 1, 1}, w3b[3] = {0, 1, 0};
  d = make(3, c3, 6, d3, w3);
  CHECK_OK(blk_assigner_create_round_robin(&as, 4, 6));
  for (int g = 0; g < 6; g++) CHECK_EQ_INT(link_count(d, as, g), 26);
  check_all(d, as);
  blk_decomposer_destroy(d);
  d = make(3, c3, 6, d3, w3b);
  check_all(d, as);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);
}

static void test_continuous(void) {
  double lo[2] = {0, 0}, hi[2] = {2, 1};
  blk_cbounds dom;
  CHECK_OK(blk_cbounds_set(&dom, 2, lo, hi));
  blk_decomposer_config cfg = BLK_DECOMPOSER_CONFIG_INIT;
  cfg.wrap[1] = 1;
  blk_decomposer *d = NULL;
  CHECK_OK(blk_decomposer_create_continuous(&d, &dom, 4, &cfg)); /* 4x1 */
  blk_assigner *as = NULL;
  CHECK_OK(blk_assigner_create_contiguous(&as, 2, 4));
  blk_link *l = NULL;
  int n = 0;
  CHECK_OK(blk_decomposer_links(d, as, 1, &l, &n));
  CHECK_EQ_INT(n, 8); /* axis 1 has one wrapped division */
  for (int i = 0; i < n; i++) {
    blk_cbounds co;
    CHECK_OK(blk_decomposer_block_cbounds(d, l[i].gid, &co, NULL));
    CHECK_EQ_INT(l[i].cbounds.dim, 2);
    CHECK_NEAR(l[i].cbounds.min[0], co.min[0], 0);
    CHECK_NEAR(l[i].cbounds.max[0], co.max[0], 0);
    CHECK_EQ_INT(l[i].bounds.dim, 0);
    CHECK_EQ_INT(l[i].gid, 1 + l[i].dir[0]);
  }
  blk_links_free(l);
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);
}

static void test_errors(void) {
  int64_t c2[2] = {8, 6};
  int d2[2] = {4, 3};
  blk_decomposer *d = make(2, c2, 12, d2, NULL);
  blk_assigner *as = NULL, *wrong = NULL;
  CHECK_OK(blk_assigner_create_contiguous(&as, 2, 12));
  CHECK_OK(blk_assigner_create_contiguous(&wrong, 2, 13));
  blk_link *l = &poison;
  int n = 99;
  CHECK_ERR(blk_decomposer_links(d, as, 12, &l, &n), BLK_ENOTFOUND, "gid 12 is outside 0..11");
  CHECK(l == NULL);
  CHECK_EQ_INT(n, 0);
  CHECK_ERR(blk_decomposer_links(d, as, -1, &l, &n), BLK_ENOTFOUND, "gid -1");
  CHECK_ERR(blk_decomposer_links(d, wrong, 99, &l, &n), BLK_EINVAL, "13 blocks"); /* both */
  CHECK_ERR(blk_decomposer_links(d, wrong, 0, &l, &n), BLK_EINVAL,
            "the assigner has 13 blocks, the decomposer 12");
  CHECK_ERR(blk_decomposer_links(NULL, as, 0, &l, &n), BLK_EINVAL, "NULL");
  CHECK_ERR(blk_decomposer_links(d, as, 0, NULL, &n), BLK_EINVAL, "NULL");
  blk_links_free(NULL); /* does nothing, like the destroys */
  blk_decomposer_destroy(d);
  blk_assigner_destroy(as);
  blk_assigner_destroy(wrong);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_counts();
  test_wrap();
  test_degenerate();
  test_continuous();
  test_errors();
  printf("test_links: ok\n");
  return 0;
}
