/*
 * test_tuning: BLK_ARRAYS_AUTO following a tuning file (blk/master.h).
 *
 *   test_tuning            files written here (by rank 0, into a fresh
 *                          directory): AUTO picks what a file says is
 *                          fastest, between and beyond the measured sizes,
 *                          for the nearest block count and k; a file for
 *                          other rank counts leaves the built-in rules, or
 *                          with a cost-model line, the model's choice; the
 *                          all-reduce it picks gives right sums; rank 0's
 *                          file is everyone's (the others' settings and
 *                          BLK_TUNING are not read); a missing file and
 *                          malformed ones fail the create on every rank
 *                          with the same code and detail
 *   test_tuning --file F   a file blk-tune wrote: at every size it measured
 *                          for this rank count, AUTO picks the fastest
 *                          there (worked out here from the file's lines)
 */
#define _POSIX_C_SOURCE 200809L
#include <blk/blk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"
#include "check.h"

static const char *const names[] = {"TREE", "SPLIT",          "BUTTERFLY",
                                    "RING", "SEGMENTED_RING", "PIPELINED_TREE"};

static const char *name_of(blk_arrays_algorithm a) {
  return a >= BLK_ARRAYS_TREE && a <= BLK_ARRAYS_PIPELINED_TREE ? names[a - 1] : "AUTO?";
}

typedef struct block {
  int gid;
  float data[4096];
} block;

static void *array_of(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  return ((block *)data)->data;
}

static int fill(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  for (int i = 0; i < 4096; i++) b->data[i] = (float)((b->gid * 3 + i) % 7);
  return 0;
}

static int verify(void *data, blk_proxy *p, void *user) {
  (void)p;
  const int *n = user;
  block *b = data;
  for (int i = 0; i < 4096; i++) {
    float want = 0;
    for (int g = 0; g < *n; g++) want += (float)((g * 3 + i) % 7);
    CHECK_MSG(b->data[i] == want, "gid %d element %d is %g, expected %g", b->gid, i,
              (double)b->data[i], (double)want);
  }
  return 0;
}

/* A master with tuning file `path` (NULL: none given) and n blocks on the
 * contiguous assigner; *a gets the assigner. Returns the create's code. */
static int make(blk_master **m, blk_assigner **a, const char *path, int n, block **blocks) {
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = 1;
  mc.tuning = path;
  int rc = blk_master_create(m, MPI_COMM_WORLD, &mc);
  if (rc) return rc;
  CHECK_OK(blk_assigner_create_contiguous(a, size, n));
  int gids[64], local = blk_assigner_local_gids(*a, rank, gids, 64);
  *blocks = calloc((size_t)(local ? local : 1), sizeof **blocks);
  CHECK(*blocks != NULL);
  for (int i = 0; i < local; i++) {
    (*blocks)[i].gid = gids[i];
    CHECK_OK(blk_master_add(*m, gids[i], &(*blocks)[i], NULL, 0));
  }
  return 0;
}

static void unmake(blk_master *m, blk_assigner *a, block *blocks) {
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  free(blocks);
}

static blk_arrays_algorithm pick(const blk_master *m, const blk_assigner *a, size_t bytes, int k) {
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = bytes / sizeof(float);
  spec.k = k;
  return blk_arrays_all_reduce_algorithm(m, a, &spec);
}

