/*
 * test_kdtree: blk_kdtree_create over block counts that are not powers of
 * two (7, 13, 38) and one that is (8), in 2D and 3D, exact and sampled,
 * over uniform points, Gaussian blobs, coordinates with few distinct values
 * and copies of whole points, checked against references computed here.
 *
 * Every block g makes P(g) points (uneven counts) with ids first(g) ..
 * first(g) + P(g) - 1, whose coordinates are a function of the id, so rank 0
 * can make every point again. After the build and the move:
 *  - ids: gathered to rank 0, every id is in exactly one block, once, with
 *    its coordinates unchanged (the sorted multiset equals the input's);
 *  - every point lies in its block's box, point_to_gid names that block,
 *    and block_points says how many it holds (EXACT);
 *  - the boxes tile the domain: inside it, volumes adding up to its own, no
 *    two overlapping in a positive volume;
 *  - links: for every gid, exactly the blocks whose closed boxes meet its
 *    own (brute force over all pairs), ascending, with the assigner's rank,
 *    their boxes, and dir as the boxes say, the reverse link having -dir;
 *  - exchange: a second master whose blocks have the tree's links sends a
 *    message on every link, and every block gets each one on the link back;
 *  - random points: point_to_gid names a block whose box holds them;
 *  - balance: EXACT with distinct points, every block holds floor(N/B) or
 *    ceil(N/B) points; with copies of whole points (m of each), within
 *    depth (1 + m/2) of N/B (each split misses its target by at most m/2,
 *    and rounds by less than 1, at each level); SAMPLED with s samples per
 *    block, within 0.5 .. 1.5 of N/B for s = 64 (docs/kdtree.md).
 * Failures, the same code and detail on every rank: bad arguments (on every
 * rank, and on the last rank only), a points callback failing on one block,
 * a point outside the domain; then a build that succeeds on the same master.
 * --case faults fails each allocation in turn on rank 0 and on the last rank
 * (blk's fault injection) until a build needs no more: every rank returns
 * the same code, and the blocks keep their points. With --threads 2 every
 * callback runs on the pool (blk__sched_force), so the build's callbacks
 * run at once.
 *
 *   test_kdtree --threads T [--mem-blocks M] [--case all|faults] [--only abc..z]
 *
 * --only runs the problems named by letter (a: the first in main's list)
 * and z the failures; the tests split them between runs to stay fast.
 */
#include <blk/blk.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "check.h"
#include "runtime/schedule.h"

static int g_rank, g_size, g_threads = 1, g_mem;

/* ---- points ---------------------------------------------------------------- */

enum { UNIFORM, BLOBS, FEW_VALUES, COPIES };
#define COPIES_OF 5

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}
static double unit(uint64_t h) {
  return (double)(h >> 11) * 0x1p-53;
}

static void coords(int dist, int dim, uint64_t id, double *x) {
  uint64_t h = mix(id * 7919 + (uint64_t)dist);
  if (dist == COPIES) h = mix(id / COPIES_OF * 7919 + (uint64_t)dist);
  int blob = (int)(h % 4);
  for (int a = 0; a < dim; a++) {
    uint64_t ha = mix(h + (uint64_t)a);
    switch (dist) {
      case BLOBS: {
        double c = 0.2 + 0.6 * unit(mix((uint64_t)(blob * 16 + a))); /* 4 centres */
        double r = sqrt(-2 * log(unit(ha) + 1e-300)), th = 6.283185307179586 * unit(mix(ha));
        double v = c + 0.04 * r * cos(th);
        x[a] = v < 0 ? 0 : v > 1 ? 1 : v;
        break;
      }
      case FEW_VALUES:
        x[a] = a == 0 ? (double)(ha % 3) * 0.5 : a == 1 ? (double)(ha % 10) * 0.1 : unit(ha);
        break;
      default:
        x[a] = unit(ha);
        break;
    }
  }
}

/* ---- a problem: the layout of a record and where the points come from ---- */

typedef struct problem {
  const char *name;
  int nblocks, dim, dist;
  blk_type type; /* of the coordinates */
  int domain;    /* 1: [0,1]^dim given; 0: the points' box */
  blk_kdtree_method method;
  blk_kdtree_axis_rule axis;
  size_t samples;
  int move;
  /* the record: an id, a tag, the coordinates */
  size_t rs, coord_off, id_off;
  uint64_t *first; /* per gid, and the total at [nblocks] */
  int fail_gid;    /* the points callback fails for this gid (-1: none) */
} problem;

static size_t points_of(int gid) {
  return 150 + (size_t)(gid * 37 % 61);
}

