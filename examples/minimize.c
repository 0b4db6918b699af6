/*
 * minimize: parallel minimization in the style of parallel MINUIT, by an
 * all-gather of the gradient and a min-loc all-reduce of the best point.
 *
 * The function of --dim parameters is a shifted quadratic plus quartic with
 * neighbour coupling, f(x) = sum_i w_i d_i^2 + d_i^4 / 4 + d_i d_(i+1) / 2
 * with d = x - c: convex (the quadratic part is diagonally dominant), so its
 * one minimum is f = 0 at x = c. With weights w_i in [1, 10) it is
 * ill-conditioned enough that steepest descent alone needs about twice the
 * iterations of the search below. c and w come from --seed; the search
 * starts at x = 0.
 *
 * Every block holds the current point x and the one before it. An
 * iteration is two collectives (at 4 ranks each one costs a wait, so the
 * work rides on their callbacks rather than on extra foreach passes):
 *  1. blk_all_gather: block g computes the gradient components g, g + n, ...
 *     (n blocks) by central differences in give, and every block gets the
 *     whole gradient in take. Still in take, block g tries trials g, g + n,
 *     ... of --trials: a random search over the plane of the gradient and
 *     the last step, x - a grad + b (x - x_before), with a log-uniform step a
 *     and a uniform momentum b. Picking the best of many (a, b) makes it a
 *     heavy-ball method whose line search is the random search.
 *  2. blk_arrays_all_reduce with a min-loc op (spec.combine) over a record
 *     {value, iteration, trial, x[dim]}: every block ends with the best
 *     point of all, or keeps x when no trial beat it.
 *
 * Deterministic: the op orders records by value, then iteration, then trial
 * (a total order, so any combining order finds the same record), and a
 * trial's random numbers are ex_random's stream iteration * trials + trial:
 * a function of the trial, not of the block that runs it. So the answer is
 * the same bit for bit for any number of blocks, ranks and threads, in core
 * or out, and every rank repeats the minimization serially, with the same
 * functions, to check every block's record against it. It also checks the
 * known minimum: every parameter within 1e-5 of c and f below 1e-9.
 *
 * Out-of-core (--mem-blocks N), save writes the record, the point before it
 * and the evaluation count; the gradient and trial points are scratch.
 *
 *   mpiexec -n 4 ./minimize [--blocks 12] [--k 2] [--threads 2] [--dim 20]
 *                           [--trials 64] [--iters 30] [--seed 1]
 *                           [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * (--halving changes nothing: blk_all_gather and the array collectives
 * choose their own order.) Prints one line with PASS, or FAIL and exit
 * status 1 (and, out-of-core, a line of rank 0's storage figures).
 */
#include <blk/blk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

/* The record of a point, as doubles (iteration and trial are small
 * integers, exact in a double): the array the min-loc all-reduce combines.
 * The start point is iteration 0, trial -1. */
enum { REC_VALUE, REC_ITER, REC_TRIAL, REC_X };

#define DIFF_STEP 1e-5 /* of the central differences */
#define TOL_X 1e-5     /* largest |x_i - c_i| accepted */
#define TOL_VALUE 1e-9 /* largest f accepted (the minimum is 0) */

typedef struct setup {
  int dim, trials, nblocks;
  uint64_t seed;
  double *c, *w; /* where the minimum is; the weights */
  double *start; /* the start's record */
} setup;

static size_t rec_len(const setup *s) {
  return (size_t)REC_X + (size_t)s->dim;
}

static double objective(const setup *s, const double *x) {
  double f = 0.0;
  for (int i = 0; i < s->dim; i++) {
    double d = x[i] - s->c[i], d2 = d * d;
    f += s->w[i] * d2 + 0.25 * d2 * d2;
    if (i + 1 < s->dim) f += 0.5 * d * (x[i + 1] - s->c[i + 1]);
  }
  return f;
}

/* df/dx_j by central differences; x is changed and restored. */
static double partial(const setup *s, double *x, int j) {
  double xj = x[j];
  x[j] = xj + DIFF_STEP;
  double up = objective(s, x);
  x[j] = xj - DIFF_STEP;
  double down = objective(s, x);
  x[j] = xj;
  return (up - down) / (2.0 * DIFF_STEP);
}

/* Whether record r comes before record q: lower value, then earlier
 * iteration (the current point wins a tie), then lower trial. */
static int better(const double *r, const double *q) {
  if (r[REC_VALUE] != q[REC_VALUE]) return r[REC_VALUE] < q[REC_VALUE];
  if (r[REC_ITER] != q[REC_ITER]) return r[REC_ITER] < q[REC_ITER];
  return r[REC_TRIAL] < q[REC_TRIAL];
}

