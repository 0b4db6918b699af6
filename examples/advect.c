/*
 * advect: particle tracing, where a particle's next block is known only when
 * it gets there. The example of messages to any gid and of asynchronous
 * exchange.
 *
 * A 2D domain [0, 2] x [0, 1] (3D: [0, 2] x [0, 1] x [0, 1]) is cut by the
 * continuous decomposer into --blocks blocks, assigned contiguously. The
 * velocity is steady and analytic: the double gyre (two vortices side by
 * side) plus a weak drift along x, and in 3D a second pair of vortices in
 * the y-z plane. No flow crosses the walls but x = 2, so some particles are
 * carried out of the domain there and the others circle until they run out
 * of steps.
 *
 * --particles seeds are placed by ex_random, so every block regenerates them
 * all and keeps those it owns. A block traces a particle with fixed-step RK4
 * (--h) until it leaves the domain or has taken --max-steps steps; a step
 * that lands in another block's part of the domain sends it (position, id,
 * steps and crossings so far) to the block that owns the new position,
 * found by blk_decomposer_cpoint_to_gid and reached by blk_proxy_enqueue_to:
 * any gid on any rank, not only a link neighbour, which continues it. A
 * particle finishes on the block that owns its end point, or, if it left
 * the domain, on the block it left from, with its first point outside. With
 * a step longer than a block (--h 0.5 with 7 blocks) particles jump past
 * their neighbours; the summary counts those sends ("past a neighbour").
 *
 * Two modes, both run by default (--mode both|iexchange|rounds):
 *  - iexchange: blk_master_iexchange runs a block when particles come for
 *    it; the first run traces its own seeds. A run traces at most --batch
 *    particles (0: all) and returns 1 while some wait, to be run again.
 *  - rounds: blk_master_foreach traces what came and posts the number it
 *    sent on to a value all-reduce; blk_master_exchange_remote delivers the
 *    particles and completes the sum; the rounds stop when it is 0.
 *
 * The check: every block compares each particle it finished with a serial
 * trace of it from its seed, bit for bit (end point, steps, crossings, the
 * block it ends on), and every particle must finish once (no block holds an
 * id twice, and the global count is --particles). Bit for bit holds because
 * a step is one function of the position alone (rk4_step, called by the
 * blocks and the serial trace alike), positions travel as their bytes, and
 * ownership is the decomposer's, the same on every rank.
 *
 * Out-of-core (--mem-blocks N), save writes a block's waiting and finished
 * particles and its counters; load reads them back. (With --batch, a block
 * that asks to run again may go out between its runs with particles still
 * waiting: blk runs ready blocks in generations, so one that is out is not
 * passed over for ever by those in memory.)
 *
 *   mpiexec -n 4 ./advect [--blocks 13] [--threads 2] [--dim 2|3]
 *                         [--particles 300] [--h 0.02] [--max-steps 250]
 *                         [--batch 0] [--mode both] [--seed 1]
 *                         [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * Prints one line with PASS, or FAIL and exit status 1 (and, out-of-core, a
 * line of rank 0's storage figures).
 */
#include <blk/blk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

#define PI 3.141592653589793
#define GYRE 0.25   /* amplitude of the x-y vortices */
#define GYRE_YZ 0.1 /* of the y-z vortices (3D) */
#define DRIFT 0.08  /* uniform velocity along x */

/* A particle, as it travels and as it is kept when finished. */
typedef struct particle {
  double x[3];       /* position; x[2] = 0 in 2D */
  int64_t id;        /* its seed's number */
  int32_t steps;     /* RK4 steps taken */
  int32_t crossings; /* times it went on to another block */
  int32_t left;      /* finished: 1 if it left the domain (x is its first point outside) */
  int32_t pad;
} particle;

typedef struct setup {
  int dim, max_steps, batch;
  int64_t particles;
  double h;
  uint64_t seed;
  blk_cbounds domain;
  const blk_decomposer *d;
} setup;

/* ---- the flow and a step ------------------------------------------------- */

