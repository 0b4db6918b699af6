/*
 * partners.c: the blk_partners object, an ops table plus its state.
 *
 * Built-in patterns (partners_regular.c) and users' patterns go through the same
 * object: the public queries check p, round and gid against the rounds and nblocks
 * cached at create, then call the ops, so an ops function only ever sees valid
 * arguments. Built-ins also describe each exchange round as a digit of a grid
 * coordinate (round_digit: axis, radix, step), which round_axis, _radix, _step and
 * the positions read; a custom pattern leaves it NULL and gets -1.
 *
 * A custom pattern is checked once at create by asking every (round, gid): counts,
 * ranges, silence of inactive blocks, round 0 and round R, and that each round's
 * messages sent equal the next round's received. That costs (R+1) * nblocks calls of
 * each ops function (refused above 2^32: minutes on every rank) and a buffer as large
 * as the largest group; it also yields max_group. Queries cost what the ops cost plus
 * O(1). The object never changes after create, so it needs no lock.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "base/memory_limit.h"
#include "blk/decomposer.h"
#include "blk/partners.h"
#include "patterns/partners_folded.h"
#include "patterns/partners_joined.h"
#include "patterns/partners_pipeline.h"
#include "patterns/partners_regular.h"
#include "patterns/partners_ring.h"
#include "patterns/partners_top.h"

/* The most (round, gid) pairs create checks of a custom pattern: 2^32, about
 * a minute at ~15 ns a pair with trivial ops functions. */
#define MAX_CHECKED_PAIRS ((uint64_t)1 << 32)

struct blk_partners {
  const blk_partners_ops *ops;
  void *state;
  /* NULL for custom patterns */
  int (*round_digit)(const void *state, int round, blk__round_digit *out);
  /* NULL where the digit gives the position (all but folded patterns) */
  int (*round_position)(const void *state, int round, int gid);
  int rounds;
  int nblocks;
  int max_group;
};

/* Wrap a built-in state (right by construction, so not checked as a custom
 * one is); on failure the state is freed. round_digit may be NULL. */
static int wrap_builtin(blk_partners **out, const blk_partners_ops *ops, void *s,
                        int (*round_digit)(const void *, int, blk__round_digit *), int max_group) {
  blk_partners *p = blk__malloc(sizeof *p);
  if (p == NULL) {
    ops->destroy(s);
    return blk__fail(BLK_ENOMEM, "partners: no memory for a %zu-byte object", sizeof *p);
  }
  p->ops = ops;
  p->state = s;
  p->round_digit = round_digit;
  p->round_position = NULL;
  p->rounds = ops->rounds(s);
  p->nblocks = ops->nblocks(s);
  p->max_group = max_group;
  *out = p;
  return 0;
}

static int wrap_regular(blk_partners **out, const blk_partners_ops *ops, blk__regular *s) {
  return wrap_builtin(out, ops, s, blk__regular_round_digit, blk__regular_max_group(s));
}

int blk_partners_create(blk_partners **out, blk_pattern pattern, int dim, const int *divisions,
                        int k, int contiguous) {
  if (out == NULL) return blk__fail(BLK_EINVAL, "partners: out is NULL");
  *out = NULL;
  const blk_partners_ops *ops = NULL;
  blk__regular *s = NULL;
  int rc = blk__regular_create_k(&ops, &s, pattern, dim, divisions, k, contiguous);
  if (rc != 0) return rc;
  return wrap_regular(out, ops, s);
}

int blk_partners_create_for(blk_partners **out, blk_pattern pattern, const blk_decomposer *d, int k,
                            int contiguous) {
  if (out == NULL) return blk__fail(BLK_EINVAL, "partners: out is NULL");
  *out = NULL;
  if (d == NULL) return blk__fail(BLK_EINVAL, "partners: the decomposer is NULL");
  int divisions[BLK_MAX_DIM];
  blk_decomposer_divisions(d, divisions);
  return blk_partners_create(out, pattern, blk_decomposer_dim(d), divisions, k, contiguous);
}

