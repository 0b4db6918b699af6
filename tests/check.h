/*
 * check.h: assertions for blk's tests.
 *
 * A failed check prints file, line, the rank (when MPI is running) and both
 * values, then stops the whole job (MPI_Abort under MPI, abort() otherwise),
 * so mpiexec exits non-zero and ctest sees the failure. Unit tests that do not
 * use MPI still link it through blk; MPI_Initialized is safe to call anyway.
 */
#ifndef BLK_TEST_CHECK_H
#define BLK_TEST_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int check_rank(void) {
  int init = 0, fin = 0, rank = -1;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

static inline void check_stop(void) {
  int init = 0, fin = 0;
  fflush(stdout);
  fflush(stderr);
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
  abort();
}

#define CHECK_FAIL_(...)                                                                 \
  do {                                                                                   \
    fprintf(stderr, "%s:%d: rank %d: check failed: ", __FILE__, __LINE__, check_rank()); \
    fprintf(stderr, __VA_ARGS__);                                                        \
    fprintf(stderr, "\n");                                                               \
    check_stop();                                                                        \
  } while (0)

#define CHECK(cond)                        \
  do {                                     \
    if (!(cond)) CHECK_FAIL_("%s", #cond); \
  } while (0)

#define CHECK_MSG(cond, ...)               \
  do {                                     \
    if (!(cond)) CHECK_FAIL_(__VA_ARGS__); \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                                       \
  do {                                                                                           \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);                              \
    if (check_a_ != check_b_) CHECK_FAIL_("%s == %s: %lld != %lld", #a, #b, check_a_, check_b_); \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
  do {                                                                                             \
    double check_a_ = (double)(a), check_b_ = (double)(b);                                         \
    if (!(fabs(check_a_ - check_b_) <= (double)(tol)))                                             \
      CHECK_FAIL_("%s ~= %s: %.17g != %.17g (tol %g)", #a, #b, check_a_, check_b_, (double)(tol)); \
  } while (0)

#define CHECK_STR(a, b)                                                      \
  do {                                                                       \
    const char *check_a_ = (a), *check_b_ = (b);                             \
    if (strcmp(check_a_, check_b_) != 0)                                     \
      CHECK_FAIL_("%s == %s: \"%s\" != \"%s\"", #a, #b, check_a_, check_b_); \
  } while (0)

/* A call returning a blk code must succeed; prints the code and detail. */
#define CHECK_OK(call)                                                                  \
  do {                                                                                  \
    int check_rc_ = (call);                                                             \
    if (check_rc_ != 0)                                                                 \
      CHECK_FAIL_("%s returned %d (%s): %s", #call, check_rc_, blk_strerror(check_rc_), \
                  blk_last_error());                                                    \
  } while (0)

/* A call must fail with the given code, and its detail must contain a text. */
#define CHECK_ERR(call, code, text)                                                           \
  do {                                                                                        \
    int check_rc_ = (call);                                                                   \
    if (check_rc_ != (code))                                                                  \
      CHECK_FAIL_("%s returned %d (%s), expected %d (%s)", #call, check_rc_,                  \
                  blk_strerror(check_rc_), (int)(code), blk_strerror(code));                  \
    if (strstr(blk_last_error(), (text)) == NULL)                                             \
      CHECK_FAIL_("%s: error detail \"%s\" does not mention \"%s\"", #call, blk_last_error(), \
                  (text));                                                                    \
  } while (0)

/* A collective's outcome: every rank returned rc, with the same detail
 * (blk_last_error()), which contains want (NULL: anything). Call it on
 * every rank of MPI_COMM_WORLD. Include blk.h first. */
#ifdef BLK_ERROR_H
static inline void check_agreed(int rc, const char *want) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int *codes = (int *)malloc((size_t)size * sizeof *codes);
  char *details = (char *)malloc((size_t)size * 512), mine[512];
  if (!codes || !details) CHECK_FAIL_("no memory to compare %d ranks' outcomes", size);
  snprintf(mine, sizeof mine, "%s", rc ? blk_last_error() : "");
  MPI_Allgather(&rc, 1, MPI_INT, codes, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Allgather(mine, 512, MPI_CHAR, details, 512, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < size; r++) {
    if (codes[r] != rc)
      CHECK_FAIL_("this rank returned %d (%s: %s), rank %d returned %d (%s)", rc, blk_strerror(rc),
                  mine, r, codes[r], blk_strerror(codes[r]));
    if (strcmp(details + 512 * r, mine) != 0)
      CHECK_FAIL_("this rank says \"%s\", rank %d says \"%s\"", mine, r, details + 512 * r);
  }
  if (want && !strstr(mine, want)) CHECK_FAIL_("the detail \"%s\" does not say \"%s\"", mine, want);
  free(details);
  free(codes);
}
#endif

/* The configuration most tests' masters take: threads, the four block
 * callbacks (which out of core needs) and mem_blocks (0: no budget). A test
 * sets anything else on the copy it gets. Include blk.h first. */
#ifdef BLK_MASTER_H
static inline blk_master_config check_master_config(int threads, int mem_blocks,
                                                    blk_block_create_fn create,
                                                    blk_block_destroy_fn destroy,
                                                    blk_block_save_fn save,
                                                    blk_block_load_fn load) {
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = threads;
  mc.mem_blocks = mem_blocks;
  mc.create = create;
  mc.destroy = destroy;
  mc.save = save;
  mc.load = load;
  return mc;
}
#endif

/* Adds blocks gids[0, n) to m, each made by create (with no user data) and
 * without links. Include blk.h first. */
#ifdef BLK_MASTER_H
static inline void check_add_blocks(blk_master *m, const int *gids, int n,
                                    blk_block_create_fn create) {
  for (int i = 0; i < n; i++) {
    void *b;
    CHECK_OK(create(&b, gids[i], NULL));
    CHECK_OK(blk_master_add(m, gids[i], b, NULL, 0));
  }
}
#endif

/* The options of an out-of-core test: --threads T (default 1), --mem-blocks
 * M (required, at least 1) and --spill-in-memory; anything else stops the
 * test. */
typedef struct check_ooc_options {
  int threads, mem_blocks, in_memory;
} check_ooc_options;

static inline check_ooc_options check_ooc_parse(int argc, char **argv) {
  check_ooc_options o = {1, 0, 0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      o.threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      o.mem_blocks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spill-in-memory"))
      o.in_memory = 1;
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  CHECK_MSG(o.mem_blocks > 0, "--mem-blocks M (at least 1) is required");
  return o;
}

/* Out-of-core: the master never held more blocks than its budget, and with
 * more local blocks than the budget it really swapped. Include blk.h first. */
#ifdef BLK_MASTER_H
static inline void check_budget(const blk_master *m, int mem_blocks) {
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  if (mem_blocks <= 0) {
    CHECK_EQ_INT(st.evictions, 0);
    return;
  }
  CHECK_MSG(st.blocks_in_memory_peak <= mem_blocks, "peak %d blocks in memory, budget %d",
            st.blocks_in_memory_peak, mem_blocks);
  if (blk_master_local_count(m) > mem_blocks)
    CHECK_MSG(st.evictions > 0 && st.loads > 0, "%d blocks, budget %d, but %llu evictions",
              blk_master_local_count(m), mem_blocks, (unsigned long long)st.evictions);
}
#endif

#endif
