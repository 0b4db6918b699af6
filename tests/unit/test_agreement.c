/*
 * test_agreement: the closing agreement's plan (agreement.h), run for every
 * rank count from 1 to 70 by a simulation that starts the ranks in a random
 * order and lets them run as far as their mailboxes allow, in random order:
 *  - every rank ends with the combination of every rank's record (here the
 *    set of ranks, as a bit mask, and a sum that must count each rank once);
 *  - no rank finishes before every rank has started (the barrier property
 *    the exchange's termination and the one-operation-ahead bound rest on);
 *  - each message goes to a peer that expects exactly it (same key), and a
 *    rank gets at most one message per peer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/agreement.h"
#include "check.h"

#define MAXR 70

typedef struct record {
  uint64_t mask[2]; /* ranks 0..127 */
  long sum;         /* sum of 1000 + rank: each rank counted once */
} record;

typedef struct mail {
  int present, key;
  record r;
} mail;

static void combine(record *acc, const record *in) {
  acc->mask[0] |= in->mask[0];
  acc->mask[1] |= in->mask[1];
  acc->sum += in->sum;
}

static unsigned rng = 12345;
static unsigned next_rand(void) {
  rng = rng * 1103515245u + 12345u;
  return rng >> 8;
}

static void run(int size) {
  static blk__agree_step plan[MAXR][BLK__AGREE_MAX_STEPS];
  static mail box[MAXR][MAXR]; /* box[to][from] */
  int nsteps[MAXR], at[MAXR], started[MAXR], done[MAXR], order[MAXR];
  record rec[MAXR];
  memset(box, 0, sizeof box);
  for (int r = 0; r < size; r++) {
    nsteps[r] = blk__agree_plan(r, size, plan[r]);
    CHECK(nsteps[r] <= BLK__AGREE_MAX_STEPS);
    at[r] = started[r] = done[r] = 0;
    memset(&rec[r], 0, sizeof rec[r]);
    rec[r].mask[r / 64] = (uint64_t)1 << (r % 64);
    rec[r].sum = 1000 + r;
    order[r] = r;
  }
  for (int i = size - 1; i > 0; i--) { /* the order ranks start in */
    int j = (int)(next_rand() % (unsigned)(i + 1)), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  int nstarted = 0, ndone = 0, idle = 0;
  while (ndone < size) {
    /* Start the next rank now and then; otherwise step a random one. */
    if (nstarted < size && next_rand() % 3 == 0) started[order[nstarted++]] = 1;
    int r = (int)(next_rand() % (unsigned)size);
    if (!started[r] || done[r]) {
      CHECK_MSG(++idle < 1000000, "p = %d: stuck", size);
      continue;
    }
    while (at[r] < nsteps[r]) {
      const blk__agree_step *st = &plan[r][at[r]];
      CHECK(st->peer >= 0 && st->peer < size && st->peer != r);
      if (st->send) {
        mail *m = &box[st->peer][r];
        CHECK_MSG(!m->present, "p = %d: rank %d sends rank %d a second message", size, r,
                  st->peer);
        m->present = 1;
        m->key = st->key;
        m->r = rec[r];
      } else {
        mail *m = &box[r][st->peer];
        if (!m->present) break;
        CHECK_EQ_INT(m->key, st->key);
        if (st->replace)
          rec[r] = m->r;
        else
          combine(&rec[r], &m->r);
        m->present = 0;
      }
      at[r]++;
    }
    if (at[r] == nsteps[r]) {
      for (int q = 0; q < size; q++)
        CHECK_MSG(started[q], "p = %d: rank %d finished before rank %d started", size, r, q);
      done[r] = 1;
      ndone++;
    }
  }
  long want = 0;
  for (int r = 0; r < size; r++) want += 1000 + r;
  for (int r = 0; r < size; r++) {
    CHECK_EQ_INT(rec[r].sum, want);
    for (int q = 0; q < size; q++)
      CHECK_MSG(rec[r].mask[q / 64] >> (q % 64) & 1, "p = %d: rank %d never heard of rank %d",
                size, r, q);
    for (int q = 0; q < size; q++) CHECK_MSG(!box[r][q].present, "p = %d: a message left", size);
  }
}

int main(void) {
  for (int size = 1; size <= MAXR; size++)
    for (int trial = 0; trial < 20; trial++) run(size);
  /* The plan's length: 2 log2 p' steps, plus one fold step each way. */
  blk__agree_step steps[BLK__AGREE_MAX_STEPS];
  CHECK_EQ_INT(blk__agree_plan(0, 1, steps), 0);
  CHECK_EQ_INT(blk__agree_plan(0, 2, steps), 2);
  CHECK_EQ_INT(blk__agree_plan(0, 3, steps), 4); /* fold-in, 2 doubling, fold-out */
  CHECK_EQ_INT(blk__agree_plan(2, 3, steps), 2); /* the extra rank: hand over, wait */
  CHECK_EQ_INT(blk__agree_plan(5, 8, steps), 6);
  CHECK_EQ_INT(blk__agree_plan(0, 1 << 30, steps), 60);
  printf("test_agreement: ok\n");
  return 0;
}