static void problem_layout(problem *p) {
  if (p->type == BLK_DOUBLE) { /* {u64 id; double x[dim]} */
    p->id_off = 0;
    p->coord_off = 8;
    p->rs = 8 + 8 * (size_t)p->dim;
  } else { /* {u32 tag; float x[dim]; u64 id}, the id unaligned */
    p->coord_off = 4;
    p->id_off = 4 + 4 * (size_t)p->dim;
    p->rs = p->id_off + 8;
  }
  p->first = calloc((size_t)p->nblocks + 1, sizeof *p->first);
  for (int g = 0; g < p->nblocks; g++) p->first[g + 1] = p->first[g] + points_of(g);
  p->fail_gid = -1;
}

/* The coordinates as stored (float ones rounded). */
static void stored(const problem *p, uint64_t id, double *x) {
  coords(p->dist, p->dim, id, x);
  if (p->type == BLK_FLOAT)
    for (int a = 0; a < p->dim; a++) x[a] = (float)x[a];
}

static void write_record(const problem *p, unsigned char *r, uint64_t id) {
  double x[BLK_MAX_DIM];
  stored(p, id, x);
  memset(r, 0xab, p->rs);
  memcpy(r + p->id_off, &id, 8);
  for (int a = 0; a < p->dim; a++) {
    if (p->type == BLK_DOUBLE) {
      memcpy(r + p->coord_off + 8 * (size_t)a, &x[a], 8);
    } else {
      float f = (float)x[a];
      memcpy(r + p->coord_off + 4 * (size_t)a, &f, 4);
    }
  }
}

static void read_record(const problem *p, const unsigned char *r, uint64_t *id, double *x) {
  memcpy(id, r + p->id_off, 8);
  for (int a = 0; a < p->dim; a++) {
    if (p->type == BLK_DOUBLE) {
      memcpy(&x[a], r + p->coord_off + 8 * (size_t)a, 8);
    } else {
      float f;
      memcpy(&f, r + p->coord_off + 4 * (size_t)a, 4);
      x[a] = f;
    }
  }
}

/* ---- blocks ---------------------------------------------------------------- */

typedef struct block {
  int gid;
  size_t n, rs;
  unsigned char *recs;
} block;

static problem *g_p; /* the running problem, for the block callbacks */

static int create(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b);
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  b->rs = g_p->rs;
  *out = b;
  return 0;
}

static void destroy(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data;
  free(b->recs);
  free(b);
}

static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  uint64_t n = b->n;
  blk_buffer_write(out, &n, sizeof n);
  return blk_buffer_write(out, b->recs, b->n * b->rs);
}

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  block *b = data;
  uint64_t n;
  blk_buffer_read(in, &n, sizeof n);
  CHECK_EQ_INT(b->gid, gid);
  free(b->recs);
  b->n = (size_t)n;
  b->recs = malloc(b->n * b->rs + 1);
  if (!b->recs) return BLK_ENOMEM;
  return blk_buffer_read(in, b->recs, b->n * b->rs);
}

static int make_points(void *data, blk_proxy *px, void *user) {
  (void)px;
  const problem *p = user;
  block *b = data;
  free(b->recs);
  b->rs = p->rs;
  b->n = points_of(b->gid);
  b->recs = malloc(b->n * p->rs);
  if (!b->recs) return BLK_ENOMEM;
  for (size_t j = 0; j < b->n; j++) write_record(p, b->recs + j * p->rs, p->first[b->gid] + j);
  return 0;
}

static int give_points(void *data, int gid, const void **records, size_t *count, void *user) {
  const problem *p = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  if (gid == p->fail_gid) return -7;
  *records = b->recs;
  *count = b->n;
  return 0;
}

static int take_points(void *data, int gid, const void *records, size_t count, void *user) {
  const problem *p = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  CHECK(count == 0 || records != NULL);
  unsigned char *mine = malloc(count * p->rs + 1);
  if (!mine) return BLK_ENOMEM;
  if (count) memcpy(mine, records, count * p->rs);
  free(b->recs);
  b->recs = mine;
  b->n = count;
  return 0;
}

/* A master whose blocks hold problem p's points. Masters are kept for the
 * run, one per block count (a master costs 85 ms at 4 ranks on 2 cores),
 * and their blocks made again for each problem. */
static struct {
  int nblocks;
  blk_master *m;
  blk_assigner *a;
} g_masters[8];