int blk_partners_create_rounds(blk_partners **out, blk_pattern pattern, int dim,
                               const int *divisions, int nrounds, const int *axes,
                               const int *radices, int contiguous) {
  if (out == NULL) return blk__fail(BLK_EINVAL, "partners: out is NULL");
  *out = NULL;
  const blk_partners_ops *ops = NULL;
  blk__regular *s = NULL;
  int rc = blk__regular_create_rounds(&ops, &s, pattern, dim, divisions, nrounds, axes, radices,
                                      contiguous);
  if (rc != 0) return rc;
  return wrap_regular(out, ops, s);
}

/* ---- custom patterns ---- */

typedef int (*list_fn)(const void *state, int round, int gid, int *gids, int max);

/* A scratch list that grows to the largest group seen. */
typedef struct scratch {
  int *gids;
  int cap;
} scratch;

/* Ask fn for a whole list into sc; returns 0 or an error, the count in *count. */
static int ask(scratch *sc, list_fn fn, const char *name, const void *state, int round, int gid,
               int nblocks, int *count) {
  int n = fn(state, round, gid, sc->gids, sc->cap);
  /* A gid is listed at most once, so a longer list is wrong: refused before
   * the scratch grows to hold it. */
  if (n > nblocks)
    return blk__fail(BLK_EINVAL,
                     "partners: custom %s(round %d, gid %d) returned %d partners, more than the "
                     "%d blocks",
                     name, round, gid, n, nblocks);
  if (n > sc->cap) {
    int rc = blk__memory_check((uint64_t)n, sizeof(int),
                               "partners: custom %s(round %d, gid %d) lists %d partners", name,
                               round, gid, n);
    if (rc) return rc;
    int *grown = blk__realloc(sc->gids, (size_t)n * sizeof *grown);
    if (grown == NULL) return blk__fail(BLK_ENOMEM, "partners: no memory for %d partner gids", n);
    sc->gids = grown;
    sc->cap = n;
    int again = fn(state, round, gid, sc->gids, sc->cap);
    if (again != n)
      return blk__fail(BLK_EINVAL,
                       "partners: custom %s(round %d, gid %d) returned %d, then %d: not a "
                       "pure function",
                       name, round, gid, n, again);
  }
  *count = n;
  return 0;
}

/* Check one list of a custom pattern (see the top of the file). */
static int check_list(const scratch *sc, const char *name, int round, int gid, int count,
                      int active, int rounds, int nblocks, int is_out) {
  if (count < 0)
    return blk__fail(BLK_EINVAL, "partners: custom %s(round %d, gid %d) returned %d, below 0", name,
                     round, gid, count);
  if (count == 0) return 0;
  if (!active)
    return blk__fail(BLK_EINVAL,
                     "partners: custom %s(round %d, gid %d) returned %d partners for an "
                     "inactive block",
                     name, round, gid, count);
  if (!is_out && round == 0)
    return blk__fail(BLK_EINVAL,
                     "partners: custom %s(round 0, gid %d) returned %d partners; round 0 "
                     "receives nothing",
                     name, gid, count);
  if (is_out && round == rounds)
    return blk__fail(BLK_EINVAL,
                     "partners: custom %s(round %d, gid %d) returned %d partners; the last "
                     "round sends nothing",
                     name, round, gid, count);
  for (int i = 0; i < count; i++)
    if (sc->gids[i] < 0 || sc->gids[i] >= nblocks)
      return blk__fail(BLK_EINVAL,
                       "partners: custom %s(round %d, gid %d) lists gid %d, outside 0..%d", name,
                       round, gid, sc->gids[i], nblocks - 1);
  return 0;
}

