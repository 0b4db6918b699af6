/*
 * example_util.h: the plumbing the reduction examples share, kept out of the
 * way of what they show. Header-only (static inline), not part of blk's API.
 *
 *  - ex_parse: the options every example takes (--blocks, --k, --halving,
 *    --threads, --seed), plus a few integer options of its own (--points,
 *    --keys, ...), with a usage message printed once, by rank 0.
 *  - EX_CHECK: a blk call that must succeed; otherwise print the code and
 *    blk's detail and stop the whole job.
 *  - ex_random: counter-based pseudo-random numbers. Value n of stream s is a
 *    pure function of (seed, s, n), so any rank can regenerate any block's
 *    data without running the others' generators: that is how each example
 *    computes its serial reference.
 *  - ex_add_blocks: adds a rank's blocks as an assigner places them, for the
 *    examples that need no geometry (no decomposer, no links).
 */
#ifndef BLK_EXAMPLE_UTIL_H
#define BLK_EXAMPLE_UTIL_H

#include <blk/blk.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stops the job when a blk call fails: returning would leave the other ranks
 * waiting in the next collective step. */
#define EX_CHECK(call)                                                        \
  do {                                                                        \
    int ex_rc_ = (call);                                                      \
    if (ex_rc_) ex_fail(__FILE__, __LINE__, #call, ex_rc_, blk_last_error()); \
  } while (0)

static inline void ex_fail(const char *file, int line, const char *call, int rc,
                           const char *detail) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "%s:%d: rank %d: %s failed: %s: %s\n", file, line, rank, call, blk_strerror(rc),
          detail);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1); /* not reached */
}

/* ---- options ------------------------------------------------------------ */

/* The options every example takes. */
typedef struct ex_options {
  int blocks;     /* --blocks N: number of blocks (any count, not only powers of k) */
  int k;          /* --k K: target radix of the reduction rounds */
  int contiguous; /* 1: partners adjacent first (default); 0 with --halving */
  int threads;    /* --threads T: callbacks run at once on each rank */
  uint64_t seed;  /* --seed S: the data's pseudo-random seed */
  int status;     /* after ex_parse returned 0: the exit status (0 for --help) */
} ex_options;

/* An example's own integer option, e.g. {"--points", &points, 0, "points per block"}. */
typedef struct ex_int_option {
  const char *name;
  long long *value; /* holds the default on entry */
  long long min;
  const char *help;
} ex_int_option;

static inline int ex_rank(void) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

static inline void ex_usage(const char *argv0, const char *what, const ex_options *o,
                            const ex_int_option *extra, int nextra) {
  if (ex_rank() != 0) return;
  fprintf(stderr, "usage: %s [options]\n  %s\n", argv0, what);
  fprintf(stderr, "  --blocks N    number of blocks (default %d)\n", o->blocks);
  fprintf(stderr, "  --k K         target radix of the reduction rounds, >= 2 (default %d)\n",
          o->k);
  fprintf(stderr,
          "  --halving     partners far apart first (default: contiguous, adjacent first)\n");
  fprintf(stderr, "  --threads T   threads per rank (default %d)\n", o->threads);
  fprintf(stderr, "  --seed S      seed of the pseudo-random data (default %llu)\n",
          (unsigned long long)o->seed);
  for (int i = 0; i < nextra; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s N", extra[i].name);
    fprintf(stderr, "  %-13s %s (default %lld)\n", name, extra[i].help, *extra[i].value);
  }
}

/* Reads a whole decimal integer in [min, max]; 0 on success. */
static inline int ex_parse_ll(const char *s, long long min, long long max, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < min || v > max) return -1;
  *out = v;
  return 0;
}

/* Parses argv into *o (which holds the defaults on entry) and the extra
 * options. Returns 1 to run; 0 to stop with exit status o->status (0 after
 * --help, 2 after a bad option, with the usage printed by rank 0). */
static inline int ex_parse(ex_options *o, int argc, char **argv, const char *what,
                           const ex_int_option *extra, int nextra) {
  o->status = 2;
  for (int i = 1; i < argc; i++) {
    const char *opt = argv[i], *arg = i + 1 < argc ? argv[i + 1] : NULL;
    long long v = 0;
    int bad = 0;
    if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
      ex_usage(argv[0], what, o, extra, nextra);
      o->status = 0;
      return 0;
    } else if (!strcmp(opt, "--halving")) {
      o->contiguous = 0;
      continue;
    } else if (!strcmp(opt, "--contiguous")) {
      o->contiguous = 1;
      continue;
    }
    if (!arg) {
      bad = 1;
    } else if (!strcmp(opt, "--blocks")) {
      bad = ex_parse_ll(arg, 1, INT_MAX, &v);
      o->blocks = (int)v;
    } else if (!strcmp(opt, "--k")) {
      bad = ex_parse_ll(arg, 2, INT_MAX, &v);
      o->k = (int)v;
    } else if (!strcmp(opt, "--threads")) {
      bad = ex_parse_ll(arg, 1, 1024, &v);
      o->threads = (int)v;
    } else if (!strcmp(opt, "--seed")) {
      bad = ex_parse_ll(arg, 0, LLONG_MAX, &v);
      o->seed = (uint64_t)v;
    } else {
      bad = 1;
      for (int e = 0; e < nextra; e++)
        if (!strcmp(opt, extra[e].name))
          bad = ex_parse_ll(arg, extra[e].min, INT_MAX, extra[e].value);
    }
    if (bad) {
      if (ex_rank() == 0)
        fprintf(stderr, "%s: bad option or value: %s%s%s\n", argv[0], opt, arg ? " " : "",
                arg ? arg : "");
      ex_usage(argv[0], what, o, extra, nextra);
      return 0;
    }
    i++; /* the option's value */
  }
  return 1;
}

/* "contiguous" or "halving", for the summary line. */
static inline const char *ex_order(const ex_options *o) {
  return o->contiguous ? "contiguous" : "halving";
}

/* ---- deterministic data ------------------------------------------------- */

/* A 64-bit mixing function (the splitmix64 finaliser): every input bit
 * affects every output bit, so consecutive counters give unrelated values. */
static inline uint64_t ex_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

/* Value n of stream `stream` (a gid, a point id, ...) under seed. */
static inline uint64_t ex_random(uint64_t seed, uint64_t stream, uint64_t n) {
  return ex_mix64(ex_mix64(seed ^ ex_mix64(stream)) + n);
}

/* A double in [0, 1) from the top 53 bits of r. */
static inline double ex_unit(uint64_t r) {
  return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- blocks without geometry -------------------------------------------- */

/* Creates (with create) and adds this rank's blocks as the assigner places
 * them, with no links. The master then owns them. On an error (which the
 * examples treat as fatal) a block that could not be added is not freed. */
static inline int ex_add_blocks(blk_master *m, const blk_assigner *a, blk_block_create_fn create,
                                void *user) {
  int rank = blk_master_rank(m);
  int n = blk_assigner_local_count(a, rank);
  int *gids = malloc((size_t)(n > 0 ? n : 1) * sizeof *gids);
  if (!gids) return BLK_ENOMEM;
  blk_assigner_local_gids(a, rank, gids, n);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    void *block = NULL;
    rc = create(&block, gids[i], user);
    if (!rc) rc = blk_master_add(m, gids[i], block, NULL, 0);
  }
  free(gids);
  return rc;
}

#endif