static void velocity(const setup *s, const double *x, double *v) {
  double sx = sin(PI * x[0]), cx = cos(PI * x[0]);
  double sy = sin(PI * x[1]), cy = cos(PI * x[1]);
  v[0] = -PI * GYRE * sx * cy + DRIFT;
  v[1] = PI * GYRE * cx * sy;
  v[2] = 0.0;
  if (s->dim == 3) {
    double sz = sin(PI * x[2]), cz = cos(PI * x[2]);
    v[1] -= PI * GYRE_YZ * sy * cz;
    v[2] = PI * GYRE_YZ * cy * sz;
  }
}

/* One RK4 step from x to y. The blocks and the serial trace both call this
 * one function, kept out of line so that no call site is compiled with its
 * own contraction or ordering of the arithmetic: a step's result depends on
 * x alone, not on the block that takes it. */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif
static NOINLINE void rk4_step(const setup *s, const double *x, double *y) {
  double k1[3], k2[3], k3[3], k4[3], t[3], h = s->h;
  velocity(s, x, k1);
  for (int a = 0; a < 3; a++) t[a] = x[a] + 0.5 * h * k1[a];
  velocity(s, t, k2);
  for (int a = 0; a < 3; a++) t[a] = x[a] + 0.5 * h * k2[a];
  velocity(s, t, k3);
  for (int a = 0; a < 3; a++) t[a] = x[a] + h * k3[a];
  velocity(s, t, k4);
  for (int a = 0; a < 3; a++) y[a] = x[a] + h / 6.0 * (k1[a] + 2.0 * k2[a] + 2.0 * k3[a] + k4[a]);
}

/* The block that owns x, or < 0 outside the domain. */
static int owner(const setup *s, const double *x) {
  return blk_decomposer_cpoint_to_gid(s->d, x);
}

/* Seed id: a point of the domain that any rank can regenerate. */
static particle seed_particle(const setup *s, int64_t id) {
  particle p;
  memset(&p, 0, sizeof p);
  p.id = id;
  for (int a = 0; a < s->dim; a++)
    p.x[a] = s->domain.min[a] + (s->domain.max[a] - s->domain.min[a]) *
                                    ex_unit(ex_random(s->seed, (uint64_t)id, (uint64_t)a));
  return p;
}

/* Block gid traces p while it stays in the block. Returns -1 when p
 * finished here (out of steps, or out of the domain), else the gid of the
 * block it went on to. */
static int trace(const setup *s, int gid, particle *p) {
  while (p->steps < s->max_steps) {
    double y[3];
    rk4_step(s, p->x, y);
    memcpy(p->x, y, sizeof y);
    p->steps++;
    int next = owner(s, p->x);
    if (next < 0) {
      p->left = 1;
      return -1;
    }
    if (next != gid) {
      p->crossings++;
      return next;
    }
  }
  return -1;
}

/* The reference: particle id traced on its own, from its seed, with no
 * blocks; *end is the block that should finish it. */
static particle serial_trace(const setup *s, int64_t id, int *end) {
  particle p = seed_particle(s, id);
  int gid = owner(s, p.x);
  while (p.steps < s->max_steps) {
    double y[3];
    rk4_step(s, p.x, y);
    memcpy(p.x, y, sizeof y);
    p.steps++;
    int o = owner(s, p.x);
    if (o < 0) {
      p.left = 1;
      break;
    }
    if (o != gid) p.crossings++;
    gid = o;
  }
  *end = gid;
  return p;
}

/* ---- the blocks ---------------------------------------------------------- */

typedef struct plist {
  particle *p;
  size_t n, cap;
} plist;

static int plist_push(plist *l, const particle *p) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    particle *grown = realloc(l->p, cap * sizeof *grown);
    if (!grown) return BLK_ENOMEM;
    l->p = grown;
    l->cap = cap;
  }
  l->p[l->n++] = *p;
  return 0;
}

typedef struct block {
  int gid;
  int seeded;       /* its seeds are in work (or traced) */
  plist work;       /* particles to trace here */
  plist done;       /* particles finished here */
  int64_t sent;     /* particles sent on (crossings from this block) */
  int64_t far;      /* of those, sent to a block that is not a link (it jumped one) */
  int64_t messages; /* queues sent: one per run (or round) and destination */
  int64_t runs;     /* callback runs */
} block;

