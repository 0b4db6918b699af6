/*
 * memory_limit.c: the most memory this process can have (memory_limit.h).
 *
 * Three limits, each ignored when unknown or unlimited: physical memory
 * (sysconf pages times page size: no process gets more than the machine has,
 * and swap is not counted because a job that lives in swap has failed too),
 * and the soft RLIMIT_AS and RLIMIT_DATA, the limits malloc itself runs into
 * (`ulimit -v`, `ulimit -d`, or a batch system's). A cgroup's memory limit is
 * not read: it is not in POSIX and lives in different files across versions.
 */
#define _POSIX_C_SOURCE 200809L

#include "base/memory_limit.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

/* Requests up to this size fit without asking: reading the limits costs
 * three system calls (1.3 us on a 2-vCPU VM, 4% of a small all-reduce), no
 * limit that low is in use, and an rlimit makes malloc fail cleanly anyway.
 * The requests worth refusing are the ones overcommit would grant and the
 * out-of-memory killer would end. */
#define UNCHECKED_BYTES ((uint64_t)64 << 20)

static void lower_to(blk__memory_limit *l, uint64_t bytes, const char *which) {
  if (bytes < l->bytes) {
    l->bytes = bytes;
    l->which = which;
  }
}

static void lower_to_rlimit(blk__memory_limit *l, int resource, const char *which) {
  struct rlimit r;
  if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return;
  lower_to(l, (uint64_t)r.rlim_cur, which);
}

blk__memory_limit blk__memory_limit_get(void) {
  blk__memory_limit l = {UINT64_MAX, "no known limit"};
#ifdef _SC_PHYS_PAGES
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && (uint64_t)pages <= UINT64_MAX / (uint64_t)page)
    lower_to(&l, (uint64_t)pages * (uint64_t)page, "physical memory");
#endif
  lower_to_rlimit(&l, RLIMIT_AS, "RLIMIT_AS");
  lower_to_rlimit(&l, RLIMIT_DATA, "RLIMIT_DATA");
  return l;
}

int blk__memory_fits(uint64_t count, uint64_t size) {
  if (size == 0 || count <= UNCHECKED_BYTES / size) return 1;
  return count <= blk__memory_limit_get().bytes / size;
}

int blk__memory_check(uint64_t count, uint64_t size, const char *fmt, ...) {
  if (size == 0 || count <= UNCHECKED_BYTES / size) return BLK_OK;
  blk__memory_limit l = blk__memory_limit_get();
  if (count <= l.bytes / size) return BLK_OK;
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  unsigned long long n = count, each = size, limit = l.bytes;
  if (count > UINT64_MAX / size)
    return blk__fail(BLK_ENOMEM,
                     "%s: %llu x %llu bytes is more than 2^64 bytes; this process can have at "
                     "most %llu bytes (%s)",
                     what, n, each, limit, l.which);
  return blk__fail(BLK_ENOMEM,
                   "%s: %llu x %llu bytes = %llu bytes, more than this process can have: %llu "
                   "bytes (%s)",
                   what, n, each, n * each, limit, l.which);
}
