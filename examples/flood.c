/*
 * flood: the shortest walk from one cell to every cell of a maze, where a
 * round of message passing reaches only the blocks at the front. The
 * example of a foreach over some blocks, of create_at, of a table assigner
 * and of blk_all_reduce with a program's own op.
 *
 * A --width x --height grid of cells (4-connected) has walls: each cell is
 * a wall with probability --walls percent, and every cell inside one of
 * --lakes discs is a wall too. The source is the cell at (width/3,
 * height/2), always open. The grid is cut by the discrete decomposer into
 * --blocks blocks; the lakes make some blocks nearly empty and others full.
 *
 * The blocks go to ranks by a table (blk_assigner_create_table): blocks in
 * order of open cells, most first, each to the rank with the fewest open
 * cells so far (longest processing time first). The summary gives the
 * most loaded rank's share over the mean, for that table and for the
 * contiguous assigner.
 *
 * blk_master_decompose makes each block with create_at, which gets the
 * block's cells (blk_block_info.core), so the block sizes its distance
 * array without carrying the decomposer.
 *
 * Rounds: the first foreach runs only the block that holds the source (a
 * select of the program's own); every later one only the blocks that got
 * cells in the last exchange (blk_select_incoming). A run takes the cells
 * that came, keeps those that shorten a distance, walks from them inside
 * the block (label correcting: a cell may get shorter later, when a
 * shorter walk comes round an obstacle through another block), and sends
 * each border cell whose distance changed to the block across, as one
 * array per neighbour. The rounds end when no rank sent anything (an
 * MPI_Allreduce on the master's communicator). Out of core, a block the
 * front has not reached, or has left, is not loaded at all: the summary
 * counts the block runs against blocks x rounds, and each rank checks that
 * it loaded blocks no more often than it ran them (plus the two checks).
 *
 * The check: every block compares every cell's distance with a serial
 * breadth-first search of the whole grid (which every rank makes); then
 * blk_all_reduce folds a summary per block (cells reached, sum of their
 * distances, the farthest cell, ties to the lowest row, then column) with
 * the program's op, and it must equal the serial summary.
 *
 *   mpiexec -n 4 ./flood [--blocks 12] [--threads 2] [--width 240]
 *                        [--height 160] [--walls 30] [--lakes 6] [--seed 1]
 *                        [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * Prints one line with PASS, or FAIL and exit status 1.
 */
#include <blk/blk.h>
#include <stdatomic.h>

#include "example_util.h"

typedef struct maze {
  int64_t width, height, walls, lakes;
  uint64_t seed;
  int64_t source[2];
  int source_gid;
  const blk_decomposer *d;
  const int32_t *serial; /* the reference distances, width x height, -1: not reached */
  _Atomic long long sent, runs, wrong;
} maze;

typedef struct cell_msg {
  int32_t x, y, dist;
} cell_msg;

typedef struct block {
  int64_t x0, y0;
  int32_t nx, ny;
  int32_t *dist; /* nx x ny, row-major from (x0, y0); -1: not reached */
} block;

/* ---- the maze ---- */

static int inside_lake(const maze *z, int64_t x, int64_t y) {
  for (int64_t i = 0; i < z->lakes; i++) {
    int64_t cx = (int64_t)(ex_random(z->seed, 11, (uint64_t)(3 * i)) % (uint64_t)z->width);
    int64_t cy = (int64_t)(ex_random(z->seed, 11, (uint64_t)(3 * i + 1)) % (uint64_t)z->height);
    int64_t r = z->height / 12 + (int64_t)(ex_random(z->seed, 11, (uint64_t)(3 * i + 2)) %
                                           (uint64_t)(z->height / 8 + 1));
    if ((x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r) return 1;
  }
  return 0;
}

static int is_open(const maze *z, int64_t x, int64_t y) {
  if (x < 0 || y < 0 || x >= z->width || y >= z->height) return 0;
  if (x == z->source[0] && y == z->source[1]) return 1;
  if (inside_lake(z, x, y)) return 0;
  return (int64_t)(ex_random(z->seed, 7, (uint64_t)(y * z->width + x)) % 100) >= z->walls;
}

/* Breadth-first from the source over the whole grid: the reference. */
static int32_t *serial_bfs(const maze *z) {
  size_t n = (size_t)(z->width * z->height);
  int32_t *dist = malloc(n * sizeof *dist);
  int64_t *queue = malloc(n * sizeof *queue);
  if (!dist || !queue) ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "the serial search");
  for (size_t i = 0; i < n; i++) dist[i] = -1;
  size_t head = 0, tail = 0;
  int64_t s = z->source[1] * z->width + z->source[0];
  dist[s] = 0;
  queue[tail++] = s;
  static const int step[4][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1}};
  while (head < tail) {
    int64_t c = queue[head++], x = c % z->width, y = c / z->width;
    for (int k = 0; k < 4; k++) {
      int64_t nx = x + step[k][0], ny = y + step[k][1];
      if (!is_open(z, nx, ny) || dist[ny * z->width + nx] >= 0) continue;
      dist[ny * z->width + nx] = dist[c] + 1;
      queue[tail++] = ny * z->width + nx;
    }
  }
  free(queue);
  return dist;
}

