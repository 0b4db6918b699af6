/*
 * kdtree.c: blk_kdtree_create, the collective build of a k-d tree over any
 * block count (blk/kdtree.h, docs/kdtree.md). The tree object and its
 * queries are kdtree_tree.c; one node's quantile search is kdtree_search.c.
 *
 * The build, on every rank alike:
 *  1. agree: every rank's arguments are checked and its memory allocated,
 *     then one all-reduce says whether any rank failed and whether the specs
 *     agree (a hash of what must be equal, its min and max);
 *  2. census: a blk_master_foreach reads every block's points once (count,
 *     bounding box, points outside the domain or not finite; SAMPLED also
 *     draws the block's sample), then an all-reduce adds it up;
 *  3. SAMPLED: an all-gather gives every rank every block's sample;
 *  4. the tree, level by level: every node of a level that owns two blocks
 *     or more searches for its cut at once (kdtree_search.h). A round counts
 *     the points in every open bracket into bins: EXACT, a foreach over the
 *     blocks and an all-reduce of the bins; SAMPLED, a loop over the
 *     gathered sample, with no communication. Every rank steps the same
 *     bins, so every rank makes the same cuts;
 *  5. the move: one blk_all_to_all, each block sending each point to the
 *     leaf it falls in (by reference, sorted by owner), each block handing
 *     what it received to the program's take.
 * The build's own all-reduces run over the master's communicator with
 * MPI's non-blocking collectives, driven by blk's backoff: ranks without
 * blocks need the tree too, and a blocking MPI_Allreduce on oversubscribed
 * cores waits a scheduler slice (about 12 ms at 4 ranks on 2 cores; this
 * way 0.1-0.6 ms). They carry the failures of the foreach callbacks (a
 * points callback's code, no memory, a block missing), so every rank
 * returns the lowest failing rank's code and detail, as docs/errors.md
 * wants; blk's own collectives agree on theirs.
 *
 * Cost, for N points over B blocks on p ranks, depth D = ceil(log2 B), H
 * bins per node (256, fewer on levels of more than 256 nodes):
 *   EXACT: (1 + R) passes over the points, where R, the rounds of all the
 *     levels, is at most ceil(64 / log2 H) per level and coordinate fixed,
 *     and 3-4 per level for uniform or clustered points (docs/kdtree.md);
 *     each round a foreach (an agreement, 2 alpha log2 p) and an all-reduce
 *     of 24 H bytes per open node (2 alpha log2 p + 2 beta 24 H nodes), and
 *     O(N/p (D + dim)) work per rank;
 *   SAMPLED: one pass, an all-reduce, an all-gather of S = B samples x
 *     8 (dim + 1) bytes (alpha log2 p + beta S), then O(S (D + dim) R)
 *     work on every rank and no messages;
 *   the move: blk_all_to_all's R' swap rounds, each point's record sent
 *     once per round it crosses ranks, about N/p records per rank.
 * Memory per rank: the tree (2B - 1 nodes of about 100 bytes), the level's
 * bins (24 H per open node, at most 1.5 MiB) once for the rank and once per
 * thread that counted in the round, SAMPLED the whole sample; the move
 * copies a block's records once (sorted by owner) until it returns.
 *
 * Threads: the foreach callbacks read the tree and the searches, which the
 * driver changes only between foreach calls; each thread counts into bins
 * of its own (kd_acc), and the census and failures go in under one mutex.
 */
#include "blk/kdtree.h"

#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/backoff.h"
#include "base/fail.h"
#include "base/failure.h"
#include "base/logger.h"
#include "base/thread.h"
#include "blk/all_to_all.h"
#include "blk/partners.h"
#include "collectives/kdtree_search.h"
#include "collectives/kdtree_tree.h"

#define KD_BINS 256          /* bins per node per round */
#define KD_LEVEL_BINS 65536  /* bins of all the nodes of a level, at most */
#define KD_MIN_BINS 16       /* per node, however wide the level */
#define KD_SAMPLES 256       /* per block */
#define KD_BAD_INDEX_BITS 40 /* the first bad point's key: gid << 40 | index */

/* The census, as bins (weight summed, min and max taken). */
enum {
  CENSUS_POINTS = 0, /* weight: points; min: the first bad point's key */
  CENSUS_FAILED = 1, /* weight: ranks that failed; min: the lowest */
  CENSUS_BAD = 2,    /* weight: points outside the domain or not finite */
  CENSUS_SAMPLE = 3, /* weight: sample points of all blocks */
  CENSUS_AXES = 4,   /* + axis: min and max key of the points' coordinates */
  CENSUS_LEN = 4 + BLK_MAX_DIM
};

typedef struct kd_build {
  blk_master *m;
  const blk_assigner *a;
  blk_kdtree_spec spec;
  int have_domain;
  blk_cbounds domain;
  MPI_Comm comm;
  int rank, size;
  MPI_Datatype bin_type;
  MPI_Op bin_op;
  int mpi_made;
  int nblocks, nlocal, dim;
  size_t esz; /* SAMPLED: a sample point, dim doubles and a weight */
  int *gids;  /* this rank's gids (the assigner's), ascending */
  uint64_t *count;
  int *seen;
  blk__mutex *lock;
  blk__failure fail; /* this rank's earliest failure */
  int round;
  blk__kd_bin census[CENSUS_LEN];
  blk_kdtree *t;
  uint64_t total;
  /* the level */
  int *frontier, *next; /* nodes to split now and at the next level */
  blk__kd_search *search;
  int *active; /* slot -> search */
  int *slot;   /* node -> slot, or -1 */
  int nactive, bins;
  blk__kd_bin *hist;   /* [0]: failures; then nactive x bins */
  uint64_t gen;        /* EXACT: the round's number in the process (kd_rounds) */
  struct kd_acc *accs; /* EXACT: the round's accumulators, one per thread that ran */
  /* SAMPLED */
  int64_t *sizes; /* per rank: its sample's bytes, and whether it failed */
  int *counts;    /* per rank: the same as int, then the displacements */
  unsigned char **sample;
  size_t *nsample;
  unsigned char *all;
  uint64_t nall;
  /* the move */
  unsigned char **sent;
} kd_build;

