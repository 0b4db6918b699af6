/*
 * values.c: combining posted values, locally and through MPI; see values.h.
 *
 * The whole list is one MPI datatype (a contiguous run of bytes as one
 * element), so an MPI library cannot split it into segments: the user op
 * always sees whole lists. Cost: one MPI_Iallreduce of 520 bytes.
 */
#include "values.h"

#include <string.h>

#include "comm.h"
#include "fail.h"

enum { VALUES_EMPTY = 1, VALUES_MISMATCH = 2 };

void blk__values_clear(blk__values *v) {
  memset(v, 0, sizeof *v);
  v->flags = VALUES_EMPTY;
}

int blk__values_post(blk__values *v, int type, blk_op op, double f, int64_t i) {
  if (op != BLK_OP_SUM && op != BLK_OP_MIN && op != BLK_OP_MAX)
    return blk__fail(BLK_EINVAL, "all-reduce: op %d is not BLK_OP_SUM, BLK_OP_MIN or BLK_OP_MAX",
                     (int)op);
  if (v->count >= BLK_PROXY_MAX_REDUCTIONS)
    return blk__fail(BLK_EINVAL, "all-reduce: more than %d values posted by one block",
                     BLK_PROXY_MAX_REDUCTIONS);
  blk__value *item = &v->items[v->count++];
  item->kind = type * 4 + (int32_t)op;
  if (type == BLK__VALUE_F64)
    item->v.f64 = f;
  else
    item->v.i64 = i;
  v->flags = 0;
  return BLK_OK;
}

static void combine_item(blk__value *acc, const blk__value *in) {
  int op = acc->kind % 4;
  if (acc->kind / 4 == BLK__VALUE_F64) {
    double a = acc->v.f64, b = in->v.f64;
    acc->v.f64 = op == BLK_OP_SUM ? a + b : op == BLK_OP_MIN ? (b < a ? b : a) : (b > a ? b : a);
  } else {
    int64_t a = acc->v.i64, b = in->v.i64;
    /* A sum wraps modulo 2^64 (done in uint64_t: signed overflow is undefined). */
    acc->v.i64 = op == BLK_OP_SUM   ? (int64_t)((uint64_t)a + (uint64_t)b)
                 : op == BLK_OP_MIN ? (b < a ? b : a)
                                    : (b > a ? b : a);
  }
}

int blk__values_combine(blk__values *acc, const blk__values *in) {
  if ((in->flags & VALUES_MISMATCH) || (acc->flags & VALUES_MISMATCH)) {
    acc->flags = VALUES_MISMATCH;
    return -1;
  }
  if (in->flags & VALUES_EMPTY) return 0;
  if (acc->flags & VALUES_EMPTY) {
    *acc = *in;
    return 0;
  }
  if (acc->count != in->count) {
    acc->flags = VALUES_MISMATCH;
    return -1;
  }
  for (int i = 0; i < acc->count; i++)
    if (acc->items[i].kind != in->items[i].kind) {
      acc->flags = VALUES_MISMATCH;
      return -1;
    }
  for (int i = 0; i < acc->count; i++) combine_item(&acc->items[i], &in->items[i]);
  return 0;
}

int blk__values_mismatch(const blk__values *v) {
  return (v->flags & VALUES_MISMATCH) != 0;
}

static void combine_op(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  const blk__values *a = in;
  blk__values *b = inout;
  for (int i = 0; i < *len; i++) {
    /* MPI combines in (earlier ranks) with inout; combination commutes, so
     * the order does not matter. */
    blk__values_combine(&b[i], &a[i]);
  }
}

int blk__values_mpi_create(blk__values_mpi *out) {
  int rc;
  out->type = MPI_DATATYPE_NULL;
  out->op = MPI_OP_NULL;
  if ((rc = blk__comm_check(MPI_Type_contiguous((int)sizeof(blk__values), MPI_BYTE, &out->type),
                            "MPI_Type_contiguous")))
    return rc;
  if ((rc = blk__comm_check(MPI_Type_commit(&out->type), "MPI_Type_commit"))) goto fail;
  if ((rc = blk__comm_check(MPI_Op_create(combine_op, 1, &out->op), "MPI_Op_create"))) goto fail;
  return BLK_OK;
fail:
  blk__values_mpi_free(out);
  return rc;
}

void blk__values_mpi_free(blk__values_mpi *vm) {
  if (vm->op != MPI_OP_NULL) MPI_Op_free(&vm->op);
  if (vm->type != MPI_DATATYPE_NULL) MPI_Type_free(&vm->type);
}
