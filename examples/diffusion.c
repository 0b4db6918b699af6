/*
 * diffusion: the flagship example. A 2D or 3D field on a decomposed grid with
 * one layer of ghost cells, smoothed for several steps by a box filter (each
 * cell becomes the mean of its 3^dim neighbourhood), with a ghost exchange
 * before every step. Axis 0 is periodic; the other axes hold the value 0
 * outside the domain. Every rank also runs the same computation serially on
 * the whole grid and the example checks that both agree, and that the global
 * maximum found by blk's value all-reduce equals the serial one.
 *
 * Out-of-core (--mem-blocks N), each rank keeps at most N blocks in memory
 * and blk swaps the others out through save and load; the result must be
 * the same as in-core, and the budget must hold on every rank.
 *
 * Checkpoint and restart (blk/checkpoint.h): --checkpoint FILE writes every
 * block, with the steps done and the grid as the file's extra bytes, after
 * --stop-after S steps (default: all of them), checks the field of step S
 * and exits; --restart FILE reads the blocks back, on any number of ranks
 * and threads, and goes on from there to --steps. A restarted run must end
 * with the uninterrupted answer bit for bit: the serial run's, which an
 * uninterrupted blk run matches exactly too (the same sums in the same
 * order).
 *
 *   mpiexec -n 4 ./diffusion [--blocks 12] [--threads 2] [--steps 20]
 *                            [--size 96 64 [nz]]
 *                            [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *                            [--checkpoint FILE [--stop-after S]] [--restart FILE]
 *
 * --size with two numbers gives a 2D run, three a 3D one. Prints the error
 * and PASS, or FAIL with exit status 1 (and, out-of-core, a line of rank 0's
 * storage figures).
 */
#include <blk/blk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

#define G 1 /* ghost layers */

typedef struct field {
  int64_t lo[3], hi[3]; /* core cells, inclusive (unused axes: 0..0) */
  int64_t ext[3];       /* local extent with ghosts */
  double *cur, *next;
} field;

typedef struct setup {
  int dim;
  int64_t n[3];
} setup;

static double initial(const setup *s, int64_t x, int64_t y, int64_t z) {
  /* Smooth waves plus a deterministic bump, so the filter has work to do. */
  double v = sin(6.283185307179586 * (double)x / (double)s->n[0]) +
             0.5 * cos(6.283185307179586 * (double)y / (double)s->n[1]);
  if ((x * 7 + y * 13 + z * 29) % 17 == 0) v += 1.0;
  return v + 0.01 * (double)z;
}

static size_t local_index(const field *f, const int64_t *c) {
  /* c in global coordinates, within the ghosted box */
  return (size_t)((c[0] - f->lo[0] + G) +
                  f->ext[0] * ((c[1] - f->lo[1] + (f->ext[1] > 1 ? G : 0)) +
                               f->ext[1] * (c[2] - f->lo[2] + (f->ext[2] > 1 ? G : 0))));
}

static int create_block(void **out, int gid, void *user) {
  (void)gid;
  (void)user;
  field *f = calloc(1, sizeof *f);
  *out = f;
  return f ? 0 : BLK_ENOMEM;
}

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  field *f = block;
  free(f->cur);
  free(f->next);
  free(f);
}

/* Out-of-core: the box and the current field, ghosts included. next is
 * scratch (receive_and_step overwrites it before reading it), so it is not
 * saved, only allocated again. A block that init_block has not reached yet
 * has no field: its array is empty. */
static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  const field *f = block;
  size_t cells = f->cur ? (size_t)(f->ext[0] * f->ext[1] * f->ext[2]) : 0;
  blk_buffer_write_array(out, f->lo, sizeof f->lo[0], 3);
  blk_buffer_write_array(out, f->hi, sizeof f->hi[0], 3);
  blk_buffer_write_array(out, f->ext, sizeof f->ext[0], 3);
  return blk_buffer_write_array(out, f->cur, sizeof *f->cur, cells);
}