static blk_master *make_master(problem *p, blk_assigner **a) {
  int i = 0;
  while (g_masters[i].m && g_masters[i].nblocks != p->nblocks) i++;
  CHECK(i < 8);
  if (!g_masters[i].m) {
    blk_master_config mc = check_master_config(g_threads, g_mem, create, destroy, save, load);
    CHECK_OK(blk_master_create(&g_masters[i].m, MPI_COMM_WORLD, &mc));
    CHECK_OK(blk_assigner_create_contiguous(&g_masters[i].a, g_size, p->nblocks));
    g_masters[i].nblocks = p->nblocks;
    int n = blk_assigner_local_count(g_masters[i].a, g_rank);
    int *gids = malloc((size_t)(n ? n : 1) * sizeof *gids);
    blk_assigner_local_gids(g_masters[i].a, g_rank, gids, n);
    for (int j = 0; j < n; j++) {
      void *b;
      CHECK_OK(create(&b, gids[j], NULL));
      CHECK_OK(blk_master_add(g_masters[i].m, gids[j], b, NULL, 0));
    }
    free(gids);
  }
  CHECK_OK(blk_master_foreach(g_masters[i].m, make_points, p));
  *a = g_masters[i].a;
  return g_masters[i].m;
}

static void free_masters(void) {
  for (int i = 0; i < 8 && g_masters[i].m; i++) {
    blk_master_destroy(g_masters[i].m);
    blk_assigner_destroy(g_masters[i].a);
  }
}

static blk_kdtree_spec make_spec(problem *p, const blk_cbounds *unit_box) {
  blk_kdtree_spec s = BLK_KDTREE_SPEC_INIT;
  s.dim = p->dim;
  s.record_size = p->rs;
  s.coord_offset = p->coord_off;
  s.coord_type = p->type;
  s.points = give_points;
  s.take = p->move ? take_points : NULL;
  s.user = p;
  s.domain = p->domain ? unit_box : NULL;
  s.method = p->method;
  s.axis = p->axis;
  s.samples = p->samples;
  s.seed = 12345;
  return s;
}

/* ---- gathering what the blocks hold --------------------------------------- */

typedef struct held {
  uint64_t *ids;
  int *gids;
  double *x; /* dim per point */
  size_t n, cap;
  int dim;
  const problem *p;
} held;

static int collect(void *data, blk_proxy *px, void *user) {
  (void)px;
  held *h = user;
  const block *b = data;
  static int busy; /* callbacks may run on pool threads at once: a spin lock */
  while (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE)) continue;
  if (h->n + b->n > h->cap) {
    h->cap = 2 * (h->n + b->n) + 16;
    h->ids = realloc(h->ids, h->cap * sizeof *h->ids);
    h->gids = realloc(h->gids, h->cap * sizeof *h->gids);
    h->x = realloc(h->x, h->cap * (size_t)h->dim * sizeof *h->x);
    CHECK(h->ids && h->gids && h->x);
  }
  for (size_t j = 0; j < b->n; j++, h->n++) {
    read_record(h->p, b->recs + j * b->rs, &h->ids[h->n], &h->x[h->n * (size_t)h->dim]);
    h->gids[h->n] = b->gid;
  }
  __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
  return 0;
}

/* Every point of every block, on rank 0 (n is 0 elsewhere): one gather of
 * (id, gid, coordinates) as doubles (ids and gids below 2^53). */
