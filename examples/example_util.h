/*
 * example_util.h: the plumbing the examples share, kept out of the way of
 * what they show. Header-only (static inline), not part of blk's API.
 *
 *  - ex_start, ex_finish: the two ends of main. ex_start initialises MPI
 *    (MPI_THREAD_FUNNELED) and reads the options with ex_parse; ex_finish
 *    finalises MPI and turns the verdict into the exit status.
 *  - ex_parse: the options every reduction example takes (--blocks, --k,
 *    --halving, --threads, --seed, and the out-of-core ones below), plus a
 *    few integer options of its own (--points, --keys, ...), with a usage
 *    message printed once, by rank 0. (diffusion parses its own options but
 *    hands the out-of-core ones to ex_ooc_parse.)
 *  - EX_CHECK: a blk call that must succeed; otherwise print the code and
 *    blk's detail and stop the whole job.
 *  - ex_random: counter-based pseudo-random numbers. Value n of stream s is a
 *    pure function of (seed, s, n), so any rank can regenerate any block's
 *    data without running the others' generators: that is how each example
 *    computes its serial reference.
 *  - ex_add_blocks: adds a rank's blocks as an assigner places them, for the
 *    examples that need no geometry (no decomposer, no links).
 *  - ex_ooc: the out-of-core options every example takes (--mem-blocks N,
 *    --spill-dir DIR, --spill-in-memory, --compression N|none), put into a
 *    blk_master_config by
 *    ex_ooc_configure; ex_ooc_agree folds the budget checks into the
 *    example's verdict (no rank held more than N blocks in memory, a rank
 *    with more than N blocks really swapped, in-core nothing did) and
 *    ex_ooc_report prints rank 0's storage figures.
 *  - ex_summary: rank 0's one summary line, "name: ...: PASS" or FAIL, and
 *    under it, out-of-core, the storage figures.
 */
#ifndef BLK_EXAMPLE_UTIL_H
#define BLK_EXAMPLE_UTIL_H

#include <blk/blk.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
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

/* Out-of-core settings, the same in every example. */
typedef struct ex_ooc {
  int mem_blocks;        /* --mem-blocks N: most blocks in memory per rank; 0: in-core */
  const char *spill_dir; /* --spill-dir DIR: where spill files go (NULL: $TMPDIR or /tmp) */
  int spill_in_memory;   /* --spill-in-memory: keep swapped-out blocks compressed in memory */
  int compression;       /* --compression N|none: compression_level (0: blk's default) */
} ex_ooc;

/* The options every example takes. */
typedef struct ex_options {
  int blocks;     /* --blocks N: number of blocks (any count, not only powers of k) */
  int k;          /* --k K: target radix of the reduction rounds; 0: --k auto */
  int contiguous; /* 1: partners adjacent first (default); 0 with --halving */
  int threads;    /* --threads T: callbacks run at once on each rank */
  uint64_t seed;  /* --seed S: the data's pseudo-random seed */
  ex_ooc ooc;     /* --mem-blocks, --spill-dir, --spill-in-memory, --compression */
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

static inline int ex_size(void) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
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

/* The out-of-core options' lines of a usage message (rank 0 prints it). */
static inline void ex_ooc_usage(void) {
  fprintf(stderr,
          "  --mem-blocks N      out-of-core: at most N blocks in memory per rank (default 0:\n"
          "                      in-core, no limit); save and load swap the others\n"
          "  --spill-dir DIR     directory for the spill files (default $TMPDIR or /tmp)\n"
          "  --spill-in-memory   keep swapped-out blocks compressed in memory, not in files\n"
          "  --compression L     zstd level of swapped-out blocks, or none (stored raw)"
#ifdef BLK_COMPRESSION_AUTO
          ",\n                      or auto (blk chooses; blk's default)\n");
#else
          " (default: blk's, 1)\n");
#endif
}

/* Reads a --compression value: a zstd level (blk checks its range at
 * create), none or, where blk has it, auto. 0 on success. */
static inline int ex_ooc_parse_compression(const char *s, int *level) {
  long long v = 0;
  if (!strcmp(s, "none")) {
    *level = BLK_COMPRESSION_NONE;
#ifdef BLK_COMPRESSION_AUTO
  } else if (!strcmp(s, "auto")) {
    *level = BLK_COMPRESSION_AUTO;
#endif
  } else if (!ex_parse_ll(s, INT_MIN + 1, INT_MAX, &v) && v != 0) {
    *level = (int)v;
  } else {
    return -1;
  }
  return 0;
}