static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  field *f = block; /* fresh from create_block: all zero */
  size_t n[3] = {0, 0, 0}, cells = 0;
  void *cur = NULL;
  blk_buffer_read_array(in, f->lo, sizeof f->lo[0], 3, &n[0]);
  blk_buffer_read_array(in, f->hi, sizeof f->hi[0], 3, &n[1]);
  blk_buffer_read_array(in, f->ext, sizeof f->ext[0], 3, &n[2]);
  blk_buffer_read_array_alloc(in, &cur, sizeof *f->cur, &cells);
  f->cur = cur;
  if (blk_buffer_error(in)) return blk_buffer_error(in);
  if (n[0] != 3 || n[1] != 3 || n[2] != 3 || blk_buffer_remaining(in) != 0) return BLK_ECORRUPT;
  if (cells == 0) return 0; /* not initialised yet */
  if (cells != (size_t)(f->ext[0] * f->ext[1] * f->ext[2])) return BLK_ECORRUPT;
  f->next = calloc(cells, sizeof *f->next);
  return f->next ? 0 : BLK_ENOMEM;
}

typedef struct run {
  const setup *s;
  blk_decomposer *d;
} run;

static int init_block(void *block, blk_proxy *p, void *user) {
  run *r = user;
  field *f = block;
  blk_bounds core;
  int rc = blk_decomposer_block_bounds(r->d, blk_proxy_gid(p), &core, NULL);
  if (rc) return rc;
  size_t cells = 1;
  for (int a = 0; a < 3; a++) {
    f->lo[a] = a < r->s->dim ? core.min[a] : 0;
    f->hi[a] = a < r->s->dim ? core.max[a] : 0;
    f->ext[a] = f->hi[a] - f->lo[a] + 1 + (a < r->s->dim ? 2 * G : 0);
    cells *= (size_t)f->ext[a];
  }
  f->cur = calloc(cells, sizeof(double));
  f->next = calloc(cells, sizeof(double));
  if (!f->cur || !f->next) return BLK_ENOMEM;
  int64_t c[3];
  for (c[2] = f->lo[2]; c[2] <= f->hi[2]; c[2]++)
    for (c[1] = f->lo[1]; c[1] <= f->hi[1]; c[1]++)
      for (c[0] = f->lo[0]; c[0] <= f->hi[0]; c[0]++)
        f->cur[local_index(f, c)] = initial(r->s, c[0], c[1], c[2]);
  return 0;
}

/* The box of cells a link touches: on axis a, dir -1 is the low edge, +1 the
 * high edge, 0 the whole core. ghost selects the ghost layer outside the edge
 * instead of the core layer inside it. */
static void link_box(const field *f, const blk_link *l, int dim, int ghost, int64_t *from,
                     int64_t *to) {
  for (int a = 0; a < 3; a++) {
    int d = a < dim ? l->dir[a] : 0;
    if (d < 0) {
      from[a] = ghost ? f->lo[a] - G : f->lo[a];
      to[a] = from[a] + G - 1;
    } else if (d > 0) {
      to[a] = ghost ? f->hi[a] + G : f->hi[a];
      from[a] = to[a] - G + 1;
    } else {
      from[a] = f->lo[a];
      to[a] = f->hi[a];
    }
  }
}

static int send_edges(void *block, blk_proxy *p, void *user) {
  run *r = user;
  field *f = block;
  int nlinks = blk_proxy_out_count(p);
  for (int i = 0; i < nlinks; i++) {
    const blk_link *l = blk_proxy_link(p, i);
    int64_t from[3], to[3], c[3];
    link_box(f, l, r->s->dim, 0, from, to);
    for (c[2] = from[2]; c[2] <= to[2]; c[2]++)
      for (c[1] = from[1]; c[1] <= to[1]; c[1]++)
        for (c[0] = from[0]; c[0] <= to[0]; c[0]++) {
          int rc = blk_proxy_enqueue(p, i, &f->cur[local_index(f, c)], sizeof(double));
          if (rc) return rc;
        }
  }
  return 0;
}

