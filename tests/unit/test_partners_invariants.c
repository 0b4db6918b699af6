/*
 * test_partners_invariants: properties every regular pattern must have, over many grids.
 *
 * Grids: 1D with 1..64 blocks and 1000 and 1009, every 2D and 3D grid of at most 64
 * blocks; k = 2, 3, 4, 8 and explicit rounds (the prime factors of each axis in a
 * scrambled order); both orders; all four patterns. For each pattern object:
 *  - pairing: the (sender, receiver) pairs of round r's out-lists are exactly those of
 *    round r+1's in-lists, each once; round 0 receives nothing, round R sends nothing;
 *    an inactive block has no partners; lists stay within max_group, which is reached;
 *  - shape: merge starts with all and ends with gid 0 alone; broadcast the reverse;
 *    swap keeps all active with groups of the round's radix along the round's axis;
 *    all-reduce has gid 0 alone in its middle round; the radices multiply to nblocks
 *    (all-reduce: nblocks^2); a k-derived radix is <= k or has no factor in 2..k;
 *  - a simulation in one thread: block g starts with g+1 and in every round adds up
 *    what its in-partners sent, while a second counter adds up contributions; compared
 *    with the closed forms (merge: root n(n+1)/2 from n contributions; swap, every block
 *    sending its full value to every member, and all-reduce: every block n(n+1)/2 from
 *    n; broadcast: every block the root's 1 through a single chain).
 */
#include "blk/blk.h"
#include "blk/partners.h"
#include "check.h"

typedef struct grid {
  int dim;
  int div[3];
  int n;
} grid;

/* Coordinate of gid on axis a (axis 0 fastest). */
static int coord(const grid *g, int gid, int a) {
  for (int i = 0; i < a; i++) gid /= g->div[i];
  return gid % g->div[a];
}

/* No divisor in 2..k. */
static int no_factor_up_to(int x, int k) {
  for (int j = 2; j <= k && j < x; j++)
    if (x % j == 0) return 0;
  return x > k;
}

/* Scratch for check_pattern, allocated once per grid (malloc is slow under ASan). */
typedef struct work {
  int *from, *to, *senders, *start, *mark, *gids, *was_active;
  long long *value, *before, *count, *cbefore;
} work;

static void work_init(work *ws, int n) {
  size_t cap = (size_t)n * (size_t)n, m = (size_t)n + 1;
  ws->from = malloc(cap * sizeof(int));
  ws->to = malloc(cap * sizeof(int));
  ws->senders = malloc(cap * sizeof(int));
  ws->start = malloc(m * sizeof(int));
  ws->mark = malloc(m * sizeof(int));
  ws->gids = malloc(m * sizeof(int));
  ws->was_active = malloc(m * sizeof(int));
  ws->value = malloc(m * sizeof(long long));
  ws->before = malloc(m * sizeof(long long));
  ws->count = malloc(m * sizeof(long long));
  ws->cbefore = malloc(m * sizeof(long long));
  CHECK(ws->from && ws->to && ws->senders && ws->start && ws->mark && ws->gids && ws->was_active &&
        ws->value && ws->before && ws->count && ws->cbefore);
}

static void work_free(work *ws) {
  free(ws->from);
  free(ws->to);
  free(ws->senders);
  free(ws->start);
  free(ws->mark);
  free(ws->gids);
  free(ws->was_active);
  free(ws->value);
  free(ws->before);
  free(ws->count);
  free(ws->cbefore);
}