static int check_custom(const blk_partners_ops *ops, const void *state, int rounds, int nblocks,
                        int *max_group) {
  scratch sc = {blk__malloc(16 * sizeof(int)), 16};
  if (sc.gids == NULL) return blk__fail(BLK_ENOMEM, "partners: no memory for 16 partner gids");
  long long sent_before = 0;
  int rc = 0, most = 0;
  for (int r = 0; rc == 0; r++) {
    long long sent = 0, received = 0;
    for (int g = 0; g < nblocks && rc == 0; g++) {
      int active = ops->active(state, r, g) != 0, nin = 0, nout = 0;
      rc = ask(&sc, ops->in_partners, "in_partners", state, r, g, nblocks, &nin);
      if (rc == 0) rc = check_list(&sc, "in_partners", r, g, nin, active, rounds, nblocks, 0);
      if (rc == 0) rc = ask(&sc, ops->out_partners, "out_partners", state, r, g, nblocks, &nout);
      if (rc == 0) rc = check_list(&sc, "out_partners", r, g, nout, active, rounds, nblocks, 1);
      received += nin;
      sent += nout;
      if (nin > most) most = nin;
      if (nout > most) most = nout;
    }
    if (rc == 0 && r > 0 && received != sent_before)
      rc = blk__fail(BLK_EINVAL,
                     "partners: custom pattern sends %lld messages in round %d but receives "
                     "%lld in round %d",
                     sent_before, r - 1, received, r);
    sent_before = sent;
    if (r == rounds) break;
  }
  free(sc.gids);
  *max_group = most;
  return rc;
}

int blk__partners_create_ring(blk_partners **out, int nblocks, int rounds) {
  *out = NULL;
  const blk_partners_ops *ops = NULL;
  void *s = NULL;
  int rc = blk__ring_create(&ops, &s, nblocks, rounds);
  if (rc != 0) return rc;
  /* No axis, radix or position: a ring is not a digit. */
  return wrap_builtin(out, ops, s, NULL, nblocks > 1 ? 1 : 0);
}

int blk__partners_create_pipeline(blk_partners **out, int n, int k, int segments) {
  *out = NULL;
  blk__pipeline t;
  int rc = blk__pipeline_init(&t, n, k, segments);
  if (rc != 0) return rc;
  const blk_partners_ops *ops = NULL;
  void *s = NULL;
  int group = 0;
  if ((rc = blk__pipeline_create(&ops, &s, &t, &group)) != 0) return rc;
  /* No axis, radix or position: a tree edge is not a digit's group. */
  return wrap_builtin(out, ops, s, NULL, group);
}

/* A folded pattern's inner rounds are the inner pattern's digits; its fold
 * rounds have none. */
static int folded_digit(const void *state, int round, blk__round_digit *out) {
  int i = blk__folded_inner_round(state, round);
  const blk_partners *inner = blk__folded_inner(state);
  if (i < 0 || !inner->round_digit) return -1;
  return inner->round_digit(inner->state, i, out);
}

int blk__partners_create_folded(blk_partners **out, blk_partners *inner, int n, int fold_in,
                                int fold_out) {
  *out = NULL;
  const blk_partners_ops *ops = NULL;
  void *s = NULL;
  int group = blk_partners_max_group(inner);
  int rc = blk__folded_create(&ops, &s, inner, n, fold_in, fold_out);
  if (rc != 0) return rc;
  rc = wrap_builtin(out, ops, s, folded_digit, group > 2 ? group : 2);
  if (rc == 0) (*out)->round_position = blk__folded_position;
  return rc;
}

/* Round r's digit of part, a pattern another one delegates a round to. */
static int part_digit(const blk_partners *part, int r, blk__round_digit *out) {
  return part->round_digit ? part->round_digit(part->state, r, out) : -1;
}

/* A joined pattern's exchange rounds are its parts' (partners_joined.h). */
static int joined_digit(const void *state, int round, blk__round_digit *out) {
  int r;
  const blk_partners *part = blk__joined_part(state, round, &r);
  return part_digit(part, r, out);
}

static int joined_position(const void *state, int round, int gid) {
  int r;
  const blk_partners *part = blk__joined_part(state, round, &r);
  return blk_partners_round_position(part, r, gid);
}

int blk__partners_create_joined(blk_partners **out, blk_partners *first, blk_partners *second) {
  *out = NULL;
  int g1 = blk_partners_max_group(first), g2 = blk_partners_max_group(second);
  const blk_partners_ops *ops = NULL;
  void *s = NULL;
  int rc = blk__joined_create(&ops, &s, first, second);
  if (rc != 0) return rc;
  rc = wrap_builtin(out, ops, s, joined_digit, g1 > g2 ? g1 : g2);
  if (rc == 0) (*out)->round_position = joined_position;
  return rc;
}