/* ---- small helpers ------------------------------------------------------ */

/* floor(n * i / parts), for i <= parts, without overflow. */
static uint64_t share(uint64_t n, uint64_t parts, uint64_t i) {
  return n / parts * i + n % parts * i / parts;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9u;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

static int local_index(const kd_build *b, int gid) {
  int lo = 0, hi = b->nlocal - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (b->gids[mid] == gid) return mid;
    if (b->gids[mid] < gid)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

static void read_point(const kd_build *b, const unsigned char *rec, double *x) {
  const unsigned char *c = rec + b->spec.coord_offset;
  for (int a = 0; a < b->dim; a++) {
    if (b->spec.coord_type == BLK_DOUBLE) {
      memcpy(&x[a], c + 8 * (size_t)a, sizeof x[a]);
    } else {
      float f;
      memcpy(&f, c + 4 * (size_t)a, sizeof f);
      x[a] = f;
    }
  }
}

/* A failure of this rank, from a callback (pool threads) or the driver. */
#define NOTE(b, code, gid, ...)                                                       \
  do {                                                                                \
    blk__mutex_lock((b)->lock);                                                       \
    blk__failure_note(&(b)->fail, (code), (b)->rank, (gid), (b)->round, __VA_ARGS__); \
    blk__mutex_unlock((b)->lock);                                                     \
  } while (0)

/* ---- the build's own collectives ----------------------------------------- */

static void wait_for(MPI_Request *r, int rc, const char *what) {
  if (rc != MPI_SUCCESS) blk__panic("kdtree: %s could not start (MPI error %d)", what, rc);
  blk__backoff bo = {0};
  for (;;) {
    int done = 0;
    rc = MPI_Test(r, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) blk__panic("kdtree: %s failed (MPI error %d)", what, rc);
    if (done) return;
    blk__backoff_idle(&bo);
  }
}

static void bin_op(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  blk__kd_bins_merge(inout, in, (size_t)*len);
}

static void all_reduce(kd_build *b, blk__kd_bin *bins, int n, const char *what) {
  MPI_Request r;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, bins, n, b->bin_type, b->bin_op, b->comm, &r);
  wait_for(&r, rc, what);
}

/* Every rank learns the lowest failing rank's record (that rank sends it)
 * and returns its code with the same detail. */
static int report(kd_build *b, int lowest, int failed) {
  MPI_Request r;
  int rc = MPI_Ibcast(&b->fail, (int)sizeof b->fail, MPI_BYTE, lowest, b->comm, &r);
  wait_for(&r, rc, "the broadcast of a failure");
  b->fail.ranks = failed;
  return blk__failure_report(&b->fail, "kdtree");
}

/* The failure slot of a reduction: this rank's part. */
static void failure_bin(const kd_build *b, blk__kd_bin *bin) {
  bin->weight = b->fail.code != 0;
  bin->min = b->fail.code ? (uint64_t)b->rank : UINT64_MAX;
  bin->max = 0;
}

/* ---- 1. arguments -------------------------------------------------------- */

static int check_domain(const blk_cbounds *d, int dim) {
  if (d->dim != dim)
    return blk__fail(BLK_EINVAL, "kdtree: the domain has dim %d, the spec %d", d->dim, dim);
  for (int a = 0; a < dim; a++)
    if (!isfinite(d->min[a]) || !isfinite(d->max[a]) || d->min[a] > d->max[a])
      return blk__fail(BLK_EINVAL, "kdtree: the domain's axis %d is [%g, %g]", a, d->min[a],
                       d->max[a]);
  return 0;
}

static int check_spec(const kd_build *b, const blk_kdtree_spec *s) {
  if (s->version != BLK_KDTREE_SPEC_VERSION)
    return blk__fail(BLK_EINVAL, "kdtree: spec version %u, this blk knows %u", s->version,
                     BLK_KDTREE_SPEC_VERSION);
  if (s->dim < 1 || s->dim > BLK_MAX_DIM)
    return blk__fail(BLK_EINVAL, "kdtree: dim = %d is outside 1..%d", s->dim, BLK_MAX_DIM);
  if (s->coord_type != BLK_DOUBLE && s->coord_type != BLK_FLOAT)
    return blk__fail(BLK_EINVAL, "kdtree: coord_type %d is neither BLK_DOUBLE nor BLK_FLOAT",
                     (int)s->coord_type);
  size_t bytes = (size_t)s->dim * (s->coord_type == BLK_DOUBLE ? 8 : 4);
  if (s->record_size == 0 || s->coord_offset > s->record_size ||
      bytes > s->record_size - s->coord_offset)
    return blk__fail(BLK_EINVAL,
                     "kdtree: %zu bytes of coordinates at offset %zu do not fit a record of %zu",
                     bytes, s->coord_offset, s->record_size);
  if (!s->points) return blk__fail(BLK_EINVAL, "kdtree: the spec has no points callback");
  if (s->domain) {
    int rc = check_domain(s->domain, s->dim);
    if (rc) return rc;
  }
  if (s->method != BLK_KDTREE_EXACT && s->method != BLK_KDTREE_SAMPLED)
    return blk__fail(BLK_EINVAL, "kdtree: method %d is unknown", (int)s->method);
  if (s->axis != BLK_KDTREE_LONGEST && s->axis != BLK_KDTREE_ROUND_ROBIN)
    return blk__fail(BLK_EINVAL, "kdtree: axis rule %d is unknown", (int)s->axis);
  if (s->bins != 0 && (s->bins < 2 || s->bins > KD_LEVEL_BINS))
    return blk__fail(BLK_EINVAL, "kdtree: bins = %d is outside 2..%d", s->bins, KD_LEVEL_BINS);
  if (s->samples > ((size_t)1 << 30))
    return blk__fail(BLK_EINVAL, "kdtree: samples = %zu is above 2^30", s->samples);
  if (s->k < 0 || s->k == 1 || (s->contiguous != 0 && s->contiguous != 1))
    return blk__fail(BLK_EINVAL, "kdtree: k = %d, contiguous = %d", s->k, s->contiguous);
  if (blk_assigner_nranks(b->a) != b->size)
    return blk__fail(BLK_EINVAL, "kdtree: the assigner is for %d ranks, the master has %d",
                     blk_assigner_nranks(b->a), b->size);
  if (blk_assigner_nblocks(b->a) > INT_MAX / 2)
    return blk__fail(BLK_EINVAL, "kdtree: %d blocks are too many for one tree",
                     blk_assigner_nblocks(b->a));
  return 0;
}

/* What every rank must pass alike, hashed. */
static uint64_t spec_hash(const kd_build *b) {
  const blk_kdtree_spec *s = &b->spec;
  uint64_t v[12] = {(uint64_t)s->dim,
                    s->record_size,
                    s->coord_offset,
                    (uint64_t)s->coord_type,
                    (uint64_t)s->method,
                    (uint64_t)s->axis,
                    (uint64_t)s->bins,
                    s->samples,
                    s->seed,
                    (uint64_t)s->k,
                    (uint64_t)s->contiguous,
                    (uint64_t)b->nblocks};
  uint64_t h = (uint64_t)(s->take != NULL) + 2 * (uint64_t)b->have_domain;
  for (int i = 0; i < 12; i++) h = mix64(h ^ v[i]);
  for (int a = 0; b->have_domain && a < s->dim; a++)
    h = mix64(h ^ blk__kd_key(b->domain.min[a]) ^ mix64(blk__kd_key(b->domain.max[a])));
  return h;
}

/* The tree's shape is known from the block count: the most nodes a level
 * splits, and the bins that gives each. */
static int level_bins(const kd_build *b, int nodes) {
  int bins = b->spec.bins ? b->spec.bins : KD_BINS;
  int fit = KD_LEVEL_BINS / (nodes > 0 ? nodes : 1);
  if (fit < KD_MIN_BINS) fit = KD_MIN_BINS;
  return bins < fit ? bins : fit;
}

static size_t most_bins(const kd_build *b) {
  /* A level's nodes have at most two sizes, floor and ceil of B / 2^level. */
  size_t most = 0;
  int size[2] = {b->nblocks, 0}, many[2] = {1, 0};
  while (size[0] >= 2 || size[1] >= 2) {
    int split = (size[0] >= 2 ? many[0] : 0) + (size[1] >= 2 ? many[1] : 0);
    size_t bins = (size_t)split * (size_t)level_bins(b, split);
    if (bins > most) most = bins;
    int ns[4], nm[4], k = 0;
    for (int i = 0; i < 2; i++) {
      if (size[i] < 2) continue;
      ns[k] = size[i] / 2, nm[k++] = many[i];
      ns[k] = size[i] - size[i] / 2, nm[k++] = many[i];
    }
    /* merge equal sizes; at most two remain */
    size[0] = size[1] = 0;
    many[0] = many[1] = 0;
    for (int i = 0; i < k; i++) {
      int j = size[0] == ns[i] || many[0] == 0 ? 0 : 1;
      size[j] = ns[i];
      many[j] += nm[i];
    }
  }
  return most;
}

static int allocate(kd_build *b) {
  size_t nl = (size_t)(b->nlocal > 0 ? b->nlocal : 1), nb = (size_t)b->nblocks;
  b->gids = blk__malloc(nl * sizeof *b->gids);
  b->count = blk__calloc(nl, sizeof *b->count);
  b->seen = blk__calloc(nl, sizeof *b->seen);
  b->sample = blk__calloc(nl, sizeof *b->sample);
  b->nsample = blk__calloc(nl, sizeof *b->nsample);
  b->sent = blk__calloc(nl, sizeof *b->sent);
  b->sizes = blk__malloc(2 * (size_t)b->size * sizeof *b->sizes);
  b->counts = blk__malloc(2 * (size_t)b->size * sizeof *b->counts);
  b->frontier = blk__malloc(nb * sizeof *b->frontier);
  b->next = blk__malloc(nb * sizeof *b->next);
  b->search = blk__malloc(nb * sizeof *b->search);
  b->active = blk__malloc(nb * sizeof *b->active);
  b->slot = blk__malloc((2 * nb - 1) * sizeof *b->slot);
  b->hist = blk__malloc((1 + most_bins(b)) * sizeof *b->hist);
  blk_cbounds none = {b->dim, {0}, {0}};
  b->t = blk__kd_tree_new(b->dim, b->nblocks, &none, 0);
  if (!b->gids || !b->count || !b->seen || !b->sample || !b->nsample || !b->sent || !b->sizes ||
      !b->counts || !b->frontier || !b->next || !b->search || !b->active || !b->slot || !b->hist ||
      !b->t)
    return blk__fail(BLK_ENOMEM, "kdtree: no memory for the tree of %d blocks", b->nblocks);
  for (size_t i = 0; i < 2 * nb - 1; i++) b->slot[i] = -1;
  blk_assigner_local_gids(b->a, b->rank, b->gids, b->nlocal);
  return blk__mutex_create(&b->lock);
}

/* Checks and allocates on this rank, then agrees with every rank. */
static int begin(kd_build *b, blk_kdtree **out, const blk_kdtree_spec *spec) {
  int rc = 0;
  if (!out || !b->a || !spec) rc = blk__fail(BLK_EINVAL, "kdtree: create: NULL argument");
  if (!rc) {
    b->spec = *spec;
    rc = check_spec(b, spec);
  }
  if (!rc) {
    b->dim = spec->dim;
    b->nblocks = blk_assigner_nblocks(b->a);
    b->nlocal = blk_assigner_local_count(b->a, b->rank);
    b->have_domain = spec->domain != NULL;
    if (b->have_domain) b->domain = *spec->domain;
    b->esz = 8 * (size_t)(b->dim + 1);
    rc = allocate(b);
  }
  if (rc) { /* (the report says "kdtree failed on rank r: ...") */
    const char *why = blk_last_error();
    if (!strncmp(why, "kdtree: ", 8)) why += 8;
    blk__failure_note(&b->fail, rc, b->rank, -1, -1, "%s", why);
  }
  blk__kd_bin agree[2];
  failure_bin(b, &agree[0]);
  uint64_t h = rc ? 0 : spec_hash(b);
  agree[1].weight = 0;
  agree[1].min = rc ? UINT64_MAX : h;
  agree[1].max = rc ? 0 : h;
  all_reduce(b, agree, 2, "the agreement on the arguments");
  if (agree[0].min != UINT64_MAX) return report(b, (int)agree[0].min, (int)agree[0].weight);
  if (agree[1].min != agree[1].max)
    return blk__fail(BLK_EINVAL,
                     "kdtree: the ranks passed different specs (dim, record layout, domain, "
                     "method, bins, samples, seed, k, or take set on some only)");
  return 0;
}

/* ---- 2. the census ------------------------------------------------------- */

static int get_points(kd_build *b, void *block, int gid, const unsigned char **recs, size_t *count,
                      int li) {
  const void *r = NULL;
  size_t n = 0;
  int rc = b->spec.points(block, gid, &r, &n, b->spec.user);
  if (rc) {
    NOTE(b, BLK_ECALLBACK, gid, "the points callback returned %d", rc);
    return rc;
  }
  if (n > 0 && !r) {
    NOTE(b, BLK_EINVAL, gid, "the points callback gave %zu points at NULL", n);
    return BLK_EINVAL;
  }
  if (li >= 0 && b->seen[li] && n != b->count[li]) {
    NOTE(b, BLK_EINVAL, gid, "the points callback gave %zu points, %llu before", n,
         (unsigned long long)b->count[li]);
    return BLK_EINVAL;
  }
  *recs = r;
  *count = n;
  return 0;
}

/* The sample of one block: all its points (weight 1) when it has at most
 * `samples`, else `samples` draws with replacement, seeded by (seed, gid,
 * draw), whose weights (about n / samples each) add up to n. */
static int draw_sample(kd_build *b, int li, int gid, const unsigned char *recs, size_t n) {
  size_t s = b->spec.samples ? b->spec.samples : KD_SAMPLES, k = n <= s ? n : s;
  if (k == 0) return 0;
  unsigned char *out = blk__malloc(k * b->esz);
  if (!out) {
    NOTE(b, BLK_ENOMEM, gid, "no memory for a sample of %zu points", k);
    return BLK_ENOMEM;
  }
  for (size_t j = 0; j < k; j++) {
    size_t idx = j;
    uint64_t w = 1;
    if (n > s) {
      idx = (size_t)(mix64(mix64(b->spec.seed ^ mix64((uint64_t)gid)) + j) % n);
      w = share(n, s, j + 1) - share(n, s, j);
    }
    double x[BLK_MAX_DIM];
    read_point(b, recs + idx * b->spec.record_size, x);
    memcpy(out + j * b->esz, x, 8 * (size_t)b->dim);
    memcpy(out + j * b->esz + 8 * (size_t)b->dim, &w, sizeof w);
  }
  b->sample[li] = out;
  b->nsample[li] = k;
  return 0;
}

static int census_one(void *block, blk_proxy *p, void *user) {
  kd_build *b = user;
  int gid = blk_proxy_gid(p), li = local_index(b, gid);
  if (li < 0) {
    NOTE(b, BLK_EINVAL, gid, "the master holds gid %d, which the assigner puts on rank %d", gid,
         blk_assigner_rank(b->a, gid));
    return 0;
  }
  const unsigned char *recs;
  size_t n;
  if (get_points(b, block, gid, &recs, &n, -1)) return 0;
  blk__kd_bin c[CENSUS_LEN];
  blk__kd_bins_clear(c, CENSUS_LEN);
  c[CENSUS_POINTS].weight = n;
  for (size_t j = 0; j < n; j++) {
    double x[BLK_MAX_DIM];
    read_point(b, recs + j * b->spec.record_size, x);
    int bad = 0;
    for (int a = 0; a < b->dim; a++)
      bad |= !isfinite(x[a]) ||
             (b->have_domain && (x[a] < b->domain.min[a] || x[a] > b->domain.max[a]));
    if (bad) {
      uint64_t idx =
          j < ((uint64_t)1 << KD_BAD_INDEX_BITS) ? j : ((uint64_t)1 << KD_BAD_INDEX_BITS) - 1;
      uint64_t key = (uint64_t)gid << KD_BAD_INDEX_BITS | idx;
      if (key < c[CENSUS_POINTS].min) c[CENSUS_POINTS].min = key;
      c[CENSUS_BAD].weight++;
      continue;
    }
    for (int a = 0; a < b->dim; a++) blk__kd_bin_add(&c[CENSUS_AXES + a], blk__kd_key(x[a]), 0);
  }
  if (b->spec.method == BLK_KDTREE_SAMPLED && draw_sample(b, li, gid, recs, n)) return 0;
  c[CENSUS_SAMPLE].weight = b->nsample[li];
  blk__mutex_lock(b->lock);
  blk__kd_bins_merge(b->census, c, CENSUS_LEN);
  b->count[li] = n;
  b->seen[li] = 1;
  blk__mutex_unlock(b->lock);
  return 0;
}

static int census(kd_build *b) {
  blk__kd_bins_clear(b->census, CENSUS_LEN);
  b->census[CENSUS_POINTS].min = UINT64_MAX;
  int rc = blk_master_foreach(b->m, census_one, b);
  if (rc) return rc;
  for (int i = 0; i < b->nlocal; i++)
    if (!b->seen[i] && !b->fail.code)
      blk__failure_note(&b->fail, BLK_EINVAL, b->rank, b->gids[i], b->round,
                        "gid %d, which the assigner puts on rank %d, is not in its master",
                        b->gids[i], b->rank);
  failure_bin(b, &b->census[CENSUS_FAILED]);
  all_reduce(b, b->census, CENSUS_LEN, "the census");
  const blk__kd_bin *c = b->census;
  if (c[CENSUS_FAILED].min != UINT64_MAX)
    return report(b, (int)c[CENSUS_FAILED].min, (int)c[CENSUS_FAILED].weight);
  if (c[CENSUS_BAD].weight) {
    uint64_t key = c[CENSUS_POINTS].min;
    return blk__fail(BLK_EINVAL,
                     "kdtree: %llu points lie outside the domain or have a coordinate that is NaN "
                     "or infinite; the first is point %llu of gid %d",
                     (unsigned long long)c[CENSUS_BAD].weight,
                     (unsigned long long)(key & (((uint64_t)1 << KD_BAD_INDEX_BITS) - 1)),
                     (int)(key >> KD_BAD_INDEX_BITS));
  }
  b->total = c[CENSUS_POINTS].weight;
  if (!b->have_domain) {
    if (b->total == 0)
      return blk__fail(BLK_EINVAL, "kdtree: no block has a point, and the spec has no domain");
    b->domain.dim = b->dim;
    for (int a = 0; a < b->dim; a++) {
      b->domain.min[a] = blk__kd_value(c[CENSUS_AXES + a].min);
      b->domain.max[a] = blk__kd_value(c[CENSUS_AXES + a].max);
    }
  }
  b->t->domain = b->domain;
  b->t->nodes[0].points = b->total;
  return 0;
}

/* ---- 3. SAMPLED: every rank gets every sample ----------------------------- */

/* An all-gather of each rank's sample size and whether its memory ran out
 * (the agreement on it), then of the samples. */
static int gather_sample(kd_build *b) {
  uint64_t n = b->census[CENSUS_SAMPLE].weight, mine = 0;
  for (int i = 0; i < b->nlocal; i++) mine += b->nsample[i];
  unsigned char *local = blk__malloc(mine ? mine * b->esz : 1);
  b->all = blk__malloc(n ? n * b->esz : 1);
  b->nall = n;
  if (!local || !b->all)
    blk__failure_note(&b->fail, BLK_ENOMEM, b->rank, -1, b->round,
                      "no memory for a sample of %llu points", (unsigned long long)n);
  int64_t me[2] = {(int64_t)(mine * b->esz), b->fail.code ? b->rank : -1};
  MPI_Request r;
  int rc = MPI_Iallgather(me, 2, MPI_INT64_T, b->sizes, 2, MPI_INT64_T, b->comm, &r);
  wait_for(&r, rc, "the all-gather of the sample sizes");
  int lowest = -1, failed = 0;
  for (int i = b->size - 1; i >= 0; i--)
    if (b->sizes[2 * i + 1] >= 0) lowest = i, failed++;
  rc = 0;
  if (lowest >= 0) rc = report(b, lowest, failed);
  int64_t at = 0;
  for (int i = 0; i < b->size && !rc; i++) {
    b->counts[i] = (int)b->sizes[2 * i];
    b->counts[b->size + i] = (int)at;
    at += b->sizes[2 * i];
    if (at > INT_MAX)
      rc = blk__fail(BLK_EINVAL,
                     "kdtree: the sample is %llu bytes, more than one MPI_Allgatherv carries; "
                     "ask for fewer samples",
                     (unsigned long long)(n * b->esz));
  }
  if (!rc) {
    size_t pos = 0;
    for (int i = 0; i < b->nlocal; i++) {
      if (b->nsample[i]) memcpy(local + pos, b->sample[i], b->nsample[i] * b->esz);
      pos += b->nsample[i] * b->esz;
    }
    rc = MPI_Iallgatherv(local, (int)(mine * b->esz), MPI_BYTE, b->all, b->counts,
                         b->counts + b->size, MPI_BYTE, b->comm, &r);
    wait_for(&r, rc, "the all-gather of the sample");
  }
  free(local);
  return rc;
}

/* ---- 4. the tree, a level at a time --------------------------------------- */

/* A thread's bins for one round (EXACT). The callbacks a thread runs in a
 * round add into one accumulator, found through thread-local pointers, and
 * the driver adds the accumulators up after the foreach: a rank clears and
 * merges the bins once per thread that ran, not once per block (a level of
 * 256 nodes has 1.5 MiB of bins, and a rank may hold many blocks). Rounds
 * are numbered across the process, so a thread's pointer from an earlier
 * round (freed since) is recognised by its number and never followed. */
typedef struct kd_acc {
  struct kd_acc *next;
  blk__kd_bin bins[];
} kd_acc;

static atomic_uint_fast64_t kd_rounds;
static _Thread_local kd_acc *kd_mine;
static _Thread_local uint64_t kd_mine_round;

/* Adds the threads' accumulators of a round into into[0..n) (into NULL:
 * drops them) and frees them. */
static void free_accs(kd_build *b, blk__kd_bin *into, size_t n) {
  while (b->accs) {
    struct kd_acc *acc = b->accs;
    b->accs = acc->next;
    if (into) blk__kd_bins_merge(into, acc->bins, n);
    free(acc);
  }
}

/* Counts the points of one block into the open brackets (EXACT). */
static int count_one(void *block, blk_proxy *p, void *user) {
  kd_build *b = user;
  int gid = blk_proxy_gid(p), li = local_index(b, gid);
  const unsigned char *recs;
  size_t n;
  if (li < 0 || get_points(b, block, gid, &recs, &n, li)) return 0;
  size_t nbins = (size_t)b->nactive * (size_t)b->bins;
  if (kd_mine_round != b->gen) {
    kd_acc *acc = blk__malloc(sizeof *acc + nbins * sizeof acc->bins[0]);
    if (!acc) {
      NOTE(b, BLK_ENOMEM, gid, "no memory for %zu bins", nbins);
      return 0;
    }
    blk__kd_bins_clear(acc->bins, nbins);
    blk__mutex_lock(b->lock);
    acc->next = b->accs;
    b->accs = acc;
    blk__mutex_unlock(b->lock);
    kd_mine = acc;
    kd_mine_round = b->gen;
  }
  blk__kd_bin *mine = kd_mine->bins;
  for (size_t j = 0; j < n; j++) {
    double x[BLK_MAX_DIM];
    uint64_t key;
    read_point(b, recs + j * b->spec.record_size, x);
    int s = b->slot[blk__kd_descend(b->t, x)];
    if (s < 0) continue;
    int bin = blk__kd_search_bin(&b->search[b->active[s]], x, b->bins, &key);
    if (bin >= 0) blk__kd_bin_add(&mine[(size_t)s * (size_t)b->bins + (size_t)bin], key, 1);
  }
  return 0;
}

/* The round's bins, added up over every point (EXACT: every rank's
 * blocks; SAMPLED: the sample every rank holds). */
static int count_round(kd_build *b) {
  size_t nbins = (size_t)b->nactive * (size_t)b->bins;
  blk__kd_bins_clear(b->hist, 1 + nbins);
  b->round++;
  if (b->spec.method == BLK_KDTREE_SAMPLED) {
    for (uint64_t j = 0; j < b->nall; j++) {
      const unsigned char *e = b->all + j * b->esz;
      double x[BLK_MAX_DIM];
      uint64_t w, key;
      memcpy(x, e, 8 * (size_t)b->dim);
      memcpy(&w, e + 8 * (size_t)b->dim, sizeof w);
      int s = b->slot[blk__kd_descend(b->t, x)];
      if (s < 0) continue;
      int bin = blk__kd_search_bin(&b->search[b->active[s]], x, b->bins, &key);
      if (bin >= 0)
        blk__kd_bin_add(&b->hist[1 + (size_t)s * (size_t)b->bins + (size_t)bin], key, w);
    }
    return 0;
  }
  b->gen = atomic_fetch_add(&kd_rounds, 1) + 1;
  int rc = blk_master_foreach(b->m, count_one, b);
  free_accs(b, b->hist + 1, nbins);
  if (rc) return rc;
  failure_bin(b, &b->hist[0]);
  all_reduce(b, b->hist, (int)(1 + nbins), "the all-reduce of a round's bins");
  if (b->hist[0].min != UINT64_MAX) return report(b, (int)b->hist[0].min, (int)b->hist[0].weight);
  return 0;
}

static int choose_axis(const kd_build *b, const blk_cbounds *box, int depth) {
  if (b->spec.axis == BLK_KDTREE_ROUND_ROBIN) return depth % b->dim;
  int best = 0;
  for (int a = 1; a < b->dim; a++)
    if (box->max[a] - box->min[a] > box->max[best] - box->min[best]) best = a;
  return best;
}

/* The weight node n puts low: the first n_lo of its blocks' shares of
 * everything (block g's share is floor((g+1) N / B) - floor(g N / B)), so
 * that every block ends with floor or ceil of N / B; a node whose weight
 * is not its blocks' shares (copies of one point went one way above it)
 * splits its own weight in proportion, n_lo / n. At least one point goes
 * high. */
static uint64_t target(const kd_build *b, const blk__kd_node *nd) {
  uint64_t N = b->total, B = (uint64_t)b->nblocks, first = (uint64_t)nd->first;
  uint64_t n = (uint64_t)nd->count, lo = n / 2, t;
  if (nd->points == share(N, B, first + n) - share(N, B, first))
    t = share(N, B, first + lo) - share(N, B, first);
  else
    t = share(nd->points, n, lo);
  return t < nd->points ? t : nd->points - 1;
}

/* Splits every node of the frontier; returns the next frontier's size or a
 * code (negative). */
static int level(kd_build *b, int nf, int *nnext) {
  b->bins = level_bins(b, nf);
  for (int i = 0; i < nf; i++) {
    blk__kd_node *nd = &b->t->nodes[b->frontier[i]];
    blk_cbounds box;
    blk__kd_tree_node_box(b->t, b->frontier[i], &box);
    int axis = choose_axis(b, &box, nd->depth);
    blk__kd_search *s = &b->search[i];
    if (nd->points == 0) { /* nothing to count: cut the box in proportion */
      memset(s, 0, sizeof *s);
      blk__kd_cut_volume(&s->cut, &box, axis, nd->count / 2, nd->count);
      s->done = 1;
    } else {
      blk__kd_search_start(s, &box, axis, target(b, nd), nd->points);
    }
  }
  for (;;) {
    b->nactive = 0;
    for (int i = 0; i < nf; i++)
      if (!b->search[i].done) {
        b->slot[b->frontier[i]] = b->nactive;
        b->active[b->nactive++] = i;
      }
    if (!b->nactive) break;
    int rc = count_round(b);
    for (int j = 0; j < b->nactive && !rc; j++) {
      blk__kd_search *s = &b->search[b->active[j]];
      if (blk__kd_search_step(s, b->hist + 1 + (size_t)j * (size_t)b->bins, b->bins))
        rc = blk__fail(BLK_EINVAL,
                       "kdtree: the points changed between passes over them (round %d: the "
                       "counts of a node of %llu points do not add up)",
                       b->round, (unsigned long long)s->total);
    }
    for (int j = 0; j < b->nactive; j++) b->slot[b->frontier[b->active[j]]] = -1;
    if (rc) return rc;
  }
  int k = 0;
  for (int i = 0; i < nf; i++) {
    int lo = blk__kd_tree_split(b->t, b->frontier[i], &b->search[i].cut, b->search[i].low);
    for (int c = lo; c < lo + 2; c++)
      if (b->t->nodes[c].count >= 2) b->next[k++] = c;
  }
  *nnext = k;
  return 0;
}

static int build_tree(kd_build *b) {
  int nf = b->nblocks >= 2 ? 1 : 0;
  b->frontier[0] = 0;
  while (nf > 0) {
    int nnext = 0, rc = level(b, nf, &nnext);
    if (rc) return rc;
    int *swap = b->frontier;
    b->frontier = b->next;
    b->next = swap;
    nf = nnext;
  }
  blk__kd_tree_finish(b->t);
  return 0;
}

/* ---- 5. the move ---------------------------------------------------------- */

static int send_points(void *block, blk_proxy *p, void *user) {
  kd_build *b = user;
  int gid = blk_proxy_gid(p), li = local_index(b, gid);
  const void *given = NULL;
  size_t n = 0, rs = b->spec.record_size;
  if (li < 0) return blk__fail(BLK_EINVAL, "kdtree: gid %d is not the assigner's here", gid);
  int rc = b->spec.points(block, gid, &given, &n, b->spec.user);
  if (rc) return rc;
  const unsigned char *recs = given;
  if (n != b->count[li])
    return blk__fail(BLK_EINVAL, "kdtree: gid %d: the points callback gave %zu points, %llu before",
                     gid, n, (unsigned long long)b->count[li]);
  if (n == 0) return 0;
  int *owner = blk__malloc(n * sizeof *owner);
  size_t *start = blk__calloc((size_t)b->nblocks + 1, sizeof *start);
  unsigned char *sorted = blk__malloc(n * rs);
  if (!owner || !start || !sorted) {
    free(owner);
    free(start);
    free(sorted);
    return blk__fail(BLK_ENOMEM, "kdtree: gid %d: no memory to sort %zu points", gid, n);
  }
  for (size_t j = 0; j < n; j++) {
    double x[BLK_MAX_DIM];
    read_point(b, recs + j * rs, x);
    owner[j] = b->t->nodes[blk__kd_descend(b->t, x)].first;
    start[owner[j] + 1]++;
  }
  for (int g = 0; g < b->nblocks; g++) start[g + 1] += start[g];
  for (size_t j = 0; j < n; j++) memcpy(sorted + rs * start[owner[j]]++, recs + j * rs, rs);
  /* start[g] is now where g's run ends */
  for (int g = 0; g < b->nblocks && !rc; g++) {
    size_t from = g ? start[g - 1] : 0;
    if (start[g] > from)
      rc = blk_proxy_enqueue_ref_gid(p, g, sorted + rs * from, rs * (start[g] - from));
  }
  free(owner);
  free(start);
  b->sent[li] = sorted; /* referred to until blk_all_to_all returns */
  return rc;
}

static int take_points(void *block, blk_proxy *p, void *user) {
  kd_build *b = user;
  int gid = blk_proxy_gid(p), nin = blk_proxy_in_count(p), one = -1;
  size_t rs = b->spec.record_size, bytes = 0;
  for (int i = 0; i < nin; i++) {
    size_t q = blk_proxy_incoming_remaining(p, i);
    if (q) one = bytes ? -2 : i;
    bytes += q;
  }
  if (bytes % rs)
    return blk__fail(BLK_EINVAL, "kdtree: gid %d received %zu bytes, not whole records of %zu", gid,
                     bytes, rs);
  if (bytes == 0) return b->spec.take(block, gid, NULL, 0, b->spec.user);
  if (one >= 0) {
    const void *v = blk_proxy_dequeue_view(p, one, bytes);
    if ((uintptr_t)v % _Alignof(max_align_t) == 0)
      return b->spec.take(block, gid, v, bytes / rs, b->spec.user);
    unsigned char *copy = blk__malloc(bytes);
    if (!copy) return blk__fail(BLK_ENOMEM, "kdtree: gid %d: no memory for %zu bytes", gid, bytes);
    memcpy(copy, v, bytes);
    int rc = b->spec.take(block, gid, copy, bytes / rs, b->spec.user);
    free(copy);
    return rc;
  }
  unsigned char *all = blk__malloc(bytes);
  if (!all) return blk__fail(BLK_ENOMEM, "kdtree: gid %d: no memory for %zu bytes", gid, bytes);
  size_t at = 0;
  for (int i = 0; i < nin; i++) {
    size_t q = blk_proxy_incoming_remaining(p, i);
    blk_proxy_dequeue(p, i, all + at, q);
    at += q;
  }
  int rc = b->spec.take(block, gid, all, bytes / rs, b->spec.user);
  free(all);
  return rc;
}

static int move(kd_build *b) {
  int k = b->spec.k, contiguous = b->spec.contiguous;
  if (k == 0) {
    blk_cost_model model = BLK_COST_MODEL_INIT; /* one thread: the same choice on every rank */
    size_t bytes = (size_t)(b->total / (uint64_t)b->nblocks) * b->spec.record_size;
    int rc = blk_partners_choose(BLK_SWAP, b->a, bytes, &model, 1, &k, &contiguous);
    if (rc) { /* (the same on every rank: no MPI, the same arguments) */
      k = 2;
      contiguous = 1;
    }
  }
  int rc = blk_all_to_all(b->m, b->a, k, contiguous, send_points, take_points, b);
  for (int i = 0; i < b->nlocal; i++) {
    free(b->sent[i]);
    b->sent[i] = NULL;
  }
  return rc;
}

/* ---- the call ------------------------------------------------------------- */

static void release(kd_build *b) {
  for (int i = 0; b->sample && i < b->nlocal; i++) free(b->sample[i]);
  for (int i = 0; b->sent && i < b->nlocal; i++) free(b->sent[i]);
  free(b->gids);
  free(b->count);
  free(b->seen);
  free(b->sample);
  free(b->nsample);
  free(b->sent);
  free(b->sizes);
  free(b->counts);
  free(b->frontier);
  free(b->next);
  free(b->search);
  free(b->active);
  free(b->slot);
  free(b->hist);
  free(b->all);
  free_accs(b, NULL, 0);
  blk__mutex_destroy(b->lock);
  blk_kdtree_destroy(b->t);
  if (b->mpi_made) {
    MPI_Op_free(&b->bin_op);
    MPI_Type_free(&b->bin_type);
  }
}

int blk_kdtree_spec_init(blk_kdtree_spec *spec, unsigned int version) {
  if (!spec) return blk__fail(BLK_EINVAL, "kdtree: spec_init: spec is NULL");
  if (version != BLK_KDTREE_SPEC_VERSION)
    return blk__fail(BLK_EINVAL, "kdtree: spec version %u, this blk knows %u", version,
                     BLK_KDTREE_SPEC_VERSION);
  blk_kdtree_spec init = BLK_KDTREE_SPEC_INIT;
  *spec = init;
  return 0;
}

int blk_kdtree_create(blk_kdtree **out, blk_master *m, const blk_assigner *a,
                      const blk_kdtree_spec *spec) {
  if (out) *out = NULL;
  if (!m) return blk__fail(BLK_EINVAL, "kdtree: create: the master is NULL");
  double t0 = MPI_Wtime();
  kd_build b;
  memset(&b, 0, sizeof b);
  b.m = m;
  b.a = a;
  b.comm = blk_master_comm(m);
  b.rank = blk_master_rank(m);
  b.size = blk_master_size(m);
  blk__failure_clear(&b.fail);
  if (MPI_Type_contiguous(3, MPI_UINT64_T, &b.bin_type) != MPI_SUCCESS ||
      MPI_Type_commit(&b.bin_type) != MPI_SUCCESS ||
      MPI_Op_create(bin_op, 1, &b.bin_op) != MPI_SUCCESS)
    blk__panic("kdtree: MPI could not make the bins' type and operation");
  b.mpi_made = 1;
  int rc = begin(&b, out, spec);
  if (!rc) rc = census(&b);
  if (!rc && b.spec.method == BLK_KDTREE_SAMPLED) rc = gather_sample(&b);
  if (!rc) rc = build_tree(&b);
  if (!rc && b.spec.take) rc = move(&b);
  if (!rc) {
    BLK__LOG(BLK_LOG_INFO,
             "kdtree: %llu points, %d blocks, depth %d, %s: %d rounds of bins over %d levels, "
             "%.3f ms",
             (unsigned long long)b.total, b.nblocks, b.t->depth,
             b.spec.method == BLK_KDTREE_EXACT ? "exact" : "sampled", b.round, b.t->depth,
             (MPI_Wtime() - t0) * 1e3);
    *out = b.t;
    b.t = NULL;
    blk__clear_error();
  }
  release(&b);
  return rc;
}