/* Receives the ghosts, applies the filter, and posts the new local maximum. */
static int receive_and_step(void *block, blk_proxy *p, void *user) {
  run *r = user;
  field *f = block;
  int dim = r->s->dim;
  /* Ghost cells outside a non-periodic boundary hold 0: no link fills them. */
  size_t cells = (size_t)(f->ext[0] * f->ext[1] * f->ext[2]);
  double *keep = f->next;
  memset(keep, 0, cells * sizeof *keep);
  int64_t c[3];
  for (c[2] = f->lo[2]; c[2] <= f->hi[2]; c[2]++)
    for (c[1] = f->lo[1]; c[1] <= f->hi[1]; c[1]++)
      for (c[0] = f->lo[0]; c[0] <= f->hi[0]; c[0]++)
        keep[local_index(f, c)] = f->cur[local_index(f, c)];
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    const blk_link *l = blk_proxy_link(p, i);
    int64_t from[3], to[3];
    link_box(f, l, dim, 1, from, to);
    for (c[2] = from[2]; c[2] <= to[2]; c[2]++)
      for (c[1] = from[1]; c[1] <= to[1]; c[1]++)
        for (c[0] = from[0]; c[0] <= to[0]; c[0]++)
          blk_proxy_dequeue(p, i, &keep[local_index(f, c)], sizeof(double));
  }
  /* keep now holds core and ghosts; filter it into cur. */
  double local_max = -INFINITY;
  int64_t span[3] = {1, dim > 1 ? 1 : 0, dim > 2 ? 1 : 0};
  for (c[2] = f->lo[2]; c[2] <= f->hi[2]; c[2]++)
    for (c[1] = f->lo[1]; c[1] <= f->hi[1]; c[1]++)
      for (c[0] = f->lo[0]; c[0] <= f->hi[0]; c[0]++) {
        double sum = 0.0;
        int count = 0;
        int64_t o[3];
        for (o[2] = -span[2]; o[2] <= span[2]; o[2]++)
          for (o[1] = -span[1]; o[1] <= span[1]; o[1]++)
            for (o[0] = -span[0]; o[0] <= span[0]; o[0]++) {
              int64_t q[3] = {c[0] + o[0], c[1] + o[1], c[2] + o[2]};
              sum += keep[local_index(f, q)];
              count++;
            }
        double v = sum / count;
        f->cur[local_index(f, c)] = v;
        if (v > local_max) local_max = v;
      }
  return blk_proxy_all_reduce_f64(p, local_max, BLK_OP_MAX);
}

/* The same computation on the whole grid, on one rank. */
static double serial_at(const setup *s, const double *g, int64_t x, int64_t y, int64_t z) {
  x = ((x % s->n[0]) + s->n[0]) % s->n[0]; /* axis 0 is periodic */
  if (y < 0 || y >= s->n[1] || z < 0 || z >= s->n[2]) return 0.0;
  return g[x + s->n[0] * (y + s->n[1] * z)];
}

static double *serial_run(const setup *s, int steps, double *max_out) {
  size_t cells = (size_t)(s->n[0] * s->n[1] * s->n[2]);
  double *g = malloc(cells * sizeof *g), *h = malloc(cells * sizeof *h);
  if (!g || !h) {
    free(g);
    free(h);
    return NULL;
  }
  for (int64_t z = 0; z < s->n[2]; z++)
    for (int64_t y = 0; y < s->n[1]; y++)
      for (int64_t x = 0; x < s->n[0]; x++)
        g[x + s->n[0] * (y + s->n[1] * z)] = initial(s, x, y, z);
  int64_t span[3] = {1, s->dim > 1 ? 1 : 0, s->dim > 2 ? 1 : 0};
  for (int t = 0; t < steps; t++) {
    *max_out = -INFINITY;
    for (int64_t z = 0; z < s->n[2]; z++)
      for (int64_t y = 0; y < s->n[1]; y++)
        for (int64_t x = 0; x < s->n[0]; x++) {
          double sum = 0.0;
          int count = 0;
          for (int64_t oz = -span[2]; oz <= span[2]; oz++)
            for (int64_t oy = -span[1]; oy <= span[1]; oy++)
              for (int64_t ox = -span[0]; ox <= span[0]; ox++) {
                sum += serial_at(s, g, x + ox, y + oy, z + oz);
                count++;
              }
          double v = sum / count;
          h[x + s->n[0] * (y + s->n[1] * z)] = v;
          if (v > *max_out) *max_out = v;
        }
    double *tmp = g;
    g = h;
    h = tmp;
  }
  free(h);
  return g;
}