/* Open cells of block gid: its cost, for the table. */
static int64_t open_cells(const maze *z, int gid) {
  blk_bounds core, bounds;
  EX_CHECK(blk_decomposer_block_bounds(z->d, gid, &core, &bounds));
  int64_t n = 0;
  for (int64_t y = core.min[1]; y <= core.max[1]; y++)
    for (int64_t x = core.min[0]; x <= core.max[0]; x++) n += is_open(z, x, y);
  return n;
}

typedef struct costed {
  int64_t cost;
  int gid;
} costed;

static int by_cost(const void *a, const void *b) {
  const costed *p = a, *q = b;
  if (p->cost != q->cost) return p->cost > q->cost ? -1 : 1;
  return p->gid - q->gid;
}

/* Longest processing time first: ranks[gid] for every gid. Returns the
 * most loaded rank's open cells; *contiguous_most is the same for the
 * contiguous assigner, and *total the open cells of all blocks. The same
 * on every rank (it is all arithmetic). */
static int64_t lpt_table(const maze *z, int nblocks, int nranks, int *ranks,
                         int64_t *contiguous_most, int64_t *total) {
  costed *c = malloc((size_t)nblocks * sizeof *c);
  int64_t *load = calloc((size_t)nranks, sizeof *load);
  int64_t *contiguous = calloc((size_t)nranks, sizeof *contiguous);
  blk_assigner *a = NULL;
  if (!c || !load || !contiguous) ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "the table");
  EX_CHECK(blk_assigner_create_contiguous(&a, nranks, nblocks));
  for (int g = 0; g < nblocks; g++) {
    c[g] = (costed){open_cells(z, g), g};
    contiguous[blk_assigner_rank(a, g)] += c[g].cost;
  }
  qsort(c, (size_t)nblocks, sizeof *c, by_cost);
  for (int i = 0; i < nblocks; i++) {
    int least = 0;
    for (int r = 1; r < nranks; r++)
      if (load[r] < load[least]) least = r;
    ranks[c[i].gid] = least;
    load[least] += c[i].cost;
  }
  int64_t most = 0;
  *contiguous_most = 0;
  *total = 0;
  for (int r = 0; r < nranks; r++) {
    if (load[r] > most) most = load[r];
    if (contiguous[r] > *contiguous_most) *contiguous_most = contiguous[r];
    *total += load[r];
  }
  blk_assigner_destroy(a);
  free(c);
  free(load);
  free(contiguous);
  return most;
}

/* ---- blocks ---- */

static int block_create(void **out, int gid, void *user) {
  (void)gid;
  (void)user;
  *out = calloc(1, sizeof(block));
  return *out ? 0 : BLK_ENOMEM;
}

/* decompose's create: the block's cells size its array, all not reached. */
static int block_create_at(void **out, const blk_block_info *info, void *user) {
  int rc = block_create(out, info->gid, user);
  if (rc) return rc;
  block *b = *out;
  b->x0 = info->core.min[0];
  b->y0 = info->core.min[1];
  b->nx = (int32_t)(info->core.max[0] - info->core.min[0] + 1);
  b->ny = (int32_t)(info->core.max[1] - info->core.min[1] + 1);
  b->dist = malloc((size_t)b->nx * (size_t)b->ny * sizeof *b->dist);
  if (!b->dist) {
    free(b); /* a failed create keeps nothing */
    *out = NULL;
    return BLK_ENOMEM;
  }
  for (int32_t i = 0; i < b->nx * b->ny; i++) b->dist[i] = -1;
  return 0;
}

static void block_destroy(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data;
  if (b) free(b->dist);
  free(b);
}