const blk_partners *blk__partners_joined_first(const blk_partners *p) {
  return p && p->round_position == joined_position ? blk__joined_first(p->state) : NULL;
}

/* A top exchange's rounds are its tree's (partners_top.h). */
static int top_digit(const void *state, int round, blk__round_digit *out) {
  int r;
  const blk_partners *tree = blk__top_part(state, round, &r);
  return part_digit(tree, r, out);
}

static int top_position(const void *state, int round, int gid) {
  int r;
  const blk_partners *tree = blk__top_part(state, round, &r);
  return blk_partners_round_position(tree, r, gid);
}

int blk__partners_create_top(blk_partners **out, blk_partners *tree) {
  *out = NULL;
  int group = blk_partners_max_group(tree);
  const blk_partners_ops *ops = NULL;
  void *s = NULL;
  int rc = blk__top_create(&ops, &s, tree);
  if (rc != 0) return rc;
  rc = wrap_builtin(out, ops, s, top_digit, group);
  if (rc == 0) (*out)->round_position = top_position;
  return rc;
}

int blk__partners_create_folding(blk_partners **out, blk_pattern pattern, int n, int k,
                                 int contiguous) {
  return blk__partners_create_folding_within(out, pattern, n, k, contiguous, blk__fold_width(k));
}

int blk__partners_create_folding_within(blk_partners **out, blk_pattern pattern, int n, int k,
                                        int contiguous, int width) {
  *out = NULL;
  int m = n >= 1 && k >= 2 && width >= 2 ? blk__fold_base_within(n, width) : n;
  if (m == n) return blk_partners_create(out, pattern, 1, &n, k, contiguous);
  blk_partners *inner = NULL;
  int rc = blk_partners_create(&inner, pattern, 1, &m, k, contiguous);
  if (rc != 0) return rc;
  return blk__partners_create_folded(out, inner, n, pattern != BLK_BROADCAST, pattern != BLK_MERGE);
}

int blk_partners_create_folded(blk_partners **out, blk_pattern pattern, int nblocks, int k,
                               int contiguous) {
  if (out == NULL) return blk__fail(BLK_EINVAL, "partners: out is NULL");
  /* (Arguments blk_partners_create refuses reach it unfolded, and it says why.) */
  return blk__partners_create_folding(out, pattern, nblocks, k, contiguous);
}

int blk__partners_fold_extras(const blk_partners *p) {
  return p->round_position == blk__folded_position ? blk__folded_extras(p->state) : -1;
}

int blk_partners_create_custom(blk_partners **out, const blk_partners_ops *ops, void *state) {
  if (out == NULL) return blk__fail(BLK_EINVAL, "partners: out is NULL");
  *out = NULL;
  if (ops == NULL) return blk__fail(BLK_EINVAL, "partners: ops is NULL");
  if (ops->version < 1 || ops->version > BLK_PARTNERS_OPS_VERSION)
    return blk__fail(BLK_EINVAL,
                     "partners: ops->version = %u; this blk knows 1..%u (set it to "
                     "BLK_PARTNERS_OPS_VERSION)",
                     ops->version, BLK_PARTNERS_OPS_VERSION);
  const char *missing = ops->rounds == NULL         ? "rounds"
                        : ops->nblocks == NULL      ? "nblocks"
                        : ops->active == NULL       ? "active"
                        : ops->in_partners == NULL  ? "in_partners"
                        : ops->out_partners == NULL ? "out_partners"
                                                    : NULL;
  if (missing != NULL) return blk__fail(BLK_EINVAL, "partners: ops->%s is NULL", missing);
  int rounds = ops->rounds(state), nblocks = ops->nblocks(state), max_group = 0;
  if (rounds < 0)
    return blk__fail(BLK_EINVAL, "partners: custom rounds() = %d, must be >= 0", rounds);
  if (nblocks < 1)
    return blk__fail(BLK_EINVAL, "partners: custom nblocks() = %d, must be >= 1", nblocks);
  /* Round R + 1 is how a driver says "finished" (reduce.c). */
  if (rounds == INT_MAX)
    return blk__fail(BLK_EINVAL, "partners: custom rounds() = %d, must be below INT_MAX", rounds);
  /* The check below asks every (round, gid); past this many it would run
   * for minutes on every rank before anything is sent. */
  uint64_t pairs = ((uint64_t)rounds + 1) * (uint64_t)nblocks;
  if (pairs > MAX_CHECKED_PAIRS)
    return blk__fail(BLK_EINVAL,
                     "partners: custom pattern of rounds() = %d over nblocks() = %d: checking it "
                     "takes (rounds + 1) x nblocks = %llu calls of each function, more than the "
                     "2^32 blk allows",
                     rounds, nblocks, (unsigned long long)pairs);
  int rc = check_custom(ops, state, rounds, nblocks, &max_group);
  if (rc != 0) return rc;

  blk_partners *p = blk__malloc(sizeof *p);
  if (p == NULL)
    return blk__fail(BLK_ENOMEM, "partners: no memory for a %zu-byte object", sizeof *p);
  p->ops = ops;
  p->state = state;
  p->round_digit = NULL;
  p->round_position = NULL;
  p->rounds = rounds;
  p->nblocks = nblocks;
  p->max_group = max_group;
  *out = p;
  return 0;
}