/* Iteration it's trials first, first + step, ... from the point in rec, the
 * one before it and the gradient g: the best of them and rec ends in *best
 * (*best and *trial are scratch records, swapped rather than copied). The
 * blocks run it for their own trials, the serial reference for all of them.
 * Returns the number of evaluations. */
static int64_t try_points(const setup *s, int it, int first, int step, const double *rec,
                          const double *before, const double *g, double **best, double **trial) {
  const double *x = rec + REC_X;
  int64_t evals = 0;
  memcpy(*best, rec, rec_len(s) * sizeof *rec);
  for (int t = first; t < s->trials; t += step) {
    uint64_t stream = (uint64_t)it * (uint64_t)s->trials + (uint64_t)t;
    double a = exp2(-8.0 + 10.0 * ex_unit(ex_random(s->seed, stream, 0)));
    double b = ex_unit(ex_random(s->seed, stream, 1));
    double *y = *trial;
    for (int i = 0; i < s->dim; i++) y[REC_X + i] = x[i] - a * g[i] + b * (x[i] - before[i]);
    y[REC_VALUE] = objective(s, y + REC_X);
    y[REC_ITER] = it;
    y[REC_TRIAL] = t;
    evals++;
    if (better(y, *best)) {
      *trial = *best;
      *best = y;
    }
  }
  return evals;
}

/* ---- the blocks --------------------------------------------------------- */

typedef struct point_block {
  double *rec;          /* rec_len: the current point; after the all-reduce the best so far */
  double *before;       /* dim: the point before it, for the momentum */
  int64_t evals;        /* evaluations of f by this block */
  double *g;            /* scratch: the gradient (in give, this block's components) */
  double *trial, *best; /* scratch records */
} point_block;

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  point_block *b = block;
  if (!b) return;
  free(b->rec);
  free(b->before);
  free(b->g);
  free(b->trial);
  free(b->best);
  free(b);
}

/* A block at the start point. (Out-of-core, blk also calls this to make the
 * block that load fills; it only copies.) */
static int create_block(void **out, int gid, void *user) {
  const setup *s = user;
  size_t n = rec_len(s);
  point_block *b = calloc(1, sizeof *b);
  *out = b;
  if (!b) return BLK_ENOMEM;
  b->rec = malloc(n * sizeof *b->rec);
  b->before = malloc((size_t)s->dim * sizeof *b->before);
  b->g = malloc((size_t)s->dim * sizeof *b->g);
  b->trial = malloc(n * sizeof *b->trial);
  b->best = malloc(n * sizeof *b->best);
  if (!b->rec || !b->before || !b->g || !b->trial || !b->best) {
    destroy_block(b, gid, user);
    *out = NULL;
    return BLK_ENOMEM;
  }
  memcpy(b->rec, s->start, n * sizeof *b->rec);
  memcpy(b->before, s->start + REC_X, (size_t)s->dim * sizeof *b->before);
  return 0;
}

static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  const setup *s = user;
  const point_block *b = block;
  blk_buffer_write(out, b->rec, rec_len(s) * sizeof *b->rec);
  blk_buffer_write(out, b->before, (size_t)s->dim * sizeof *b->before);
  return blk_buffer_write_i64(out, b->evals);
}

static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  const setup *s = user;
  point_block *b = block;
  size_t rec_bytes = rec_len(s) * sizeof *b->rec, before_bytes = (size_t)s->dim * sizeof(double);
  if (blk_buffer_remaining(in) != rec_bytes + before_bytes + sizeof(int64_t)) return BLK_ECORRUPT;
  blk_buffer_read(in, b->rec, rec_bytes);
  blk_buffer_read(in, b->before, before_bytes);
  return blk_buffer_read_i64(in, &b->evals);
}

/* ---- an iteration ------------------------------------------------------- */

typedef struct iteration {
  const setup *s;
  int it;
} iteration;

/* all-gather, give: this block's gradient components at x. */
static int give_gradient(void *block, int gid, const void **data, size_t *size, void *user) {
  const iteration *r = user;
  const setup *s = r->s;
  point_block *b = block;
  size_t m = 0;
  for (int j = gid; j < s->dim; j += s->nblocks) b->g[m++] = partial(s, b->rec + REC_X, j);
  b->evals += 2 * (int64_t)m;
  *data = b->g;
  *size = m * sizeof *b->g;
  return 0;
}

/* all-gather, take: piece h holds components h, h + n, ...; with the whole
 * gradient, try this block's points. Its record becomes the best of them
 * and the current point, and the current point the one before. */