static void check_pattern(const blk_partners *p, const grid *gr, blk_pattern pattern, int k,
                          const char *name, work *ws) {
  const int n = blk_partners_nblocks(p), R = blk_partners_rounds(p), mg = blk_partners_max_group(p);
  CHECK_EQ_INT(n, gr->n);
  if (pattern == BLK_ALLREDUCE) CHECK_MSG(R % 2 == 0, "%s: all-reduce R = %d is odd", name, R);
  const int half = pattern == BLK_ALLREDUCE ? R / 2 : R;

  /* The rounds' axes and radices. */
  long long product = 1;
  for (int e = 0; e < R; e++) {
    int a = blk_partners_round_axis(p, e), x = blk_partners_round_radix(p, e);
    CHECK_MSG(a >= 0 && a < gr->dim, "%s: round %d axis %d", name, e, a);
    CHECK_MSG(x >= 2 && x <= gr->div[a], "%s: round %d radix %d", name, e, x);
    CHECK_MSG(x <= mg, "%s: round %d radix %d above max_group %d", name, e, x, mg);
    if (k > 0) CHECK_MSG(x <= k || no_factor_up_to(x, k), "%s: radix %d with k = %d", name, x, k);
    product *= x;
  }
  CHECK_EQ_INT(blk_partners_round_axis(p, R), -1);
  CHECK_EQ_INT(blk_partners_round_radix(p, -1), -1);
  CHECK_EQ_INT(product, pattern == BLK_ALLREDUCE ? (long long)n * n : n);
  if (R == 0) CHECK_EQ_INT(mg, 0);

  /* Pairs sent in the previous round (from[i] -> to[i]), bucketed by receiver into
   * senders[start[q] .. start[q+1]-1]; mark[] stamps one receiver's in-list. */
  const size_t cap = (size_t)n * (size_t)n; /* no list is longer than nblocks */
  CHECK(mg <= n);
  int *from = ws->from, *to = ws->to, *senders = ws->senders, *start = ws->start;
  int *mark = ws->mark, *gids = ws->gids, *was_active = ws->was_active, stamp = 0;
  long long *value = ws->value, *before = ws->before, *count = ws->count, *cbefore = ws->cbefore;
  memset(mark, 0, (size_t)n * sizeof *mark);
  for (int g = 0; g < n; g++) {
    value[g] = g + 1;
    count[g] = 1;
  }
  size_t nsent = 0;
  int reached = 0;

  for (int r = 0; r <= R; r++) {
    int nactive = 0;
    size_t nnext = 0;
    for (int q = 0; q <= n; q++) start[q] = 0; /* bucket last round's pairs by receiver */
    for (size_t i = 0; i < nsent; i++) start[to[i] + 1]++;
    for (int q = 0; q < n; q++) start[q + 1] += start[q];
    for (size_t i = 0; i < nsent; i++) senders[start[to[i]]++] = from[i];
    for (int q = n; q > 0; q--) start[q] = start[q - 1];
    start[0] = 0;
    memcpy(before, value, (size_t)n * sizeof *value);
    memcpy(cbefore, count, (size_t)n * sizeof *count);
    for (int g = 0; g < n; g++) {
      int act = blk_partners_active(p, r, g);
      CHECK(act == 0 || act == 1);
      nactive += act;

      /* In: receive, and add up what the partners sent (their values after last round). */
      int nin = blk_partners_in(p, r, g, gids, mg + 1);
      CHECK_MSG(nin <= mg, "%s: round %d gid %d has %d in-partners, max_group %d", name, r, g, nin,
                mg);
      if (nin > reached) reached = nin;
      CHECK_MSG(act || nin == 0, "%s: inactive gid %d has in-partners in round %d", name, g, r);
      if (r == 0) CHECK_MSG(nin == 0, "%s: gid %d receives in round 0", name, g);
      if (act && r > 0) value[g] = count[g] = 0;
      stamp++;
      for (int i = 0; i < nin; i++) {
        CHECK(gids[i] >= 0 && gids[i] < n);
        CHECK_MSG(mark[gids[i]] != stamp, "%s: round %d: gid %d lists %d twice", name, r, g,
                  gids[i]);
        mark[gids[i]] = stamp;
        value[g] += before[gids[i]];
        count[g] += cbefore[gids[i]];
      }
      /* What round r-1 sent to g is what g receives, each sender once. */
      CHECK_MSG(start[g + 1] - start[g] == nin,
                "%s: gid %d is sent %d messages in round %d but receives %d in round %d", name, g,
                start[g + 1] - start[g], r - 1, nin, r);
      for (int i = start[g]; i < start[g + 1]; i++) {
        CHECK_MSG(mark[senders[i]] == stamp,
                  "%s: gid %d sends to %d in round %d, which does not list it (once) in round %d",
                  name, senders[i], g, r - 1, r);
        mark[senders[i]] = 0;
      }
      if (pattern == BLK_SWAP && r > 0) CHECK_EQ_INT(nin, blk_partners_round_radix(p, r - 1));
      if (pattern == BLK_BROADCAST && r > 0 && act) CHECK_EQ_INT(nin, 1);

      /* Out. */
      int nout = blk_partners_out(p, r, g, gids, mg + 1);
      CHECK_MSG(nout <= mg, "%s: round %d gid %d has %d out-partners", name, r, g, nout);
      if (nout > reached) reached = nout;
      CHECK_MSG(act || nout == 0, "%s: inactive gid %d has out-partners in round %d", name, g, r);
      if (r == R) CHECK_MSG(nout == 0, "%s: gid %d sends in the last round", name, g);
      if (pattern == BLK_MERGE && r < R && act) CHECK_EQ_INT(nout, 1);
      if (pattern == BLK_SWAP && r < R) {
        CHECK_EQ_INT(nout, blk_partners_round_radix(p, r));
        int axis = blk_partners_round_axis(p, r);
        for (int i = 0; i < nout; i++)
          for (int a = 0; a < gr->dim; a++)
            if (a != axis) CHECK_EQ_INT(coord(gr, gids[i], a), coord(gr, g, a));
      }
      for (int i = 0; i < nout; i++) {
        CHECK(gids[i] >= 0 && gids[i] < n);
        CHECK(nnext < cap);
        from[nnext] = g;
        to[nnext++] = gids[i];
      }

      /* Who is active when. */
      if (pattern == BLK_SWAP) CHECK_EQ_INT(act, 1);
      if ((pattern == BLK_MERGE || pattern == BLK_ALLREDUCE) && r == 0) CHECK_EQ_INT(act, 1);
      if ((pattern == BLK_BROADCAST || pattern == BLK_ALLREDUCE) && r == R) CHECK_EQ_INT(act, 1);
      if ((pattern == BLK_MERGE && r == R) || (pattern == BLK_BROADCAST && r == 0) ||
          (pattern == BLK_ALLREDUCE && r == half))
        CHECK_MSG(act == (g == 0), "%s: round %d gid %d active %d", name, r, g, act);
      if (r > 0 && (pattern == BLK_MERGE || (pattern == BLK_ALLREDUCE && r <= half)))
        CHECK_MSG(!act || was_active[g], "%s: gid %d comes back in round %d", name, g, r);
      if (r > 0 && (pattern == BLK_BROADCAST || (pattern == BLK_ALLREDUCE && r > half)))
        CHECK_MSG(act || !was_active[g], "%s: gid %d drops out in round %d", name, g, r);
      was_active[g] = act;
    }
    CHECK(nactive >= 1);

    nsent = nnext;
  }
  CHECK_EQ_INT(nsent, 0);
  CHECK_MSG(reached == mg, "%s: max_group %d but the largest list has %d", name, mg, reached);

  /* The closed forms. */
  long long total = (long long)n * (n + 1) / 2;
  for (int g = 0; g < n; g++) {
    switch (pattern) {
      case BLK_MERGE:
        if (g == 0) {
          CHECK_MSG(value[0] == total && count[0] == n, "%s: root has %lld from %lld", name,
                    value[0], count[0]);
        }
        break;
      case BLK_BROADCAST:
        CHECK_MSG(value[g] == 1 && count[g] == 1, "%s: gid %d has %lld from %lld", name, g,
                  value[g], count[g]);
        break;
      case BLK_SWAP:
      case BLK_ALLREDUCE:
        CHECK_MSG(value[g] == total && count[g] == n, "%s: gid %d has %lld from %lld", name, g,
                  value[g], count[g]);
        break;
    }
  }
}

