/*
 * all_reduce.c: blk_all_reduce, one value per block of any size folded by
 * the program's op in gid order; see blk/all_reduce.h.
 *
 * Three steps, each ending agreed on every rank: the arguments and the
 * record memory (an all-reduce of the sizes and blk__op_agree_once); a
 * foreach that runs give into this rank's records (gid, value), each
 * block writing its own slot, so the pool needs no lock; an all-gather of
 * the counts, then of the records, folded on every rank in ascending gid
 * order, so every rank computes the same bits from the same bytes.
 */
#include "blk/all_reduce.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/copy.h"
#include "base/fail.h"
#include "master/master_state.h"

typedef struct collect_ctx {
  blk_master *m;
  unsigned char *records; /* by lid: int32 gid, then the value */
  size_t stride;
  blk_value_fn give;
  void *user;
} collect_ctx;

static int collect(void *block, blk_proxy *p, void *user) {
  collect_ctx *c = user;
  int gid = blk_proxy_gid(p);
  unsigned char *rec = c->records + (size_t)blk_master_lid(c->m, gid) * c->stride;
  int32_t g = gid;
  memcpy(rec, &g, sizeof g);
  return c->give(rec + sizeof g, block, gid, c->user);
}

/* An MPI collective failing leaves the others inside it: the job stops. */
static void check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  blk__panic("all_reduce: %s failed: %s", what, text);
}

/* For sorting the gathered records by gid. */
typedef struct gid_at {
  int32_t gid;
  size_t at;
} gid_at;

static int by_gid(const void *a, const void *b) {
  int32_t x = ((const gid_at *)a)->gid, y = ((const gid_at *)b)->gid;
  return (x > y) - (x < y);
}

/* Gathers every rank's records and folds them into result. counts and
 * displs: room for one int per rank. */
static int gather_fold(blk_master *m, const unsigned char *records, int n, size_t size,
                       blk_value_op_fn op, void *result, void *user, int *counts, int *displs) {
  MPI_Comm comm = blk__comm_mpi(m->comm);
  int ranks = m->op.size, rank = m->op.rank;
  size_t stride = sizeof(int32_t) + size;
  unsigned char *all = NULL, *acc = NULL;
  gid_at *order = NULL;
  blk__failure f;
  blk__failure_clear(&f);
  check(MPI_Allgather(&n, 1, MPI_INT, counts, 1, MPI_INT, comm), "MPI_Allgather");
  uint64_t total = 0;
  for (int r = 0; r < ranks; r++) total += (uint64_t)counts[r];
  if (total == 0)
    blk__failure_note(&f, BLK_EINVAL, rank, -1, -1, "there is no block on any rank");
  else if (total * stride > INT32_MAX)
    blk__failure_note(&f, BLK_EINVAL, rank, -1, -1,
                      "%llu blocks of %zu bytes make %llu bytes of records; at most 2 GiB",
                      (unsigned long long)total, size, (unsigned long long)(total * stride));
  else if (!(all = blk__malloc((size_t)total * stride)) ||
           !(order = blk__malloc((size_t)total * sizeof *order)) || !(acc = blk__malloc(size)))
    blk__failure_note(&f, BLK_ENOMEM, rank, -1, -1, "no memory for %llu records of %zu bytes",
                      (unsigned long long)total, stride);
  int rc = blk__op_agree_once(comm, &f, "all_reduce");
  if (rc) goto exit;
  /* Every byte count fits an int: the total does. */
  for (int r = 0, at = 0; r < ranks; r++) {
    displs[r] = at;
    counts[r] *= (int)stride;
    at += counts[r];
  }
  check(MPI_Allgatherv(records, n * (int)stride, MPI_BYTE, all, counts, displs, MPI_BYTE, comm),
        "MPI_Allgatherv");
  for (size_t i = 0; i < total; i++) {
    memcpy(&order[i].gid, all + i * stride, sizeof(int32_t));
    order[i].at = i * stride + sizeof(int32_t);
  }
  qsort(order, (size_t)total, sizeof *order, by_gid);
  blk__copy(acc, all + order[0].at, size);
  for (size_t i = 1; i < total; i++) op(acc, all + order[i].at, user);
  blk__copy(result, acc, size);
exit:
  free(all);
  free(order);
  free(acc);
  return rc;
}

int blk_all_reduce(blk_master *m, size_t size, blk_value_fn give, blk_value_op_fn op, void *result,
                   void *user) {
  if (!m) return blk__fail(BLK_EINVAL, "all_reduce: the master is NULL");
  BLK__ENTER(m);
  MPI_Comm comm = blk__comm_mpi(m->comm);
  int rank = m->op.rank, n = blk__table_count(&m->table);
  blk__failure f;
  blk__failure_clear(&f);
  /* The same size everywhere: the largest of size and of ~size give the
   * largest and the smallest. */
  uint64_t mine[2] = {size, ~(uint64_t)size}, most[2];
  check(MPI_Allreduce(mine, most, 2, MPI_UINT64_T, MPI_MAX, comm), "MPI_Allreduce");
  size_t stride = sizeof(int32_t) + size;
  unsigned char *records = NULL;
  int ranks = m->op.size;
  int *counts = blk__malloc((size_t)ranks * sizeof *counts);
  int *displs = blk__malloc((size_t)ranks * sizeof *displs);
  if (!counts || !displs)
    blk__failure_note(&f, BLK_ENOMEM, rank, -1, -1, "no memory for %d ranks' counts", ranks);
  else if (!give || !op || !result)
    blk__failure_note(&f, BLK_EINVAL, rank, -1, -1, "the %s is NULL",
                      !give ? "give callback"
                      : !op ? "op"
                            : "result");
  else if (most[0] != ~most[1])
    blk__failure_note(&f, BLK_EINVAL, rank, -1, -1,
                      "ranks gave different value sizes (%llu to %llu bytes)",
                      (unsigned long long)~most[1], (unsigned long long)most[0]);
  else if (size == 0)
    blk__failure_note(&f, BLK_EINVAL, rank, -1, -1, "the value size is 0");
  else if (size > INT32_MAX || (n > 0 && !(records = blk__malloc((size_t)n * stride))))
    blk__failure_note(&f, BLK_ENOMEM, rank, -1, -1, "no memory for %d values of %zu bytes", n,
                      size);
  int rc = blk__op_agree_once(comm, &f, "all_reduce");
  if (!rc) {
    collect_ctx c = {m, records, stride, give, user};
    rc = blk_master_foreach(m, collect, &c);
  }
  if (!rc) rc = gather_fold(m, records, n, size, op, result, user, counts, displs);
  free(records);
  free(counts);
  free(displs);
  BLK__LEAVE();
  return rc;
}