static int create_block(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b);
  *out = b;
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  return 0;
}

static void destroy_block(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data;
  if (!b) return;
  free(b->work.p);
  free(b->done.p);
  free(b);
}

static int save_block(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  blk_buffer_write_i32(out, b->seeded);
  blk_buffer_write_i64(out, b->sent);
  blk_buffer_write_i64(out, b->far);
  blk_buffer_write_i64(out, b->messages);
  blk_buffer_write_i64(out, b->runs);
  blk_buffer_write_array(out, b->work.p, sizeof(particle), b->work.n);
  return blk_buffer_write_array(out, b->done.p, sizeof(particle), b->done.n);
}

static int load_block(void *data, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data; /* fresh from create_block */
  int32_t seeded = 0;
  void *work = NULL, *done = NULL;
  blk_buffer_read_i32(in, &seeded);
  blk_buffer_read_i64(in, &b->sent);
  blk_buffer_read_i64(in, &b->far);
  blk_buffer_read_i64(in, &b->messages);
  blk_buffer_read_i64(in, &b->runs);
  blk_buffer_read_array_alloc(in, &work, sizeof(particle), &b->work.n);
  blk_buffer_read_array_alloc(in, &done, sizeof(particle), &b->done.n);
  b->seeded = seeded;
  b->work.p = work;
  b->work.cap = b->work.n;
  b->done.p = done;
  b->done.cap = b->done.n;
  if (blk_buffer_error(in)) return blk_buffer_error(in);
  return blk_buffer_remaining(in) ? BLK_ECORRUPT : 0;
}

/* Puts the block's own seeds into its work, once. */
static int seed_block(const setup *s, block *b) {
  if (b->seeded) return 0;
  b->seeded = 1;
  for (int64_t id = 0; id < s->particles; id++) {
    particle p = seed_particle(s, id);
    if (owner(s, p.x) != b->gid) continue;
    int rc = plist_push(&b->work, &p);
    if (rc) return rc;
  }
  return 0;
}

/* Moves every particle that came (any in queue: links first, then one per
 * sending gid) into the block's work. */
static int receive(block *b, blk_proxy *p) {
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t bytes = blk_proxy_incoming_remaining(p, i);
    if (bytes % sizeof(particle)) return BLK_ECORRUPT;
    for (; bytes; bytes -= sizeof(particle)) {
      particle q;
      blk_proxy_dequeue(p, i, &q, sizeof q);
      int rc = plist_push(&b->work, &q);
      if (rc) return rc;
    }
  }
  return 0;
}

/* Whether gid is one of the first n out queues' (the links'). */
static int is_link(blk_proxy *p, int n, int gid) {
  for (int i = 0; i < n; i++)
    if (blk_proxy_out_gid(p, i) == gid) return 1;
  return 0;
}

/* Traces up to max particles of the block's work (0: all of it), sending
 * on those that leave the block to whichever block owns them now. */
static int trace_work(const setup *s, block *b, blk_proxy *p, size_t max) {
  int queues = blk_proxy_out_count(p); /* the links' */
  for (size_t k = 0; b->work.n && (max == 0 || k < max); k++) {
    particle q = b->work.p[--b->work.n];
    int next = trace(s, b->gid, &q);
    if (next < 0) {
      int rc = plist_push(&b->done, &q);
      if (rc) return rc;
      continue;
    }
    int rc = blk_proxy_enqueue_to(p, next, &q, sizeof q);
    if (rc) return rc;
    b->sent++;
    b->far += !is_link(p, queues, next);
  }
  b->messages += blk_proxy_out_count(p) - queues; /* one opened per destination */
  b->runs++;
  return 0;
}

/* iexchange: the first run takes the seeds; each traces what has come and
 * asks to run again while more than --batch waited. */
static int iexchange_run(void *data, blk_proxy *p, void *user) {
  const setup *s = user;
  block *b = data;
  int rc = seed_block(s, b);
  if (!rc) rc = receive(b, p);
  if (!rc) rc = trace_work(s, b, p, (size_t)s->batch);
  if (rc) return rc;
  return b->work.n > 0;
}

