/*
 * agreement.c: the recursive-doubling plan of the closing agreement; see
 * agreement.h.
 *
 * Keys: 0 for the fold-in (an extra rank's record to its partner below),
 * 1..log2 p' for the doubling steps, and log2 p' + 1 for the fold-out (the
 * result back to the extra rank). The fold-out receiver takes the result as
 * it is: combining it with its own record again would count that twice.
 */
#include "base/agreement.h"

int blk__agree_plan(int rank, int size, blk__agree_step *steps) {
  int n = 0, pof2 = 1, log = 0;
  while (pof2 <= size / 2) { /* (pof2 * 2 would overflow near INT_MAX) */
    pof2 *= 2;
    log++;
  }
  int extra = size - pof2;
  if (rank >= pof2) { /* an extra rank: hand over, wait for the result */
    steps[n++] = (blk__agree_step){rank - pof2, 1, 0, 0};
    steps[n++] = (blk__agree_step){rank - pof2, 0, 1, log + 1};
    return n;
  }
  if (rank < extra) steps[n++] = (blk__agree_step){rank + pof2, 0, 0, 0};
  for (int j = 0; j < log; j++) {
    steps[n++] = (blk__agree_step){rank ^ (1 << j), 1, 0, j + 1};
    steps[n++] = (blk__agree_step){rank ^ (1 << j), 0, 0, j + 1};
  }
  if (rank < extra) steps[n++] = (blk__agree_step){rank + pof2, 1, 0, log + 1};
  return n;
}