static int take_gradient(void *block, int gid, const void *data, const size_t *offsets, int n,
                         void *user) {
  const iteration *r = user;
  const setup *s = r->s;
  point_block *b = block;
  const unsigned char *bytes = data;
  for (int h = 0; h < n; h++) {
    size_t m = h < s->dim ? (size_t)((s->dim - h + n - 1) / n) : 0;
    if (offsets[h + 1] - offsets[h] != m * sizeof(double)) return BLK_ECORRUPT;
    for (size_t i = 0; i < m; i++)
      memcpy(&b->g[(size_t)h + i * (size_t)n], bytes + offsets[h] + i * sizeof(double),
             sizeof(double));
  }
  b->evals += try_points(s, r->it, gid, s->nblocks, b->rec, b->before, b->g, &b->best, &b->trial);
  memcpy(b->before, b->rec + REC_X, (size_t)s->dim * sizeof *b->before);
  memcpy(b->rec, b->best, rec_len(s) * sizeof *b->rec);
  return 0;
}

/* all-reduce: the block's record. */
static void *record_of(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  return ((point_block *)block)->rec;
}

/* The min-loc op: acc becomes the better of the two records. It compares
 * whole records, so the all-reduce runs an algorithm that hands it whole
 * arrays (see main). */
static void min_loc(void *acc, const void *in, size_t count, void *user) {
  const setup *s = user;
  if (count != rec_len(s)) {
    fprintf(stderr, "minimize: min_loc got %zu of a record's %zu doubles\n", count, rec_len(s));
    abort();
  }
  if (better(in, acc)) memcpy(acc, in, count * sizeof(double));
}

/* ---- the serial reference and the check --------------------------------- */

/* The whole minimization on one rank: the same functions on the same
 * numbers. rec and before end as every block's should. */
static int64_t minimize_serial(const setup *s, int iters, double *rec, double *before) {
  size_t n = rec_len(s);
  double *g = malloc((size_t)s->dim * sizeof *g), *trial = malloc(n * sizeof *trial);
  double *best = malloc(n * sizeof *best);
  if (!g || !trial || !best) ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "serial");
  int64_t evals = 0;
  memcpy(rec, s->start, n * sizeof *rec);
  memcpy(before, s->start + REC_X, (size_t)s->dim * sizeof *before);
  for (int it = 1; it <= iters; it++) {
    for (int j = 0; j < s->dim; j++) g[j] = partial(s, rec + REC_X, j);
    evals += 2 * (int64_t)s->dim + try_points(s, it, 0, 1, rec, before, g, &best, &trial);
    memcpy(before, rec + REC_X, (size_t)s->dim * sizeof *before);
    memcpy(rec, best, n * sizeof *rec);
  }
  free(g);
  free(trial);
  free(best);
  return evals;
}

/* A 64-bit checksum of the parameters' bits, as an int64 to post. */
static int64_t checksum(const setup *s, const double *rec) {
  uint64_t h = 0;
  for (int i = 0; i < s->dim; i++) {
    uint64_t bits;
    memcpy(&bits, &rec[REC_X + i], sizeof bits);
    h = ex_mix64(h ^ bits);
  }
  int64_t v;
  memcpy(&v, &h, sizeof v);
  return v;
}

typedef struct check {
  const setup *s;
  const double *rec, *before; /* the serial result */
} check;

/* foreach: every block compares with the serial result bit for bit and
 * posts what the summary needs; equal minima and maxima of the value and
 * the checksum say every block holds the same point. */