/* rounds: trace everything that has come, and count what was sent on. */
static int round_run(void *data, blk_proxy *p, void *user) {
  const setup *s = user;
  block *b = data;
  int64_t before = b->sent;
  int rc = seed_block(s, b);
  if (!rc) rc = receive(b, p);
  if (!rc) rc = trace_work(s, b, p, 0);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, b->sent - before, BLK_OP_SUM);
  return rc;
}

/* ---- the check ----------------------------------------------------------- */

static int by_id(const void *a, const void *b) {
  int64_t x = ((const particle *)a)->id, y = ((const particle *)b)->id;
  return (x > y) - (x < y);
}

enum {
  R_FINISHED,
  R_WRONG,
  R_TWICE,
  R_CROSSINGS,
  R_LEFT,
  R_SENT,
  R_FAR,
  R_MESSAGES,
  R_RUNS,
  R_WAITING,
  R_COUNT
};

/* Every finished particle against its serial trace; posts the figures
 * (enum above) and clears the block for the next mode. */
static int check_block(void *data, blk_proxy *p, void *user) {
  const setup *s = user;
  block *b = data;
  int64_t r[R_COUNT] = {0};
  if (b->done.n > 1) qsort(b->done.p, b->done.n, sizeof *b->done.p, by_id); /* p may be NULL */
  for (size_t i = 0; i < b->done.n; i++) {
    const particle *q = &b->done.p[i];
    r[R_TWICE] += i > 0 && q->id == b->done.p[i - 1].id;
    int end = -1;
    particle want = serial_trace(s, q->id, &end);
    int same = q->id >= 0 && q->id < s->particles && end == b->gid &&
               !memcmp(q->x, want.x, sizeof q->x) && q->steps == want.steps &&
               q->crossings == want.crossings && q->left == want.left;
    if (!same && r[R_WRONG] < 3)
      fprintf(stderr,
              "advect: gid %d finished particle %lld at (%.17g, %.17g, %.17g) after %d steps, "
              "%d crossings, left %d; serial: (%.17g, %.17g, %.17g), %d steps, %d crossings, "
              "left %d, on gid %d\n",
              b->gid, (long long)q->id, q->x[0], q->x[1], q->x[2], q->steps, q->crossings, q->left,
              want.x[0], want.x[1], want.x[2], want.steps, want.crossings, want.left, end);
    r[R_WRONG] += !same;
    r[R_CROSSINGS] += q->crossings;
    r[R_LEFT] += q->left;
  }
  r[R_FINISHED] = (int64_t)b->done.n;
  r[R_SENT] = b->sent;
  r[R_FAR] = b->far;
  r[R_MESSAGES] = b->messages;
  r[R_RUNS] = b->runs;
  r[R_WAITING] = (int64_t)b->work.n;
  b->done.n = b->work.n = 0;
  b->seeded = 0;
  b->sent = b->far = b->messages = b->runs = 0;
  for (int i = 0; i < R_COUNT; i++) {
    int rc = blk_proxy_all_reduce_i64(p, r[i], BLK_OP_SUM);
    if (rc) return rc;
  }
  return 0;
}

/* A mode's figures, summed over all blocks. */
typedef struct outcome {
  int64_t r[R_COUNT];
  int rounds;
  double seconds;
  int ok;
} outcome;

static void check(blk_master *m, setup *s, const char *mode, outcome *o) {
  EX_CHECK(blk_master_foreach(m, check_block, s));
  EX_CHECK(blk_master_exchange(m));
  for (int i = 0; i < R_COUNT; i++) o->r[i] = blk_master_result_i64(m, i);
  /* Every particle sent on was taken up once: the crossings the finished
   * particles carry add up to the sends. */
  o->ok = o->r[R_FINISHED] == s->particles && !o->r[R_WRONG] && !o->r[R_TWICE] &&
          !o->r[R_WAITING] && o->r[R_CROSSINGS] == o->r[R_SENT];
  if (!o->ok && blk_master_rank(m) == 0)
    fprintf(stderr,
            "advect: %s: %lld of %lld particles finished, %lld differ from the serial trace, "
            "%lld finished twice on a block, %lld still waiting, %lld sent on and %lld "
            "crossings\n",
            mode, (long long)o->r[R_FINISHED], (long long)s->particles, (long long)o->r[R_WRONG],
            (long long)o->r[R_TWICE], (long long)o->r[R_WAITING], (long long)o->r[R_SENT],
            (long long)o->r[R_CROSSINGS]);
}

