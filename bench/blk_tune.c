/*
 * blk_tune: measures every all-reduce algorithm of blk_arrays on this
 * machine and writes the tuning file that BLK_ARRAYS_AUTO then follows
 * (blk_master_config.tuning or $BLK_TUNING; blk/master.h).
 *
 *   mpiexec -n R blk-tune [--blocks-per-rank 1,4] [--k 2] [--sizes 1K:16M:4] [--no-model]
 *                         [--reps N] [--passes P] [--output FILE] [--evaluate]
 *                         [--evaluate-with FILE] [--held-out FILE]
 *
 * For each blocks-per-rank count and array size (one block's array of
 * floats), each algorithm (TREE, SPLIT, BUTTERFLY, RING, SEGMENTED_RING,
 * PIPELINED_TREE)
 * runs a warm-up and then N timed repetitions, each alone between barriers
 * (bench_barrier: waiting ranks yield their core); a repetition's time is
 * its slowest rank's (what the job waits for), the figure the median of
 * those. This is done in P passes over the algorithms (--passes, default
 * 2), the least figure kept. Every result is checked (integer-valued
 * floats, so the sums are exact); a wrong one stops the run. Rank 0 writes
 * one line per measurement, "ranks blocks k bytes algorithm microseconds",
 * after the "blk-tuning 1" header, and prints a table with the fastest
 * algorithm of each size. Besides the sizes of the grid, it measures those
 * just below and just above where an algorithm's messages cross the MPI's
 * eager limit, which it finds first (eager_step.h): each algorithm's time
 * steps there, and the file must not interpolate across the step. Run it
 * with the rank count and the threads of the jobs it is for: the file only
 * serves that rank count.
 *
 * It also fits t = alpha + beta * bytes to each algorithm's times (least
 * squares, weighted by 1/t^2 so that small and large sizes count alike) and
 * prints the constants: how far a straight-line cost model is from the
 * measurements (AUTO itself interpolates between the measured sizes).
 *
 * Then it fits the cost model of a program's own reductions
 * (blk_cost_model, which blk_partners_predict and blk_partners_choose take):
 * it times blk_reduce with a merge callback (add what comes in, send the
 * array on) and a swap callback (hand piece j of the array to out-partner
 * j, as a redistribution does) over the built-in patterns, k = 2, 4, 8 in
 * both orders, at every size and blocks-per-rank count above; predicts each
 * run's time with one constant at a time set to 1 (the model is linear in
 * its constants), and fits the five constants to the times by
 * non-negative least squares weighted by 1/t^2 (tune_fit.h). It prints them
 * as a blk_cost_model initializer, with how far the fitted and the built-in
 * constants are from the times, and writes them into the file as its
 * "cost-model" line, which AUTO follows at rank counts the file has no
 * measurement of (base/tuning.h).
 * --no-model skips this part; --constants A,B,C,L,G skips the fit and takes
 * those constants (seconds) instead, e.g. to score constants fitted at one
 * rank count on another with --evaluate.
 *
 * --evaluate then times every algorithm at sizes held out of the file (the
 * geometric midpoints of the grid's sizes) and scores three ways of
 * choosing against the fastest there: blk's built-in rules, the file just
 * written (read by a master, as a program would), and the fitted lines;
 * it prints chosen time / fastest time for each size, and the mean and
 * worst of each way (--evaluate-with FILE: that file instead of the one
 * just written, e.g. one written at another rank count, whose cost-model
 * line then chooses; --held-out FILE: the held-out times too, in the
 * tuning file's format, so that other ways of choosing can be scored
 * against the same two runs). For the cost model it does the same with k and the
 * order: at the held-out sizes it times every (k, order) of the fit and what
 * blk_partners_choose picks with the fitted and with the built-in
 * constants, and scores both picks against the fastest of those.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep (eager_step.h) */
#include <blk/blk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "eager_step.h"
#include "tune_fit.h"

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* t[r]: this rank's seconds of repetition r. The median over repetitions
 * of the slowest rank's time, in microseconds: one repetition that met a
 * scheduler slice (3 and 4 ranks on 2 cores) moves a mean, not this. */
