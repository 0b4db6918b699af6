/*
 * test_all_gather: blk_all_gather against the pieces worked out here.
 *
 * Block g brings piece_size(g, t) bytes (zero for some gids, and different
 * from one call to the next, t) made from (g, t, index); take checks that it
 * got n pieces, each at its offset, each byte right. Over block counts that
 * are not powers of k (1, 2, 7, 12, 13, 38 (folded), 44), k = 2, 3, 4 and 8, contiguous
 * and round-robin assigners. Then the same through blk_all_gather_with:
 * place gives even gids a region of their own (into which give's bytes
 * were written, at the block's own offset, as a program gathering into its
 * array has them) and odd gids none, on every rank but rank 1, which has
 * no place; take must get the region, holding every piece, and place must
 * be asked once per block with the total. Then failures: give failing on
 * one gid, take failing on one gid, k = 1, and a config of an unknown
 * version on rank 0 only: every rank returns the same code and detail, and
 * no block takes anything from a gather whose give failed.
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
  unsigned char *all;  /* the region place gives (even gids, placed calls) */
  size_t all_size;     /* its bytes (0: none) */
  int asked;           /* place calls (this call) */
} block;

typedef struct ctx {
  int t;         /* the call: changes every piece */
  int fail_give; /* gid whose give fails, or -1 */
  int fail_take; /* gid whose take fails, or -1 */
  int n;         /* the block count */
  int placed;    /* through blk_all_gather_with, with a place on this rank */
} ctx;

static size_t piece_size(int g, int t) {
  return (size_t)((g * 37 + t * 11) % 101) * (size_t)(g % 3 == 1 ? 0 : 1) +
         (g == 5 ? 70000 : 0); /* gid 5: larger than the others */
}

static size_t total_size(const ctx *c) {
  size_t total = 0;
  for (int g = 0; g < c->n; g++) total += piece_size(g, c->t);
  return total;
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
  free(b->all);
  free(b);
}

/* Out of core the block's state is its gid, what it took and was asked,
 * and its region (which holds its piece from give on); mine is only read
 * in give's round, before the block can leave. */
static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  blk_buffer_write_i32(out, b->gid);
  blk_buffer_write_i32(out, b->took);
  blk_buffer_write_i32(out, b->asked);
  return blk_buffer_write_array(out, b->all, 1, b->all_size);
}

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  block *b = data;
  blk_buffer_read_i32(in, &b->gid);
  blk_buffer_read_i32(in, &b->took);
  blk_buffer_read_i32(in, &b->asked);
  free(b->all);
  b->all = NULL;
  blk_buffer_read_array_alloc(in, (void **)&b->all, 1, &b->all_size);
  CHECK_EQ_INT(b->gid, gid);
  return blk_buffer_error(in);
}

static int give(void *data, int gid, const void **bytes, size_t *size, void *user) {
  const ctx *c = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  b->took = 0;
  b->asked = 0;
  if (gid == c->fail_give) return -7;
  size_t n = piece_size(gid, c->t);
  unsigned char *to;
  free(b->mine);
  free(b->all);
  b->mine = b->all = NULL;
  b->all_size = 0;
  if (c->placed && gid % 2 == 0) { /* the piece already in the region, at its offset */
    size_t at = 0;
    for (int g = 0; g < gid; g++) at += piece_size(g, c->t);
    b->all_size = total_size(c) + 1;
    b->all = calloc(1, b->all_size); /* (saved whole out of core before the others land) */
    CHECK(b->all != NULL);
    to = b->all + at;
  } else {
    b->mine = malloc(n ? n : 1);
    CHECK(b->mine != NULL);
    to = b->mine;
  }
  for (size_t i = 0; i < n; i++) to[i] = byte_of(gid, c->t, i);
  *bytes = n ? to : NULL;
  *size = n;
  return 0;
}

/* Even gids get their region, odd ones blk's storage. */
static void *place(void *data, int gid, size_t total, void *user) {
  const ctx *c = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  CHECK_MSG(c->placed, "gid %d: place called without blk_all_gather_with", gid);
  CHECK_MSG(total == total_size(c), "gid %d: place asked for %zu bytes, the pieces are %zu", gid,
            total, total_size(c));
  b->asked++;
  return gid % 2 == 0 ? b->all : NULL;
}

static int take(void *data, int gid, const void *bytes, const size_t *offsets, int n, void *user) {
  const ctx *c = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  const unsigned char *all = bytes;
  size_t at = 0;
  CHECK_EQ_INT(n, c->n);
  CHECK_EQ_INT(offsets[0], 0);
  CHECK_EQ_INT(b->asked, c->placed ? 1 : 0);
  if (c->placed && gid % 2 == 0)
    CHECK_MSG(all == b->all, "gid %d: take did not get the region place gave", gid);
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
      check_add_blocks(m, gids, local, create);
      blk_all_gather_config cfg;
      CHECK_OK(blk_all_gather_config_init(&cfg, BLK_ALL_GATHER_CONFIG_VERSION));
      cfg.place = rank == 1 ? NULL : place; /* (rank 1: blk's storage, as without one) */
      for (int with = 0; with <= 1; with++)
        for (int ki = 0; ki < 4; ki++) {
          ctx c = {runs, -1, -1, n, with && cfg.place};
          if (with)
            CHECK_OK(blk_all_gather_with(m, a, radices[ki], give, take, &cfg, &c));
          else
            CHECK_OK(blk_all_gather(m, a, radices[ki], give, take, &c));
          CHECK_EQ_INT(took_total(m), n);
          runs++;
        }
      /* Failures, on the last gid (on the last rank that has it). */
      blk_log_set_level(BLK_LOG_NONE);
      ctx c = {runs, n - 1, -1, n, 0};
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
      c.fail_take = -1; /* an unknown layout on rank 0 only: every rank refuses */
      c.placed = cfg.place != NULL;
      if (rank == 0) cfg.version = BLK_ALL_GATHER_CONFIG_VERSION + 1;
      rc = blk_all_gather_with(m, a, 2, give, take, &cfg, &c);
      check_agreed(rc, "version");
      CHECK_EQ_INT(rc, BLK_EINVAL);
      CHECK_ERR(blk_all_gather_config_init(&cfg, 0), BLK_EINVAL, "version");
      CHECK_ERR(blk_all_gather_config_init(NULL, 1), BLK_EINVAL, "NULL");
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