/* ---- options ------------------------------------------------------------- */

enum { MODE_IEXCHANGE = 1, MODE_ROUNDS = 2, MODE_BOTH = 3 };

typedef struct options {
  int blocks, threads, dim, max_steps, batch, mode;
  long long particles;
  double h;
  uint64_t seed;
  ex_ooc ooc;
} options;

static void usage(const char *argv0, const options *o) {
  if (ex_rank() != 0) return;
  fprintf(stderr,
          "usage: %s [options]\n"
          "  particle tracing across blocks: any-gid messages, iexchange and rounds\n"
          "  --blocks N        number of blocks (default %d)\n"
          "  --threads T       threads per rank (default %d)\n"
          "  --dim D           2 or 3 (default %d)\n"
          "  --particles P     seeds (default %lld)\n"
          "  --h H             RK4 step (default %g)\n"
          "  --max-steps S     most steps a particle takes (default %d)\n"
          "  --batch B         iexchange: most particles a run traces, 0: all (default %d)\n"
          "  --mode M          iexchange, rounds or both (default both)\n"
          "  --seed S          seed of the particles' positions (default %llu)\n",
          argv0, o->blocks, o->threads, o->dim, o->particles, o->h, o->max_steps, o->batch,
          (unsigned long long)o->seed);
  ex_ooc_usage();
}

/* Reads argv into *o (defaults on entry). Returns 0 to run, else the exit
 * status (0 after --help, 2 after a bad option). */
