/*
 * choose.c: the cost of a pattern's rounds under a simple machine model, and
 * the radix and order that minimise it (blk/partners.h).
 *
 * A round's cost is taken per rank, with the blocks spread evenly over the
 * ranks (what a balanced assigner does):
 *     [alpha if any of its messages cross ranks]
 *   + remote bytes a rank sends * beta
 *   + (callbacks * callback + messages * local + received bytes * gamma) / threads
 * so the rounds inside a rank cost the work of their callbacks, shared by the
 * threads, and a round that crosses ranks one latency more and the bytes on
 * the link. Which messages cross is counted from the pattern and the
 * assigner themselves, on up to SAMPLES blocks spread over the gids, so any
 * pattern and any assigner are modelled as they are.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "blk/assigner.h"
#include "blk/partners.h"

/* Blocks whose partners are counted in each round (all when fewer). */
#define SAMPLES 512

/* The candidate radices: a round of more members than this is what folding
 * avoids, and beyond it a larger k only saves rounds that cost little. */
#define MAX_K 16

static int check_model(const blk_cost_model *m) {
  if (m->version < 1 || m->version > BLK_COST_MODEL_VERSION)
    return blk__fail(BLK_EINVAL,
                     "partners: cost model version %u; this blk knows 1..%u (initialise it with "
                     "BLK_COST_MODEL_INIT)",
                     m->version, BLK_COST_MODEL_VERSION);
  double v[5] = {m->alpha, m->beta, m->callback, m->local, m->gamma};
  for (int i = 0; i < 5; i++)
    if (!(v[i] >= 0) || isinf(v[i]))
      return blk__fail(BLK_EINVAL, "partners: a cost model constant is %g, not finite >= 0", v[i]);
  if (m->threads < 1)
    return blk__fail(BLK_EINVAL, "partners: the cost model has %d threads", m->threads);
  return BLK_OK;
}

/* The bytes of one message sent in exchange round e: the whole block's
 * bytes, or with split_swap a swap's piece (bytes / k_e). */
static double message_bytes(const blk_partners *p, int e, size_t bytes, int split_swap) {
  int k = blk_partners_round_radix(p, e);
  return split_swap && k > 0 ? (double)bytes / k : (double)bytes;
}

static double predict(const blk_partners *p, const blk_assigner *a, size_t bytes,
                      const blk_cost_model *m, int split_swap, int *gids) {
  int n = blk_partners_nblocks(p), R = blk_partners_rounds(p), ranks = blk_assigner_nranks(a);
  int samples = n < SAMPLES ? n : SAMPLES, mg = blk_partners_max_group(p);
  double scale = (double)n / samples / ranks; /* a sample's share of one rank */
  double total = 0;
  for (int r = 0; r <= R; r++) {
    double active = 0, remote = 0, local = 0;
    double size = r > 0 ? message_bytes(p, r - 1, bytes, split_swap) : 0;
    double out_size = r < R ? message_bytes(p, r, bytes, split_swap) : 0;
    for (int i = 0; i < samples; i++) {
      int g = (int)((long long)i * n / samples);
      if (!blk_partners_active(p, r, g)) continue;
      active++;
      int me = blk_assigner_rank(a, g), nout = blk_partners_out(p, r, g, gids, mg);
      for (int j = 0; j < nout; j++) {
        if (gids[j] == g) continue; /* to itself: a hand-over, counted in the callback */
        if (blk_assigner_rank(a, gids[j]) != me)
          remote++;
        else
          local++;
      }
      /* What it receives, by count, from the round before. */
      int nin = blk_partners_in(p, r, g, gids, mg);
      for (int j = 0; j < nin; j++)
        if (gids[j] != g) total += size * m->gamma * scale / m->threads;
    }
    total += (active * m->callback + (local + remote) * m->local) * scale / m->threads;
    total += remote * scale * out_size * m->beta;
    if (remote > 0) total += m->alpha;
  }
  return total;
}

/* predict() with its scratch; returns 0 or BLK_ENOMEM (with the detail). */
static int predict_once(const blk_partners *p, const blk_assigner *a, size_t bytes,
                        const blk_cost_model *m, int split_swap, double *t) {
  int mg = blk_partners_max_group(p);
  int *gids = blk__malloc((size_t)(mg > 0 ? mg : 1) * sizeof *gids);
  if (!gids) return blk__fail(BLK_ENOMEM, "partners: no memory for %d gids", mg);
  *t = predict(p, a, bytes, m, split_swap, gids);
  free(gids);
  return BLK_OK;
}

double blk_partners_predict(const blk_partners *p, const blk_assigner *a, size_t bytes,
                            const blk_cost_model *model, int split_swap) {
  blk_cost_model defaults = BLK_COST_MODEL_INIT;
  if (!model) model = &defaults;
  if (!p || !a) {
    blk__fail(BLK_EINVAL, "partners: predict: the pattern or the assigner is NULL");
    return -1;
  }
  if (check_model(model)) return -1;
  if (blk_partners_nblocks(p) != blk_assigner_nblocks(a)) {
    blk__fail(BLK_EINVAL, "partners: predict: a pattern of %d blocks, an assigner of %d",
              blk_partners_nblocks(p), blk_assigner_nblocks(a));
    return -1;
  }
  double t = -1;
  return predict_once(p, a, bytes, model, split_swap, &t) ? -1 : t;
}

int blk_partners_choose(blk_pattern pattern, const blk_assigner *a, size_t bytes,
                        const blk_cost_model *model, int split_swap, int *k, int *contiguous) {
  blk_cost_model defaults = BLK_COST_MODEL_INIT;
  if (!model) model = &defaults;
  if (!a || !k || !contiguous)
    return blk__fail(BLK_EINVAL, "partners: choose: the assigner, k or contiguous is NULL");
  int rc = check_model(model);
  if (rc) return rc;
  int n = blk_assigner_nblocks(a), top = n < MAX_K ? n : MAX_K;
  double best = INFINITY;
  *k = 2;
  *contiguous = 1;
  /* Ties go to the smaller k and to contiguous order: fewer members to wait
   * for, and the order the assigners keep on a rank. */
  for (int kk = 2; kk <= top || kk == 2; kk++)
    for (int c = 1; c >= 0; c--) {
      blk_partners *p = NULL;
      double t = 0;
      if ((rc = blk_partners_create_folded(&p, pattern, n, kk, c))) return rc;
      rc = predict_once(p, a, bytes, model, split_swap, &t);
      blk_partners_destroy(p);
      if (rc) return rc;
      if (t < best * (1 - 1e-9)) {
        best = t;
        *k = kk;
        *contiguous = c;
      }
    }
  return BLK_OK;
}
