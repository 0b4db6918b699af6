/*
 * test_all_reduce: blk_all_reduce folds one value per block, of any size,
 * with the program's op in gid order, the same bits on every rank and at
 * any rank and thread count.
 *
 * A value is 41 bytes: a double, a 2x2 integer matrix modulo a prime and a
 * byte. The op adds the doubles (floating point: the order shows in the
 * bits), multiplies the matrices (not commutative: the order shows in the
 * result) and xors the bytes. Every rank compares the result with a serial
 * left fold over gids 0..n-1, byte for byte. Then, on every rank alike: a
 * give that fails for gid 5 (BLK_ECALLBACK, the result untouched), a NULL
 * op, sizes that differ between ranks, and a master with no blocks at all
 * (BLK_EINVAL); after each, the reduction works again.
 *
 *   test_all_reduce --blocks N --threads T [--mem-blocks M]
 */
#include <blk/blk.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define VALUE 41
#define PRIME 1000003u

typedef struct block {
  int gid;
} block;

#include "flat_block.h"

/* gid's value, from the gid alone. */
static void value_of(unsigned char *v, int gid) {
  double d = 1.0 / (gid + 3) + gid * 1e-9;
  uint64_t mat[4] = {(uint64_t)gid + 1, 2, (uint64_t)(gid * gid) % PRIME, 1};
  unsigned char x = (unsigned char)(gid * 37 + 11);
  memcpy(v, &d, 8);
  memcpy(v + 8, mat, 32);
  v[40] = x;
}

static int give(void *value, const void *data, int gid, void *user) {
  const block *b = data;
  const int *fail_gid = user;
  CHECK_EQ_INT(b->gid, gid);
  if (gid == *fail_gid) return -3;
  value_of(value, gid);
  return 0;
}

static void fold(void *acc, const void *in, void *user) {
  (void)user;
  unsigned char *a = acc;
  const unsigned char *b = in;
  double x, y;
  memcpy(&x, a, 8);
  memcpy(&y, b, 8);
  x += y;
  memcpy(a, &x, 8);
  uint64_t p[4], q[4], r[4];
  memcpy(p, a + 8, 32);
  memcpy(q, b + 8, 32);
  r[0] = (p[0] * q[0] + p[1] * q[2]) % PRIME;
  r[1] = (p[0] * q[1] + p[1] * q[3]) % PRIME;
  r[2] = (p[2] * q[0] + p[3] * q[2]) % PRIME;
  r[3] = (p[2] * q[1] + p[3] * q[3]) % PRIME;
  memcpy(a + 8, r, 32);
  a[40] ^= b[40];
}

static void expect_same_error(int rc, int code, const char *needle, const unsigned char *result,
                              const unsigned char *before) {
  CHECK_MSG(rc == code, "returned %d, expected %d: %s", rc, code, blk_last_error());
  CHECK_MSG(strstr(blk_last_error(), needle), "the detail does not say \"%s\": %s", needle,
            blk_last_error());
  CHECK(!memcmp(result, before, VALUE)); /* untouched */
  int len = (int)strlen(blk_last_error()), lo, hi;
  MPI_Allreduce(&len, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&len, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK_MSG(lo == hi, "the detail differs between ranks: %s", blk_last_error());
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int nblocks = 13, threads = 1, mem_blocks = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
      nblocks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      mem_blocks = atoi(argv[++i]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_round_robin(&a, size, nblocks));
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  blk_master *m;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  int *gids = malloc((size_t)nblocks * sizeof *gids);
  CHECK(gids);
  int local = blk_assigner_local_gids(a, rank, gids, nblocks);
  check_add_blocks(m, gids, local, create);

  /* The serial reference. */
  unsigned char want[VALUE], v[VALUE], result[VALUE], before[VALUE];
  value_of(want, 0);
  for (int g = 1; g < nblocks; g++) {
    value_of(v, g);
    fold(want, v, NULL);
  }

  int fail_gid = -1;
  for (int twice = 0; twice < 2; twice++) {
    memset(result, 0xee, VALUE);
    CHECK_OK(blk_all_reduce(m, VALUE, give, fold, result, &fail_gid));
    CHECK_MSG(!memcmp(result, want, VALUE), "the fold differs from the serial one");
  }

  /* Failures, the same on every rank, and the reduction works after. */
  memset(result, 0x5a, VALUE);
  memcpy(before, result, VALUE);
  fail_gid = 5;
  expect_same_error(blk_all_reduce(m, VALUE, give, fold, result, &fail_gid), BLK_ECALLBACK,
                    "returned -3", result, before);
  CHECK_MSG(strstr(blk_last_error(), "gid 5"), "the detail does not name gid 5: %s",
            blk_last_error());
  fail_gid = -1;
  expect_same_error(blk_all_reduce(m, VALUE, give, NULL, result, &fail_gid), BLK_EINVAL,
                    "the op is NULL", result, before);
  if (size > 1)
    expect_same_error(
        blk_all_reduce(m, rank == size - 1 ? VALUE + 1 : VALUE, give, fold, result, &fail_gid),
        BLK_EINVAL, "different value sizes", result, before);
  CHECK_OK(blk_all_reduce(m, VALUE, give, fold, result, &fail_gid));
  CHECK(!memcmp(result, want, VALUE));

  blk_master *empty;
  CHECK_OK(blk_master_create(&empty, MPI_COMM_WORLD, &mc));
  memcpy(result, before, VALUE);
  expect_same_error(blk_all_reduce(empty, VALUE, give, fold, result, &fail_gid), BLK_EINVAL,
                    "no block on any rank", result, before);
  blk_master_destroy(empty);

  if (mem_blocks) {
    blk_master_stats st;
    blk_master_stats_get(m, &st);
    CHECK(st.blocks_in_memory_peak <= mem_blocks);
  }
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  free(gids);
  if (rank == 0) printf("test_all_reduce: ok (%d blocks, %d ranks)\n", nblocks, size);
  MPI_Finalize();
  return 0;
}
