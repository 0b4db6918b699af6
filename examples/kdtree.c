/*
 * kdtree: particles in clustered blobs, cut into blocks of equal counts by
 * a k-d tree, then a ghost exchange over the tree's links.
 *
 * Each block makes --points particles, scattered over --blobs Gaussian
 * blobs in the unit cube (so a regular grid of blocks would leave most
 * blocks nearly empty). blk_kdtree_create cuts the cube into --blocks
 * blocks (any count) holding the same number of particles, exactly
 * (default) or from --samples particles per block, and moves every particle
 * to its block. The blocks then move to a second master whose links are
 * the tree's (blk_kdtree_links), and each block sends every neighbour the
 * particles within --ghost of the neighbour's box.
 *
 * Checks, every one against brute force: every particle arrived once,
 * unchanged (counts and sums of ids and of a hash of the ids); each lies in
 * its block's box and blk_kdtree_point_to_gid names its block; each block's
 * links are exactly the blocks whose boxes touch its own; the counts are
 * balanced (exact: all within one of each other; sampled: within half of
 * the mean); each block received as ghosts exactly the particles of its
 * neighbours within --ghost of its box, counted from all particles, which
 * every rank can make.
 *
 *   mpiexec -n 4 ./kdtree [--blocks 13] [--points 400] [--blobs 5] [--dim 3]
 *                         [--samples 0] [--ghost 1/50] [--threads 2] [--seed 1]
 *                         [--k K|auto] [--mem-blocks N] ...
 *
 * Prints one line with the balance and PASS, or FAIL and exit status 1.
 */
#include <blk/blk.h>
#include <math.h>

#include "example_util.h"

#define MAXD 3

typedef struct particle {
  uint64_t id;
  double x[MAXD];
} particle;

typedef struct pblock {
  particle *p;
  size_t n;
  particle *ghost; /* received from the neighbours */
  size_t nghost;
} pblock;

typedef struct setup {
  uint64_t seed;
  long long per_block, blobs;
  int dim, nblocks, exact;
  double ghost;
  const blk_kdtree *tree;
} setup;

/* Particle id: a blob, then a Gaussian offset from its centre (Box-Muller),
 * clamped to the cube. The same on every rank. */
static particle make_particle(const setup *s, uint64_t id) {
  particle q = {id, {0}};
  uint64_t blob = ex_random(s->seed, id, 0) % (uint64_t)s->blobs;
  double sigma = 0.03 * (double)(1 + blob % 3);
  for (int a = 0; a < s->dim; a++) {
    double c = 0.15 + 0.7 * ex_unit(ex_random(s->seed, 1000000007u + blob, (uint64_t)a));
    double u = ex_unit(ex_random(s->seed, id, 1 + 2 * (uint64_t)a)) + 1e-300;
    double v = ex_unit(ex_random(s->seed, id, 2 + 2 * (uint64_t)a));
    double x = c + sigma * sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
    q.x[a] = x < 0 ? 0 : x > 1 ? 1 : x;
  }
  return q;
}

static int64_t id_hash(uint64_t id) {
  return (int64_t)(ex_mix64(id) >> 33);
}

/* ---- blocks ---------------------------------------------------------------- */

static int pblock_create(void **out, int gid, void *user) {
  (void)gid;
  (void)user;
  *out = calloc(1, sizeof(pblock));
  return *out ? 0 : BLK_ENOMEM;
}

static void pblock_destroy(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  pblock *b = block;
  if (b) {
    free(b->p);
    free(b->ghost);
  }
  free(b);
}

/* Out of core: the particles, then the ghosts. */
static int pblock_save(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  const pblock *b = block;
  uint64_t n[2] = {b->n, b->nghost};
  blk_buffer_write(out, n, sizeof n);
  blk_buffer_write(out, b->p, b->n * sizeof(particle));
  return blk_buffer_write(out, b->ghost, b->nghost * sizeof(particle));
}

static int pblock_load(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  pblock *b = block;
  uint64_t n[2];
  int rc = blk_buffer_read(in, n, sizeof n);
  if (rc) return rc;
  free(b->p);
  free(b->ghost);
  b->n = (size_t)n[0];
  b->nghost = (size_t)n[1];
  b->p = malloc(b->n * sizeof(particle) + 1);
  b->ghost = malloc(b->nghost * sizeof(particle) + 1);
  if (!b->p || !b->ghost) return BLK_ENOMEM;
  blk_buffer_read(in, b->p, b->n * sizeof(particle));
  return blk_buffer_read(in, b->ghost, b->nghost * sizeof(particle));
}

