/*
 * ooc_bench: what out-of-core costs, measured through the public API.
 *
 * For a smooth float field and for random floats, each rank holds B blocks
 * of F floats. It reports:
 *  - spill and restore throughput (MB/s of raw block bytes, from the
 *    master's own timers: encode + write, read + decode) and the ratio,
 *    with one block in memory, so every block goes out and comes back;
 *  - the time of a merge-reduce (element-wise sum of the fields, k = 2) in
 *    core, with a quarter of the blocks in memory compressed (zstd level 1,
 *    4-byte shuffle), and the same stored uncompressed; the slowdowns.
 * Median of R repetitions; the sums are checked against a serial one.
 *
 *   mpiexec -n 1 blk-ooc-bench [--blocks 16] [--floats 262144] [--reps 5]
 *                              [--spill-dir DIR]
 */
#include <blk/blk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct field {
  int gid;
  size_t n;
  float *v;
} field;

typedef struct setup {
  size_t n;
  int random;
  int nblocks;
} setup;

static float value(const setup *s, int gid, size_t i) {
  if (!s->random) return (float)(sin(0.001 * (double)i + gid) * cos(0.0003 * (double)i));
  uint64_t x = ((uint64_t)gid << 32 ^ i) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return (float)((double)(x >> 11) / 9007199254740992.0);
}

static int create(void **out, int gid, void *user) {
  const setup *s = user;
  field *f = calloc(1, sizeof *f);
  if (!f) return BLK_ENOMEM;
  f->gid = gid;
  f->n = s->n;
  f->v = malloc(s->n * sizeof *f->v);
  if (!f->v) return BLK_ENOMEM;
  *out = f;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  field *f = b;
  free(f->v);
  free(f);
}

static int save(blk_buffer *out, const void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  const field *f = b;
  return blk_buffer_write(out, f->v, f->n * sizeof *f->v);
}

static int load(void *b, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  field *f = b;
  return blk_buffer_read(in, f->v, f->n * sizeof *f->v);
}

static int init(void *b, blk_proxy *p, void *user) {
  (void)p;
  const setup *s = user;
  field *f = b;
  for (size_t i = 0; i < f->n; i++) f->v[i] = value(s, f->gid, i);
  return 0;
}

static int touch(void *b, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  field *f = b;
  f->v[0] += 0.0f; /* the block must be in memory: that is the point */
  return 0;
}

static int merge(void *b, blk_proxy *p, void *user) {
  (void)user;
  field *f = b;
  int nin = blk_proxy_in_count(p);
  for (int i = 0; i < nin; i++) {
    if (blk_proxy_in_gid(p, i) == f->gid) continue;
    const float *in;
    size_t n = blk_proxy_dequeue_array_view(p, i, (const void **)&in, sizeof(float));
    for (size_t j = 0; j < n && j < f->n; j++) {
      float x;
      memcpy(&x, in + j, sizeof x); /* the view may be unaligned */
      f->v[j] += x;
    }
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++)
    if (blk_proxy_out_gid(p, i) != f->gid)
      blk_proxy_enqueue_array(p, i, f->v, sizeof(float), f->n);
  return 0;
}

static double result_error; /* of gid 0 against the serial sum, this rank */

static int check_root(void *b, blk_proxy *p, void *user) {
  (void)p;
  const setup *s = user;
  field *f = b;
  if (f->gid != 0) return 0;
  double worst = 0.0;
  for (size_t i = 0; i < f->n; i += 997) {
    double want = 0.0;
    for (int g = 0; g < s->nblocks; g++) want += value(s, g, i);
    double e = fabs((double)f->v[i] - want) / (1.0 + fabs(want));
    if (e > worst) worst = e;
  }
  result_error = worst;
  return 0;
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, compare_double);
  return t[n / 2];
}