static unsigned next_random(unsigned *seed) {
  *seed = *seed * 1103515245u + 12345u;
  return (*seed >> 16) & 0x7fffu;
}

/* Explicit rounds: the prime factors of every axis, shuffled, axes in any order (the
 * order within an axis is the order its rounds run in). */
static int scrambled_rounds(const grid *g, unsigned *seed, int *axes, int *radices) {
  int nr = 0;
  for (int a = 0; a < g->dim; a++)
    for (int d = g->div[a], f = 2; d > 1;) {
      if (d % f == 0) {
        axes[nr] = a;
        radices[nr++] = f;
        d /= f;
      } else {
        f++;
      }
    }
  for (int i = nr - 1; i > 0; i--) {
    int j = (int)(next_random(seed) % (unsigned)(i + 1)), t = axes[i];
    axes[i] = axes[j];
    axes[j] = t;
    t = radices[i];
    radices[i] = radices[j];
    radices[j] = t;
  }
  return nr;
}

/* Swap routing: from every block, following out-partner number
 * round_position(r, d) in every round reaches d, and that partner agrees with
 * d in the round's position. Checked by walking, not by the digit formula. */
static void check_routing(const blk_partners *p, const grid *g, const char *name) {
  int R = blk_partners_rounds(p);
  int out[1024];
  for (int src = 0; src < g->n; src++)
    for (int dst = 0; dst < g->n; dst++) {
      int at = src;
      for (int r = 0; r < R; r++) {
        int j = blk_partners_round_position(p, r, dst);
        int n = blk_partners_out(p, r, at, out, 1024);
        CHECK_MSG(j >= 0 && j < n, "%s: round %d position of %d is %d of %d", name, r, dst, j, n);
        at = out[j];
        CHECK_EQ_INT(blk_partners_round_position(p, r, at), j);
      }
      CHECK_MSG(at == dst, "%s: routing from %d to %d ended at %d", name, src, dst, at);
    }
  CHECK_EQ_INT(blk_partners_round_position(p, 0, g->n), -1);
}