static int block_save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  int64_t head[4] = {b->x0, b->y0, b->nx, b->ny};
  blk_buffer_write(out, head, sizeof head);
  return blk_buffer_write(out, b->dist, (size_t)b->nx * (size_t)b->ny * sizeof *b->dist);
}

static int block_load(void *data, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data;
  int64_t head[4];
  int rc = blk_buffer_read(in, head, sizeof head);
  if (rc) return rc;
  b->x0 = head[0];
  b->y0 = head[1];
  b->nx = (int32_t)head[2];
  b->ny = (int32_t)head[3];
  free(b->dist);
  b->dist = malloc((size_t)b->nx * (size_t)b->ny * sizeof *b->dist + 1);
  if (!b->dist) return BLK_ENOMEM;
  return blk_buffer_read(in, b->dist, (size_t)b->nx * (size_t)b->ny * sizeof *b->dist);
}

/* ---- the rounds ---- */

static int holds_source(int gid, size_t queued, void *user) {
  (void)queued;
  return gid == ((const maze *)user)->source_gid;
}

typedef struct walk {
  int32_t *queue; /* local cell indices; a cell may be in it more than once */
  size_t head, tail, cap;
  unsigned char *changed;
} walk;

static int push(walk *w, int32_t c) {
  if (w->tail == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 256;
    int32_t *q = realloc(w->queue, cap * sizeof *q);
    if (!q) return BLK_ENOMEM;
    w->queue = q;
    w->cap = cap;
  }
  w->queue[w->tail++] = c;
  return 0;
}

/* dist[c] = d if that is shorter; then c is walked from. */
static int offer(const maze *z, block *b, walk *w, int64_t x, int64_t y, int32_t d) {
  int32_t c = (int32_t)((y - b->y0) * b->nx + (x - b->x0));
  if (!is_open(z, x, y) || (b->dist[c] >= 0 && b->dist[c] <= d)) return 0;
  b->dist[c] = d;
  w->changed[c] = 1;
  return push(w, c);
}

/* One out array per neighbour: which out queue, and its cells. */
typedef struct outbox {
  int queue;
  cell_msg *cells;
  size_t n, cap;
} outbox;

static int post(blk_proxy *p, outbox *box, int *nbox, int gid, cell_msg m) {
  int i = 0;
  while (i < *nbox && blk_proxy_out_gid(p, box[i].queue) != gid) i++;
  if (i == *nbox) {
    int q = 0;
    while (q < blk_proxy_out_count(p) && blk_proxy_out_gid(p, q) != gid) q++;
    if (q == blk_proxy_out_count(p)) return BLK_EINVAL; /* not a link: cannot happen */
    box[i] = (outbox){q, NULL, 0, 0};
    (*nbox)++;
  }
  outbox *o = &box[i];
  if (o->n == o->cap) {
    size_t cap = o->cap ? 2 * o->cap : 64;
    cell_msg *cells = realloc(o->cells, cap * sizeof *cells);
    if (!cells) return BLK_ENOMEM;
    o->cells = cells;
    o->cap = cap;
  }
  o->cells[o->n++] = m;
  return 0;
}

