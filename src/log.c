/*
 * log.c: leveled log lines on stderr with a rank prefix.
 *
 * The level is an atomic so any thread may read or set it. Each line is
 * formatted into one buffer and written with a single fputs, so lines from
 * different threads do not interleave.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blk/error.h"
#include "logger.h"

static atomic_int level = -1; /* -1: not read from BLK_LOG yet */
static atomic_int log_rank = -1;

static const char *const level_names[] = {"none", "error", "warn", "info", "debug", "trace"};

int blk_log_parse_level(blk_log_level *out, const char *name) {
  if (!name) return BLK_EINVAL;
  for (int i = 0; i <= BLK_LOG_TRACE; i++) {
    if (strcmp(name, level_names[i]) == 0 || (name[0] == (char)('0' + i) && name[1] == '\0')) {
      *out = (blk_log_level)i;
      return 0;
    }
  }
  return BLK_EINVAL;
}

void blk_log_set_level(blk_log_level l) {
  atomic_store(&level, (int)l);
}

blk_log_level blk_log_get_level(void) {
  int l = atomic_load_explicit(&level, memory_order_relaxed);
  if (l >= 0) return (blk_log_level)l;
  blk_log_level parsed = BLK_LOG_WARN;
  const char *env = getenv("BLK_LOG");
  if (env && blk_log_parse_level(&parsed, env) != 0) {
    fprintf(stderr,
            "blk: BLK_LOG=%s is not a level (none, error, warn, info, debug, trace); using warn\n",
            env);
    parsed = BLK_LOG_WARN;
  }
  int expected = -1;
  atomic_compare_exchange_strong(&level, &expected, (int)parsed);
  return (blk_log_level)atomic_load(&level);
}

void blk__log_set_rank(int rank) {
  atomic_store(&log_rank, rank);
}

void blk__vlog(blk_log_level l, const char *fmt, va_list ap) {
  if (l == BLK_LOG_NONE || l > blk_log_get_level()) return;
  char line[1024];
  int rank = atomic_load(&log_rank);
  int n = rank >= 0 ? snprintf(line, sizeof line, "blk[%d] %s: ", rank, level_names[l])
                    : snprintf(line, sizeof line, "blk %s: ", level_names[l]);
  if (n < 0) return;
  size_t used = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  vsnprintf(line + used, sizeof line - used, fmt, ap);
  size_t len = strlen(line);
  if (len + 1 < sizeof line) {
    line[len] = '\n';
    line[len + 1] = '\0';
  } else {
    line[sizeof line - 2] = '\n';
  }
  fputs(line, stderr);
}

void blk_log(blk_log_level l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  blk__vlog(l, fmt, ap);
  va_end(ap);
}