static const char *const pattern_names[] = {"merge", "broadcast", "swap", "allreduce"};

static int objects;

static void check_grid(const grid *g, unsigned *seed) {
  static const int ks[] = {2, 3, 4, 8};
  char name[128];
  work ws;
  work_init(&ws, g->n);
  for (int pat = BLK_MERGE; pat <= BLK_ALLREDUCE; pat++)
    for (int c = 0; c <= 1; c++) {
      for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        snprintf(name, sizeof name, "%s {%d,%d,%d} dim %d k %d %s", pattern_names[pat], g->div[0],
                 g->div[1], g->div[2], g->dim, ks[i], c ? "contiguous" : "halving");
        blk_partners *p = NULL;
        CHECK_OK(blk_partners_create(&p, (blk_pattern)pat, g->dim, g->div, ks[i], c));
        check_pattern(p, g, (blk_pattern)pat, ks[i], name, &ws);
        if (pat == BLK_SWAP && g->n <= 64) check_routing(p, g, name);
        blk_partners_destroy(p);
        objects++;
      }
      int axes[64], radices[64], nr = scrambled_rounds(g, seed, axes, radices);
      snprintf(name, sizeof name, "%s {%d,%d,%d} dim %d explicit %s", pattern_names[pat], g->div[0],
               g->div[1], g->div[2], g->dim, c ? "contiguous" : "halving");
      blk_partners *p = NULL;
      CHECK_OK(
          blk_partners_create_rounds(&p, (blk_pattern)pat, g->dim, g->div, nr, axes, radices, c));
      check_pattern(p, g, (blk_pattern)pat, 0, name, &ws);
      blk_partners_destroy(p);
      objects++;
    }
  work_free(&ws);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  unsigned seed = 12345u;
  int grids = 0;
  for (int a = 1; a <= 64; a++) {
    grid g = {1, {a, 1, 1}, a};
    check_grid(&g, &seed);
    grids++;
  }
  static const int big[] = {1000, 1009};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    grid g = {1, {big[i], 1, 1}, big[i]};
    check_grid(&g, &seed);
    grids++;
  }
  for (int a = 1; a <= 64; a++)
    for (int b = 1; a * b <= 64; b++) {
      grid g = {2, {a, b, 1}, a * b};
      check_grid(&g, &seed);
      grids++;
    }
  for (int a = 1; a <= 64; a++)
    for (int b = 1; a * b <= 64; b++)
      for (int c = 1; a * b * c <= 64; c++) {
        grid g = {3, {a, b, c}, a * b * c};
        check_grid(&g, &seed);
        grids++;
      }
  printf("test_partners_invariants: %d grids, %d pattern objects\n", grids, objects);
  printf("test_partners_invariants: ok\n");
  return 0;
}
