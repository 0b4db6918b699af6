/*
 * test_create_at: blk_master_decompose hands cfg.create_at each block's
 * gid, bounds and links, and they are the decomposer's.
 *
 * Two decompositions: 13 blocks of a discrete 2D domain with ghosts and a
 * periodic axis, and 7 blocks of a continuous 3D box with ghost width.
 * create_at keeps what it was told in the block; a foreach then compares it
 * with what the decomposer says when asked directly (block bounds, links
 * with the assigner's ranks) and with the links the master holds. The
 * config has no create (create_at alone is enough to decompose). Then a
 * create_at that fails for gid 5 makes decompose return BLK_ECALLBACK on
 * every rank, naming gid 5 and the code.
 *
 *   test_create_at --threads T
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct block {
  blk_block_info info; /* as create_at got it (links copied below) */
  blk_link links[32];
} block;

static int create_at(void **out, const blk_block_info *info, void *user) {
  const int *fail_gid = user;
  if (info->gid == *fail_gid) return -3;
  block *b = calloc(1, sizeof *b);
  if (!b) return BLK_ENOMEM;
  CHECK(info->nlinks <= 32);
  b->info = *info;
  memcpy(b->links, info->links, (size_t)info->nlinks * sizeof *info->links);
  b->info.links = NULL; /* valid only during the call */
  *out = b;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

typedef struct expect {
  const blk_decomposer *d;
  const blk_assigner *a;
} expect;

static int check_block(void *data, blk_proxy *p, void *user) {
  const block *b = data;
  const expect *e = user;
  int gid = blk_proxy_gid(p);
  CHECK_EQ_INT(b->info.gid, gid);
  CHECK_EQ_INT(b->info.dim, blk_decomposer_dim(e->d));
  CHECK(b->info.decomposer == e->d && b->info.assigner == e->a);
  int continuous = blk_decomposer_is_continuous(e->d);
  CHECK_EQ_INT(b->info.continuous, continuous);
  if (continuous) {
    blk_cbounds core, ghosted;
    CHECK_OK(blk_decomposer_block_cbounds(e->d, gid, &core, &ghosted));
    CHECK(!memcmp(&core, &b->info.ccore, sizeof core));
    CHECK(!memcmp(&ghosted, &b->info.cbounds, sizeof ghosted));
    int grew = 0; /* the ghost width shows (clipped at the domain's ends) */
    for (int i = 0; i < core.dim; i++) {
      CHECK(ghosted.min[i] <= core.min[i] && ghosted.max[i] >= core.max[i]);
      grew |= ghosted.min[i] < core.min[i] || ghosted.max[i] > core.max[i];
    }
    CHECK(grew);
  } else {
    blk_bounds core, ghosted;
    CHECK_OK(blk_decomposer_block_bounds(e->d, gid, &core, &ghosted));
    CHECK(!memcmp(&core, &b->info.core, sizeof core));
    CHECK(!memcmp(&ghosted, &b->info.bounds, sizeof ghosted));
    CHECK_EQ_INT(ghosted.min[1], core.min[1] - 2); /* axis 1 wraps: never clipped */
  }
  blk_link *links;
  int n;
  CHECK_OK(blk_decomposer_links(e->d, e->a, gid, &links, &n));
  CHECK_EQ_INT(b->info.nlinks, n);
  CHECK_EQ_INT(blk_proxy_link_count(p), n);
  for (int i = 0; i < n; i++) {
    CHECK(!memcmp(&links[i], &b->links[i], sizeof links[i]));
    CHECK(!memcmp(&links[i], blk_proxy_link(p, i), sizeof links[i]));
    CHECK_EQ_INT(b->links[i].rank, blk_assigner_rank(e->a, links[i].gid));
  }
  blk_links_free(links);
  return 0;
}

static void run(blk_decomposer *d, int threads, int size, int nblocks) {
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, nblocks));
  int fail_gid = -1;
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = threads;
  mc.create_at = create_at;
  mc.destroy = destroy;
  mc.user = &fail_gid;
  blk_master *m;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_OK(blk_master_decompose(m, d, a));
  expect e = {d, a};
  CHECK_OK(blk_master_foreach(m, check_block, &e));
  blk_master_destroy(m);

  fail_gid = 5;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_ERR(blk_master_decompose(m, d, a), BLK_ECALLBACK, "returned -3");
  CHECK_MSG(strstr(blk_last_error(), "gid 5"), "the detail does not name gid 5: %s",
            blk_last_error());
  blk_master_destroy(m);
  blk_assigner_destroy(a);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int threads = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  blk_decomposer_config dc = BLK_DECOMPOSER_CONFIG_INIT;
  dc.ghosts[0] = dc.ghosts[1] = 2;
  dc.wrap[1] = 1;
  blk_bounds domain = {2, {0, 0}, {63, 40}};
  blk_decomposer *d;
  CHECK_OK(blk_decomposer_create(&d, &domain, 13, &dc));
  run(d, threads, size, 13);
  blk_decomposer_destroy(d);

  blk_decomposer_config cc = BLK_DECOMPOSER_CONFIG_INIT;
  for (int i = 0; i < 3; i++) cc.ghost_width[i] = 0.125;
  blk_cbounds box = {3, {0.0, -1.0, 2.0}, {1.0, 1.0, 3.5}};
  CHECK_OK(blk_decomposer_create_continuous(&d, &box, 7, &cc));
  run(d, threads, size, 7);
  blk_decomposer_destroy(d);

  if (rank == 0) printf("test_create_at: ok (%d ranks, %d threads)\n", size, threads);
  MPI_Finalize();
  return 0;
}
