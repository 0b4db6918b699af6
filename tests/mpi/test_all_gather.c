/*
 * test_all_gather: blk_all_gather against the pieces worked out here.
 *
 * Block g brings piece_size(g, t) bytes (zero for some gids, and different
 * from one call to the next, t) made from (g, t, index); take checks that it
 * got n pieces, each at its offset, each byte right. Over block counts that
 * are not powers of k (1, 2, 7, 12, 13, 38 (folded), 44), k = 2, 3, 4 and 8, contiguous
 * and round-robin assigners; then failures: give failing on one gid, take
 * failing on one gid, and k = 1: every rank returns the same code and
 * detail, and no block takes anything from a gather whose give failed.
 *
 *   test_all_gather --threads T [--mem-blocks M]
 */
#include <blk/blk.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct block {
  int gid;
  unsigned char *mine; /* what give hands out (kept until the next give) */
  int took;            /* take ran on this block (this call) */
} block;

typedef struct ctx {
  int t;         /* the call: changes every piece */
  int fail_give; /* gid whose give fails, or -1 */
  int fail_take; /* gid whose take fails, or -1 */
} ctx;

static size_t piece_size(int g, int t) {
  return (size_t)((g * 37 + t * 11) % 101) * (size_t)(g % 3 == 1 ? 0 : 1) +
         (g == 5 ? 70000 : 0); /* gid 5: larger than the others */
}

static unsigned char byte_of(int g, int t, size_t i) {
  return (unsigned char)(g * 131 + t * 17 + (int)(i % 251) * 7);
}

static int create(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b);
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  *out = b;
  return 0;
}

static void destroy(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data;
  free(b->mine);
  free(b);
}

/* Out of core the block's state is its gid; mine is remade by give. */
static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  blk_buffer_write_i32(out, b->gid);
  return blk_buffer_write_i32(out, b->took);
}

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  block *b = data;
  blk_buffer_read_i32(in, &b->gid);
  blk_buffer_read_i32(in, &b->took);
  CHECK_EQ_INT(b->gid, gid);
  return blk_buffer_error(in);
}

static int give(void *data, int gid, const void **bytes, size_t *size, void *user) {
  const ctx *c = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  b->took = 0;
  if (gid == c->fail_give) return -7;
  size_t n = piece_size(gid, c->t);
  free(b->mine);
  b->mine = malloc(n ? n : 1);
  CHECK(b->mine != NULL);
  for (size_t i = 0; i < n; i++) b->mine[i] = byte_of(gid, c->t, i);
  *bytes = n ? b->mine : NULL;
  *size = n;
  return 0;
}

static int take(void *data, int gid, const void *bytes, const size_t *offsets, int n, void *user) {
  const ctx *c = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  const unsigned char *all = bytes;
  size_t at = 0;
  CHECK_EQ_INT(offsets[0], 0);
  for (int g = 0; g < n; g++) {
    size_t want = piece_size(g, c->t);
    CHECK_MSG(offsets[g + 1] - offsets[g] == want, "gid %d: piece %d has %zu bytes, expected %zu",
              gid, g, offsets[g + 1] - offsets[g], want);
    for (size_t i = 0; i < want; i++)
      CHECK_MSG(all[at + i] == byte_of(g, c->t, i), "gid %d: piece %d byte %zu is wrong", gid, g,
                i);
    at += want;
  }
  b->took = 1;
  return gid == c->fail_take ? -9 : 0;
}

static int count_took(void *data, blk_proxy *p, void *user) {
  (void)p;
  int *n = user;
  __atomic_fetch_add(n, ((block *)data)->took, __ATOMIC_RELAXED);
  return 0;
}

static int took_total(blk_master *m) {
  int mine = 0, all = 0;
  CHECK_OK(blk_master_foreach(m, count_took, &mine));
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

static blk_master *master_of(int threads, int mem_blocks) {
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  blk_master *m = NULL;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  return m;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int threads = 1, mem_blocks = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      mem_blocks = atoi(argv[++i]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  static const int counts[] = {1, 2, 7, 12, 13, 38, 44}; /* 38: folded into 36 */
  static const int radices[] = {2, 3, 4, 8};
  int runs = 0;
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    int n = counts[ci];
    for (int rr = 0; rr <= 1; rr++) {
      blk_assigner *a;
      if (rr)
        CHECK_OK(blk_assigner_create_round_robin(&a, size, n));
      else
        CHECK_OK(blk_assigner_create_contiguous(&a, size, n));
      blk_master *m = master_of(threads, mem_blocks);
      int gids[64], local = blk_assigner_local_gids(a, rank, gids, 64);
      for (int i = 0; i < local; i++) {
        void *b;
        CHECK_OK(create(&b, gids[i], NULL));
        CHECK_OK(blk_master_add(m, gids[i], b, NULL, 0));
      }
      for (int ki = 0; ki < 4; ki++) {
        ctx c = {runs, -1, -1};
        CHECK_OK(blk_all_gather(m, a, radices[ki], give, take, &c));
        CHECK_EQ_INT(took_total(m), n);
        runs++;
      }
      /* Failures, on the last gid (on the last rank that has it). */
      blk_log_set_level(BLK_LOG_NONE);
      ctx c = {runs, n - 1, -1};
      int rc = blk_all_gather(m, a, 2, give, take, &c);
      check_agreed(rc, "give callback");
      CHECK_EQ_INT(rc, BLK_ECALLBACK);
      if (n > 1) CHECK_EQ_INT(took_total(m), 0); /* everyone needs every piece */
      c.fail_give = -1;
      c.fail_take = n - 1;
      rc = blk_all_gather(m, a, 3, give, take, &c);
      check_agreed(rc, "take callback");
      CHECK_EQ_INT(rc, BLK_ECALLBACK);
      CHECK_EQ_INT(took_total(m), n); /* only the failing take failed */
      CHECK_ERR(blk_all_gather(m, a, 1, give, take, &c), BLK_EINVAL, "k = 1");
      check_agreed(BLK_EINVAL, "k = 1");
      blk_log_set_level(BLK_LOG_WARN);
      if (mem_blocks) check_budget(m, mem_blocks);
      blk_master_destroy(m);
      blk_assigner_destroy(a);
    }
  }
  if (rank == 0)
    printf("test_all_gather: ok (%d gathers, %d ranks, %d threads, %d blocks in memory)\n", runs,
           size, threads, mem_blocks);
  MPI_Finalize();
  return 0;
}