static int step(void *data, blk_proxy *p, void *user) {
  maze *z = user;
  block *b = data;
  static const int dirs[4][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1}};
  size_t n = (size_t)b->nx * (size_t)b->ny;
  walk w = {NULL, 0, 0, 0, calloc(n, 1)};
  outbox box[8];
  int nbox = 0, rc = w.changed ? 0 : BLK_ENOMEM;
  atomic_fetch_add(&z->runs, 1);

  if (!rc && blk_proxy_gid(p) == z->source_gid) /* 0 shortens nothing after the first run */
    rc = offer(z, b, &w, z->source[0], z->source[1], 0);
  for (int i = 0; !rc && i < blk_proxy_in_count(p); i++) {
    if (!blk_proxy_incoming_remaining(p, i)) continue;
    const void *view;
    size_t count = blk_proxy_dequeue_array_view(p, i, &view, sizeof(cell_msg));
    for (size_t k = 0; !rc && k < count; k++) {
      cell_msg m;
      memcpy(&m, (const char *)view + k * sizeof m, sizeof m);
      rc = offer(z, b, &w, m.x, m.y, m.dist);
    }
  }
  /* Walk from what shortened, inside the block. */
  while (!rc && w.head < w.tail) {
    int32_t c = w.queue[w.head++];
    int64_t x = b->x0 + c % b->nx, y = b->y0 + c / b->nx;
    for (int k = 0; !rc && k < 4; k++) {
      int64_t nx = x + dirs[k][0], ny = y + dirs[k][1];
      if (nx >= b->x0 && nx < b->x0 + b->nx && ny >= b->y0 && ny < b->y0 + b->ny)
        rc = offer(z, b, &w, nx, ny, b->dist[c] + 1);
    }
  }
  /* Border cells that changed, once each, with their final distance. */
  for (size_t c = 0; !rc && c < n; c++) {
    if (!w.changed[c]) continue;
    int64_t x = b->x0 + (int64_t)c % b->nx, y = b->y0 + (int64_t)c / b->nx;
    for (int k = 0; !rc && k < 4; k++) {
      int64_t pt[2] = {x + dirs[k][0], y + dirs[k][1]};
      if (pt[0] >= b->x0 && pt[0] < b->x0 + b->nx && pt[1] >= b->y0 && pt[1] < b->y0 + b->ny)
        continue;
      if (!is_open(z, pt[0], pt[1])) continue;
      int gid = blk_decomposer_point_to_gid(z->d, pt);
      rc = post(p, box, &nbox, gid, (cell_msg){(int32_t)pt[0], (int32_t)pt[1], b->dist[c] + 1});
    }
  }
  long long sent = 0;
  for (int i = 0; i < nbox; i++) {
    if (!rc)
      rc = blk_proxy_enqueue_array(p, box[i].queue, box[i].cells, sizeof(cell_msg), box[i].n);
    sent += (long long)box[i].n;
    free(box[i].cells);
  }
  atomic_fetch_add(&z->sent, sent);
  free(w.queue);
  free(w.changed);
  return rc;
}

/* ---- the check ---- */

static int compare(void *data, blk_proxy *p, void *user) {
  (void)p;
  maze *z = user;
  const block *b = data;
  long long wrong = 0;
  for (int32_t j = 0; j < b->ny; j++)
    for (int32_t i = 0; i < b->nx; i++)
      wrong += b->dist[j * b->nx + i] != z->serial[(b->y0 + j) * z->width + (b->x0 + i)];
  atomic_fetch_add(&z->wrong, wrong);
  return 0;
}

typedef struct summary {
  int64_t reached, dist_sum;
  int32_t far, far_x, far_y, pad;
} summary;

static void fold_cell(summary *s, int32_t d, int32_t x, int32_t y) {
  if (d < 0) return;
  s->reached++;
  s->dist_sum += d;
  if (d > s->far || (d == s->far && (y < s->far_y || (y == s->far_y && x < s->far_x)))) {
    s->far = d;
    s->far_x = x;
    s->far_y = y;
  }
}

static int give(void *value, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  summary s = {0, 0, -1, 0, 0, 0};
  for (int32_t j = 0; j < b->ny; j++)
    for (int32_t i = 0; i < b->nx; i++)
      fold_cell(&s, b->dist[j * b->nx + i], (int32_t)b->x0 + i, (int32_t)b->y0 + j);
  memcpy(value, &s, sizeof s);
  return 0;
}