static int make_particles(void *block, blk_proxy *px, void *user) {
  const setup *s = user;
  pblock *b = block;
  uint64_t first = (uint64_t)blk_proxy_gid(px) * (uint64_t)s->per_block;
  free(b->p); /* (out of core, a block comes back from storage even when empty) */
  b->n = (size_t)s->per_block;
  b->p = malloc(b->n * sizeof(particle) + 1);
  if (!b->p) return BLK_ENOMEM;
  for (size_t i = 0; i < b->n; i++) b->p[i] = make_particle(s, first + i);
  return 0;
}

/* ---- the k-d tree's callbacks --------------------------------------------- */

static int give(void *block, int gid, const void **records, size_t *count, void *user) {
  (void)gid;
  (void)user;
  const pblock *b = block;
  *records = b->p;
  *count = b->n;
  return 0;
}

static int take(void *block, int gid, const void *records, size_t count, void *user) {
  (void)gid;
  (void)user;
  pblock *b = block;
  particle *p = malloc(count * sizeof *p + 1);
  if (!p) return BLK_ENOMEM;
  if (count) memcpy(p, records, count * sizeof *p);
  free(b->p);
  b->p = p;
  b->n = count;
  return 0;
}

/* ---- moving the blocks to a master with the tree's links ------------------ */

/* The blocks, by gid, while they change masters (this rank's only). */
typedef struct handover {
  pblock **by_gid;
} handover;

static int hand_over(void *block, blk_proxy *px, void *user) {
  handover *h = user;
  pblock *b = block, *moved = calloc(1, sizeof *moved);
  if (!moved) return BLK_ENOMEM;
  *moved = *b; /* the particles change hands; the old block is left empty */
  memset(b, 0, sizeof *b);
  h->by_gid[blk_proxy_gid(px)] = moved;
  return 0;
}

/* ---- the checks ------------------------------------------------------------ */

static double box_distance(const blk_cbounds *box, const double *x) {
  double d2 = 0;
  for (int a = 0; a < box->dim; a++) {
    double d = x[a] < box->min[a]   ? box->min[a] - x[a]
               : x[a] > box->max[a] ? x[a] - box->max[a]
                                    : 0;
    d2 += d * d;
  }
  return sqrt(d2);
}

/* Each block sends each neighbour its particles within the ghost width of
 * the neighbour's box. */
static int send_ghosts(void *block, blk_proxy *px, void *user) {
  const setup *s = user;
  const pblock *b = block;
  for (int i = 0; i < blk_proxy_out_count(px); i++) {
    const blk_link *l = blk_proxy_link(px, i);
    for (size_t j = 0; j < b->n; j++)
      if (box_distance(&l->cbounds, b->p[j].x) <= s->ghost) {
        int rc = blk_proxy_enqueue(px, i, &b->p[j], sizeof b->p[j]);
        if (rc) return rc;
      }
  }
  return 0;
}

static int receive_ghosts(void *block, blk_proxy *px, void *user) {
  (void)user;
  pblock *b = block;
  size_t n = 0;
  for (int i = 0; i < blk_proxy_in_count(px); i++)
    n += blk_proxy_incoming_remaining(px, i) / sizeof(particle);
  free(b->ghost);
  b->ghost = malloc(n * sizeof *b->ghost + 1);
  if (!b->ghost) return BLK_ENOMEM;
  b->nghost = 0;
  for (int i = 0; i < blk_proxy_in_count(px); i++) {
    size_t k = blk_proxy_incoming_remaining(px, i) / sizeof(particle);
    blk_proxy_dequeue(px, i, b->ghost + b->nghost, k * sizeof(particle));
    b->nghost += k;
  }
  return 0;
}

/* Whether a's and b's closed boxes meet. */
static int touch(const blk_cbounds *a, const blk_cbounds *b) {
  for (int i = 0; i < a->dim; i++)
    if (a->min[i] > b->max[i] || b->min[i] > a->max[i]) return 0;
  return 1;
}

/* Checks a block after the move and the ghost exchange, and posts the sums
 * every rank compares with the serial ones: particles, errors, id sum,
 * hash sum; then the fewest and the most particles a block holds, and
 * the ghosts received. */