static double slowest_median(double *t, int reps) {
  MPI_Allreduce(MPI_IN_PLACE, t, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  qsort(t, (size_t)reps, sizeof *t, by_value);
  double mid = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
  return mid * 1e6;
}

#define MAX_SIZES 32                 /* given by --sizes */
#define MAX_MEASURED (MAX_SIZES + 6) /* and around the eager step */
#define MAX_BPR 8
#define NALGS 6

static const char *const alg_names[NALGS] = {"TREE", "SPLIT",          "BUTTERFLY",
                                             "RING", "SEGMENTED_RING", "PIPELINED_TREE"};
static const blk_arrays_algorithm algs[NALGS] = {
    BLK_ARRAYS_TREE, BLK_ARRAYS_SPLIT,          BLK_ARRAYS_BUTTERFLY,
    BLK_ARRAYS_RING, BLK_ARRAYS_SEGMENTED_RING, BLK_ARRAYS_PIPELINED_TREE};

static int rank_ = 0;

#if defined(__GNUC__)
static void stop(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#endif
static void stop(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bench_vstop("blk-tune", rank_, fmt, ap);
  va_end(ap);
  exit(1);
}

typedef struct block {
  int gid;
  size_t count;
  float *data;
} block;

static float value(int g, size_t i) {
  return (float)((g * 7 + (int)(i % 1009) * 3) % 23 - 11);
}

static void *array_of(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  return ((block *)data)->data;
}

/* Fills every block's array with its start values (outside the timer). */
static int fill(void *data, blk_proxy *p, void *user) {
  (void)p;
  (void)user;
  block *b = data;
  for (size_t i = 0; i < b->count; i++) b->data[i] = value(b->gid, i);
  return 0;
}

typedef struct check_ctx {
  int n;
  int bad_gid; /* a block whose result was wrong, or -1 */
  size_t bad_at;
} check_ctx;

static int check(void *data, blk_proxy *p, void *user) {
  (void)p;
  check_ctx *c = user;
  block *b = data;
  for (size_t i = 0; i < b->count; i++) {
    float want = 0;
    for (int g = 0; g < c->n; g++) want += value(g, i);
    if (b->data[i] != want) {
      c->bad_gid = b->gid;
      c->bad_at = i;
      return 0;
    }
  }
  return 0;
}

static void parse_sizes(const char *arg, size_t *sizes, int *n) {
  char *end = NULL;
  double lo = strtod(arg, &end), hi = lo, factor = 0;
  double mult = 1;
  *n = 0;
  if (*end == 'K' || *end == 'k') mult = 1024, end++;
  if (*end == 'M' || *end == 'm') mult = 1048576, end++;
  lo *= mult;
  if (*end == ':') {
    hi = strtod(end + 1, &end);
    mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024, end++;
    if (*end == 'M' || *end == 'm') mult = 1048576, end++;
    hi *= mult;
    if (*end != ':') stop("--sizes %s: expected LO:HI:FACTOR", arg);
    factor = strtod(end + 1, &end);
    if (factor <= 1) stop("--sizes %s: the factor must be above 1", arg);
  }
  if (*end || lo < 4) stop("--sizes %s: sizes are bytes (K, M), at least 4", arg);
  for (double s = lo; s <= hi * 1.0001 && *n < MAX_SIZES; s = factor ? s * factor : hi * 2)
    sizes[(*n)++] = (size_t)s;
}

static void parse_list(const char *arg, int *v, int *n, int max) {
  *n = 0;
  for (const char *at = arg; *at && *n < max;) {
    char *end = NULL;
    long x = strtol(at, &end, 10);
    if (end == at || x < 1 || x > 64)
      stop("--blocks-per-rank %s: counts 1..64, comma-separated", arg);
    v[(*n)++] = (int)x;
    at = *end == ',' ? end + 1 : end;
  }
}

static int by_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

/* The sizes to measure for n blocks: the grid, and for each kind of message
 * an algorithm sends, the array sizes at which that message lies just below
 * and just above the eager step (step.lo and step.hi bytes of an MPI
 * message; 0: none): whole arrays (TREE, BUTTERFLY, PIPELINED_TREE up to
 * its segment), a k-th of one (SPLIT's first pieces) and an n-th (the
 * rings' pieces). A blk message is its piece and a header of HEADER_BYTES;
 * below is a piece of lo - HEADER_BYTES - 8, above one of hi - HEADER_BYTES
 * + 8 (the 8: pieces of an array that does not divide evenly differ by an
 * element). Interpolating across a step blends it into a slope (RING's time
 * at 2 ranks goes from 3.1 to 8.3 us between 16 and 19.5 KiB, performance.md
 * 15.2); with a point on each side only sizes within about 1% of it are
 * guessed. Sizes beyond the grid's ends are left out; ascending; returns
 * how many. */
#define HEADER_BYTES 32 /* sizeof(blk__msg), src/runtime/comm.h */
static int measured_sizes(const size_t *grid, int ngrid, eager_bracket step, int k, int n,
                          size_t *out) {
  int m = 0;
  for (int i = 0; i < ngrid; i++) out[m++] = grid[i];
  const int parts[3] = {1, k, n};
  for (int p = 0; p < 3 && step.lo > HEADER_BYTES + 8; p++)
    for (int side = 0; side < 2; side++) {
      size_t piece = side ? step.hi - HEADER_BYTES + 8 : step.lo - HEADER_BYTES - 8;
      size_t bytes = piece * (size_t)parts[p];
      bytes -= bytes % sizeof(float);
      int known = bytes <= grid[0] || bytes >= grid[ngrid - 1];
      for (int i = 0; i < m && !known; i++) known = out[i] == bytes;
      if (!known) out[m++] = bytes;
    }
  qsort(out, (size_t)m, sizeof *out, by_size);
  return m;
}

/* Least squares of t = a + b x weighted by 1/t^2. */
static void fit(const double *x, const double *t, int n, double *a, double *b) {
  double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (int i = 0; i < n; i++) {
    double w = 1 / (t[i] * t[i]);
    sw += w, sx += w * x[i], st += w * t[i], sxx += w * x[i] * x[i], sxt += w * x[i] * t[i];
  }
  double det = sw * sxx - sx * sx;
  *b = det != 0 ? (sw * sxt - sx * st) / det : 0;
  *a = (st - *b * sx) / sw;
}

/* One blocks-per-rank count's master, assigner and blocks (arrays of up to
 * most floats). */
typedef struct setup {
  blk_master *m;
  blk_assigner *a;
  block *blocks;
  int local, n;
} setup;

static setup make_setup(int size, int bpr, size_t most, const char *tuning) {
  setup s = {NULL, NULL, NULL, 0, bpr * size};
  if (blk_assigner_create_contiguous(&s.a, size, s.n)) stop("assigner: %s", blk_last_error());
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = 1;
  mc.tuning = tuning;
  if (blk_master_create(&s.m, MPI_COMM_WORLD, &mc)) stop("master: %s", blk_last_error());
  int gids[MAX_BPR * 8];
  s.local = blk_assigner_local_gids(s.a, rank_, gids, MAX_BPR * 8);
  s.blocks = calloc((size_t)(s.local ? s.local : 1), sizeof *s.blocks);
  if (!s.blocks) stop("no memory");
  for (int i = 0; i < s.local; i++) {
    s.blocks[i].gid = gids[i];
    s.blocks[i].data = malloc((most ? most : 1) * sizeof(float));
    if (!s.blocks[i].data || blk_master_add(s.m, gids[i], &s.blocks[i], NULL, 0))
      stop("no memory for blocks of %zu floats", most);
  }
  return s;
}

static void free_setup(setup *s) {
  blk_master_destroy(s->m);
  blk_assigner_destroy(s->a);
  for (int i = 0; i < s->local; i++) free(s->blocks[i].data);
  free(s->blocks);
}

/* The median over repetitions of the slowest rank's microseconds of alg on
 * arrays of `bytes`, after a warm-up; the result is checked. */
static double measure(setup *s, int k, int ai, size_t bytes, int reps_opt) {
  size_t count = bytes / sizeof(float);
  for (int i = 0; i < s->local; i++) s->blocks[i].count = count;
  int reps = reps_opt ? reps_opt : (int)fmin(200, fmax(5, 2e8 / ((double)bytes * s->n)));
  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = array_of;
  spec.count = count;
  spec.k = k;
  spec.algorithm = algs[ai];
  double *t = malloc((size_t)reps * sizeof *t);
  if (!t) stop("no memory for %d times", reps);
  for (int r = -1; r < reps; r++) { /* r = -1: the warm-up */
    if (blk_master_foreach(s->m, fill, NULL)) stop("fill: %s", blk_last_error());
    bench_barrier();
    double t0 = MPI_Wtime();
    if (blk_arrays_all_reduce(s->m, s->a, &spec))
      stop("%s at %zu bytes: %s", alg_names[ai], bytes, blk_last_error());
    if (r >= 0) t[r] = MPI_Wtime() - t0;
  }
  check_ctx c = {s->n, -1, 0};
  if (blk_master_foreach(s->m, check, &c)) stop("check: %s", blk_last_error());
  if (c.bad_gid >= 0)
    stop("WRONG RESULT: %s at %zu bytes: gid %d element %zu", alg_names[ai], bytes, c.bad_gid,
         c.bad_at);
  double usec = slowest_median(t, reps);
  free(t);
  return usec;
}

/* t[ai]: every algorithm measured once in each of `passes` passes over the
 * algorithms, the least of its figures kept. A change of the machine's
 * speed (docs/performance.md 8) that meets one algorithm's repetitions in
 * one pass seldom meets it in the next. */
static void measure_all(setup *s, int k, size_t bytes, int reps_opt, int passes, double t[NALGS]) {
  for (int pass = 0; pass < passes; pass++)
    for (int ai = 0; ai < NALGS; ai++) {
      double usec = measure(s, k, ai, bytes, reps_opt);
      t[ai] = pass ? fmin(t[ai], usec) : usec;
    }
}

static int index_of(blk_arrays_algorithm alg) {
  for (int ai = 0; ai < NALGS; ai++)
    if (algs[ai] == alg) return ai;
  stop("AUTO chose algorithm %d, which blk-tune does not time", (int)alg);
}

/* What each way of choosing costs on sizes held out of the measurement:
 * chosen time / best time, mean and worst, over every held-out size. */
typedef struct quality {
  double sum, worst;
  int n;
} quality;

static void score(quality *q, double chosen, double best) {
  double r = chosen / best;
  q->sum += r;
  q->worst = fmax(q->worst, r);
  q->n++;
}

/* ---- the cost model of a program's own reductions --------------------------- */

#define MODEL_NK 3
#define NFEAT 5
static const int model_ks[MODEL_NK] = {2, 4, 8};
static const char *const feat_names[NFEAT] = {"alpha", "beta", "callback", "local", "gamma"};

/* What a program's callback does: a merge (split 0) adds what comes in and
 * sends its whole array on; a swap (split 1) hands piece j of count / k
 * floats to out-partner j (to itself too) and lays the pieces that come in
 * side by side, the rest of the array staying where it is, so each round
 * moves (k - 1) / k of the data (blk_partners_predict's split_swap). */
typedef struct user_red {
  const blk_partners *p;
  int split;
} user_red;

static int user_round(void *data, blk_proxy *px, void *user) {
  const user_red *u = user;
  block *b = data;
  int r = blk_proxy_round(px), nin = blk_proxy_in_count(px), nout = blk_proxy_out_count(px);
  if (u->split && nin > 0) {
    size_t q = b->count / (size_t)nin;
    for (int i = 0; i < nin; i++)
      memcpy(b->data + (size_t)i * q, blk_proxy_dequeue_view(px, i, q * sizeof(float)),
             q * sizeof(float));
  } else
    for (int i = 0; i < nin; i++) {
      if (blk_proxy_in_gid(px, i) == b->gid) continue;
      const unsigned char *in = blk_proxy_dequeue_view(px, i, b->count * sizeof(float));
      for (size_t j = 0; j < b->count; j++) {
        float v;
        memcpy(&v, in + j * sizeof v, sizeof v);
        b->data[j] += v;
      }
    }
  if (r == blk_partners_rounds(u->p)) return 0;
  size_t q = u->split ? b->count / (size_t)nout : b->count;
  for (int i = 0; i < nout; i++) {
    if (!u->split && blk_proxy_out_gid(px, i) == b->gid) continue;
    int rc = blk_proxy_enqueue(px, i, b->data + (u->split ? (size_t)i * q : 0), q * sizeof(float));
    if (rc) return rc;
  }
  return 0;
}

/* Adds the block's floats to *(double *)user: a swap keeps the total. */
static int add_up(void *data, blk_proxy *px, void *user) {
  (void)px;
  block *b = data;
  double *sum = user;
  for (size_t i = 0; i < b->count; i++) *sum += b->data[i];
  return 0;
}

static double total_of(setup *s) {
  double mine = 0, all = 0;
  if (blk_master_foreach(s->m, add_up, &mine)) stop("sum: %s", blk_last_error());
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

/* The median over repetitions of the slowest rank's microseconds of
 * blk_reduce over p with user_round on arrays of `bytes`, after a warm-up;
 * the result is checked (a merge: gid 0 holds the sum; a swap: the total
 * is kept). */
static double measure_user(setup *s, const blk_partners *p, int split, size_t bytes, int reps_opt) {
  size_t count = bytes / sizeof(float);
  for (int i = 0; i < s->local; i++) s->blocks[i].count = count;
  int reps = reps_opt ? reps_opt : (int)fmin(200, fmax(5, 2e8 / ((double)bytes * s->n)));
  user_red u = {p, split};
  double before = 0, *t = malloc((size_t)reps * sizeof *t);
  if (!t) stop("no memory for %d times", reps);
  for (int r = -1; r < reps; r++) { /* r = -1: the warm-up */
    if (blk_master_foreach(s->m, fill, NULL)) stop("fill: %s", blk_last_error());
    if (r == reps - 1 && split) before = total_of(s);
    bench_barrier();
    double t0 = MPI_Wtime();
    if (blk_reduce(s->m, s->a, p, user_round, &u))
      stop("%s at %zu bytes: %s", split ? "swap" : "merge", bytes, blk_last_error());
    if (r >= 0) t[r] = MPI_Wtime() - t0;
  }
  if (split) {
    double after = total_of(s);
    if (after != before)
      stop("WRONG RESULT: swap at %zu bytes: total %g, was %g", bytes, after, before);
  } else {
    check_ctx c = {s->n, -1, 0};
    for (int i = 0; i < s->local; i++)
      if (s->blocks[i].gid == 0) check(&s->blocks[i], NULL, &c);
    int bad = c.bad_gid >= 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) stop("WRONG RESULT: merge at %zu bytes: gid 0's sum is wrong", bytes);
  }
  double usec = slowest_median(t, reps);
  free(t);
  return usec;
}

/* The model's parts of a run: its prediction with one constant at a time
 * set to 1 (so time = features . constants). */
static void features(const blk_partners *p, const blk_assigner *a, size_t bytes, int split,
                     double *f) {
  for (int j = 0; j < NFEAT; j++) {
    blk_cost_model unit = {BLK_COST_MODEL_VERSION, 0, 0, 0, 0, 0, 1};
    double *c[NFEAT] = {&unit.alpha, &unit.beta, &unit.callback, &unit.local, &unit.gamma};
    *c[j] = 1;
    f[j] = blk_partners_predict(p, a, bytes, &unit, split);
    if (f[j] < 0) stop("predict: %s", blk_last_error());
  }
}

static double dot(const double *f, const double *c) {
  double s = 0;
  for (int j = 0; j < NFEAT; j++) s += f[j] * c[j];
  return s;
}

static blk_partners *make_user_pattern(int n, int split, int k, int contiguous) {
  blk_partners *p = NULL;
  if (blk_partners_create(&p, split ? BLK_SWAP : BLK_MERGE, 1, &n, k, contiguous))
    stop("partners: %s", blk_last_error());
  return p;
}

/* Fits blk_cost_model to merges and swaps timed over the grid; writes the
 * constants to c (alpha, beta, callback, local, gamma, in seconds). */
static void fit_model(int size, const int *bprs, int nbpr, const size_t *sizes, int nsizes,
                      int reps_opt, FILE *out, double *c) {
  size_t most_rows = (size_t)(nbpr * nsizes * 2 * MODEL_NK * 2);
  int rows = 0;
  double *X = calloc(most_rows * NFEAT, sizeof *X), *y = calloc(most_rows, sizeof *y),
         *w = calloc(most_rows, sizeof *w);
  if (!X || !y || !w) stop("no memory");
  for (int bi = 0; bi < nbpr; bi++) {
    setup s = make_setup(size, bprs[bi], sizes[nsizes - 1] / sizeof(float), NULL);
    for (int split = 0; split < 2; split++)
      for (int ki = 0; ki < MODEL_NK; ki++)
        for (int contiguous = 1; contiguous >= 0; contiguous--) {
          if (model_ks[ki] > s.n && ki > 0) continue;
          blk_partners *p = make_user_pattern(s.n, split, model_ks[ki], contiguous);
          for (int si = 0; si < nsizes; si++) {
            double t = measure_user(&s, p, split, sizes[si], reps_opt) * 1e-6;
            features(p, s.a, sizes[si], split, &X[(size_t)rows * NFEAT]);
            y[rows] = t;
            w[rows] = 1 / (t * t);
            rows++;
          }
          blk_partners_destroy(p);
        }
    free_setup(&s);
  }
  tune_nnls(X, y, w, rows, NFEAT, c);
  blk_cost_model d = BLK_COST_MODEL_INIT;
  double def[NFEAT] = {d.alpha, d.beta, d.callback, d.local, d.gamma};
  double err_fit = 0, err_def = 0, worst_fit = 0, worst_def = 0;
  for (int i = 0; i < rows; i++) {
    double ef = fabs(dot(&X[(size_t)i * NFEAT], c) - y[i]) / y[i],
           ed = fabs(dot(&X[(size_t)i * NFEAT], def) - y[i]) / y[i];
    err_fit += ef, err_def += ed;
    worst_fit = fmax(worst_fit, ef), worst_def = fmax(worst_def, ed);
  }
  if (rank_ == 0) {
    printf(
        "\nblk_cost_model fitted to %d merges and swaps (blk_reduce, k = 2, 4, 8, both orders;"
        " non-negative least squares weighted by 1/t^2):\n\n| constant | fitted | built-in "
        "|\n|---|---:|---:|\n",
        rows);
    for (int j = 0; j < NFEAT; j++) printf("| %s | %.3g | %.3g |\n", feat_names[j], c[j], def[j]);
    printf(
        "| error of the times, mean / worst | %.0f%% / %.0f%% | %.0f%% / %.0f%% |\n\n"
        "    blk_cost_model model = {BLK_COST_MODEL_VERSION, %.4g, %.4g, %.4g, %.4g, %.4g, 1};\n",
        100 * err_fit / rows, 100 * worst_fit, 100 * err_def / rows, 100 * worst_def, c[0], c[1],
        c[2], c[3], c[4]);
  }
  if (out)
    fprintf(out,
            "# blk_cost_model fitted (seconds; threads 1): what AUTO follows at rank counts with "
            "no lines here\n"
            "cost-model %.6g %.6g %.6g %.6g %.6g\n",
            c[0], c[1], c[2], c[3], c[4]);
  free(X);
  free(y);
  free(w);
}

/* At the held-out sizes: what blk_partners_choose picks with the fitted
 * and the built-in constants, timed against every (k, order) of the fit
 * and the picks themselves; chosen / fastest. */
static void evaluate_model(int size, const int *bprs, int nbpr, const size_t *sizes, int nsizes,
                           int reps_opt, const double *c, const char *label) {
  blk_cost_model fitted = {BLK_COST_MODEL_VERSION, c[0], c[1], c[2], c[3], c[4], 1};
  quality q[2] = {{0, 0, 0}, {0, 0, 0}};
  if (rank_ == 0)
    printf(
        "\nheld-out sizes, k and the order (chosen / fastest of those timed):\n\n"
        "| blocks a rank | pattern | bytes | fastest | %s constants | built-in constants |\n"
        "|---:|---|---:|---|---|---|\n",
        label);
  for (int bi = 0; bi < nbpr; bi++) {
    setup s = make_setup(size, bprs[bi], sizes[nsizes - 1] / sizeof(float), NULL);
    for (int split = 0; split < 2; split++)
      for (int si = 0; si + 1 < nsizes; si++) {
        size_t bytes = (size_t)sqrt((double)sizes[si] * (double)sizes[si + 1]);
        bytes -= bytes % sizeof(float);
        int ks[MODEL_NK * 2 + 2], cs[MODEL_NK * 2 + 2], nc = 0, pick[2];
        for (int ki = 0; ki < MODEL_NK; ki++)
          for (int contiguous = 1; contiguous >= 0; contiguous--)
            if (model_ks[ki] <= s.n || ki == 0) ks[nc] = model_ks[ki], cs[nc++] = contiguous;
        for (int h = 0; h < 2; h++) {
          int k = 2, contiguous = 1;
          if (blk_partners_choose(split ? BLK_SWAP : BLK_MERGE, s.a, bytes, h ? NULL : &fitted,
                                  split, &k, &contiguous))
            stop("choose: %s", blk_last_error());
          pick[h] = -1;
          for (int i = 0; i < nc; i++)
            if (ks[i] == k && cs[i] == contiguous) pick[h] = i;
          if (pick[h] < 0) ks[nc] = k, cs[nc] = contiguous, pick[h] = nc++;
        }
        double t[MODEL_NK * 2 + 2];
        int best = 0;
        for (int i = 0; i < nc; i++) {
          blk_partners *p = make_user_pattern(s.n, split, ks[i], cs[i]);
          t[i] = measure_user(&s, p, split, bytes, reps_opt);
          blk_partners_destroy(p);
          if (t[i] < t[best]) best = i;
        }
        for (int h = 0; h < 2; h++) score(&q[h], t[pick[h]], t[best]);
        if (rank_ == 0)
          printf("| %d | %s | %zu | k %d %s | k %d %s %.2f | k %d %s %.2f |\n", bprs[bi],
                 split ? "swap" : "merge", bytes, ks[best], cs[best] ? "contiguous" : "halving",
                 ks[pick[0]], cs[pick[0]] ? "contiguous" : "halving", t[pick[0]] / t[best],
                 ks[pick[1]], cs[pick[1]] ? "contiguous" : "halving", t[pick[1]] / t[best]);
      }
    free_setup(&s);
  }
  if (rank_ == 0)
    printf(
        "\n| constants | mean chosen/fastest | worst |\n|---|---:|---:|\n"
        "| %s | %.3f | %.2f |\n| built-in | %.3f | %.2f |\n",
        label, q[0].sum / q[0].n, q[0].worst, q[1].sum / q[1].n, q[1].worst);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t sizes[MAX_SIZES];
  int nsizes = 0, bprs[MAX_BPR] = {1}, nbpr = 1, k = 2, reps_opt = 0, passes = 2, evaluate = 0,
      cost_model = 1, given = 0;
  double constants[NFEAT] = {0};
  const char *output = "blk-tuning.txt", *evaluate_with = NULL, *held_out = NULL;
  parse_sizes("1K:16M:4", sizes, &nsizes);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--sizes") && v)
      parse_sizes(v, sizes, &nsizes), i++;
    else if (!strcmp(a, "--blocks-per-rank") && v)
      parse_list(v, bprs, &nbpr, MAX_BPR), i++;
    else if (!strcmp(a, "--k") && v)
      k = atoi(v), i++;
    else if (!strcmp(a, "--reps") && v)
      reps_opt = atoi(v), i++;
    else if (!strcmp(a, "--passes") && v)
      passes = atoi(v), i++;
    else if (!strcmp(a, "--output") && v)
      output = v, i++;
    else if (!strcmp(a, "--evaluate"))
      evaluate = 1;
    else if (!strcmp(a, "--evaluate-with") && v)
      evaluate = 1, evaluate_with = v, i++;
    else if (!strcmp(a, "--held-out") && v)
      evaluate = 1, held_out = v, i++;
    else if (!strcmp(a, "--no-model"))
      cost_model = 0;
    else if (!strcmp(a, "--constants") && v) {
      const char *at = v;
      for (int j = 0; j < NFEAT; j++) {
        char *end = NULL;
        constants[j] = strtod(at, &end);
        if (end == at || !(constants[j] >= 0) || (j + 1 < NFEAT ? *end != ',' : *end != 0))
          stop("--constants %s: five numbers >= 0, comma-separated", v);
        at = end + 1;
      }
      given = 1, i++;
    } else
      stop("unknown option %s (see the top of bench/blk_tune.c)", a);
  }
  if (k < 2) stop("--k %d: at least 2", k);
  if (passes < 1) stop("--passes %d: at least 1", passes);
  if (reps_opt < 0) stop("--reps %d: at least 1 (0: by size)", reps_opt);
  FILE *out = NULL;
  if (rank_ == 0) {
    out = fopen(output, "w");
    if (!out) stop("cannot write %s", output);
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    fprintf(out,
            "# blk-tune, %s: %d ranks, k = %d; microseconds of blk_arrays_all_reduce (float "
            "sum), median over repetitions of the slowest rank's time\n# ranks blocks k bytes "
            "algorithm microseconds\n"
            "blk-tuning 1\n",
            when, size, k);
    printf("blk-tune: %d ranks, k = %d, writing %s\n", size, k, output);
  }
  eager_bracket step = eager_step();
  if (rank_ == 0) {
    if (step.lo)
      printf(
          "MPI's eager step: messages of %zu bytes go at once, of %zu after a handshake; "
          "also measured: the sizes whose messages lie on either side of it\n",
          step.lo, step.hi);
    else
      printf("MPI's eager step: none found%s\n", size < 2 ? " (one rank)" : "");
    /* For blk: PIPELINED_TREE's default segment sits just below it
     * (blk/arrays.h, BLK_ARRAYS_PIPELINE_EAGER_SEGMENTS). */
    if (step.lo)
      fprintf(out,
              "# MPI's eager step: messages of lo bytes go at once, of hi after a "
              "handshake\neager-step %zu %zu\n",
              step.lo, step.hi);
    else
      fprintf(out, "# MPI's eager step: none found\n");
    fflush(out);
  }
  /* The masters timed read the file as written so far, so PIPELINED_TREE
   * is timed with the segments the finished file will give it. */
  const char *timed_with = step.lo ? output : NULL;
  size_t most = sizes[nsizes - 1] / sizeof(float);
  double alpha[MAX_BPR][NALGS], beta[MAX_BPR][NALGS];
  for (int bi = 0; bi < nbpr; bi++) {
    setup s = make_setup(size, bprs[bi], most, timed_with);
    size_t msizes[MAX_MEASURED];
    int nm = measured_sizes(sizes, nsizes, step, k, s.n, msizes);
    double t[NALGS][MAX_MEASURED];
    if (rank_ == 0)
      printf(
          "\n%d blocks a rank (%d in all)\n\n| bytes | TREE | SPLIT | BUTTERFLY | RING | "
          "SEGMENTED_RING | PIPELINED_TREE | fastest |\n|---:|---:|---:|---:|---:|---:|---:|---|\n",
          bprs[bi], s.n);
    for (int si = 0; si < nm; si++) {
      double at[NALGS];
      measure_all(&s, k, msizes[si], reps_opt, passes, at);
      for (int ai = 0; ai < NALGS; ai++) {
        t[ai][si] = at[ai];
        if (out)
          fprintf(out, "%d %d %d %zu %s %.3f\n", size, s.n, k, msizes[si], alg_names[ai],
                  t[ai][si]);
      }
      if (rank_ == 0) {
        int best = 0;
        printf("| %zu |", msizes[si]);
        for (int ai = 0; ai < NALGS; ai++) {
          printf(" %.1f |", t[ai][si]);
          if (t[ai][si] < t[best][si]) best = ai;
        }
        printf(" %s |\n", alg_names[best]);
      }
    }
    if (rank_ == 0)
      printf(
          "\nfitted t = alpha + beta * bytes (weighted least squares):\n\n"
          "| algorithm | alpha (usec) | beta (usec/MiB) | worst error of the fit |\n"
          "|---|---:|---:|---:|\n");
    for (int ai = 0; ai < NALGS; ai++) {
      double x[MAX_MEASURED], worst = 0;
      for (int si = 0; si < nm; si++) x[si] = (double)msizes[si];
      fit(x, t[ai], nm, &alpha[bi][ai], &beta[bi][ai]);
      for (int si = 0; si < nm; si++)
        worst = fmax(worst, fabs(alpha[bi][ai] + beta[bi][ai] * x[si] - t[ai][si]) / t[ai][si]);
      if (rank_ == 0)
        printf("| %s | %.2f | %.1f | %.0f%% |\n", alg_names[ai], alpha[bi][ai],
               beta[bi][ai] * 1048576.0, 100 * worst);
    }
    free_setup(&s);
  }
  if (cost_model && !given) fit_model(size, bprs, nbpr, sizes, nsizes, reps_opt, out, constants);
  if (out && fclose(out) != 0) stop("writing %s failed", output);
  out = NULL;
  MPI_Barrier(MPI_COMM_WORLD);

  /* Held out: the sizes halfway (geometrically) between those of the grid,
   * each algorithm timed there; what the built-in rules, the file just
   * written (a master reading it, as a program would) and the fitted lines
   * choose, against the fastest. */
  if (evaluate && nsizes > 1) {
    quality q[3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    static const char *const how[3] = {"built-in rules", "tuning file", "fitted alpha-beta"};
    FILE *hout = NULL;
    if (rank_ == 0 && held_out) {
      if (!(hout = fopen(held_out, "w"))) stop("cannot write %s", held_out);
      fprintf(hout, "# blk-tune --held-out: %d ranks, k = %d\nblk-tuning 1\n", size, k);
    }
    if (rank_ == 0)
      printf(
          "\nheld-out sizes (chosen / fastest):\n\n| blocks a rank | bytes | fastest | "
          "built-in | file | fitted |\n|---:|---:|---|---|---|---|\n");
    for (int bi = 0; bi < nbpr; bi++) {
      setup s = make_setup(size, bprs[bi], most, evaluate_with ? evaluate_with : output);
      for (int si = 0; si + 1 < nsizes; si++) {
        size_t bytes = (size_t)sqrt((double)sizes[si] * (double)sizes[si + 1]);
        bytes -= bytes % sizeof(float);
        double t[NALGS];
        int best = 0, model = 0;
        measure_all(&s, k, bytes, reps_opt, passes, t);
        for (int ai = 0; ai < NALGS; ai++) {
          if (hout)
            fprintf(hout, "%d %d %d %zu %s %.3f\n", size, s.n, k, bytes, alg_names[ai], t[ai]);
          if (t[ai] < t[best]) best = ai;
          double p = alpha[bi][ai] + beta[bi][ai] * (double)bytes;
          if (p < alpha[bi][model] + beta[bi][model] * (double)bytes) model = ai;
        }
        blk_arrays spec = BLK_ARRAYS_INIT;
        spec.count = bytes / sizeof(float);
        spec.k = k;
        int builtin = index_of(blk_arrays_all_reduce_algorithm(NULL, s.a, &spec));
        int table = index_of(blk_arrays_all_reduce_algorithm(s.m, s.a, &spec));
        int chosen[3] = {builtin, table, model};
        for (int w = 0; w < 3; w++) score(&q[w], t[chosen[w]], t[best]);
        if (rank_ == 0)
          printf("| %d | %zu | %s | %s %.2f | %s %.2f | %s %.2f |\n", bprs[bi], bytes,
                 alg_names[best], alg_names[builtin], t[builtin] / t[best], alg_names[table],
                 t[table] / t[best], alg_names[model], t[model] / t[best]);
      }
      free_setup(&s);
    }
    if (hout && fclose(hout) != 0) stop("writing %s failed", held_out);
    if (rank_ == 0) {
      printf("\n| choice | mean chosen/fastest | worst |\n|---|---:|---:|\n");
      for (int w = 0; w < 3; w++)
        printf("| %s | %.3f | %.2f |\n", how[w], q[w].sum / q[w].n, q[w].worst);
    }
    if (cost_model)
      evaluate_model(size, bprs, nbpr, sizes, nsizes, reps_opt, constants,
                     given ? "given" : "fitted");
  }
  MPI_Finalize();
  return 0;
}
