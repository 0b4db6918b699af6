/*
 * tuning.c: blk-tune's measurements and the choice between them (see
 * tuning.h).
 *
 * The table is an array of measurements in file order. A choice scans it
 * three times (the nearest (blocks, k), then each algorithm's two sizes
 * around the job's): O(rows x names), a few thousand rows at most, once per
 * AUTO collective. Nothing changes after parse; no lock.
 */
#include "base/tuning.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"

#define NAME_MAX_LEN 31

typedef struct row {
  int ranks, blocks, k;
  double bytes, usec;
  char name[NAME_MAX_LEN + 1];
} row;

struct blk__tuning {
  row *rows;
  size_t n, cap;
  int has_model;
  double model[BLK__TUNING_CONSTANTS];
  int has_eager;
  size_t eager_lo, eager_hi;
};

void blk__tuning_free(blk__tuning *t) {
  if (!t) return;
  free(t->rows);
  free(t);
}

/* The next whitespace-separated word of line[*at, end) into w (at most cap-1
 * characters); 0 when there is none or it is too long. */
static int word(const char *line, size_t end, size_t *at, char *w, size_t cap) {
  while (*at < end && isspace((unsigned char)line[*at])) (*at)++;
  size_t n = 0;
  while (*at < end && !isspace((unsigned char)line[*at])) {
    if (n + 1 >= cap) return 0;
    w[n++] = line[(*at)++];
  }
  w[n] = '\0';
  return n > 0;
}

static int to_int(const char *w, int lo, int *out) {
  char *e = NULL;
  errno = 0;
  long v = strtol(w, &e, 10);
  if (errno || !e || *e || v < lo || v > 1 << 30) return 0;
  *out = (int)v;
  return 1;
}

/* A finite number above 0 (or, with zero_ok, >= 0). */
static int to_num(const char *w, int zero_ok, double *out) {
  char *e = NULL;
  errno = 0;
  double v = strtod(w, &e);
  if (errno || !e || *e || !(v > 0 || (zero_ok && v == 0)) || !isfinite(v)) return 0;
  *out = v;
  return 1;
}

/* The words of a "cost-model" line (w[0] is the keyword); NULL or why not. */
static const char *cost_model_line(blk__tuning *t, char w[][64], int nw, int more) {
  if (t->has_model) return "a second cost-model line";
  if (nw != 1 + BLK__TUNING_CONSTANTS || more)
    return "expected: cost-model alpha beta callback local gamma";
  for (int j = 0; j < BLK__TUNING_CONSTANTS; j++)
    if (!to_num(w[1 + j], 1, &t->model[j])) return "a cost-model constant must be a number >= 0";
  t->has_model = 1;
  return NULL;
}

/* The words of an "eager-step" line; NULL or why not. */
static const char *eager_step_line(blk__tuning *t, char w[][64], int nw, int more) {
  int lo = 0, hi = 0;
  if (t->has_eager) return "a second eager-step line";
  if (nw != 3 || more) return "expected: eager-step lo hi";
  if (!to_int(w[1], 1, &lo) || !to_int(w[2], 2, &hi) || hi <= lo)
    return "eager-step's sizes must be whole numbers of bytes, 1 <= lo < hi";
  t->eager_lo = (size_t)lo;
  t->eager_hi = (size_t)hi;
  t->has_eager = 1;
  return NULL;
}

static int add(blk__tuning *t, const row *r) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    row *grown = blk__realloc(t->rows, cap * sizeof *grown);
    if (!grown) return BLK_ENOMEM;
    t->rows = grown;
    t->cap = cap;
  }
  t->rows[t->n++] = *r;
  return BLK_OK;
}