static int check_block(void *block, blk_proxy *p, void *user) {
  const check *c = user;
  const setup *s = c->s;
  const point_block *b = block;
  int64_t differ = memcmp(b->rec, c->rec, rec_len(s) * sizeof *b->rec) != 0 ||
                   memcmp(b->before, c->before, (size_t)s->dim * sizeof *b->before) != 0;
  double err = 0.0;
  for (int i = 0; i < s->dim; i++) err = fmax(err, fabs(b->rec[REC_X + i] - s->c[i]));
  int rc = blk_proxy_all_reduce_i64(p, differ, BLK_OP_SUM);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, b->evals, BLK_OP_SUM);
  if (!rc) rc = blk_proxy_all_reduce_f64(p, b->rec[REC_VALUE], BLK_OP_MIN);
  if (!rc) rc = blk_proxy_all_reduce_f64(p, b->rec[REC_VALUE], BLK_OP_MAX);
  if (!rc) rc = blk_proxy_all_reduce_f64(p, err, BLK_OP_MAX);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, checksum(s, b->rec), BLK_OP_MIN);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, checksum(s, b->rec), BLK_OP_MAX);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, (int64_t)b->rec[REC_ITER], BLK_OP_MIN);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, (int64_t)b->rec[REC_TRIAL], BLK_OP_MIN);
  return rc;
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 12, .k = 2, .contiguous = 1, .threads = 2, .seed = 1};
  long long dim = 20, trials = 64, iters = 30;
  ex_int_option extra[] = {{"--dim", &dim, 1, "parameters of the function"},
                           {"--trials", &trials, 1, "trial points an iteration"},
                           {"--iters", &iters, 1, "iterations"}};
  if (!ex_start(&argc, &argv, &o, "parallel minimization: gradient all-gather, min-loc all-reduce",
                extra, 3))
    return o.status;
  int size = ex_size();

  /* The function, and the start: x = 0 as iteration 0, trial -1. */
  setup s = {(int)dim, (int)trials, o.blocks, o.seed, NULL, NULL, NULL};
  size_t n = rec_len(&s);
  s.c = malloc((size_t)s.dim * sizeof *s.c);
  s.w = malloc((size_t)s.dim * sizeof *s.w);
  s.start = calloc(n, sizeof *s.start);
  if (!s.c || !s.w || !s.start) ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "setup");
  for (int i = 0; i < s.dim; i++) {
    s.c[i] = 4.0 * ex_unit(ex_random(o.seed, 0, 2 * (uint64_t)i)) - 2.0;
    s.w[i] = 1.0 + 9.0 * ex_unit(ex_random(o.seed, 0, 2 * (uint64_t)i + 1));
  }
  s.start[REC_TRIAL] = -1.0;
  s.start[REC_VALUE] = objective(&s, s.start + REC_X);

  blk_assigner *a = NULL;
  blk_master *m = NULL;
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  EX_CHECK(ex_choose_k(&o, BLK_ALLREDUCE, a, n * sizeof(double), 0));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = create_block;
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.user = &s;
  mc.shuffle = sizeof(double);
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(ex_add_blocks(m, a, create_block, &s));

  blk_arrays spec = BLK_ARRAYS_INIT;
  spec.array = record_of;
  spec.count = n;
  spec.type = BLK_DOUBLE;
  spec.k = o.k;
  spec.user = &s;
  spec.combine = min_loc;
  /* min_loc compares whole records: TREE and BUTTERFLY combine whole
   * arrays, SPLIT and the rings piece by piece. AUTO's pick if it is one of
   * the first two (BUTTERFLY with a block a rank), else TREE. */
  blk_arrays_algorithm alg = blk_arrays_all_reduce_algorithm(m, a, &spec);
  spec.algorithm = alg == BLK_ARRAYS_BUTTERFLY ? alg : BLK_ARRAYS_TREE;

  double t0 = MPI_Wtime();
  for (int it = 1; it <= (int)iters; it++) {
    iteration r = {&s, it};
    EX_CHECK(blk_all_gather(m, a, o.k, give_gradient, take_gradient, &r));
    EX_CHECK(blk_arrays_all_reduce(m, a, &spec));
  }
  double elapsed = MPI_Wtime() - t0;

  double *rec = malloc(n * sizeof *rec), *before = malloc((size_t)s.dim * sizeof *before);
  if (!rec || !before) ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "serial");
  int64_t want_evals = minimize_serial(&s, (int)iters, rec, before);
  check c = {&s, rec, before};
  EX_CHECK(blk_master_foreach(m, check_block, &c));
  EX_CHECK(blk_master_exchange(m));
  int64_t differ = blk_master_result_i64(m, 0), evals = blk_master_result_i64(m, 1);
  double vmin = blk_master_result_f64(m, 2), vmax = blk_master_result_f64(m, 3);
  double err = blk_master_result_f64(m, 4);
  int64_t hmin = blk_master_result_i64(m, 5), hmax = blk_master_result_i64(m, 6);
  long long found_it = (long long)blk_master_result_i64(m, 7);
  long long found_trial = (long long)blk_master_result_i64(m, 8);

  int agree = vmin == vmax && hmin == hmax;
  int ok = ex_ooc_agree(
      m, &o.ooc, differ == 0 && agree && evals == want_evals && vmax <= TOL_VALUE && err <= TOL_X);
  uint64_t h;
  memcpy(&h, &hmin, sizeof h);
  ex_summary(m, &o.ooc, ok, "minimize",
             "%d parameters, %d blocks on %d ranks x %d threads, %s, k=%d %s: %lld iterations x "
             "(%d gradient + %d trial points), %lld evaluations (%.0f/s); f = %.17g from "
             "iteration %lld trial %lld, max |x - c| = %.3g, parameters %016llx%s; %lld blocks "
             "differ from serial, %.3f s",
             s.dim, o.blocks, size, o.threads, ex_ooc_mode(&o.ooc).s, o.k,
             spec.algorithm == BLK_ARRAYS_TREE ? "tree" : "butterfly", iters, 2 * s.dim, s.trials,
             (long long)evals, elapsed > 0 ? (double)evals / elapsed : 0.0, vmin, found_it,
             found_trial, err, (unsigned long long)h, agree ? "" : " (blocks disagree)",
             (long long)differ, elapsed);
  free(rec);
  free(before);
  free(s.c);
  free(s.w);
  free(s.start);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  return ex_finish(ok);
}
