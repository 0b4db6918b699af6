/* test_pages: blk__pages_populate maps every page of a buffer that had no
 * mapping (mincore says so afterwards), changes no byte (written pages keep
 * their bytes, the others read zero, the buffer's neighbours are as they
 * were), works across its mincore chunks and from unaligned ends, and
 * leaves a buffer below BLK__PAGES_POPULATE_MIN alone. Where the system
 * cannot populate (not Linux, a kernel before 5.14) it checks that nothing
 * changed and reports the test skipped (77), not passed. */
#define _DEFAULT_SOURCE /* mincore, MAP_ANONYMOUS */

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/pages.h"
#include "check.h"

static size_t page;

static unsigned char *fresh(size_t pages) {
  void *p = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED);
  return p;
}

static size_t mapped_pages(unsigned char *at, size_t pages) {
  unsigned char *vec = malloc(pages);
  CHECK(vec != NULL);
  CHECK(mincore(at, pages * page, vec) == 0);
  size_t n = 0;
  for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
  free(vec);
  return n;
}

/* The byte at offset i of a written page. */
static unsigned char pattern(size_t i) {
  return (unsigned char)(i * 131u + 7u);
}

int main(void) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  CHECK(page >= 4096);

  /* 2500 pages (more than two mincore chunks of 1024), untouched except a
   * few written pages, at both chunk edges among them, and one read. */
  const size_t pages = 2500;
  const size_t written[] = {0, 5, 1023, 1024, 1500, 2499};
  const size_t nwritten = sizeof written / sizeof written[0];
  unsigned char *r = fresh(pages);
  for (size_t w = 0; w < nwritten; w++)
    for (size_t i = 0; i < page; i++) r[written[w] * page + i] = pattern(i + w);
  volatile unsigned char zero = r[7 * page + 3]; /* maps the zero page there */
  CHECK(zero == 0);
  CHECK(mapped_pages(r, pages) == nwritten + 1);

  /* The buffer: from inside page 0 to inside page 2499. */
  unsigned char *from = r + 100;
  size_t n = pages * page - 200;
  int can = blk__pages_populate(from, n);
  CHECK(can == 0 || can == 1);
  if (can)
    CHECK_MSG(mapped_pages(r, pages) == pages, "%zu of %zu pages mapped", mapped_pages(r, pages),
              pages);
  else
    CHECK(mapped_pages(r, pages) == nwritten + 1);
  for (size_t p = 0, w = 0; p < pages; p++) {
    int was_written = w < nwritten && written[w] == p;
    for (size_t i = 0; i < page; i++) {
      unsigned char want = was_written ? pattern(i + w) : 0;
      if (r[p * page + i] != want)
        CHECK_MSG(0, "page %zu byte %zu: %u, not %u", p, i, r[p * page + i], want);
    }
    w += (size_t)was_written;
  }
  CHECK(munmap(r, pages * page) == 0);

  /* Below the minimum: nothing is mapped. */
  const size_t small = BLK__PAGES_POPULATE_MIN / page - 1;
  unsigned char *s = fresh(small);
  int small_can = blk__pages_populate(s, small * page);
  CHECK(small_can == 0 || small_can == 1);
  CHECK(mapped_pages(s, small) == 0);
  CHECK(munmap(s, small * page) == 0);

  /* Heap memory with bytes in every page: unchanged. */
  const size_t heap = 4 * BLK__PAGES_POPULATE_MIN + 13;
  unsigned char *h = malloc(heap);
  CHECK(h != NULL);
  for (size_t i = 0; i < heap; i++) h[i] = pattern(i);
  CHECK(blk__pages_populate(h, heap) == can);
  for (size_t i = 0; i < heap; i++)
    if (h[i] != pattern(i)) CHECK_MSG(0, "heap byte %zu: %u, not %u", i, h[i], pattern(i));
  free(h);

  /* Nothing to do (no system call: 1 where the build can populate). */
  int none = blk__pages_populate(NULL, 0);
  CHECK(none == 0 || none == 1);

  if (!can) {
    printf(
        "test_pages: this system cannot populate pages (MADV_POPULATE_WRITE); checked that "
        "nothing changed: SKIP\n");
    return 77;
  }
  printf("test_pages: PASS\n");
  return 0;
}