static void combine(void *acc, const void *in, void *user) {
  (void)user;
  summary a, v;
  memcpy(&a, acc, sizeof a);
  memcpy(&v, in, sizeof v);
  a.reached += v.reached;
  a.dist_sum += v.dist_sum;
  if (v.far > a.far || (v.far == a.far && v.far >= 0 &&
                        (v.far_y < a.far_y || (v.far_y == a.far_y && v.far_x < a.far_x)))) {
    a.far = v.far;
    a.far_x = v.far_x;
    a.far_y = v.far_y;
  }
  memcpy(acc, &a, sizeof a);
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 12, .k = 2, .contiguous = 1, .threads = 2, .seed = 1};
  long long width = 240, height = 160, walls = 30, lakes = 6;
  ex_int_option extra[] = {
      {"--width", &width, 2, "cells along x"},
      {"--height", &height, 2, "cells along y"},
      {"--walls", &walls, 0, "percent of cells that are walls, besides the lakes"},
      {"--lakes", &lakes, 0, "discs of wall"},
  };
  if (!ex_start(&argc, &argv, &o, "the shortest walks from one cell through a maze", extra, 4))
    return o.status;
  if (walls > 100 || width * height > INT32_MAX) {
    if (ex_rank() == 0) fprintf(stderr, "flood: --walls above 100 or a grid too large\n");
    return ex_finish(0);
  }
  int size = ex_size();
  maze z = {.width = width, .height = height, .walls = walls, .lakes = lakes, .seed = o.seed};
  z.source[0] = width / 3;
  z.source[1] = height / 2;

  int64_t lo[2] = {0, 0}, hi[2] = {width - 1, height - 1};
  blk_bounds domain;
  EX_CHECK(blk_bounds_set(&domain, 2, lo, hi));
  blk_decomposer *d = NULL;
  EX_CHECK(blk_decomposer_create(&d, &domain, o.blocks, NULL));
  z.d = d;
  z.source_gid = blk_decomposer_point_to_gid(d, z.source);

  int *ranks = malloc((size_t)o.blocks * sizeof *ranks);
  if (!ranks) ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "the table");
  int64_t contiguous_most = 0, open_total = 0;
  int64_t most = lpt_table(&z, o.blocks, size, ranks, &contiguous_most, &open_total);
  blk_assigner *a = NULL;
  EX_CHECK(blk_assigner_create_table(&a, size, o.blocks, ranks));
  free(ranks);

  int32_t *serial = serial_bfs(&z);
  z.serial = serial;

  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = block_create;
  mc.create_at = block_create_at;
  mc.destroy = block_destroy;
  mc.save = block_save;
  mc.load = block_load;
  ex_ooc_configure(&mc, &o.ooc);
  blk_master *m = NULL;
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(blk_master_decompose(m, d, a));

  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  long long rounds = 0, runs = 0, sent = 0, runs_here = 0;
  for (;;) {
    atomic_store(&z.sent, 0);
    atomic_store(&z.runs, 0);
    EX_CHECK(
        blk_master_foreach_some(m, step, rounds == 0 ? holds_source : blk_select_incoming, &z));
    long long mine[2] = {atomic_load(&z.sent), atomic_load(&z.runs)}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_SUM, blk_master_comm(m));
    rounds++;
    runs_here += mine[1];
    runs += all[1];
    sent += all[0];
    if (all[0] == 0) break;
    EX_CHECK(blk_master_exchange(m));
  }
  double elapsed = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  EX_CHECK(blk_master_foreach(m, compare, &z));
  long long wrong = atomic_load(&z.wrong);
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  summary got = {0, 0, -1, 0, 0, 0}, want = {0, 0, -1, 0, 0, 0};
  EX_CHECK(blk_all_reduce(m, sizeof got, give, combine, &got, NULL));
  for (int32_t y = 0; y < height; y++)
    for (int32_t x = 0; x < width; x++) fold_cell(&want, serial[y * width + x], x, y);
  int same = got.reached == want.reached && got.dist_sum == want.dist_sum && got.far == want.far &&
             got.far_x == want.far_x && got.far_y == want.far_y;
  /* Out of core, a block is loaded to run, and once more for each of the
   * two checks: never for a round that skipped it. */
  blk_master_stats st;
  blk_master_stats_get(m, &st);
  int skipped = o.ooc.mem_blocks <= 0 ||
                st.loads <= (unsigned long long)(runs_here + 2 * blk_master_local_count(m));
  if (!skipped)
    fprintf(stderr, "flood: rank %d loaded %llu times for %lld runs of %d blocks\n", ex_rank(),
            (unsigned long long)st.loads, runs_here, blk_master_local_count(m));
  int ok = ex_ooc_agree(m, &o.ooc, wrong == 0 && same && want.reached > 1 && skipped);

  double mean = (double)open_total / size;
  ex_summary(m, &o.ooc, ok, "flood",
             "%lldx%lld cells, %d blocks on %d ranks x %d threads, %s: %lld reached (serial "
             "%lld), farthest %d steps at (%d, %d), %lld cells wrong; %lld rounds, %lld block "
             "runs of %lld, %lld cells sent; most loaded rank %.2fx the mean (contiguous "
             "%.2fx), %.3f s",
             width, height, o.blocks, size, o.threads, ex_ooc_mode(&o.ooc).s,
             (long long)got.reached, (long long)want.reached, got.far, got.far_x, got.far_y, wrong,
             rounds, runs, rounds * o.blocks, sent, mean > 0 ? (double)most / mean : 0.0,
             mean > 0 ? (double)contiguous_most / mean : 0.0, elapsed);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  free(serial);
  return ex_finish(ok);
}
