/*
 * test_misuse: programming errors inside a collective phase stop the job with
 * a message naming rank, gid, round and what was wrong (death tests: ctest
 * checks the message and the non-zero exit), and bad input to blk's setup
 * calls returns a clear error.
 *
 *   test_misuse --case NAME
 *     past-end        dequeue more than the neighbour sent
 *     not-neighbour   dequeue from a gid that is not a link neighbour
 *     not-partner     enqueue in a reduction to a gid that is not an out-partner
 *     view-past-end   blk_proxy_dequeue_view more than an all_to_all message
 *                     sent by reference holds
 *     bad-input       no death: every bad argument returns its code (passes normally)
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const char *which;

static int create(void **out, int gid, void *user) {
  (void)user;
  int *b = malloc(sizeof *b);
  if (!b) return BLK_ENOMEM;
  *b = gid;
  *out = b;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

static int send_one(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  int64_t v = 42;
  for (int i = 0; i < blk_proxy_out_count(p); i++) CHECK_OK(blk_proxy_enqueue(p, i, &v, sizeof v));
  return 0;
}

static int read_badly(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  int64_t v[2];
  if (!strcmp(which, "past-end") && blk_proxy_in_count(p) > 0) blk_proxy_dequeue(p, 0, v, sizeof v);
  if (!strcmp(which, "not-neighbour")) blk_proxy_dequeue_gid(p, 1000000, v, sizeof v[0]);
  return 0;
}

static int reduce_badly(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  int64_t v = 1;
  if (blk_proxy_round(p) == 0 && blk_proxy_gid(p) == 1)
    CHECK_OK(blk_proxy_enqueue_gid(p, 999, &v, sizeof v));
  for (int i = 0; i < blk_proxy_out_count(p); i++) CHECK_OK(blk_proxy_enqueue(p, i, &v, sizeof v));
  return 0;
}

/* all_to_all: 8 bytes by reference to every block, read as 16 in place. */
static const int64_t sent_pair[2] = {42, 43};

static int send_ref(void *b, blk_proxy *p, void *user) {
  (void)b;
  int nblocks = *(const int *)user;
  for (int g = 0; g < nblocks; g++)
    CHECK_OK(blk_proxy_enqueue_ref_gid(p, g, &sent_pair[0], sizeof sent_pair[0]));
  return 0;
}

static int view_badly(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  const int64_t *v = blk_proxy_dequeue_view(p, 0, 2 * sizeof *v);
  return v[1] == sent_pair[1] ? 0 : 1; /* not reached: the view stops the job */
}

static void bad_input(int size) {
  blk_log_set_level(BLK_LOG_NONE);
  blk_master *m = NULL;
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = 0;
  CHECK_ERR(blk_master_create(&m, MPI_COMM_WORLD, &mc), BLK_EINVAL, "threads = 0");
  mc.threads = 1;
  CHECK_ERR(blk_master_create(&m, MPI_COMM_NULL, &mc), BLK_EINVAL, "MPI_COMM_NULL");
  int level;
  MPI_Query_thread(&level);
  mc.threads = 2;
  if (level < MPI_THREAD_FUNNELED)
    CHECK_ERR(blk_master_create(&m, MPI_COMM_WORLD, &mc), BLK_ETHREADLEVEL, "MPI_THREAD_FUNNELED");
  else
    CHECK_MSG(0, "this test needs MPI initialised with MPI_Init (level SINGLE), got %d", level);
  /* BLK_THREADS_AUTO (the default) quietly takes 1 thread when MPI gives no threads. */
  mc.threads = BLK_THREADS_AUTO;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_EQ_INT(blk_master_threads(m), 1);
  blk_master_destroy(m);
  mc.threads = 1;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_ERR(blk_master_add(m, -1, NULL, NULL, 0), BLK_EINVAL, "gid = -1");
  blk_link l = {0};
  l.gid = 3;
  l.rank = size;
  CHECK_ERR(blk_master_add(m, 0, NULL, &l, 1), BLK_EINVAL, "rank");
  l.rank = 0;
  l.dir[0] = 2;
  CHECK_ERR(blk_master_add(m, 0, NULL, &l, 1), BLK_EINVAL, "dir[0] = 2");
  CHECK_OK(blk_master_add(m, 5, NULL, NULL, 0));
  CHECK_ERR(blk_master_add(m, 5, NULL, NULL, 0), BLK_EINVAL, "gid 5 is already");
  /* decompose without a create callback, and with mismatched assigner */
  blk_bounds dom;
  int64_t lo[1] = {0}, hi[1] = {99};
  CHECK_OK(blk_bounds_set(&dom, 1, lo, hi));
  blk_decomposer *d;
  blk_assigner *a;
  CHECK_OK(blk_decomposer_create(&d, &dom, 4, NULL));
  CHECK_OK(blk_assigner_create_contiguous(&a, size, 5));
  CHECK_ERR(blk_master_decompose(m, d, a), BLK_EINVAL, "create callback");
  blk_master_destroy(m);
  mc.create = create;
  mc.destroy = destroy;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_ERR(blk_master_decompose(m, d, a), BLK_EINVAL, "assigner has 5 blocks");
  CHECK_ERR(blk_master_foreach(m, NULL, NULL), BLK_EINVAL, "NULL");
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  blk_master_destroy(NULL);
}

int main(int argc, char **argv) {
  CHECK(argc == 3 && !strcmp(argv[1], "--case"));
  which = argv[2];
  int provided;
  if (!strcmp(which, "bad-input"))
    MPI_Init(&argc, &argv);
  else
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!strcmp(which, "bad-input")) {
    bad_input(size);
    if (rank == 0) printf("test_misuse bad-input: ok\n");
    MPI_Finalize();
    return 0;
  }

  int nblocks = 4;
  blk_bounds dom;
  int64_t lo[1] = {0}, hi[1] = {99};
  CHECK_OK(blk_bounds_set(&dom, 1, lo, hi));
  blk_decomposer *d;
  blk_assigner *a;
  blk_master *m;
  CHECK_OK(blk_decomposer_create(&d, &dom, nblocks, NULL));
  CHECK_OK(blk_assigner_create_contiguous(&a, size, nblocks));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = 2;
  mc.create = create;
  mc.destroy = destroy;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_OK(blk_master_decompose(m, d, a));
  if (!strcmp(which, "not-partner")) {
    blk_partners *p;
    CHECK_OK(blk_partners_create(&p, BLK_MERGE, 1, &nblocks, 2, 1));
    CHECK_OK(blk_reduce(m, a, p, reduce_badly, NULL));
    blk_partners_destroy(p);
  } else if (!strcmp(which, "view-past-end")) {
    CHECK_OK(blk_all_to_all(m, a, 2, 1, send_ref, view_badly, &nblocks));
  } else {
    CHECK_OK(blk_master_foreach(m, send_one, NULL));
    CHECK_OK(blk_master_exchange(m));
    CHECK_OK(blk_master_foreach(m, read_badly, NULL));
  }
  /* Reaching here means blk did not stop the job; ranks that had nothing
   * wrong wait here for the one that should have stopped it. */
  MPI_Barrier(MPI_COMM_WORLD);
  printf("test_misuse %s: blk did not stop the job\n", which);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  MPI_Finalize();
  return 0;
}
