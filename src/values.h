/*
 * values.h: the value all-reduce that blocks post during a callback.
 *
 * Each block posts a short list of (type, op, value) through its proxy. At
 * the next exchange the lists of the local blocks are combined on this rank
 * (they must agree in type and op, position by position), and the ranks
 * combine theirs with one non-blocking MPI_Iallreduce whose completion also
 * ends the exchange (it doubles as the barrier of the termination test).
 * A rank with no blocks contributes an empty list, which combines as the
 * identity, so it needs to know nothing about what the blocks posted.
 */
#ifndef BLK_VALUES_H
#define BLK_VALUES_H

#include <mpi.h>
#include <stdint.h>

#include "blk/proxy.h"

enum { BLK__VALUE_F64 = 0, BLK__VALUE_I64 = 1 };

typedef struct blk__value {
  int32_t kind; /* type * 4 + op */
  int32_t pad;
  union {
    double f64;
    int64_t i64;
  } v;
} blk__value;

typedef struct blk__values {
  int32_t count;
  int32_t flags; /* VALUES_EMPTY, VALUES_MISMATCH (values.c) */
  blk__value items[BLK_PROXY_MAX_REDUCTIONS];
} blk__values;

/* An empty list (the identity of the combination). */
void blk__values_clear(blk__values *v);
/* Appends one posted value; BLK_EINVAL for an unknown op or a full list. */
int blk__values_post(blk__values *v, int type, blk_op op, double f, int64_t i);
/* Combines the list of a local block into acc; returns 0, or -1 if the two
 * disagree (different count, or type or op at some position). */
int blk__values_combine(blk__values *acc, const blk__values *in);

/* The MPI side: one committed datatype and op for a whole blk__values. */
typedef struct blk__values_mpi {
  MPI_Datatype type;
  MPI_Op op;
} blk__values_mpi;
int blk__values_mpi_create(blk__values_mpi *out);
void blk__values_mpi_free(blk__values_mpi *vm);
/* Whether a combined list came out as a mismatch between ranks. */
int blk__values_mismatch(const blk__values *v);

#endif