/* Reads argv[*i] if it is an out-of-core option (and its value, advancing
 * *i past it). Returns 1 if it was one, 0 if not, -1 for a missing or bad
 * value. */
static inline int ex_ooc_parse(ex_ooc *o, int argc, char **argv, int *i) {
  const char *opt = argv[*i], *arg = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (!strcmp(opt, "--spill-in-memory")) {
    o->spill_in_memory = 1;
    return 1;
  }
  if (strcmp(opt, "--mem-blocks") && strcmp(opt, "--spill-dir") && strcmp(opt, "--compression"))
    return 0;
  if (!arg) return -1;
  if (!strcmp(opt, "--mem-blocks")) {
    long long v = 0;
    if (ex_parse_ll(arg, 0, INT_MAX, &v)) return -1;
    o->mem_blocks = (int)v;
  } else if (!strcmp(opt, "--compression")) {
    if (ex_ooc_parse_compression(arg, &o->compression)) return -1;
  } else {
    o->spill_dir = arg;
  }
  (*i)++;
  return 1;
}

static inline void ex_usage(const char *argv0, const char *what, const ex_options *o,
                            const ex_int_option *extra, int nextra) {
  if (ex_rank() != 0) return;
  fprintf(stderr, "usage: %s [options]\n  %s\n", argv0, what);
  fprintf(stderr, "  --blocks N    number of blocks (default %d)\n", o->blocks);
  fprintf(stderr,
          "  --k K|auto    target radix of the reduction rounds, >= 2 (default %d); auto:\n"
          "                k and order from blk_partners_choose's model\n",
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
  ex_ooc_usage();
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
    int ooc = ex_ooc_parse(&o->ooc, argc, argv, &i);
    if (ooc > 0) continue;
    if (ooc < 0 || !arg) {
      bad = 1;
    } else if (!strcmp(opt, "--blocks")) {
      bad = ex_parse_ll(arg, 1, INT_MAX, &v);
      o->blocks = (int)v;
    } else if (!strcmp(opt, "--k")) {
      v = 0; /* auto */
      if (strcmp(arg, "auto")) bad = ex_parse_ll(arg, 2, INT_MAX, &v);
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

/* --k auto: sets o->k and o->contiguous to what blk_partners_choose's
 * default model picks for `pattern` over a's blocks with messages of
 * `bytes` (split_swap: a swap that hands each member its share), with the
 * example's threads, and says so on rank 0. Every rank picks alike. Does
 * nothing when --k was a number. Returns blk's code. */
static inline int ex_choose_k(ex_options *o, blk_pattern pattern, const blk_assigner *a,
                              size_t bytes, int split_swap) {
  if (o->k) return 0;
  blk_cost_model m = BLK_COST_MODEL_INIT;
  m.threads = o->threads;
  int rc = blk_partners_choose(pattern, a, bytes, &m, split_swap, &o->k, &o->contiguous);
  if (!rc && ex_rank() == 0)
    printf("--k auto: k = %d, %s order (blk_partners_choose, %zu-byte messages)\n", o->k,
           o->contiguous ? "contiguous" : "halving", bytes);
  return rc;
}

/* The start of main: initialises MPI, then parses argv as ex_parse does.
 * blk never calls MPI_Init; MPI_THREAD_FUNNELED is enough for any --threads,
 * since only the thread that created the master calls MPI. Returns 1 to run;
 * 0 to stop (after --help or a bad option) with MPI already finalised: main
 * then returns o->status. */
static inline int ex_start(int *argc, char ***argv, ex_options *o, const char *what,
                           const ex_int_option *extra, int nextra) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (ex_parse(o, *argc, *argv, what, extra, nextra)) return 1;
  MPI_Finalize();
  return 0;
}

/* The end of main, after the blk objects are destroyed: finalises MPI and
 * returns the exit status, 0 if ok, else 1. */
static inline int ex_finish(int ok) {
  MPI_Finalize();
  return ok ? 0 : 1;
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

/* ---- out-of-core -------------------------------------------------------- */

/* Puts the out-of-core options into a master's config; the callbacks
 * (create, destroy, save, load) are the example's own. */
static inline void ex_ooc_configure(blk_master_config *mc, const ex_ooc *o) {
  mc->mem_blocks = o->mem_blocks;
  mc->spill_dir = o->spill_dir;
  mc->spill_in_memory = o->spill_in_memory;
  mc->compression_level = o->compression;
}

/* A short text returned by value, so it can go straight into a printf. */
typedef struct ex_text {
  char s[64];
} ex_text;

/* "in-core" or "out-of-core (N in memory)", for the summary line. */
static inline ex_text ex_ooc_mode(const ex_ooc *o) {
  ex_text t;
  if (o->mem_blocks > 0)
    snprintf(t.s, sizeof t.s, "out-of-core (%d in memory)", o->mem_blocks);
  else
    snprintf(t.s, sizeof t.s, "in-core");
  return t;
}

/* Whether the budget held on this rank: never more than mem_blocks blocks
 * in memory and, with more local blocks than that, some really went out and
 * came back; in-core, nothing went out. Says what is wrong on stderr. */
static inline int ex_ooc_budget_held(const blk_master *m, const ex_ooc *o) {
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  int n = blk_master_local_count(m), held = 1;
  if (o->mem_blocks <= 0)
    held = st.evictions == 0;
  else if (st.blocks_in_memory_peak > o->mem_blocks)
    held = 0;
  else if (n > o->mem_blocks)
    held = st.evictions > 0 && st.loads > 0;
  if (!held)
    fprintf(stderr,
            "rank %d: budget not kept: %d local blocks, budget %d (0: in-core), peak %d in "
            "memory, %llu evictions, %llu loads\n",
            blk_master_rank(m), n, o->mem_blocks, st.blocks_in_memory_peak,
            (unsigned long long)st.evictions, (unsigned long long)st.loads);
  return held;
}

/* The verdict every rank prints and exits with: ok here and on every other
 * rank, and the budget held on every rank. Collective over the master's
 * communicator (an MPI_Allreduce beside blk's own messages). */
static inline int ex_ooc_agree(const blk_master *m, const ex_ooc *o, int ok) {
  int mine = ok && ex_ooc_budget_held(m, o), all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, blk_master_comm(m));
  return all;
}

/* Out-of-core, rank 0 prints its storage figures, one line under the
 * summary: what went out and came back, and how well it compressed. */
static inline void ex_ooc_report(const blk_master *m, const ex_ooc *o, const char *name) {
  if (o->mem_blocks <= 0 || blk_master_rank(m) != 0) return;
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  double ratio = st.bytes_stored_written
                     ? (double)st.bytes_raw_written / (double)st.bytes_stored_written
                     : 0.0;
  printf(
      "%s: rank 0 out-of-core: %d blocks, peak %d in memory (budget %d), %llu loads, %llu "
      "evictions, %llu queues spilled; %llu bytes raw -> %llu stored (%.2fx), %s\n",
      name, blk_master_local_count(m), st.blocks_in_memory_peak, o->mem_blocks,
      (unsigned long long)st.loads, (unsigned long long)st.evictions,
      (unsigned long long)st.queues_spilled, (unsigned long long)st.bytes_raw_written,
      (unsigned long long)st.bytes_stored_written, ratio,
      o->spill_in_memory ? "kept in memory" : "in a spill file");
}

/* ---- the summary ------------------------------------------------------- */

#if defined(__GNUC__)
#define EX_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define EX_PRINTF(fmt, args)
#endif

/* Rank 0 prints the example's one summary line, "name: <fmt's text>: PASS"
 * (or FAIL when !ok), and under it, out-of-core, its storage figures
 * (ex_ooc_report). The other ranks print nothing. */
static inline void ex_summary(const blk_master *m, const ex_ooc *o, int ok, const char *name,
                              const char *fmt, ...) EX_PRINTF(5, 6);

static inline void ex_summary(const blk_master *m, const ex_ooc *o, int ok, const char *name,
                              const char *fmt, ...) {
  if (blk_master_rank(m) == 0) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", name);
    vprintf(fmt, ap);
    printf(": %s\n", ok ? "PASS" : "FAIL");
    va_end(ap);
  }
  ex_ooc_report(m, o, name);
}

#endif
