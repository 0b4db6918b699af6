/*
 * combine.c: element-wise ops over two arrays; see combine.h.
 *
 * One loop per (type, op), over restrict pointers, so the compiler can turn
 * each into vector code without an overlap check. Cost: one read of each
 * array and one write of acc, about 1.5 copies of the bytes.
 */
#include "base/combine.h"

#include <math.h>
#include <stdint.h>

#define BLK__LOOPS(T, S)                                               \
  do {                                                                 \
    T *restrict x = acc;                                               \
    const T *restrict y = in;                                          \
    if (op == BLK_OP_SUM) {                                            \
      S *restrict xs = acc;                                            \
      const S *restrict ys = in;                                       \
      for (size_t i = 0; i < n; i++) xs[i] = (S)(xs[i] + ys[i]);       \
    } else if (op == BLK_OP_MIN) {                                     \
      for (size_t i = 0; i < n; i++) x[i] = y[i] < x[i] ? y[i] : x[i]; \
    } else {                                                           \
      for (size_t i = 0; i < n; i++) x[i] = y[i] > x[i] ? y[i] : x[i]; \
    }                                                                  \
  } while (0)

void blk__combine(blk_type t, blk_op op, void *restrict acc, const void *restrict in, size_t n) {
  switch (t) {
    case BLK_FLOAT:
      BLK__LOOPS(float, float);
      break;
    case BLK_DOUBLE:
      BLK__LOOPS(double, double);
      break;
    case BLK_INT32:
      BLK__LOOPS(int32_t, uint32_t);
      break;
    case BLK_INT64:
      BLK__LOOPS(int64_t, uint64_t);
      break;
  }
}

#define BLK__FILL(T, MINV, MAXV)                                            \
  do {                                                                      \
    T *x = a, v = op == BLK_OP_SUM ? (T)0 : op == BLK_OP_MIN ? MAXV : MINV; \
    for (size_t i = 0; i < n; i++) x[i] = v;                                \
  } while (0)

void blk__identity(blk_type t, blk_op op, void *a, size_t n) {
  switch (t) {
    case BLK_FLOAT:
      BLK__FILL(float, -INFINITY, INFINITY);
      break;
    case BLK_DOUBLE:
      BLK__FILL(double, -(double)INFINITY, (double)INFINITY);
      break;
    case BLK_INT32:
      BLK__FILL(int32_t, INT32_MIN, INT32_MAX);
      break;
    case BLK_INT64:
      BLK__FILL(int64_t, INT64_MIN, INT64_MAX);
      break;
  }
}
