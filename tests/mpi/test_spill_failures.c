/*
 * test_spill_failures: out-of-core failures through the master, for real.
 * Every collective's code and detail are checked on every rank.
 *
 *   --case missing-dir   a spill directory that does not exist: create fails
 *                        with BLK_EIO naming it, on every rank
 *   --case full          the spill directory is a small tmpfs (needs root;
 *                        otherwise the test reports itself skipped, exit 77):
 *                        evictions fail with "No space left on device" and
 *                        the file; every rank returns that; foreach still
 *                        runs every block on correct data (over the budget)
 *   --case corrupt       a byte of each spilled record is overwritten: the
 *                        next foreach returns BLK_ECORRUPT on every rank,
 *                        naming a gid and the file; the other blocks still
 *                        run, on correct data
 *   --case dir-removed   the spill directory is removed mid-run (the spill
 *                        file has no name, so the directory is empty): the
 *                        run goes on with correct results; destroy is fine
 *   --case bytes         a byte budget (mem_bytes with a size callback) holds
 *   --case load          load takes its buffer's memory (blk_buffer_detach, as
 *                        master.h allows) and, once, for the last gid, fails
 *                        after taking it: the foreach returns BLK_ECALLBACK
 *                        naming that gid on every rank, every other block
 *                        runs, and the next foreach finds the block whole
 *                        (its record still holds its bytes)
 *
 * Every block holds 16 KiB of incompressible bytes made from its gid and a
 * generation number, so any lost or stale block shows. While blocks are
 * spilled, the spill directory holds no file (nothing can be left behind).
 */
#define _POSIX_C_SOURCE 200809L
#include <blk/blk.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "master/master_state.h"

#define NBLOCKS 8
#define BYTES 16384

typedef struct block {
  int gid, generation;
  unsigned char data[BYTES];
} block;

static unsigned char byte_of(int gid, int generation, size_t i) {
  uint64_t x = ((uint64_t)gid << 40) ^ ((uint64_t)generation << 20) ^ i;
  x *= 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return (unsigned char)(x >> 56);
}

static void fill(block *b) {
  for (size_t i = 0; i < BYTES; i++) b->data[i] = byte_of(b->gid, b->generation, i);
}

static int create(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b);
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  fill(b);
  *out = b;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  blk_buffer_write_i32(out, b->gid);
  blk_buffer_write_i32(out, b->generation);
  return blk_buffer_write(out, b->data, BYTES);
}

/* The load case: load takes the buffer's memory; and the gid whose load
 * fails once, after taking it (-1: none). Only the driver calls load. */
static int take_memory = 0, fail_load_gid = -1;

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  block *b = data;
  blk_buffer taken = BLK_BUFFER_INIT;
  if (take_memory) {
    size_t size = in->size, cap = 0;
    void *mem = in->pos == 0 ? blk_buffer_detach(in, &cap) : NULL;
    CHECK_MSG(mem != NULL, "gid %d: load's buffer owns no memory to take", gid);
    CHECK_EQ_INT(in->size, 0);
    if (gid == fail_load_gid) {
      fail_load_gid = -1;
      free(mem);
      return -42;
    }
    blk_buffer_adopt(&taken, mem, size, cap);
    in = &taken;
  }
  blk_buffer_read_i32(in, &b->gid);
  blk_buffer_read_i32(in, &b->generation);
  blk_buffer_read(in, b->data, BYTES);
  CHECK_EQ_INT(b->gid, gid);
  int rc = blk_buffer_error(in);
  blk_buffer_free(&taken);
  return rc;
}

static size_t block_size(const void *data, int gid, void *user) {
  (void)data;
  (void)gid;
  (void)user;
  return sizeof(struct block);
}

/* Checks the block holds what it should, then moves it to the next
 * generation; counts the blocks it ran on. */
static int check_and_advance(void *data, blk_proxy *p, void *user) {
  int *ran = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, blk_proxy_gid(p));
  for (size_t i = 0; i < BYTES; i++)
    CHECK_MSG(b->data[i] == byte_of(b->gid, b->generation, i),
              "gid %d generation %d: byte %zu is wrong: a block was lost or is stale", b->gid,
              b->generation, i);
  b->generation++;
  fill(b);
  __atomic_fetch_add(ran, 1, __ATOMIC_RELAXED);
  return 0;
}

