/*
 * test_unchanged: out of core, a block that leaves memory as it came in is
 * not written again, and a block that changed is.
 *
 * 23 blocks over the ranks (contiguous), each 16 000 floats made from its
 * gid and a generation number, with at most M in memory. Every pass is a
 * foreach; after each, a read-only foreach checks every element of every
 * block against the formula (the reference), so a stale record would show.
 * Checked per rank, from blk_master_stats:
 * (1) two read-only passes: in each, every block that leaves memory after
 *     coming in from its record is not written; only the blocks that were
 *     in memory when the pass began, at most M, may have changed since
 *     their record was written (more writes fail the test, and with more
 *     than 2M blocks on the rank, the old rule of a write per eviction
 *     would);
 * (2) a pass that changes the blocks of even gid: records are written, at
 *     least one per changed block that left memory, and the check after it
 *     sees the new values of those and the old of the others;
 * (3) in memory mode (--spill-in-memory), where records are memory and a
 *     loaded block gives its record back, the values stay right too.
 *
 *   test_unchanged --threads T --mem-blocks M [--spill-in-memory]
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define NBLOCKS 23
#define N 16000

typedef struct block {
  int gid;
  int generation;
  float v[N];
} block;

#include "flat_block.h"

static float value(int gid, int generation, int i) {
  return (float)(gid * 1000 + generation) + 0.25f * (float)(i % 97);
}

static int fill(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  for (int i = 0; i < N; i++) b->v[i] = value(b->gid, b->generation, i);
  return 0;
}

/* Reads every element (the block must not change). */
static int check(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  const block *b = data;
  for (int i = 0; i < N; i++)
    if (b->v[i] != value(b->gid, b->generation, i))
      CHECK_MSG(0, "gid %d generation %d: v[%d] = %g, expected %g", b->gid, b->generation, i,
                (double)b->v[i], (double)value(b->gid, b->generation, i));
  return 0;
}

static int change_even(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  if (b->gid % 2) return 0;
  b->generation++;
  return fill(data, p, user);
}

static blk_master_stats stats(const blk_master *m) {
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  return st;
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
  mc.spill_in_memory = in_memory;
  blk_master *m;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  int gids[NBLOCKS], local = blk_assigner_local_gids(a, rank, gids, NBLOCKS);
  check_add_blocks(m, gids, local, create);
  CHECK_OK(blk_master_foreach(m, fill, NULL));
  const int swaps = local > mem_blocks;

  /* (1) Read-only passes: each writes at most the M blocks that were in
   * memory when it began (changed, maybe, since their record). */
  blk_master_stats before, after;
  for (int pass = 0; pass < 2; pass++) {
    before = stats(m);
    CHECK_OK(blk_master_foreach(m, check, NULL));
    after = stats(m);
    const uint64_t written = after.records_written - before.records_written;
    const uint64_t evicted = after.evictions - before.evictions;
    if (swaps)
      CHECK_MSG(evicted > 0, "rank %d: %d blocks, %d in memory, no evictions", rank, local,
                mem_blocks);
    if (!in_memory)
      CHECK_MSG(written <= (uint64_t)mem_blocks,
                "rank %d: read-only pass %d wrote %llu records for %llu evictions (%d in memory)",
                rank, pass, (unsigned long long)written, (unsigned long long)evicted, mem_blocks);
  }

  /* (2) The blocks of even gid change: each that leaves memory is written. */
  before = stats(m);
  CHECK_OK(blk_master_foreach(m, change_even, NULL));
  CHECK_OK(blk_master_foreach(m, check, NULL));
  after = stats(m);
  int even = 0;
  for (int i = 0; i < local; i++) even += gids[i] % 2 == 0;
  if (swaps && even > mem_blocks)
    CHECK_MSG(after.records_written - before.records_written >= (uint64_t)(even - mem_blocks),
              "rank %d: %d blocks changed, %d in memory, %llu records written", rank, even,
              mem_blocks, (unsigned long long)(after.records_written - before.records_written));
  /* And again, so that a block changed twice is not taken for its first
   * record either. */
  CHECK_OK(blk_master_foreach(m, change_even, NULL));
  CHECK_OK(blk_master_foreach(m, check, NULL));
  CHECK_OK(blk_master_foreach(m, check, NULL));
  check_budget(m, mem_blocks);

  blk_master_destroy(m);
  blk_assigner_destroy(a);
  if (rank == 0)
    printf("test_unchanged: ok (%d ranks, %d threads, %d in memory%s)\n", size, threads, mem_blocks,
           in_memory ? ", records in memory" : "");
  MPI_Finalize();
  return 0;
}
