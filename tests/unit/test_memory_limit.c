/* test_memory_limit: the limit is physical memory unless an rlimit is lower;
 * a request above it, or one whose size overflows, is refused with a detail
 * naming the request, its bytes and the limit; one at the limit is not.
 * The rlimits are lowered in forked children, so this process keeps its own. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blk/blk.h"
#include "check.h"
#include "base/memory_limit.h"

static uint64_t physical_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  CHECK(pages > 0 && page > 0);
  return (uint64_t)pages * (uint64_t)page;
}

/* In a child: lower `resource` to `bytes` and check that the limit follows.
 * Nothing is allocated after the rlimit is lowered (an AddressSanitizer
 * build maps terabytes of shadow memory and could map no more). */
static void child_limit(int resource, uint64_t bytes, const char *which) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit r;
    if (getrlimit(resource, &r) != 0) _exit(10);
    r.rlim_cur = (rlim_t)bytes;
    if (setrlimit(resource, &r) != 0) _exit(11);
    blk__memory_limit l = blk__memory_limit_get();
    if (l.bytes != bytes) _exit(12);
    if (strcmp(l.which, which) != 0) _exit(13);
    const uint64_t unchecked = (uint64_t)64 << 20;
    if (bytes < unchecked) { /* taken as fitting up to 64 MiB, refused past it */
      if (!blk__memory_fits(1, unchecked) || blk__memory_fits(1, unchecked + 1)) _exit(16);
      _exit(0);
    }
    if (!blk__memory_fits(1, bytes) || blk__memory_fits(1, bytes + 1)) _exit(14);
    if (!blk__memory_fits(bytes / 8, 8) || blk__memory_fits(bytes / 8 + 1, 8)) _exit(15);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "child lowering %s to %llu bytes: status %d", which, (unsigned long long)bytes, status);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);

  /* Without a lower rlimit (as ctest runs it) the limit is physical memory. */
  blk__memory_limit l = blk__memory_limit_get();
  uint64_t phys = physical_bytes();
  CHECK(l.bytes <= phys);
  CHECK(l.bytes > 0);
  struct rlimit as, data;
  CHECK(getrlimit(RLIMIT_AS, &as) == 0 && getrlimit(RLIMIT_DATA, &data) == 0);
  if (as.rlim_cur == RLIM_INFINITY && data.rlim_cur == RLIM_INFINITY) {
    CHECK_EQ_INT(l.bytes, phys);
    CHECK_STR(l.which, "physical memory");
  }

  /* The boundary, in bytes and in items. */
  CHECK_EQ_INT(blk__memory_check(1, l.bytes, "one block"), BLK_OK);
  CHECK_EQ_INT(blk__memory_check(l.bytes / 4, 4, "gids"), BLK_OK);
  CHECK_EQ_INT(blk__memory_check(0, UINT64_MAX, "nothing"), BLK_OK);
  CHECK_EQ_INT(blk__memory_check(UINT64_MAX, 0, "empty items"), BLK_OK);
  CHECK(blk__memory_fits(1, 1));
  CHECK(!blk__memory_fits(1, l.bytes + 1));
  CHECK(!blk__memory_fits(l.bytes / 4 + 1, 4));

  /* A refusal names what was asked, the bytes it needs and the limit. */
  CHECK_EQ_INT(blk__memory_check(l.bytes / 4 + 1, 4, "master: %d gids", 7), BLK_ENOMEM);
  char want[256];
  snprintf(want, sizeof want, "master: 7 gids: %llu x 4 bytes = %llu bytes, more than",
           (unsigned long long)(l.bytes / 4 + 1), (unsigned long long)(l.bytes / 4 + 1) * 4);
  CHECK_MSG(strstr(blk_last_error(), want) != NULL, "detail \"%s\" lacks \"%s\"", blk_last_error(),
            want);
  snprintf(want, sizeof want, "this process can have: %llu bytes (%s)", (unsigned long long)l.bytes,
           l.which);
  CHECK_MSG(strstr(blk_last_error(), want) != NULL, "detail \"%s\" lacks \"%s\"", blk_last_error(),
            want);

  /* A size that overflows 64 bits never fits and says so. */
  CHECK(!blk__memory_fits(UINT64_MAX / 2, 3));
  CHECK_EQ_INT(blk__memory_check(UINT64_MAX / 2, 3, "arrays: count"), BLK_ENOMEM);
  CHECK_MSG(strstr(blk_last_error(),
                   "arrays: count: 9223372036854775807 x 3 bytes is more than "
                   "2^64 bytes") != NULL,
            "detail: %s", blk_last_error());

  /* A lower rlimit becomes the limit, and names itself (below the current
   * limit, since a soft rlimit cannot go above the hard one). */
  uint64_t low = l.bytes / 2 < ((uint64_t)64 << 30) ? l.bytes / 2 : (uint64_t)64 << 30;
  child_limit(RLIMIT_AS, low, "RLIMIT_AS");
  child_limit(RLIMIT_DATA, low - 4096, "RLIMIT_DATA");
  /* Up to 64 MiB is taken as fitting without reading the limits. */
  child_limit(RLIMIT_AS, (uint64_t)32 << 20, "RLIMIT_AS");

  printf("test_memory_limit: ok\n");
  return 0;
}