int blk__tuning_parse(blk__tuning **out, const char *text, size_t len, const char *label) {
  *out = NULL;
  blk__tuning *t = blk__calloc(1, sizeof *t);
  if (!t) return blk__fail(BLK_ENOMEM, "tuning: no memory for %s", label);
  int rc = BLK_OK, header = 0, lineno = 0;
  for (size_t start = 0; start < len && !rc;) {
    size_t end = start;
    while (end < len && text[end] != '\n') end++;
    lineno++;
    size_t stop = start; /* the line up to a comment */
    while (stop < end && text[stop] != '#') stop++;
    size_t at = start;
    char w[6][64];
    int nw = 0;
    while (nw < 6 && word(text, stop, &at, w[nw], sizeof w[nw])) nw++;
    char extra[64];
    int more = word(text, stop, &at, extra, sizeof extra) ||
               (at < stop && !isspace((unsigned char)text[at]));
    if (nw == 0 && !more) {
      /* blank or a comment */
    } else if (!header) {
      if (nw != 2 || more || strcmp(w[0], "blk-tuning") != 0 || strcmp(w[1], "1") != 0)
        rc = blk__fail(BLK_EINVAL, "tuning: %s line %d: expected \"blk-tuning 1\" first", label,
                       lineno);
      header = 1;
    } else if (!strcmp(w[0], "cost-model")) {
      const char *why = cost_model_line(t, w, nw, more);
      if (why) rc = blk__fail(BLK_EINVAL, "tuning: %s line %d: %s", label, lineno, why);
    } else if (!strcmp(w[0], "eager-step")) {
      const char *why = eager_step_line(t, w, nw, more);
      if (why) rc = blk__fail(BLK_EINVAL, "tuning: %s line %d: %s", label, lineno, why);
    } else {
      row r;
      memset(&r, 0, sizeof r);
      const char *why = NULL;
      if (nw != 6 || more)
        why = "expected: ranks blocks k bytes algorithm microseconds";
      else if (!to_int(w[0], 1, &r.ranks))
        why = "ranks must be a whole number >= 1";
      else if (!to_int(w[1], 1, &r.blocks))
        why = "blocks must be a whole number >= 1";
      else if (!to_int(w[2], 2, &r.k))
        why = "k must be a whole number >= 2";
      else if (!to_num(w[3], 0, &r.bytes))
        why = "bytes must be a number > 0";
      else if (strlen(w[4]) > NAME_MAX_LEN)
        why = "the algorithm's name is longer than 31 characters";
      else if (!to_num(w[5], 0, &r.usec))
        why = "microseconds must be a number > 0";
      if (why) {
        rc = blk__fail(BLK_EINVAL, "tuning: %s line %d: %s", label, lineno, why);
      } else {
        memcpy(r.name, w[4], strlen(w[4]) + 1);
        if (add(t, &r)) rc = blk__fail(BLK_ENOMEM, "tuning: no memory for %s", label);
      }
    }
    start = end + 1;
  }
  if (!rc && !header) rc = blk__fail(BLK_EINVAL, "tuning: %s is empty", label);
  if (!rc && t->n == 0 && !t->has_model && !t->has_eager)
    rc = blk__fail(BLK_EINVAL, "tuning: %s holds no measurement, no cost model and no eager step",
                   label);
  if (rc) {
    blk__tuning_free(t);
    return rc;
  }
  *out = t;
  return BLK_OK;
}

/* The time of `name` at `bytes` among the rows of (ranks, blocks, k): log-log
 * interpolation between the measured sizes around it; < 0 if it was not
 * measured on both sides of bytes (or at bytes). */
static double time_at(const blk__tuning *t, const row *group, const char *name, double bytes) {
  const row *lo = NULL, *hi = NULL;
  for (size_t i = 0; i < t->n; i++) {
    const row *r = &t->rows[i];
    if (r->ranks != group->ranks || r->blocks != group->blocks || r->k != group->k ||
        strcmp(r->name, name) != 0)
      continue;
    if (r->bytes <= bytes && (!lo || r->bytes > lo->bytes)) lo = r;
    if (r->bytes >= bytes && (!hi || r->bytes < hi->bytes)) hi = r;
  }
  if (!lo || !hi) return -1;
  if (hi->bytes == lo->bytes) return lo->usec;
  double f = (log(bytes) - log(lo->bytes)) / (log(hi->bytes) - log(lo->bytes));
  return exp(log(lo->usec) + f * (log(hi->usec) - log(lo->usec)));
}

int blk__tuning_best(const blk__tuning *t, int ranks, int blocks, int k, double bytes,
                     const char *const *names, int nnames) {
  if (!t || bytes <= 0) return -1;
  /* The measured (blocks, k) nearest the job's: k equal first, then blocks
   * nearest by ratio; ties to the earlier line. */
  const row *near = NULL;
  double near_d = 0;
  for (size_t i = 0; i < t->n; i++) {
    const row *r = &t->rows[i];
    if (r->ranks != ranks) continue;
    double d = fabs(log((double)r->blocks / (double)blocks)) + (r->k != k ? 1e6 : 0);
    if (!near || d < near_d) {
      near = r;
      near_d = d;
    }
  }
  if (!near) return -1;
  /* Beyond the sizes measured there, the nearest of them. */
  double lo = 0, hi = 0;
  for (size_t i = 0; i < t->n; i++) {
    const row *r = &t->rows[i];
    if (r->ranks != near->ranks || r->blocks != near->blocks || r->k != near->k) continue;
    if (lo == 0 || r->bytes < lo) lo = r->bytes;
    if (r->bytes > hi) hi = r->bytes;
  }
  double at = bytes < lo ? lo : bytes > hi ? hi : bytes;
  int best = -1;
  double best_t = 0;
  for (int j = 0; j < nnames; j++) {
    double tj = time_at(t, near, names[j], at);
    if (tj >= 0 && (best < 0 || tj < best_t)) {
      best = j;
      best_t = tj;
    }
  }
  return best;
}

int blk__tuning_cost_model(const blk__tuning *t, double *c) {
  if (!t || !t->has_model) return 0;
  for (int j = 0; j < BLK__TUNING_CONSTANTS; j++) c[j] = t->model[j];
  return 1;
}

int blk__tuning_eager_step(const blk__tuning *t, size_t *lo, size_t *hi) {
  if (!t || !t->has_eager) return 0;
  *lo = t->eager_lo;
  *hi = t->eager_hi;
  return 1;
}