static int parse(options *o, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *opt = argv[i], *arg = i + 1 < argc ? argv[i + 1] : NULL;
    long long v = 0;
    int bad = 0;
    if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
      usage(argv[0], o);
      return -1;
    }
    int ooc = ex_ooc_parse(&o->ooc, argc, argv, &i);
    if (ooc > 0) continue;
    if (ooc < 0 || !arg) {
      bad = 1;
    } else if (!strcmp(opt, "--blocks")) {
      bad = ex_parse_ll(arg, 1, INT_MAX, &v);
      o->blocks = (int)v;
    } else if (!strcmp(opt, "--threads")) {
      bad = ex_parse_ll(arg, 1, 1024, &v);
      o->threads = (int)v;
    } else if (!strcmp(opt, "--dim")) {
      bad = ex_parse_ll(arg, 2, 3, &v);
      o->dim = (int)v;
    } else if (!strcmp(opt, "--particles")) {
      bad = ex_parse_ll(arg, 0, INT_MAX, &o->particles);
    } else if (!strcmp(opt, "--max-steps")) {
      bad = ex_parse_ll(arg, 0, INT_MAX, &v);
      o->max_steps = (int)v;
    } else if (!strcmp(opt, "--batch")) {
      bad = ex_parse_ll(arg, 0, INT_MAX, &v);
      o->batch = (int)v;
    } else if (!strcmp(opt, "--seed")) {
      bad = ex_parse_ll(arg, 0, LLONG_MAX, &v);
      o->seed = (uint64_t)v;
    } else if (!strcmp(opt, "--h")) {
      char *end = NULL;
      o->h = strtod(arg, &end);
      bad = end == arg || *end || !(o->h > 0.0) || !isfinite(o->h);
    } else if (!strcmp(opt, "--mode")) {
      o->mode = !strcmp(arg, "iexchange") ? MODE_IEXCHANGE
                : !strcmp(arg, "rounds")  ? MODE_ROUNDS
                : !strcmp(arg, "both")    ? MODE_BOTH
                                          : 0;
      bad = !o->mode;
    } else {
      bad = 1;
    }
    if (bad) {
      if (ex_rank() == 0)
        fprintf(stderr, "%s: bad option or value: %s%s%s\n", argv[0], opt, arg ? " " : "",
                arg ? arg : "");
      usage(argv[0], o);
      return 2;
    }
    i++; /* the option's value */
  }
  return 0;
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  options o = {.blocks = 13,
               .threads = 2,
               .dim = 2,
               .max_steps = 250,
               .batch = 0,
               .mode = MODE_BOTH,
               .particles = 300,
               .h = 0.02,
               .seed = 1};
  int status = parse(&o, argc, argv);
  if (status) {
    MPI_Finalize();
    return status < 0 ? 0 : status;
  }
  int size = ex_size();

  setup s = {o.dim, o.max_steps, o.batch, o.particles, o.h, o.seed, {0}, NULL};
  double lo[3] = {0.0, 0.0, 0.0}, hi[3] = {2.0, 1.0, 1.0};
  EX_CHECK(blk_cbounds_set(&s.domain, o.dim, lo, hi));
  blk_decomposer *d = NULL;
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  EX_CHECK(blk_decomposer_create_continuous(&d, &s.domain, o.blocks, NULL));
  s.d = d;
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = create_block;
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.user = &s;
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(blk_master_decompose(m, d, a));
  MPI_Comm comm = blk_master_comm(m);

  outcome iex = {{0}, 0, 0.0, 1}, rnd = {{0}, 0, 0.0, 1};
  if (o.mode & MODE_IEXCHANGE) {
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    EX_CHECK(blk_master_iexchange(m, a, iexchange_run, &s));
    iex.seconds = MPI_Wtime() - t0;
    check(m, &s, "iexchange", &iex);
  }
  if (o.mode & MODE_ROUNDS) {
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    int64_t in_flight = 0;
    do {
      EX_CHECK(blk_master_foreach(m, round_run, &s));
      EX_CHECK(blk_master_exchange_remote(m, a));
      in_flight = blk_master_result_i64(m, 0);
      rnd.rounds++;
    } while (in_flight > 0);
    rnd.seconds = MPI_Wtime() - t0;
    check(m, &s, "rounds", &rnd);
  }

  /* Both modes traced the same particles: the same crossings and exits. */
  const outcome *first = o.mode & MODE_IEXCHANGE ? &iex : &rnd;
  int agree =
      o.mode != MODE_BOTH || (iex.r[R_CROSSINGS] == rnd.r[R_CROSSINGS] &&
                              iex.r[R_FAR] == rnd.r[R_FAR] && iex.r[R_LEFT] == rnd.r[R_LEFT]);
  int ok = ex_ooc_agree(m, &o.ooc, iex.ok && rnd.ok && agree);
  int div[3] = {1, 1, 1};
  char grid[48];
  blk_decomposer_divisions(d, div);
  if (o.dim == 3)
    snprintf(grid, sizeof grid, "%dx%dx%d", div[0], div[1], div[2]);
  else
    snprintf(grid, sizeof grid, "%dx%d", div[0], div[1]);
  long long crossings = (long long)first->r[R_CROSSINGS];
  char iex_text[160] = "", rnd_text[160] = "";
  if (o.mode & MODE_IEXCHANGE)
    snprintf(iex_text, sizeof iex_text, "; iexchange (batch %d): %lld runs, %lld messages, %.3f s",
             o.batch, (long long)iex.r[R_RUNS], (long long)iex.r[R_MESSAGES], iex.seconds);
  if (o.mode & MODE_ROUNDS)
    snprintf(rnd_text, sizeof rnd_text, "; rounds: %d rounds, %lld messages, %.3f s", rnd.rounds,
             (long long)rnd.r[R_MESSAGES], rnd.seconds);
  ex_summary(m, &o.ooc, ok, "advect",
             "%dD, %d blocks (%s) on %d ranks x %d threads, %s, %lld particles, h %g, "
             "<= %d steps: %lld crossings (%.2f a particle, %lld past a neighbour), %lld left the "
             "domain%s%s",
             o.dim, o.blocks, grid, size, o.threads, ex_ooc_mode(&o.ooc).s, o.particles, o.h,
             o.max_steps, crossings, o.particles ? (double)crossings / (double)o.particles : 0.0,
             (long long)first->r[R_FAR], (long long)first->r[R_LEFT], iex_text, rnd_text);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  return ex_finish(ok);
}
