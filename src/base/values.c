/*
 * values.c: combining posted values; see values.h.
 *
 * The combination is commutative (sum, min, max item by item; a mismatch
 * absorbs everything), which the agreement needs so that every rank ends
 * with the same bits.
 */
#include "base/values.h"

#include <string.h>

#include "base/fail.h"

enum { VALUES_NOTHING = 1, VALUES_MISMATCH = 2 };

/* Only items[0, count) mean anything: these set count and flags alone, so
 * starting an operation does not write the 512 bytes of items. */
void blk__values_clear(blk__values *v) {
  v->count = 0;
  v->flags = VALUES_NOTHING;
}

void blk__values_none_posted(blk__values *v) {
  v->count = 0;
  v->flags = 0;
}

void blk__values_copy(blk__values *dst, const blk__values *src) {
  dst->count = src->count;
  dst->flags = src->flags;
  memcpy(dst->items, src->items, (size_t)src->count * sizeof src->items[0]);
}

int blk__values_post(blk__values *v, int type, blk_op op, double f, int64_t i) {
  if (op != BLK_OP_SUM && op != BLK_OP_MIN && op != BLK_OP_MAX)
    return blk__fail(BLK_EINVAL, "all-reduce: op %d is not BLK_OP_SUM, BLK_OP_MIN or BLK_OP_MAX",
                     (int)op);
  if (v->count >= BLK__VALUES_MAX)
    return blk__fail(BLK_EINVAL, "all-reduce: more than %d values posted by one block",
                     BLK__VALUES_MAX);
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
    /* A NaN wins a min or max whichever side it is on: commutative, so
     * every rank ends with the same bits (b != b: b is NaN). */
    acc->v.f64 = op == BLK_OP_SUM   ? a + b
                 : b != b           ? b
                 : op == BLK_OP_MIN ? (b < a ? b : a)
                                    : (b > a ? b : a);
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
  if (in->flags & VALUES_NOTHING) return 0;
  if (acc->flags & VALUES_NOTHING) {
    blk__values_copy(acc, in);
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