static void write_file(const char *path, const char *text) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    CHECK(fclose(f) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static void expect(blk_arrays_algorithm got, blk_arrays_algorithm want, const char *what) {
  CHECK_MSG(got == want, "%s: AUTO picked %s, the file says %s", what, name_of(got), name_of(want));
}

/* A master's log: the rounds of the last "arrays" operation's info line. */
static void count_rounds(blk_log_level level, const char *line, void *user) {
  const char *at = strstr(line, " rounds");
  if (level != BLK_LOG_INFO || !strstr(line, "arrays") || !at) return;
  while (at > line && at[-1] >= '0' && at[-1] <= '9') at--;
  *(int *)user = atoi(at);
}

/* The checks on files written here. */
static void own_files(void) {
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char dir[64] = "/tmp/blk-tuning-XXXXXX";
  if (rank == 0) CHECK(mkdtemp(dir) != NULL);
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  char good[128], other[128], bad[128], missing[128];
  snprintf(good, sizeof good, "%s/good.txt", dir);
  snprintf(other, sizeof other, "%s/other.txt", dir);
  snprintf(bad, sizeof bad, "%s/bad.txt", dir);
  snprintf(missing, sizeof missing, "%s/none.txt", dir);
  /* For this rank count, 2 blocks a rank, k = 2: TREE fastest at 1 KiB,
   * SEGMENTED_RING at 16 KiB, RING at 64 KiB (where TREE was not
   * measured, so it does not count), and between 1 and 16 KiB the log-log
   * lines cross (TREE 10 -> 40, SEGMENTED_RING 20 -> 25: equal near 5.2
   * KiB). 4 blocks a rank: PIPELINED_TREE, then SPLIT. */
  char text[2048];
  int n2 = 2 * size, n4 = 4 * size;
  snprintf(text, sizeof text,
           "# written by test_tuning\nblk-tuning 1\n"
           "%d %d 2 1024 TREE 10\n%d %d 2 1024 SEGMENTED_RING 20\n%d %d 2 1024 RING 50\n"
           "%d %d 2 16384 TREE 40   # a comment\n%d %d 2 16384 SEGMENTED_RING 25\n"
           "%d %d 2 65536 SEGMENTED_RING 90\n%d %d 2 65536 RING 60\n\n"
           "%d %d 2 1024 SPLIT 5\n%d %d 2 1024 TREE 6\n%d %d 2 1024 PIPELINED_TREE 4\n",
           size, n2, size, n2, size, n2, size, n2, size, n2, size, n2, size, n2, size, n4, size, n4,
           size, n4);
  write_file(good, text);
  snprintf(text, sizeof text, "blk-tuning 1\n%d %d 2 1024 RING 1\n", size + 1, n2);
  write_file(other, text);

  blk_master *m;
  blk_assigner *a;
  block *blocks;
  CHECK_OK(make(&m, &a, good, n2, &blocks));
  expect(pick(m, a, 1024, 2), BLK_ARRAYS_TREE, "1 KiB");
  expect(pick(m, a, 512, 2), BLK_ARRAYS_TREE, "512 B (below every size: as 1 KiB)");
  expect(pick(m, a, 2048, 2), BLK_ARRAYS_TREE, "2 KiB (interpolated)");
  expect(pick(m, a, 8192, 2), BLK_ARRAYS_SEGMENTED_RING, "8 KiB (interpolated)");
  expect(pick(m, a, 16384, 2), BLK_ARRAYS_SEGMENTED_RING, "16 KiB");
  expect(pick(m, a, 65536, 2), BLK_ARRAYS_RING, "64 KiB");
  expect(pick(m, a, 1 << 20, 2), BLK_ARRAYS_RING, "1 MiB (beyond: as 64 KiB)");
  expect(pick(m, a, 1024, 3), BLK_ARRAYS_TREE, "k = 3 (only k = 2 measured)");
  /* AUTO runs what it picked, and the sums are right. */
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = 4096;
  CHECK_OK(blk_master_foreach(m, fill, NULL));
  CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
  CHECK_OK(blk_master_foreach(m, verify, &n2));
  /* An explicit algorithm is never overridden. */
  spec.algorithm = BLK_ARRAYS_BUTTERFLY;
  CHECK(blk_arrays_all_reduce_algorithm(m, a, &spec) == BLK_ARRAYS_BUTTERFLY);
  unmake(m, a, blocks);

  /* The nearest block count measured: 4 a rank picks the 4-a-rank lines,
   * and so does 5 a rank (5/4 is nearer 1 than 5/2). */
  int counts[] = {4, 5};
  for (int i = 0; i < 2; i++) {
    int n = counts[i] * size;
    CHECK_OK(make(&m, &a, good, n, &blocks));
    expect(pick(m, a, 1024, 2), BLK_ARRAYS_PIPELINED_TREE, "the 4-blocks-a-rank lines");
    spec.algorithm = BLK_ARRAYS_AUTO; /* (runs it, with its default segment) */
    CHECK_OK(blk_master_foreach(m, fill, NULL));
    CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
    CHECK_OK(blk_master_foreach(m, verify, &n));
    unmake(m, a, blocks);
  }
  /* Lines for another rank count only: the built-in rules. */
  CHECK_OK(make(&m, &a, other, n2, &blocks));
  CHECK(pick(m, a, 1024, 2) == pick(NULL, a, 1024, 2));
  unmake(m, a, blocks);

  /* Lines for another rank count and a cost model: the model's choice,
   * counted here by hand for n = 2 blocks a rank, contiguous assigner.
   * alpha only (a round that crosses ranks): BUTTERFLY's swap crosses in
   * its last log_2(ranks) rounds only, TREE's merge and broadcast, SPLIT's
   * scatter and gather twice that, the ring in every round; on one rank
   * nothing crosses, all cost 0 and the tie goes to TREE. On two ranks
   * TREE's top group is gids 0 and 2, on two ranks, so its top is one
   * exchange (arrays.c, partners_top.h) and it crosses once, as BUTTERFLY
   * does: a tie, to TREE. On three the top group has three members (no
   * exchange: 2 crossings), on four it is gids 0 and 4 (the level below
   * crosses twice, the exchange once: 3), against BUTTERFLY's 1 and 2,
   * so BUTTERFLY. local only (a
   * message): TREE sends 2 (n-1), BUTTERFLY and SPLIT's halves at least n
   * a round, the ring n a round for 2 (n-1) rounds, so TREE. And where the
   * file measured this rank count, the measurements, not the model. */
  char model[128], both[128];
  snprintf(model, sizeof model, "%s/model.txt", dir);
  snprintf(both, sizeof both, "%s/both.txt", dir);
  snprintf(text, sizeof text, "blk-tuning 1\n%d %d 2 1024 RING 1\ncost-model 1e-5 0 0 0 0\n",
           size + 1, n2);
  write_file(model, text);
  CHECK_OK(make(&m, &a, model, n2, &blocks));
  expect(pick(m, a, 1024, 2), size > 2 ? BLK_ARRAYS_BUTTERFLY : BLK_ARRAYS_TREE,
         "the cost model, alpha only");
  expect(pick(m, a, 1 << 20, 2), size > 2 ? BLK_ARRAYS_BUTTERFLY : BLK_ARRAYS_TREE,
         "the cost model, alpha only, 1 MiB");
  spec.algorithm = BLK_ARRAYS_AUTO;
  CHECK_OK(blk_master_foreach(m, fill, NULL));
  CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
  CHECK_OK(blk_master_foreach(m, verify, &n2));
  /* The model cannot be evaluated on the last rank (its first allocation
   * fails): every rank returns the same BLK_ENOMEM, nobody hangs, and the
   * next all-reduce is whole. */
  blk_log_set_level(BLK_LOG_NONE);
  CHECK_OK(blk_master_foreach(m, fill, NULL));
  if (rank == size - 1) blk__fault_arm(BLK__FAULT_ALLOC, 1, 1);
  int failed = blk_arrays_all_reduce(m, a, &spec);
  blk__fault_arm(BLK__FAULT_ALLOC, 1, 0);
  CHECK_EQ_INT(failed, BLK_ENOMEM);
  check_agreed(failed, "partners");
  blk_log_set_level(BLK_LOG_WARN);
  CHECK_OK(blk_master_foreach(m, fill, NULL));
  CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
  CHECK_OK(blk_master_foreach(m, verify, &n2));
  unmake(m, a, blocks);
  snprintf(text, sizeof text, "blk-tuning 1\ncost-model 0 0 0 1e-7 0\n");
  write_file(model, text);
  CHECK_OK(make(&m, &a, model, n2, &blocks));
  expect(pick(m, a, 4096, 2), BLK_ARRAYS_TREE, "the cost model, local only");
  unmake(m, a, blocks);
  snprintf(text, sizeof text, "blk-tuning 1\n%d %d 2 1024 RING 1\ncost-model 1e-5 0 0 0 0\n", size,
           n2);
  write_file(both, text);
  CHECK_OK(make(&m, &a, both, n2, &blocks));
  expect(pick(m, a, 1024, 2), BLK_ARRAYS_RING, "measured for this rank count: not the model");
  unmake(m, a, blocks);

  /* Rank 0's file is everyone's: the others name a file that does not
   * exist, and BLK_TUNING is set on them only (neither is read). */
  if (rank != 0) setenv("BLK_TUNING", missing, 1);
  CHECK_OK(make(&m, &a, rank == 0 ? good : missing, n2, &blocks));
  expect(pick(m, a, 65536, 2), BLK_ARRAYS_RING, "rank 0's file");
  unmake(m, a, blocks);
  /* No path given: rank 0's BLK_TUNING. */
  if (rank == 0) setenv("BLK_TUNING", good, 1);
  CHECK_OK(make(&m, &a, NULL, n2, &blocks));
  expect(pick(m, a, 1024, 2), BLK_ARRAYS_TREE, "BLK_TUNING");
  unmake(m, a, blocks);
  unsetenv("BLK_TUNING");

  /* MPI's eager step alone: on several ranks with at most
   * BLK_ARRAYS_PIPELINE_EAGER_BLOCKS blocks each (2 here), PIPELINED_TREE
   * cuts an array of at most BLK_ARRAYS_PIPELINE_EAGER_SEGMENTS segments
   * just below it into those (2080 - 32 bytes of header: 512 floats, 8
   * segments of 4096 floats): S - 1 + 2 H = 7 + 2 H rounds on the k-nomial
   * tree H levels deep (the most nonzero base-k digits of a gid below n),
   * and round 0, says the operation's info line.
   * Without the file the 16 KiB array is one segment (it is under
   * BLK_ARRAYS_PIPELINE_MIN_BYTES), which runs as TREE: TREE's rounds. On
   * one rank, or with more blocks a rank, the file changes nothing. The sums
   * are right every time. */
  snprintf(text, sizeof text, "blk-tuning 1\neager-step 2080 2200\n");
  write_file(model, text);
  const int per_rank[] = {2, BLK_ARRAYS_PIPELINE_EAGER_BLOCKS + 1};
  for (int pr = 0; pr < 2; pr++) {
    int nb = per_rank[pr] * size, rounds[3] = {0, 0, 0}, levels = 0;
    for (int g = 1; g < nb; g++) {
      int digits = 0;
      for (int v = g; v; v /= spec.k) digits += v % spec.k != 0;
      if (digits > levels) levels = digits;
    }
    /* 0: PIPELINED_TREE, 1: the same with the file, 2: TREE. */
    for (int run = 0; run < 3; run++) {
      blk_master_config lc = BLK_MASTER_CONFIG_INIT;
      lc.threads = 1;
      lc.tuning = run == 1 ? model : NULL;
      lc.log = count_rounds;
      lc.log_user = &rounds[run];
      lc.log_level = BLK_LOG_INFO;
      CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &lc));
      CHECK_OK(blk_assigner_create_contiguous(&a, size, nb));
      int gids[64], local = blk_assigner_local_gids(a, rank, gids, 64);
      blocks = calloc((size_t)local, sizeof *blocks);
      CHECK(blocks != NULL);
      for (int i = 0; i < local; i++) {
        blocks[i].gid = gids[i];
        CHECK_OK(blk_master_add(m, gids[i], &blocks[i], NULL, 0));
      }
      spec.algorithm = run == 2 ? BLK_ARRAYS_TREE : BLK_ARRAYS_PIPELINED_TREE;
      CHECK_OK(blk_master_foreach(m, fill, NULL));
      CHECK_OK(blk_arrays_all_reduce(m, a, &spec));
      CHECK_OK(blk_master_foreach(m, verify, &nb));
      unmake(m, a, blocks);
    }
    int eager = size > 1 && per_rank[pr] <= BLK_ARRAYS_PIPELINE_EAGER_BLOCKS;
    CHECK_MSG(rounds[2] > 0 && rounds[0] == rounds[2] &&
                  rounds[1] == (eager ? 8 + 2 * levels : rounds[2]),
              "%d ranks x %d blocks: PIPELINED_TREE ran %d rounds without the eager step, %d "
              "with it (expected %d); TREE %d",
              size, per_rank[pr], rounds[0], rounds[1], eager ? 8 + 2 * levels : rounds[2],
              rounds[2]);
  }

  /* Failures: the same code and detail on every rank, no master. */
  blk_log_set_level(BLK_LOG_NONE);
  m = (blk_master *)1;
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.tuning = missing;
  int rc = blk_master_create(&m, MPI_COMM_WORLD, &mc);
  CHECK_EQ_INT(rc, BLK_EIO);
  CHECK(m == NULL);
  check_agreed(rc, "No such file or directory");
  check_agreed(rc, "none.txt");
  static const char *const broken[][2] = {
      {"1 2 2 1024 TREE 5\n", "line 1: expected \"blk-tuning 1\" first"},
      {"blk-tuning 2\n1 2 2 1024 TREE 5\n", "line 1: expected \"blk-tuning 1\" first"},
      {"blk-tuning 1\n\n1 2 2 1K TREE 5\n", "line 3: bytes must be a number > 0"},
      {"blk-tuning 1\n1 2 1 1024 TREE 5\n", "line 2: k must be a whole number >= 2"},
      {"blk-tuning 1\n1 2 2 1024 TREE\n", "line 2: expected: ranks blocks k bytes algorithm"},
      {"blk-tuning 1\n1 2 2 1024 TREE 5 6\n", "line 2: expected: ranks blocks k bytes algorithm"},
      {"blk-tuning 1\n1 2 2 1024 TREE -5\n", "line 2: microseconds must be a number > 0"},
      {"blk-tuning 1\n# nothing measured\n", "holds no measurement"},
      {"blk-tuning 1\ncost-model 1 2 3 4\n",
       "line 2: expected: cost-model alpha beta callback local gamma"},
      {"blk-tuning 1\ncost-model 1 2 3 4 5 6\n",
       "line 2: expected: cost-model alpha beta callback local gamma"},
      {"blk-tuning 1\ncost-model 1 2 3 4 -5\n",
       "line 2: a cost-model constant must be a number >= 0"},
      {"blk-tuning 1\ncost-model 1 2 3 4 5\ncost-model 1 2 3 4 5\n",
       "line 3: a second cost-model line"},
      {"blk-tuning 1\neager-step 8000\n", "line 2: expected: eager-step lo hi"},
      {"blk-tuning 1\neager-step 8000 9000 10000\n", "line 2: expected: eager-step lo hi"},
      {"blk-tuning 1\neager-step 9000 8000\n", "line 2: eager-step's sizes must be whole"},
      {"blk-tuning 1\neager-step 0 8000\n", "line 2: eager-step's sizes must be whole"},
      {"blk-tuning 1\neager-step 8K 9K\n", "line 2: eager-step's sizes must be whole"},
      {"blk-tuning 1\neager-step 8000 9000\neager-step 8000 9000\n",
       "line 3: a second eager-step line"},
      {"", "is empty"},
  };
  for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
    write_file(bad, broken[i][0]);
    mc.tuning = bad;
    rc = blk_master_create(&m, MPI_COMM_WORLD, &mc);
    CHECK_EQ_INT(rc, BLK_EINVAL);
    CHECK(m == NULL);
    check_agreed(rc, broken[i][1]);
    check_agreed(rc, "bad.txt");
  }
  blk_log_set_level(BLK_LOG_WARN);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    unlink(good);
    unlink(other);
    unlink(model);
    unlink(both);
    unlink(bad);
    CHECK(rmdir(dir) == 0);
  }
}

