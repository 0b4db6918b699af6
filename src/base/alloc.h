/*
 * alloc.h: blk's memory allocation, which a test can make fail (fault.h).
 *
 * Every allocation inside blk goes through these, so a test can fail the
 * Nth one and check that the failure comes back to every rank as an error
 * (or stops the job with a message) and loses nothing.
 */
#ifndef BLK_ALLOC_H
#define BLK_ALLOC_H

#include <stdlib.h>

#include "base/fault.h"

static inline void *blk__malloc(size_t n) {
  return blk__fault_check(BLK__FAULT_ALLOC) ? NULL : malloc(n);
}

static inline void *blk__calloc(size_t n, size_t size) {
  return blk__fault_check(BLK__FAULT_ALLOC) ? NULL : calloc(n, size);
}

static inline void *blk__realloc(void *p, size_t n) {
  return blk__fault_check(BLK__FAULT_ALLOC) ? NULL : realloc(p, n);
}

#endif
