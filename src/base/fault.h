/*
 * fault.h: making blk's own calls fail on purpose, to test what a failure
 * does to an operation on every rank.
 *
 * Three kinds of call can be made to fail: memory allocations inside blk
 * (alloc.h), the MPI sends of comm.c (MPI_Isend and MPI_Issend) and its
 * payload receives (MPI_Irecv). Arming a kind makes its calls number
 * first .. first + count - 1, counted from the arming, fail as if the
 * resource were gone (malloc returns NULL; the MPI call returns
 * MPI_ERR_OTHER without being made). Counts are per process and kind.
 *
 * Tests arm faults with blk__fault_arm; any program can with the
 * environment variable BLK_FAULT, read when a master is created:
 *     BLK_FAULT=alloc:17            the 17th allocation after that fails
 *     BLK_FAULT=isend:3:2@1         on rank 1, the 3rd and 4th sends fail
 * (kinds alloc, isend, irecv; ":count" and "@rank" optional).
 *
 * Unarmed, a check costs one relaxed atomic load. Any thread.
 */
#ifndef BLK_FAULT_H
#define BLK_FAULT_H

#include <stdint.h>

typedef enum blk__fault_kind {
  BLK__FAULT_ALLOC = 0,
  BLK__FAULT_ISEND = 1,
  BLK__FAULT_IRECV = 2,
  BLK__FAULT_KINDS = 3
} blk__fault_kind;

/* Makes calls first .. first+count-1 of `kind` from now on fail (first >= 1),
 * and restarts its count. count == 0 disarms it. */
void blk__fault_arm(blk__fault_kind kind, uint64_t first, uint64_t count);

/* Calls of `kind` counted since it was last armed, and how many of them
 * failed on purpose. */
uint64_t blk__fault_calls(blk__fault_kind kind);
uint64_t blk__fault_fired(blk__fault_kind kind);

/* Arms what BLK_FAULT asks for, if it names this rank (or no rank). Returns
 * 0, or BLK_EINVAL for a value it cannot read (the detail says why). */
int blk__fault_from_env(int rank);

/* Whether this call of `kind` must fail. */
int blk__fault_check(blk__fault_kind kind);

#endif