static int check_block(void *block, blk_proxy *px, void *user) {
  const setup *s = user;
  const pblock *b = block;
  int gid = blk_proxy_gid(px);
  blk_cbounds box, other;
  int rc = blk_kdtree_block_bounds(s->tree, gid, &box);
  if (rc) return rc;
  int64_t errors = 0, id_sum = 0, hash_sum = 0;
  for (size_t j = 0; j < b->n; j++) {
    particle want = make_particle(s, b->p[j].id);
    if (memcmp(&want, &b->p[j], sizeof want) || !blk_cbounds_contains(&box, b->p[j].x) ||
        blk_kdtree_point_to_gid(s->tree, b->p[j].x) != gid)
      errors++;
    id_sum += (int64_t)b->p[j].id;
    hash_sum += id_hash(b->p[j].id);
  }
  /* The links: exactly the touching boxes (brute force over all of them). */
  int nlinks = blk_proxy_out_count(px), k = 0;
  for (int h = 0; h < s->nblocks; h++) {
    if (h == gid) continue;
    blk_kdtree_block_bounds(s->tree, h, &other);
    if (!touch(&box, &other)) continue;
    if (k >= nlinks || blk_proxy_link(px, k)->gid != h) errors++;
    k++;
  }
  if (k != nlinks) errors++;
  /* The ghosts: every particle of a neighbour within reach, made again. */
  uint64_t total = (uint64_t)s->nblocks * (uint64_t)s->per_block, want = 0;
  for (uint64_t id = 0; id < total; id++) {
    particle q = make_particle(s, id);
    int owner = blk_kdtree_point_to_gid(s->tree, q.x);
    if (owner == gid) continue;
    blk_kdtree_block_bounds(s->tree, owner, &other);
    if (touch(&box, &other) && box_distance(&box, q.x) <= s->ghost) want++;
  }
  if (b->nghost != want) errors++;
  for (size_t j = 0; j < b->nghost; j++) {
    particle q = make_particle(s, b->ghost[j].id);
    if (memcmp(&q, &b->ghost[j], sizeof q) || box_distance(&box, q.x) > s->ghost ||
        blk_kdtree_point_to_gid(s->tree, q.x) == gid)
      errors++;
  }
  uint64_t counted;
  rc = blk_kdtree_block_points(s->tree, gid, &counted);
  if (!rc && s->exact && counted != b->n) errors++;
  int64_t post[4] = {(int64_t)b->n, errors, id_sum, hash_sum};
  for (int i = 0; i < 4 && !rc; i++) rc = blk_proxy_all_reduce_i64(px, post[i], BLK_OP_SUM);
  if (!rc) rc = blk_proxy_all_reduce_i64(px, (int64_t)b->n, BLK_OP_MIN);
  if (!rc) rc = blk_proxy_all_reduce_i64(px, (int64_t)b->n, BLK_OP_MAX);
  if (!rc) rc = blk_proxy_all_reduce_i64(px, (int64_t)b->nghost, BLK_OP_SUM);
  return rc;
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 13, .k = 0, .contiguous = 1, .threads = 2, .seed = 1};
  long long points = 400, blobs = 5, dim = 3, samples = 0, ghost_inv = 50;
  ex_int_option extra[] = {{"--points", &points, 0, "particles made by each block"},
                           {"--blobs", &blobs, 1, "Gaussian blobs the particles gather in"},
                           {"--dim", &dim, 2, "2 or 3 dimensions"},
                           {"--samples", &samples, 0, "sampled: particles per block; 0: exact"},
                           {"--ghost", &ghost_inv, 1, "ghost width is 1 / this"}};
  if (!ex_start(&argc, &argv, &o, "particles in blobs cut by a k-d tree, with ghosts", extra, 5))
    return o.status;
  if (dim > MAXD) dim = MAXD;
  int size = ex_size(), rank = ex_rank();
  setup s = {o.seed, points, blobs, (int)dim, o.blocks, samples == 0, 1.0 / (double)ghost_inv,
             NULL};

  blk_assigner *a = NULL;
  blk_master *m = NULL, *m2 = NULL;
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = pblock_create;
  mc.destroy = pblock_destroy;
  mc.save = pblock_save;
  mc.load = pblock_load;
  mc.shuffle = sizeof(double);
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(ex_add_blocks(m, a, pblock_create, NULL));
  EX_CHECK(blk_master_foreach(m, make_particles, &s));

  /* The tree: the unit cube cut into o.blocks blocks of equal counts. */
  double lo[MAXD] = {0, 0, 0}, hi[MAXD] = {1, 1, 1};
  blk_cbounds cube;
  EX_CHECK(blk_cbounds_set(&cube, s.dim, lo, hi));
  blk_kdtree_spec spec = BLK_KDTREE_SPEC_INIT;
  spec.dim = s.dim;
  spec.record_size = sizeof(particle);
  spec.coord_offset = offsetof(particle, x);
  spec.coord_type = BLK_DOUBLE;
  spec.points = give;
  spec.take = take;
  spec.domain = &cube;
  spec.method = samples ? BLK_KDTREE_SAMPLED : BLK_KDTREE_EXACT;
  spec.samples = (size_t)samples;
  spec.seed = o.seed;
  spec.k = o.k;
  spec.contiguous = o.contiguous;
  blk_kdtree *t = NULL;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  EX_CHECK(blk_kdtree_create(&t, m, a, &spec));
  double elapsed = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  s.tree = t;

  /* The blocks move to a master whose links are the tree's. */
  handover h = {calloc((size_t)o.blocks, sizeof(pblock *))};
  if (!h.by_gid) ex_fail(__FILE__, __LINE__, "calloc", BLK_ENOMEM, "the hand-over");
  EX_CHECK(blk_master_foreach(m, hand_over, &h));
  EX_CHECK(blk_master_create(&m2, MPI_COMM_WORLD, &mc));
  int nlocal = blk_assigner_local_count(a, rank), nlinks = 0;
  int *gids = malloc((size_t)(nlocal ? nlocal : 1) * sizeof *gids);
  blk_assigner_local_gids(a, rank, gids, nlocal);
  for (int i = 0; i < nlocal; i++) {
    blk_link *links;
    int n;
    EX_CHECK(blk_kdtree_links(t, a, gids[i], &links, &n));
    EX_CHECK(blk_master_add(m2, gids[i], h.by_gid[gids[i]], links, n));
    nlinks += n;
    blk_links_free(links);
  }
  free(gids);
  free(h.by_gid);
  blk_master_destroy(m);
  m = NULL;

  EX_CHECK(blk_master_foreach(m2, send_ghosts, &s));
  EX_CHECK(blk_master_exchange(m2));
  EX_CHECK(blk_master_foreach(m2, receive_ghosts, &s));
  EX_CHECK(blk_master_foreach(m2, check_block, &s));
  EX_CHECK(blk_master_exchange(m2)); /* completes check_block's sums */
  int64_t arrived = blk_master_result_i64(m2, 0), errors = blk_master_result_i64(m2, 1);
  uint64_t total = (uint64_t)o.blocks * (uint64_t)points;
  int64_t id_sum = (int64_t)(total * (total - 1) / 2), hash_sum = 0;
  for (uint64_t id = 0; id < total; id++) hash_sum += id_hash(id);
  int sums_ok = arrived == (int64_t)total && blk_master_result_i64(m2, 2) == id_sum &&
                blk_master_result_i64(m2, 3) == hash_sum;

  /* Balance: exact, all within one of each other; sampled, within half
   * of the mean. */
  int64_t least = blk_master_result_i64(m2, 4), most = blk_master_result_i64(m2, 5);
  double mean = (double)total / o.blocks;
  int balanced =
      samples ? (double)least >= 0.5 * mean && (double)most <= 1.5 * mean : most - least <= 1;
  int links_all = 0;
  MPI_Allreduce(&nlinks, &links_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int ok = ex_ooc_agree(m2, &o.ooc, errors == 0 && sums_ok && balanced);
  char how[64] = "exact";
  if (samples) snprintf(how, sizeof how, "sampled (%lld per block)", samples);
  ex_summary(m2, &o.ooc, ok, "kdtree",
             "%llu particles in %lld blobs, %dD, %d blocks (depth %d) on %d ranks x %d threads, "
             "%s, %s: %lld to %lld per block (mean %.1f), %d links, %lld ghosts within 1/%lld, "
             "%lld errors, sums %s, tree and move %.3f s",
             (unsigned long long)total, blobs, s.dim, o.blocks, blk_kdtree_depth(t), size,
             o.threads, ex_ooc_mode(&o.ooc).s, how, (long long)least, (long long)most, mean,
             links_all, (long long)blk_master_result_i64(m2, 6), ghost_inv, (long long)errors,
             sums_ok ? "equal" : "DIFFER", elapsed);
  blk_master_destroy(m2);
  blk_kdtree_destroy(t);
  blk_assigner_destroy(a);
  return ex_finish(ok);
}