/* A file blk-tune wrote: at every (blocks, k, bytes) it measured for this
 * rank count, AUTO picks the fastest line. */
static int from_blk_tune(const char *path) {
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  FILE *f = fopen(path, "r");
  CHECK_MSG(f != NULL, "cannot read %s", path);
  typedef struct line {
    int ranks, blocks, k;
    size_t bytes;
    char name[32];
    double usec;
  } line;
  line lines[512];
  int n = 0;
  char buf[256];
  while (fgets(buf, sizeof buf, f) && n < 512) {
    line l;
    if (sscanf(buf, "%d %d %d %zu %31s %lf", &l.ranks, &l.blocks, &l.k, &l.bytes, l.name,
               &l.usec) == 6 &&
        l.ranks == size)
      lines[n++] = l;
  }
  fclose(f);
  CHECK_MSG(n > 0, "%s has no line for %d ranks", path, size);
  int checked = 0;
#define SAME_SIZE(x, y)                                              \
  (lines[x].blocks == lines[y].blocks && lines[x].k == lines[y].k && \
   lines[x].bytes == lines[y].bytes)
  for (int i = 0; i < n; i++) {
    int best = i, first = 1; /* the fastest line of this (blocks, k, bytes); i its first */
    for (int j = 0; j < n; j++) {
      if (!SAME_SIZE(j, i)) continue;
      if (j < i) first = 0;
      if (lines[j].usec < lines[best].usec) best = j;
    }
    if (!first) continue;
    blk_master *m;
    blk_assigner *a;
    block *blocks;
    CHECK_OK(make(&m, &a, path, lines[i].blocks, &blocks));
    blk_arrays_algorithm got = pick(m, a, lines[i].bytes, lines[i].k);
    /* The pick's time is the fastest: lines that tie (the file has three
     * decimals) are all fastest, and AUTO takes the first of them in its
     * own order, which need not be the file's. */
    int at = -1;
    for (int j = 0; j < n; j++)
      if (SAME_SIZE(j, i) && !strcmp(lines[j].name, name_of(got))) at = j;
    CHECK_MSG(at >= 0 && lines[at].usec == lines[best].usec,
              "%d blocks, %zu bytes: AUTO picked %s (%g us), %s says %s (%g us)", lines[i].blocks,
              lines[i].bytes, name_of(got), at >= 0 ? lines[at].usec : -1.0, path, lines[best].name,
              lines[best].usec);
    unmake(m, a, blocks);
    checked++;
  }
#undef SAME_SIZE
  return checked;
}

int main(int argc, char **argv) {
  int provided, rank;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc == 3 && !strcmp(argv[1], "--file")) {
    int checked = from_blk_tune(argv[2]);
    if (rank == 0) printf("test_tuning: ok (%d sizes of %s)\n", checked, argv[2]);
  } else {
    CHECK_MSG(argc == 1, "usage: test_tuning [--file FILE]");
    own_files();
    if (rank == 0) printf("test_tuning: ok\n");
  }
  MPI_Finalize();
  return 0;
}
