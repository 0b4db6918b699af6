/*
 * quiescence.c: the end of an asynchronous exchange, by counting waves;
 * see quiescence.h.
 */
#include "runtime/quiescence.h"

#include "base/fail.h"

void blk__quiescence_init(blk__quiescence *q, MPI_Comm comm) {
  q->comm = comm;
  q->wave = MPI_REQUEST_NULL;
  q->waves = 0;
  q->last[0] = q->last[1] = -1;
}

static void check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  blk__panic("iexchange: %s failed: %s", what, text);
}

int blk__quiescence_poll(blk__quiescence *q, int passive, int64_t sent, int64_t received) {
  if (q->wave == MPI_REQUEST_NULL) {
    if (!passive) return 0;
    q->mine[0] = sent;
    q->mine[1] = received;
    check(MPI_Iallreduce(q->mine, q->sums, 2, MPI_INT64_T, MPI_SUM, q->comm, &q->wave),
          "MPI_Iallreduce");
  }
  int done = 0;
  check(MPI_Test(&q->wave, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (!done) return 0;
  q->waves++;
  int over = q->sums[0] == q->sums[1] && q->sums[0] == q->last[0] && q->sums[1] == q->last[1];
  q->last[0] = q->sums[0];
  q->last[1] = q->sums[1];
  return over;
}