typedef struct compare {
  const setup *s;
  const double *serial;
  double max_error;
} compare;

static int compare_block(void *block, blk_proxy *p, void *user) {
  (void)p;
  compare *cmp = user;
  field *f = block;
  double err = 0.0;
  int64_t c[3];
  for (c[2] = f->lo[2]; c[2] <= f->hi[2]; c[2]++)
    for (c[1] = f->lo[1]; c[1] <= f->hi[1]; c[1]++)
      for (c[0] = f->lo[0]; c[0] <= f->hi[0]; c[0]++) {
        double want = cmp->serial[c[0] + cmp->s->n[0] * (c[1] + cmp->s->n[1] * c[2])];
        double e = fabs(f->cur[local_index(f, c)] - want);
        if (e > err) err = e;
      }
  return blk_proxy_all_reduce_f64(p, err, BLK_OP_MAX);
}

/* A checkpoint's extra bytes: the steps done and the grid, checked at a
 * restart (the file is read on the same machine type, so native order). */
typedef struct saved_run {
  int64_t step, dim, n[3];
} saved_run;

static int usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--blocks N] [--threads T] [--steps S] [--size NX NY [NZ]]\n"
          "          [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]\n"
          "          [--checkpoint FILE [--stop-after S]] [--restart FILE]\n"
          "  a box-filter diffusion on a decomposed 2D or 3D grid, checked serially\n"
          "  --checkpoint FILE   write the blocks to FILE after --stop-after S steps\n"
          "                      (default: all), check that step and exit\n"
          "  --restart FILE      read the blocks from FILE (any rank and thread count)\n"
          "                      and go on to --steps; the answer must be the same\n",
          argv0);
  ex_ooc_usage();
  return 2;
}

