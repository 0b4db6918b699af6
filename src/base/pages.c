/*
 * pages.c: untouched pages made real before a read; see pages.h.
 *
 * One mincore call per CHUNK pages finds the pages with no mapping, and one
 * madvise per run of them faults the run in: a buffer whose untouched pages
 * lie in a few runs (a histogram's empty ranges of bins) costs a few calls.
 * An error of either call ends the work quietly: the buffer is unchanged,
 * and what is left unpopulated costs only the flushes this would have saved.
 */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* mincore, madvise */
#endif
#include "base/pages.h"

#include <stdint.h>

#if defined(__linux__)
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
#define CHUNK 1024 /* pages a mincore call reports on */

int blk__pages_populate(void *data, size_t n) {
  if (n < BLK__PAGES_POPULATE_MIN) return 1;
  const long size = sysconf(_SC_PAGESIZE);
  if (size <= 0) return 0;
  const uintptr_t page = (uintptr_t)size;
  const uintptr_t lo = (uintptr_t)data & ~(page - 1);
  const uintptr_t hi = ((uintptr_t)data + n + page - 1) & ~(page - 1);
  unsigned char mapped[CHUNK];
  for (uintptr_t at = lo; at < hi;) {
    size_t pages = (size_t)((hi - at) / page);
    if (pages > CHUNK) pages = CHUNK;
    if (mincore((void *)at, pages * page, mapped) != 0) return 1;
    for (size_t i = 0; i < pages;) {
      if (mapped[i] & 1) {
        i++;
        continue;
      }
      size_t j = i + 1;
      while (j < pages && !(mapped[j] & 1)) j++;
      /* EINVAL: a kernel before 5.14, which knows no MADV_POPULATE_WRITE. */
      if (madvise((void *)(at + i * page), (j - i) * page, MADV_POPULATE_WRITE) != 0)
        return errno == EINVAL ? 0 : 1;
      i = j;
    }
    at += pages * page;
  }
  return 1;
}
#else
int blk__pages_populate(void *data, size_t n) {
  (void)data;
  (void)n;
  return 0;
}
#endif