static held gather(blk_master *m, const problem *p) {
  held h = {NULL, NULL, NULL, 0, 0, p->dim, p};
  CHECK_OK(blk_master_foreach(m, collect, &h));
  int w = 2 + p->dim, n = (int)h.n * w, *counts = NULL, *displs = NULL, total = 0;
  double *mine = malloc((size_t)n * sizeof *mine + 8), *all = NULL;
  for (size_t i = 0; i < h.n; i++) {
    mine[i * (size_t)w] = (double)h.ids[i];
    mine[i * (size_t)w + 1] = h.gids[i];
    memcpy(&mine[i * (size_t)w + 2], &h.x[i * (size_t)p->dim], (size_t)p->dim * sizeof(double));
  }
  if (g_rank == 0) {
    counts = calloc((size_t)g_size, sizeof *counts);
    displs = calloc((size_t)g_size, sizeof *displs);
  }
  MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (g_rank == 0)
    for (int r = 0; r < g_size; r++) displs[r] = total, total += counts[r];
  all = malloc((size_t)total * sizeof *all + 8);
  MPI_Gatherv(mine, n, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  size_t np = (size_t)(total / w);
  held out = {malloc(np * 8 + 8),
              malloc(np * sizeof(int) + 8),
              malloc(np * (size_t)p->dim * 8 + 8),
              np,
              np,
              p->dim,
              p};
  for (size_t i = 0; i < np; i++) {
    out.ids[i] = (uint64_t)all[i * (size_t)w];
    out.gids[i] = (int)all[i * (size_t)w + 1];
    memcpy(&out.x[i * (size_t)p->dim], &all[i * (size_t)w + 2], (size_t)p->dim * sizeof(double));
  }
  free(h.ids);
  free(h.gids);
  free(h.x);
  free(mine);
  free(all);
  free(counts);
  free(displs);
  return out;
}

static void held_free(held *h) {
  free(h->ids);
  free(h->gids);
  free(h->x);
}

/* ---- the checks ------------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Every input point in exactly one block, unchanged, in its box; counts. */
static void check_points(const problem *p, const blk_kdtree *t, const held *h, uint64_t *count) {
  uint64_t N = p->first[p->nblocks];
  CHECK_EQ_INT(h->n, N);
  uint64_t *ids = malloc(N * sizeof *ids + 8);
  memcpy(ids, h->ids, N * sizeof *ids);
  qsort(ids, N, sizeof *ids, cmp_u64);
  for (uint64_t i = 0; i < N; i++)
    CHECK_MSG(ids[i] == i, "%s: sorted id %llu is %llu", p->name, (unsigned long long)i,
              (unsigned long long)ids[i]);
  free(ids);
  memset(count, 0, (size_t)p->nblocks * sizeof *count);
  for (size_t i = 0; i < h->n; i++) {
    const double *x = &h->x[i * (size_t)p->dim];
    double want[BLK_MAX_DIM];
    stored(p, h->ids[i], want);
    for (int a = 0; a < p->dim; a++) CHECK(x[a] == want[a]);
    int g = h->gids[i];
    blk_cbounds box;
    CHECK_OK(blk_kdtree_block_bounds(t, g, &box));
    CHECK_MSG(blk_cbounds_contains(&box, x), "%s: point %llu is outside the box of gid %d", p->name,
              (unsigned long long)h->ids[i], g);
    CHECK_EQ_INT(blk_kdtree_point_to_gid(t, x), g);
    count[g]++;
  }
}

static double volume(const blk_cbounds *b) {
  double v = 1;
  for (int a = 0; a < b->dim; a++) v *= b->max[a] - b->min[a];
  return v;
}

static void check_tiling(const problem *p, const blk_kdtree *t, blk_cbounds *boxes) {
  blk_cbounds dom;
  CHECK_OK(blk_kdtree_domain(t, &dom));
  double sum = 0;
  for (int g = 0; g < p->nblocks; g++) {
    CHECK_OK(blk_kdtree_block_bounds(t, g, &boxes[g]));
    for (int a = 0; a < p->dim; a++)
      CHECK(boxes[g].min[a] >= dom.min[a] && boxes[g].max[a] <= dom.max[a] &&
            boxes[g].min[a] <= boxes[g].max[a]);
    sum += volume(&boxes[g]);
  }
  CHECK_MSG(fabs(sum - volume(&dom)) <= 1e-12 * volume(&dom) + 1e-300,
            "%s: the volumes add up to %.17g, the domain's is %.17g", p->name, sum, volume(&dom));
  for (int g = 0; g < p->nblocks; g++)
    for (int h = g + 1; h < p->nblocks; h++) {
      double v = 1;
      for (int a = 0; a < p->dim; a++) {
        double lo = fmax(boxes[g].min[a], boxes[h].min[a]);
        double hi = fmin(boxes[g].max[a], boxes[h].max[a]);
        v *= hi > lo ? hi - lo : 0;
      }
      CHECK_MSG(v == 0, "%s: gids %d and %d overlap in volume %g", p->name, g, h, v);
    }
}

static void check_links(const problem *p, const blk_kdtree *t, const blk_assigner *a,
                        const blk_cbounds *boxes, int *nlinks_total) {
  *nlinks_total = 0;
  for (int g = 0; g < p->nblocks; g++) {
    blk_link *links;
    int n;
    CHECK_OK(blk_kdtree_links(t, a, g, &links, &n));
    int k = 0;
    for (int h = 0; h < p->nblocks; h++) {
      blk_cbounds meet;
      if (h == g || blk_cbounds_intersect(&meet, &boxes[g], &boxes[h]) != 1) continue;
      CHECK_MSG(k < n && links[k].gid == h,
                "%s: gid %d's link %d is to gid %d, brute force says %d", p->name, g, k,
                k < n ? links[k].gid : -1, h);
      CHECK_EQ_INT(links[k].rank, blk_assigner_rank(a, h));
      CHECK(memcmp(&links[k].cbounds, &boxes[h], sizeof boxes[h]) == 0);
      for (int x = 0; x < BLK_MAX_DIM; x++) {
        int d = links[k].dir[x];
        CHECK(links[k].wrap[x] == 0);
        if (x >= p->dim) CHECK(d == 0);
        if (d == 1) CHECK(boxes[h].min[x] == boxes[g].max[x]);
        if (d == -1) CHECK(boxes[h].max[x] == boxes[g].min[x]);
      }
      /* the reverse link has -dir */
      blk_link *back;
      int nb;
      CHECK_OK(blk_kdtree_links(t, a, h, &back, &nb));
      int r = blk_link_find_reverse(back, nb, g, links[k].dir, p->dim);
      CHECK_MSG(r >= 0, "%s: gid %d has no link back to gid %d with -dir", p->name, h, g);
      blk_links_free(back);
      k++;
    }
    CHECK_MSG(k == n, "%s: gid %d has %d links, brute force %d", p->name, g, n, k);
    *nlinks_total += n;
    blk_links_free(links);
  }
  blk_link *none;
  int nn;
  CHECK_ERR(blk_kdtree_links(t, a, p->nblocks, &none, &nn), BLK_ENOTFOUND, "outside");
  CHECK(none == NULL && nn == 0);
}

/* An exchange over the tree's links. One master for the whole run (a
 * master costs 85 ms at 4 ranks on 2 cores): each problem adds its blocks
 * with gids offset past the last problem's, and every exchange sends a
 * message on every link of every problem added so far. */
typedef struct xblock {
  int gid;
} xblock;

static blk_master *g_xm;
static int g_xoffset, g_xlinks; /* gids used so far; links of all the blocks, all ranks */

static void x_destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

static int x_send(void *data, blk_proxy *px, void *user) {
  (void)user;
  const xblock *b = data;
  for (int i = 0; i < blk_proxy_out_count(px); i++) {
    const blk_link *l = blk_proxy_link(px, i);
    int msg[2 + BLK_MAX_DIM] = {b->gid, l->gid};
    memcpy(msg + 2, l->dir, sizeof l->dir);
    CHECK_OK(blk_proxy_enqueue(px, i, msg, sizeof msg));
  }
  return 0;
}

static int x_receive(void *data, blk_proxy *px, void *user) {
  const xblock *b = data;
  int64_t *got = user;
  for (int i = 0; i < blk_proxy_in_count(px); i++) {
    const blk_link *l = blk_proxy_link(px, i);
    int msg[2 + BLK_MAX_DIM];
    CHECK_EQ_INT(blk_proxy_incoming_remaining(px, i), sizeof msg);
    blk_proxy_dequeue(px, i, msg, sizeof msg);
    CHECK_EQ_INT(msg[0], l->gid);
    CHECK_EQ_INT(msg[1], b->gid);
    for (int x = 0; x < BLK_MAX_DIM; x++) CHECK_EQ_INT(msg[2 + x], -l->dir[x]);
  }
  __atomic_fetch_add(got, blk_proxy_in_count(px), __ATOMIC_RELAXED);
  return 0;
}

static void check_exchange(const problem *p, const blk_kdtree *t, const blk_assigner *a,
                           int nlinks_total) {
  int n = blk_assigner_local_count(a, g_rank);
  int *gids = malloc((size_t)(n ? n : 1) * sizeof *gids);
  blk_assigner_local_gids(a, g_rank, gids, n);
  for (int i = 0; i < n; i++) {
    blk_link *links;
    int nl;
    CHECK_OK(blk_kdtree_links(t, a, gids[i], &links, &nl));
    for (int l = 0; l < nl; l++) links[l].gid += g_xoffset;
    xblock *b = malloc(sizeof *b);
    CHECK(b);
    b->gid = gids[i] + g_xoffset;
    CHECK_OK(blk_master_add(g_xm, b->gid, b, links, nl));
    blk_links_free(links);
  }
  free(gids);
  g_xoffset += p->nblocks;
  g_xlinks += nlinks_total;
  int64_t got = 0, all = 0;
  CHECK_OK(blk_master_foreach(g_xm, x_send, NULL));
  CHECK_OK(blk_master_exchange(g_xm));
  CHECK_OK(blk_master_foreach(g_xm, x_receive, &got));
  MPI_Allreduce(&got, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK_MSG(all == g_xlinks, "%s: %lld messages arrived over %d links", p->name, (long long)all,
            g_xlinks);
}

static void check_queries(const problem *p, const blk_kdtree *t, const blk_cbounds *boxes) {
  blk_cbounds dom;
  CHECK_OK(blk_kdtree_domain(t, &dom));
  for (int i = 0; i < 500; i++) {
    double x[BLK_MAX_DIM];
    for (int a = 0; a < p->dim; a++) {
      double u = unit(mix((uint64_t)(i * 16 + a) + 999));
      x[a] = dom.min[a] + u * (dom.max[a] - dom.min[a]);
    }
    int g = blk_kdtree_point_to_gid(t, x);
    CHECK(g >= 0 && g < p->nblocks);
    CHECK(blk_cbounds_contains(&boxes[g], x));
  }
  double out[BLK_MAX_DIM] = {0};
  out[0] = dom.max[0] + 1;
  CHECK_EQ_INT(blk_kdtree_point_to_gid(t, out), BLK_ENOTFOUND);
  out[0] = NAN;
  CHECK_EQ_INT(blk_kdtree_point_to_gid(t, out), BLK_ENOTFOUND);
  CHECK_EQ_INT(blk_kdtree_point_to_gid(t, NULL), BLK_EINVAL);
  CHECK_EQ_INT(blk_kdtree_point_to_gid(NULL, out), BLK_EINVAL);
}

/* Balance of the counts; returns the largest |count - N/B| over N/B. */
static double check_balance(const problem *p, const blk_kdtree *t, const uint64_t *count) {
  uint64_t N = p->first[p->nblocks], B = (uint64_t)p->nblocks;
  double mean = (double)N / (double)B, worst = 0;
  int depth = blk_kdtree_depth(t);
  for (int g = 0; g < p->nblocks; g++) {
    if (getenv("TEST_KDTREE_VERBOSE"))
      printf("    gid %d: %llu points\n", g, (unsigned long long)count[g]);
    double off = fabs((double)count[g] - mean);
    if (off > worst) worst = off;
    if (p->method == BLK_KDTREE_EXACT) {
      uint64_t said;
      CHECK_OK(blk_kdtree_block_points(t, g, &said));
      CHECK_EQ_INT(said, count[g]);
      if (p->dist == COPIES)
        CHECK_MSG(off <= depth * (1 + COPIES_OF / 2.0), "%s: gid %d holds %llu, N/B = %g", p->name,
                  g, (unsigned long long)count[g], mean);
      else
        CHECK_MSG(count[g] == N / B || count[g] == (N + B - 1) / B,
                  "%s: gid %d holds %llu points, N/B = %g", p->name, g,
                  (unsigned long long)count[g], mean);
    } else {
      CHECK_MSG(count[g] >= 0.5 * mean && count[g] <= 1.5 * mean,
                "%s: gid %d holds %llu points, N/B = %g", p->name, g, (unsigned long long)count[g],
                mean);
    }
  }
  return worst / mean;
}

static void run_problem(problem *p) {
  problem_layout(p);
  g_p = p;
  blk_assigner *a;
  blk_master *m = make_master(p, &a);
  double lo[BLK_MAX_DIM] = {0}, hi[BLK_MAX_DIM] = {1, 1, 1, 1, 1, 1, 1, 1};
  blk_cbounds unit_box;
  CHECK_OK(blk_cbounds_set(&unit_box, p->dim, lo, hi));
  blk_kdtree_spec spec = make_spec(p, &unit_box);
  blk_kdtree *t = NULL;
  double t0 = MPI_Wtime();
  CHECK_OK(blk_kdtree_create(&t, m, a, &spec));
  double took = MPI_Wtime() - t0;
  CHECK(t != NULL);
  CHECK_EQ_INT(blk_kdtree_nblocks(t), p->nblocks);
  CHECK_EQ_INT(blk_kdtree_dim(t), p->dim);
  int depth = 0;
  while ((1 << depth) < p->nblocks) depth++;
  CHECK_EQ_INT(blk_kdtree_depth(t), depth);

  blk_cbounds *boxes = malloc((size_t)p->nblocks * sizeof *boxes);
  check_tiling(p, t, boxes);
  int nlinks = 0;
  check_links(p, t, a, boxes, &nlinks);
  check_exchange(p, t, a, nlinks);
  check_queries(p, t, boxes);
  held h = gather(m, p);
  double worst = 0;
  if (g_rank == 0) {
    uint64_t *count = calloc((size_t)p->nblocks, sizeof *count);
    check_points(p, t, &h, count);
    worst = check_balance(p, t, count);
    free(count);
  }
  held_free(&h);
  if (g_mem) check_budget(m, g_mem);
  if (g_rank == 0)
    printf(
        "  %-34s %2d blocks, %dD %s: %llu points, %d links, worst |n - N/B| = %.3f N/B, "
        "%.1f ms\n",
        p->name, p->nblocks, p->dim, p->method == BLK_KDTREE_EXACT ? "exact  " : "sampled",
        (unsigned long long)p->first[p->nblocks], nlinks, worst, took * 1e3);
  free(boxes);
  blk_kdtree_destroy(t);
  free(p->first);
}

/* ---- failures -------------------------------------------------------------- */

/* The blocks still hold the points they were made with. */
static int unchanged(void *data, blk_proxy *px, void *user) {
  (void)px;
  const problem *p = user;
  const block *b = data;
  CHECK_EQ_INT(b->n, points_of(b->gid));
  for (size_t j = 0; j < b->n; j++) {
    uint64_t id;
    double x[BLK_MAX_DIM], want[BLK_MAX_DIM];
    read_record(p, b->recs + j * b->rs, &id, x);
    CHECK_EQ_INT(id, p->first[b->gid] + j);
    stored(p, id, want);
    for (int a = 0; a < p->dim; a++) CHECK(x[a] == want[a]);
  }
  return 0;
}

static void run_failures(void) {
  problem p = {"failures", 7, 2, UNIFORM, BLK_DOUBLE, 1, BLK_KDTREE_EXACT, BLK_KDTREE_LONGEST, 0,
               0,          0, 0, 0,       NULL,       -1}; /* nothing moves until the last build */
  problem_layout(&p);
  g_p = &p;
  blk_assigner *a;
  blk_master *m = make_master(&p, &a);
  double lo[2] = {0, 0}, hi[2] = {1, 1};
  blk_cbounds unit_box;
  CHECK_OK(blk_cbounds_set(&unit_box, 2, lo, hi));
  blk_kdtree_spec spec = make_spec(&p, &unit_box);
  blk_kdtree *t = (blk_kdtree *)&spec; /* must come back NULL */
  blk_log_set_level(BLK_LOG_NONE);

  int rc = blk_kdtree_create(&t, m, a, NULL);
  CHECK(t == NULL);
  check_agreed(rc, "NULL argument");
  CHECK_EQ_INT(rc, BLK_EINVAL);

  blk_kdtree_spec bad = spec;
  bad.dim = 9;
  rc = blk_kdtree_create(&t, m, a, &bad);
  check_agreed(rc, "dim = 9");
  CHECK_EQ_INT(rc, BLK_EINVAL);

  bad = spec; /* only on the last rank */
  if (g_rank == g_size - 1) bad.dim = 0;
  rc = blk_kdtree_create(&t, m, a, &bad);
  check_agreed(rc, "dim = 0");
  CHECK_EQ_INT(rc, BLK_EINVAL);

  bad = spec; /* a spec that differs between ranks */
  if (g_rank == g_size - 1) bad.bins = 17;
  rc = blk_kdtree_create(&t, m, a, &bad);
  check_agreed(rc, g_size > 1 ? "different specs" : NULL);
  CHECK_EQ_INT(rc, g_size > 1 ? BLK_EINVAL : 0);
  blk_kdtree_destroy(t);
  t = NULL;

  bad = spec;
  bad.coord_offset = p.rs - 8;
  rc = blk_kdtree_create(&t, m, a, &bad);
  check_agreed(rc, "do not fit a record");
  CHECK_EQ_INT(rc, BLK_EINVAL);

  p.fail_gid = 5; /* the points callback fails on one block */
  rc = blk_kdtree_create(&t, m, a, &spec);
  check_agreed(rc, "gid 5, round 0: the points callback returned -7");
  CHECK_EQ_INT(rc, BLK_ECALLBACK);
  CHECK(t == NULL);
  p.fail_gid = -1;

  blk_cbounds small = unit_box; /* points outside the domain */
  small.max[1] = 0.5;
  bad = spec;
  bad.domain = &small;
  rc = blk_kdtree_create(&t, m, a, &bad);
  check_agreed(rc, "lie outside the domain");
  CHECK_EQ_INT(rc, BLK_EINVAL);

  blk_assigner *wrong; /* an assigner for another rank count */
  CHECK_OK(blk_assigner_create_contiguous(&wrong, g_size + 1, 7));
  rc = blk_kdtree_create(&t, m, wrong, &spec);
  check_agreed(rc, "the assigner is for");
  blk_assigner_destroy(wrong);

  CHECK_EQ_INT(blk_kdtree_create(&t, NULL, a, &spec), BLK_EINVAL);
  blk_kdtree_spec_init(&bad, 99);
  CHECK_ERR(blk_kdtree_spec_init(&bad, 99), BLK_EINVAL, "version 99");
  CHECK_OK(blk_kdtree_spec_init(&bad, BLK_KDTREE_SPEC_VERSION));
  blk_log_set_level(BLK_LOG_WARN);

  CHECK_OK(blk_master_foreach(m, unchanged, &p)); /* nothing moved */
  spec.take = take_points;
  CHECK_OK(blk_kdtree_create(&t, m, a, &spec)); /* and the master is fine */
  blk_kdtree_destroy(t);
  free(p.first);
  if (g_rank == 0) printf("  failures: the same code and detail on every rank\n");
}

/* Each allocation in turn fails on one rank, in EXACT and SAMPLED builds
 * (without the move, whose failures are blk_all_to_all's and tested with
 * it), on one master: after every failure the master is usable and the
 * blocks hold the points they were made with. */
static void run_faults(void) {
  problem p = {"faults", 7, 2, BLOBS, BLK_DOUBLE, 0, BLK_KDTREE_EXACT, BLK_KDTREE_LONGEST, 0,
               0,        0, 0, 0,     NULL,       -1};
  problem_layout(&p);
  g_p = &p;
  blk_assigner *a;
  blk_master *m = make_master(&p, &a);
  blk_log_set_level(BLK_LOG_NONE);
  for (int w = 0; w < (g_size > 1 ? 2 : 1); w++) {
    int who = w ? g_size - 1 : 0, runs = 0, failures = 0;
    for (uint64_t n = 1;; n++) {
      int any = 0;
      for (int sampled = 0; sampled < 2; sampled++) {
        blk_kdtree_spec spec = make_spec(&p, NULL);
        spec.method = sampled ? BLK_KDTREE_SAMPLED : BLK_KDTREE_EXACT;
        blk_kdtree *t = NULL;
        if (g_rank == who) blk__fault_arm(BLK__FAULT_ALLOC, n, 1);
        int rc = blk_kdtree_create(&t, m, a, &spec);
        uint64_t fired = g_rank == who ? blk__fault_fired(BLK__FAULT_ALLOC) : 0;
        blk__fault_arm(BLK__FAULT_ALLOC, 0, 0);
        MPI_Bcast(&fired, 1, MPI_UINT64_T, who, MPI_COMM_WORLD);
        check_agreed(rc, NULL);
        if (rc) {
          CHECK_MSG(rc == BLK_ENOMEM || rc == BLK_ECALLBACK, "fault %llu: %d (%s)",
                    (unsigned long long)n, rc, blk_last_error());
          CHECK(t == NULL);
          failures++;
        }
        CHECK(!rc || fired);
        any |= fired != 0;
        blk_kdtree_destroy(t);
        runs++;
      }
      CHECK_OK(blk_master_foreach(m, unchanged, &p));
      if (!any) break;
      CHECK_MSG(n < 3000, "more than 3000 allocations");
    }
    if (g_rank == 0) printf("  faults on rank %d: %d builds, %d failed\n", who, runs, failures);
  }
  blk_log_set_level(BLK_LOG_WARN);
  free(p.first);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const char *which = "all", *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      g_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      g_mem = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--case") && i + 1 < argc)
      which = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  /* With 2 threads every callback goes to the pool (blk's scheduler would
   * keep these short ones on the driver), so the build's callbacks really
   * run at once. */
  if (g_threads > 1) blk__sched_force(1);
  if (!strcmp(which, "faults")) {
    run_faults();
  } else {
    /* name, blocks, dim, points, coordinates, domain, method, axis, samples, move */
    problem ps[] = {
        {"uniform", 7, 2, UNIFORM, BLK_DOUBLE, 1, BLK_KDTREE_EXACT, BLK_KDTREE_LONGEST, 0, 1, 0, 0,
         0, NULL, -1},
        {"blobs, float, points' box", 13, 3, BLOBS, BLK_FLOAT, 0, BLK_KDTREE_EXACT,
         BLK_KDTREE_ROUND_ROBIN, 0, 1, 0, 0, 0, NULL, -1},
        {"few values", 7, 3, FEW_VALUES, BLK_DOUBLE, 1, BLK_KDTREE_EXACT, BLK_KDTREE_LONGEST, 0, 1,
         0, 0, 0, NULL, -1},
        {"copies", 13, 2, COPIES, BLK_DOUBLE, 1, BLK_KDTREE_EXACT, BLK_KDTREE_LONGEST, 0, 1, 0, 0,
         0, NULL, -1},
        {"uniform, 38 blocks", 38, 2, UNIFORM, BLK_FLOAT, 1, BLK_KDTREE_EXACT, BLK_KDTREE_LONGEST,
         0, 1, 0, 0, 0, NULL, -1},
        {"sampled uniform", 8, 3, UNIFORM, BLK_DOUBLE, 1, BLK_KDTREE_SAMPLED, BLK_KDTREE_LONGEST,
         64, 1, 0, 0, 0, NULL, -1},
        {"sampled blobs", 13, 2, BLOBS, BLK_DOUBLE, 0, BLK_KDTREE_SAMPLED, BLK_KDTREE_LONGEST, 64,
         1, 0, 0, 0, NULL, -1},
    };
    if (g_rank == 0)
      printf("test_kdtree: %d ranks, %d threads, %d blocks in memory\n", g_size, g_threads, g_mem);
    blk_master_config mc = BLK_MASTER_CONFIG_INIT;
    mc.threads = g_threads;
    mc.destroy = x_destroy;
    CHECK_OK(blk_master_create(&g_xm, MPI_COMM_WORLD, &mc));
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
      if (!only || strchr(only, 'a' + (int)i)) run_problem(&ps[i]);
    if (!only || strchr(only, 'z')) run_failures();
    blk_master_destroy(g_xm);
  }
  free_masters();
  if (g_rank == 0) printf("test_kdtree: ok\n");
  MPI_Finalize();
  return 0;
}
