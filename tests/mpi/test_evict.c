/*
 * test_evict: out of core with an evict callback that moves the block's
 * memory into the record's buffer instead of copying it (blk/master.h).
 *
 * 23 blocks over the ranks (contiguous), each a malloc'd array of 3000
 * doubles, at most M in memory. Checked:
 * (1) a fill, an all-reduce of the arrays (blk_arrays_all_reduce) and a
 *     check of every element of every block against the sum worked out
 *     here over all 23 blocks' formulas: the bytes evict handed over come
 *     back through load;
 * (2) every eviction went through evict, none through save (save copies:
 *     it stays for checkpoints), and with more blocks than M there were
 *     evictions;
 * (3) an evict that fails (once, on the last rank, before it moves
 *     anything) fails the foreach running then on every rank alike
 *     (BLK_ECALLBACK naming evict), and nothing is lost: the same check
 *     passes after it.
 *
 *   test_evict --threads T --mem-blocks M [--spill-in-memory]
 */
#include <blk/blk.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define NBLOCKS 23
#define N 3000

typedef struct block {
  int gid;
  double *v; /* NULL while evict has it */
} block;

static atomic_int evicts, saves, fail_next;

static double value(int gid, int i) {
  return (double)(gid * 31 + i % 101) * 0.5;
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
  if (b) free(b->v);
  free(b);
}

static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  atomic_fetch_add(&saves, 1);
  return b->v ? blk_buffer_write(out, b->v, N * sizeof *b->v) : 0;
}

static int evict(blk_buffer *out, void *data, int gid, void *user) {
  (void)user;
  block *b = data;
  (void)gid;
  int armed = 1;
  if (atomic_compare_exchange_strong(&fail_next, &armed, 0)) return -7; /* before moving */
  atomic_fetch_add(&evicts, 1);
  if (!b->v) return 0;
  blk_buffer_adopt(out, b->v, N * sizeof *b->v, N * sizeof *b->v);
  b->v = NULL;
  return 0;
}

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data;
  size_t bytes = blk_buffer_remaining(in);
  if (bytes == 0) return 0;
  if (bytes != N * sizeof *b->v) return BLK_ECORRUPT;
  b->v = in->pos == 0 ? blk_buffer_detach(in, NULL) : NULL;
  if (b->v) return 0;
  if (!(b->v = malloc(bytes))) return BLK_ENOMEM;
  return blk_buffer_read(in, b->v, bytes);
}

static int fill(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  if (!b->v && !(b->v = malloc(N * sizeof *b->v))) return BLK_ENOMEM;
  for (int i = 0; i < N; i++) b->v[i] = value(b->gid, i);
  return 0;
}

static void *array_of(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  return ((block *)data)->v;
}

/* Every element against the sum over all blocks (the reference). */
static int check_sums(void *data, blk_proxy *p, void *user) {
  (void)p;
  const double *want = user;
  const block *b = data;
  CHECK_MSG(b->v, "gid %d has no array", b->gid);
  for (int i = 0; i < N; i++)
    if (b->v[i] != want[i])
      CHECK_MSG(0, "gid %d: v[%d] = %g, expected %g", b->gid, i, b->v[i], want[i]);
  return 0;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  const check_ooc_options opt = check_ooc_parse(argc, argv);
  const int threads = opt.threads, mem_blocks = opt.mem_blocks, in_memory = opt.in_memory;
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, NBLOCKS));
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  mc.evict = evict;
  mc.spill_in_memory = in_memory;
  blk_master *m;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  int gids[NBLOCKS], local = blk_assigner_local_gids(a, rank, gids, NBLOCKS);
  check_add_blocks(m, gids, local, create);

  /* (1) */
  static double want[N];
  for (int i = 0; i < N; i++)
    for (int g = 0; g < NBLOCKS; g++) want[i] += value(g, i);
  CHECK_OK(blk_master_foreach(m, fill, NULL));
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = N;
  spec.type = BLK_DOUBLE;
  spec.algorithm = BLK_ARRAYS_TREE; /* every block ends with the same bits */
  CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
  CHECK_OK(blk_master_foreach(m, check_sums, want));

  /* (2) */
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  CHECK_MSG((uint64_t)atomic_load(&evicts) == st.evictions,
            "rank %d: %d evict calls for %llu evictions", rank, atomic_load(&evicts),
            (unsigned long long)st.evictions);
  CHECK_EQ_INT(atomic_load(&saves), 0);
  check_budget(m, mem_blocks);

  /* (3) The last rank's next eviction fails: a pass over its blocks
   * evicts one when it has more than M (M are in memory as it begins). */
  const int swaps = local > mem_blocks;
  int last_swaps = swaps;
  MPI_Bcast(&last_swaps, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
  if (rank == size - 1 && swaps) atomic_store(&fail_next, 1);
  int rc = blk_master_foreach(m, check_sums, want);
  if (last_swaps)
    check_agreed(rc, "the evict callback failed for gid");
  else
    check_agreed(rc, NULL);
  if (last_swaps) CHECK_EQ_INT(rc, BLK_ECALLBACK);
  CHECK_EQ_INT(atomic_load(&fail_next), 0);
  CHECK_OK(blk_master_foreach(m, check_sums, want));
  CHECK_OK(blk_master_foreach(m, check_sums, want));
  CHECK_EQ_INT(atomic_load(&saves), 0); /* (the failed block stayed in memory, over the budget) */

  blk_master_destroy(m);
  blk_assigner_destroy(a);
  if (rank == 0)
    printf("test_evict: ok (%d ranks, %d threads, %d in memory%s)\n", size, threads, mem_blocks,
           in_memory ? ", records in memory" : "");
  MPI_Finalize();
  return 0;
}