static blk_master *make_master(const char *dir, int mem_blocks, size_t mem_bytes, int threads) {
  blk_master_config mc = check_master_config(threads, 0, create, destroy, save, load);
  mc.size = block_size;
  mc.mem_blocks = mem_blocks;
  mc.mem_bytes = mem_bytes;
  mc.spill_dir = dir;
  blk_master *m = NULL;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  return m;
}

/* Adds this rank's blocks. An add that has to evict may fail to write: the
 * block is added all the same and the error names the file (full disk). */
static void add_blocks(blk_master *m, blk_assigner *a, int rank, int disk_full) {
  int gids[NBLOCKS], n = blk_assigner_local_gids(a, rank, gids, NBLOCKS);
  for (int i = 0; i < n; i++) {
    void *b;
    CHECK_OK(create(&b, gids[i], NULL));
    int rc = blk_master_add(m, gids[i], b, NULL, 0);
    if (disk_full && rc == BLK_EIO)
      CHECK_MSG(strstr(blk_last_error(), "No space left on device"), "detail: %s",
                blk_last_error());
    else
      CHECK_OK(rc);
    CHECK_EQ_INT(blk_master_local_count(m), i + 1);
  }
}

/* Runs check_and_advance on every block; returns the foreach's code. */
static int run_all(blk_master *m, int expect_ran) {
  int ran = 0;
  int rc = blk_master_foreach(m, check_and_advance, &ran);
  if (expect_ran >= 0) CHECK_EQ_INT(ran, expect_ran);
  return rc;
}