void blk_partners_destroy(blk_partners *p) {
  if (p == NULL) return;
  if (p->ops->destroy != NULL) p->ops->destroy(p->state);
  free(p);
}

/* ---- queries ---- */

static int valid(const blk_partners *p, int round, int gid) {
  return p != NULL && round >= 0 && round <= p->rounds && gid >= 0 && gid < p->nblocks;
}

int blk_partners_rounds(const blk_partners *p) {
  return p == NULL ? 0 : p->rounds;
}

int blk_partners_nblocks(const blk_partners *p) {
  return p == NULL ? 0 : p->nblocks;
}

int blk_partners_active(const blk_partners *p, int round, int gid) {
  return valid(p, round, gid) && p->ops->active(p->state, round, gid) != 0;
}

int blk_partners_in(const blk_partners *p, int round, int gid, int *gids, int max) {
  if (!valid(p, round, gid)) return 0;
  int none;
  if (gids == NULL || max < 0) max = 0;
  return p->ops->in_partners(p->state, round, gid, max > 0 ? gids : &none, max);
}

int blk_partners_out(const blk_partners *p, int round, int gid, int *gids, int max) {
  if (!valid(p, round, gid)) return 0;
  int none;
  if (gids == NULL || max < 0) max = 0;
  return p->ops->out_partners(p->state, round, gid, max > 0 ? gids : &none, max);
}

int blk_partners_max_group(const blk_partners *p) {
  return p == NULL ? 0 : p->max_group;
}

/* Exchange round round of a built-in pattern as a digit; 0 if there is none. */
static int digit(const blk_partners *p, int round, blk__round_digit *dg) {
  return p != NULL && p->round_digit != NULL && p->round_digit(p->state, round, dg) == 0;
}

int blk_partners_round_axis(const blk_partners *p, int round) {
  blk__round_digit dg;
  return digit(p, round, &dg) ? dg.axis : -1;
}

int blk_partners_round_radix(const blk_partners *p, int round) {
  blk__round_digit dg;
  return digit(p, round, &dg) ? dg.radix : -1;
}

int blk_partners_round_step(const blk_partners *p, int round) {
  blk__round_digit dg;
  return digit(p, round, &dg) ? dg.step : -1;
}

int blk_partners_round_coord_position(const blk_partners *p, int round, int coord) {
  blk__round_digit dg;
  if (p != NULL && p->round_position != NULL) return -1; /* folded: no grid */
  if (!digit(p, round, &dg) || coord < 0 || coord >= dg.divisions) return -1;
  return coord / dg.step % dg.radix;
}

int blk_partners_round_position(const blk_partners *p, int round, int gid) {
  blk__round_digit dg;
  if (p != NULL && p->round_position != NULL) {
    if (round < 0 || round >= p->rounds || gid < 0 || gid >= p->nblocks) return -1;
    return p->round_position(p->state, round, gid);
  }
  if (!digit(p, round, &dg) || gid < 0 || gid >= p->nblocks) return -1;
  return gid / dg.stride % dg.divisions / dg.step % dg.radix;
}