#define CHECK_BLK(call)                                                           \
  do {                                                                            \
    int rc_ = (call);                                                             \
    if (rc_) {                                                                    \
      fprintf(stderr, "diffusion: %s failed: %s: %s\n", #call, blk_strerror(rc_), \
              blk_last_error());                                                  \
      MPI_Abort(MPI_COMM_WORLD, 1);                                               \
    }                                                                             \
  } while (0)

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  setup s = {2, {96, 64, 1}};
  int nblocks = 12, threads = 2, steps = 20, stop_after = -1;
  const char *checkpoint = NULL, *restart = NULL;
  ex_ooc ooc = {0, NULL, 0, 0};
  for (int i = 1; i < argc; i++) {
    int is_ooc = ex_ooc_parse(&ooc, argc, argv, &i); /* -1: a bad value: usage below */
    if (is_ooc > 0) {
      continue;
    } else if (!strcmp(argv[i], "--blocks") && i + 1 < argc) {
      nblocks = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
      steps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--stop-after") && i + 1 < argc) {
      stop_after = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc) {
      checkpoint = argv[++i];
    } else if (!strcmp(argv[i], "--restart") && i + 1 < argc) {
      restart = argv[++i];
    } else if (!strcmp(argv[i], "--size") && i + 2 < argc) {
      s.dim = 2;
      s.n[0] = atoll(argv[++i]);
      s.n[1] = atoll(argv[++i]);
      s.n[2] = 1;
      if (i + 1 < argc && argv[i + 1][0] != '-') {
        s.n[2] = atoll(argv[++i]);
        s.dim = 3;
      }
    } else {
      if (rank == 0) usage(argv[0]);
      MPI_Finalize();
      return 2;
    }
  }

  if (stop_after >= 0 && !checkpoint) {
    if (rank == 0) usage(argv[0]);
    MPI_Finalize();
    return 2;
  }

  blk_bounds domain;
  int64_t lo[3] = {0, 0, 0}, hi[3] = {s.n[0] - 1, s.n[1] - 1, s.n[2] - 1};
  CHECK_BLK(blk_bounds_set(&domain, s.dim, lo, hi));
  blk_decomposer_config dc = BLK_DECOMPOSER_CONFIG_INIT;
  dc.wrap[0] = 1;
  for (int a = 0; a < s.dim; a++) dc.ghosts[a] = G;
  blk_decomposer *d = NULL;
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  CHECK_BLK(blk_decomposer_create(&d, &domain, nblocks, &dc));
  CHECK_BLK(blk_assigner_create_contiguous(&a, size, nblocks));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = threads;
  mc.create = create_block;
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.shuffle = sizeof(double); /* the records are arrays of doubles */
  ex_ooc_configure(&mc, &ooc);
  CHECK_BLK(blk_master_create(&m, MPI_COMM_WORLD, &mc));

  run r = {&s, d};
  double t0 = MPI_Wtime();
  int first = 0; /* the step the run starts from */
  if (restart) {
    /* The blocks and their links from the file, placed by this run's
     * assigner; the extra bytes say where the writer stopped. */
    blk_buffer extra = BLK_BUFFER_INIT;
    CHECK_BLK(blk_checkpoint_read(m, restart, a, &extra));
    saved_run saved;
    if (blk_buffer_read(&extra, &saved, sizeof saved) || saved.dim != s.dim ||
        saved.n[0] != s.n[0] || saved.n[1] != s.n[1] || saved.n[2] != s.n[2] || saved.step < 0 ||
        saved.step > steps) {
      if (rank == 0)
        fprintf(stderr, "diffusion: %s is not a checkpoint of this grid with at most %d steps\n",
                restart, steps);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    blk_buffer_free(&extra);
    first = (int)saved.step;
  } else {
    CHECK_BLK(blk_master_decompose(m, d, a));
    CHECK_BLK(blk_master_foreach(m, init_block, &r));
  }
  int last = checkpoint && stop_after >= 0 && stop_after < steps ? stop_after : steps;
  if (last < first) last = first;
  for (int t = first; t < last; t++) {
    CHECK_BLK(blk_master_foreach(m, send_edges, &r));
    CHECK_BLK(blk_master_exchange(m));
    CHECK_BLK(blk_master_foreach(m, receive_and_step, &r));
  }
  CHECK_BLK(blk_master_exchange(m)); /* completes the last step's max */
  double blk_max = last > first ? blk_master_result_f64(m, 0) : 0.0;
  if (checkpoint) {
    saved_run saved = {last, s.dim, {s.n[0], s.n[1], s.n[2]}};
    CHECK_BLK(blk_checkpoint_write(m, checkpoint, &saved, sizeof saved));
  }
  double elapsed = MPI_Wtime() - t0;

  double serial_max = 0.0;
  double *serial = serial_run(&s, last, &serial_max);
  if (!serial) {
    fprintf(stderr, "diffusion: no memory for the serial check\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  compare cmp = {&s, serial, 0.0};
  CHECK_BLK(blk_master_foreach(m, compare_block, &cmp));
  CHECK_BLK(blk_master_exchange(m));
  double max_error = blk_master_result_f64(m, 0);
  free(serial);

  /* A restarted run must match bit for bit (the uninterrupted one does). */
  double tolerance = restart ? 0.0 : 1e-12;
  int ok = ex_ooc_agree(m, &ooc,
                        max_error <= tolerance &&
                            (last == first || fabs(blk_max - serial_max) <= tolerance));
  if (rank == 0) {
    printf("diffusion: %dD grid", s.dim);
    for (int i = 0; i < s.dim; i++) printf("%s%lld", i ? "x" : " ", (long long)s.n[i]);
    printf(
        ", %d blocks on %d ranks x %d threads, %s, %d steps: max |blk - serial| = %.3g, "
        "global max %.6f (serial %.6f), %.3f s: %s\n",
        nblocks, size, threads, ex_ooc_mode(&ooc).s, last, max_error, blk_max, serial_max, elapsed,
        ok ? "PASS" : "FAIL");
    if (restart) printf("diffusion: restarted from %s at step %d\n", restart, first);
    if (checkpoint) printf("diffusion: wrote %s after step %d\n", checkpoint, last);
  }
  ex_ooc_report(m, &ooc, "diffusion");
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  MPI_Finalize();
  return ok ? 0 : 1;
}