/* The spill directory has no entry: the spill file has no name. */
static void check_no_name(const char *dir) {
  DIR *d = opendir(dir);
  CHECK(d);
  for (struct dirent *e; (e = readdir(d));)
    CHECK_MSG(!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."), "%s holds %s", dir, e->d_name);
  closedir(d);
}

static char *scratch_dir(int rank) {
  static char path[256];
  snprintf(path, sizeof path, "/tmp/blk-spill-test-%d-%d-XXXXXX", (int)getpid(), rank);
  CHECK(mkdtemp(path));
  return path;
}

int main(int argc, char **argv) {
  CHECK(argc == 3 && !strcmp(argv[1], "--case"));
  const char *which = argv[2];
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, NBLOCKS));
  int local = blk_assigner_local_count(a, rank);
  blk_log_set_level(BLK_LOG_NONE);

  if (!strcmp(which, "missing-dir")) {
    blk_master_config mc = BLK_MASTER_CONFIG_INIT;
    mc.create = create;
    mc.destroy = destroy;
    mc.save = save;
    mc.load = load;
    mc.mem_blocks = 1;
    mc.spill_dir = "/nonexistent/blk-spill";
    blk_master *m = NULL;
    CHECK_ERR(blk_master_create(&m, MPI_COMM_WORLD, &mc), BLK_EIO, "/nonexistent/blk-spill");
    CHECK(m == NULL);
    mc.save = NULL;
    CHECK_ERR(blk_master_create(&m, MPI_COMM_WORLD, &mc), BLK_EINVAL, "save");
  } else if (!strcmp(which, "full")) {
    if (geteuid() != 0) {
      if (rank == 0) printf("test_spill_failures full: skipped: mounting a tmpfs needs root\n");
      MPI_Finalize();
      return 77; /* ctest's SKIP_RETURN_CODE: not a pass */
    } else {
      char *dir = scratch_dir(rank);
      char cmd[512];
      /* Room for about two 16 KiB records (incompressible) per rank. */
      snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=40k tmpfs %s", dir);
      CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
      blk_master *m = make_master(dir, 1, 0, 2);
      add_blocks(m, a, rank, 1);
      int any_full = 0;
      MPI_Allreduce(&(int){local > 3}, &any_full, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      for (int round = 0; round < 3; round++) {
        int rc = run_all(m, local); /* every block runs, on correct data */
        if (any_full) {
          CHECK_EQ_INT(rc, BLK_EIO);
          check_agreed(rc, "No space left on device");
          check_agreed(rc, ".spill (unlinked)");
        } else {
          check_agreed(rc, NULL);
        }
      }
      blk_master_stats st;
      blk_master_stats_get(m, &st);
      /* What could not be written stays in memory as the saved bytes (run_all
       * found every block whole), so the budget of blocks still holds. */
      CHECK(st.blocks_in_memory_peak <= 1);
      blk_master_destroy(m);
      snprintf(cmd, sizeof cmd, "umount %s", dir);
      CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
      CHECK(rmdir(dir) == 0);
    }
  } else if (!strcmp(which, "corrupt")) {
    char *dir = scratch_dir(rank);
    blk_master *m = make_master(dir, 1, 0, 1);
    add_blocks(m, a, rank, 0);
    CHECK_OK(run_all(m, local));
    check_no_name(dir);
    if (local > 1) {
      /* Every block but the resident one is in the file: wreck a byte in
       * the middle of each 64-byte-aligned record's data. The file has no
       * name; its descriptor reaches it. */
      char path[64];
      snprintf(path, sizeof path, "/proc/self/fd/%d", blk__storage_fd(m->budget.storage));
      int fd = open(path, O_RDWR);
      CHECK(fd >= 0);
      struct stat sb;
      CHECK(fstat(fd, &sb) == 0);
      for (off_t off = 1000; off < sb.st_size; off += 4096) {
        unsigned char x;
        CHECK(pread(fd, &x, 1, off) == 1);
        x ^= 0x5a;
        CHECK(pwrite(fd, &x, 1, off) == 1);
      }
      close(fd);
    }
    int ran = 0, any = 0;
    int rc = blk_master_foreach(m, check_and_advance, &ran);
    MPI_Allreduce(&(int){local > 1}, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
      CHECK_EQ_INT(rc, BLK_ECORRUPT);
      check_agreed(rc, "data checksum mismatch");
      check_agreed(rc, ".spill (unlinked)");
      CHECK(ran >= 1); /* the resident block (and any other intact one) ran */
    } else {
      CHECK_OK(rc);
    }
    blk_master_destroy(m);
    CHECK(rmdir(dir) == 0); /* nothing was left in it */
  } else if (!strcmp(which, "dir-removed")) {
    char *dir = scratch_dir(rank);
    blk_master *m = make_master(dir, 2, 0, 2);
    add_blocks(m, a, rank, 0);
    CHECK_OK(run_all(m, local));
    check_no_name(dir);
    CHECK(rmdir(dir) == 0); /* empty: the spill file has no name */
    for (int round = 0; round < 3; round++) CHECK_OK(run_all(m, local));
    check_budget(m, 2);
    blk_master_destroy(m);
  } else if (!strcmp(which, "bytes")) {
    char *dir = scratch_dir(rank);
    blk_master *m = make_master(dir, 0, 2 * sizeof(block) + 100, 2);
    add_blocks(m, a, rank, 0);
    for (int round = 0; round < 3; round++) CHECK_OK(run_all(m, local));
    check_budget(m, 2);
    blk_master_destroy(m);
    CHECK(rmdir(dir) == 0);
  } else if (!strcmp(which, "load")) {
    char *dir = scratch_dir(rank);
    blk_master *m = make_master(dir, 1, 0, 2);
    add_blocks(m, a, rank, 0);
    CHECK_OK(run_all(m, local));
    take_memory = 1;
    const int last = NBLOCKS - 1; /* on the last rank that has blocks */
    const int mine = blk_assigner_rank(a, last) == rank;
    fail_load_gid = mine && local > 1 ? last : -1;
    int any = 0;
    MPI_Allreduce(&(int){fail_load_gid >= 0}, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int rc = run_all(m, fail_load_gid >= 0 ? local - 1 : local);
    if (any) {
      CHECK_EQ_INT(rc, BLK_ECALLBACK);
      check_agreed(rc, "the load callback failed for gid 7 (code -42)");
    } else {
      check_agreed(rc, NULL);
    }
    CHECK_EQ_INT(fail_load_gid, -1); /* it was asked to load it */
    for (int round = 0; round < 2; round++) CHECK_OK(run_all(m, local));
    check_budget(m, 1);
    blk_master_destroy(m);
    CHECK(rmdir(dir) == 0);
  } else {
    CHECK_MSG(0, "unknown case %s", which);
  }
  blk_assigner_destroy(a);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("test_spill_failures %s: ok\n", which);
  MPI_Finalize();
  return 0;
}