static blk_master *make(setup *s, int mem_blocks, int level, const char *dir, blk_assigner *a,
                        int rank) {
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.create = create;
  mc.destroy = destroy;
  mc.save = save;
  mc.load = load;
  mc.user = s;
  mc.mem_blocks = mem_blocks;
  mc.compression_level = level;
  mc.shuffle = 4;
  mc.spill_dir = dir;
  blk_master *m = NULL;
  if (blk_master_create(&m, MPI_COMM_WORLD, &mc)) {
    fprintf(stderr, "ooc_bench: %s\n", blk_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int gids[4096], n = blk_assigner_local_gids(a, rank, gids, 4096);
  for (int i = 0; i < n; i++) {
    void *b = NULL;
    if (create(&b, gids[i], s) || blk_master_add(m, gids[i], b, NULL, 0)) {
      fprintf(stderr, "ooc_bench: adding gid %d: %s\n", gids[i], blk_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  blk_master_foreach(m, init, s);
  return m;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, blocks = 16, reps = 5;
  size_t floats = 262144;
  const char *dir = NULL;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--blocks")) blocks = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--floats")) floats = (size_t)atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--spill-dir")) dir = argv[i + 1];
  }
  int nblocks = blocks * size;
  blk_assigner *a;
  blk_assigner_create_contiguous(&a, size, nblocks);
  blk_partners *p;
  blk_partners_create(&p, BLK_MERGE, 1, &nblocks, 2, 1);
  if (rank == 0) {
    printf("ooc_bench: %d ranks x %d blocks of %zu floats (%.1f MiB per block), median of %d\n\n",
           size, blocks, floats, (double)floats * 4 / 1048576.0, reps);
    printf("| data | ratio | spill MB/s | restore MB/s | reduce in-core | 1/4 in memory, zstd 1 + "
           "shuffle | 1/4 in memory, uncompressed |\n|---|---:|---:|---:|---:|---:|---:|\n");
  }
  for (int random = 0; random <= 1; random++) {
    setup s = {floats, random, nblocks};
    /* Spill and restore: one block in memory, a foreach touches every block. */
    double spill[64], restore[64], ratio = 0.0;
    for (int r = 0; r < reps; r++) {
      blk_master *m = make(&s, 1, 1, dir, a, rank);
      blk_master_foreach(m, touch, NULL);
      blk_master_stats st;
      blk_master_stats_get(m, &st);
      spill[r] = (double)st.bytes_raw_written / 1e6 / (st.seconds_compress + st.seconds_write);
      restore[r] = (double)st.bytes_raw_read / 1e6 / (st.seconds_decompress + st.seconds_read);
      ratio = (double)st.bytes_raw_written / (double)st.bytes_stored_written;
      blk_master_destroy(m);
    }
    /* The reduction three ways. */
    static const int levels[3] = {1, 1, BLK_COMPRESSION_NONE};
    int budgets[3] = {0, blocks / 4 > 0 ? blocks / 4 : 1, blocks / 4 > 0 ? blocks / 4 : 1};
    double t[3][64];
    for (int way = 0; way < 3; way++)
      for (int r = 0; r < reps; r++) {
        blk_master *m = make(&s, budgets[way], levels[way], dir, a, rank);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        blk_reduce(m, a, p, merge, NULL);
        double local = MPI_Wtime() - t0, worst;
        MPI_Allreduce(&local, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[way][r] = worst;
        result_error = 0.0;
        blk_master_foreach(m, check_root, &s);
        if (result_error > 1e-4) {
          fprintf(stderr, "ooc_bench: wrong sum (relative error %g)\n", result_error);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        blk_master_destroy(m);
      }
    double in_core = median(t[0], reps), zstd = median(t[1], reps), raw = median(t[2], reps);
    if (rank == 0)
      printf("| %s float32 | %.2f | %.0f | %.0f | %.3f s | %.3f s (%.2fx) | %.3f s (%.2fx) |\n",
             random ? "random" : "smooth", ratio, median(spill, reps), median(restore, reps),
             in_core, zstd, zstd / in_core, raw, raw / in_core);
  }
  blk_partners_destroy(p);
  blk_assigner_destroy(a);
  MPI_Finalize();
  return 0;
}
