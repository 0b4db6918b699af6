/*
 * memory_limit.h: whether a request for memory can ever be met by this
 * process.
 *
 * On Linux malloc of more than the machine has usually succeeds (overcommit)
 * and the job is killed later, when the pages are touched, with no word of
 * what asked for them. blk refuses such requests up front instead: a request
 * larger than the smallest of physical memory, RLIMIT_AS and RLIMIT_DATA
 * cannot succeed whatever else the process does. Below that limit nothing is
 * promised (other processes, what is already allocated): this finds what is
 * sure to fail, it does not reserve anything. Requests up to 64 MiB are
 * taken as fitting without asking (memory_limit.c says why); larger ones
 * read the limits afresh (three system calls), since rlimits may change. No
 * state, any thread.
 */
#ifndef BLK_MEMORY_LIMIT_H
#define BLK_MEMORY_LIMIT_H

#include <stdint.h>

#include "base/fail.h"

typedef struct blk__memory_limit {
  uint64_t bytes;    /* the smallest known limit; UINT64_MAX when none is known */
  const char *which; /* what sets it: "physical memory", "RLIMIT_AS", "RLIMIT_DATA" or
                        "no known limit" */
} blk__memory_limit;

/* The most bytes this process can hold, and which limit says so. */
blk__memory_limit blk__memory_limit_get(void);

/* 1 if count items of size bytes each (count * size, which may overflow
 * uint64) are within the limit or at most 64 MiB, else 0. */
int blk__memory_fits(uint64_t count, uint64_t size);

/* 0 if count * size bytes fit (as blk__memory_fits); otherwise BLK_ENOMEM
 * through blk__fail with a detail such as "master: 2147483647 local blocks:
 * 2147483647 x 684 bytes = 1468878815548 bytes, more than this process can
 * have: 25165824000 bytes (physical memory)". fmt names what was asked for. */
int blk__memory_check(uint64_t count, uint64_t size, const char *fmt, ...) BLK__PRINTF(3, 4);

#endif
