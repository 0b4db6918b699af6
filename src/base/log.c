/*
 * log.c: leveled log lines with a rank prefix, to stderr or to the log
 * callback of the master whose call is running (context.h).
 *
 * The level is an atomic so any thread may read or set it. Each line is
 * formatted into one buffer and written with a single fputs, so lines from
 * different threads do not interleave.
 *
 * BLK_LOG is read once per process, by blk__log_init: the master calls it at
 * create, and the first blk_log_get_level or blk_log_set_level does too, so
 * a bad value is reported even by a run that logs nothing or that sets its
 * own level (which then wins over BLK_LOG). One compare-and-swap on env_read
 * picks the one thread that reports; a thread that loses it while the
 * winner is still reading parses BLK_LOG itself, silently, and gets the same
 * level, so nobody waits and nobody reports twice.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "base/logger.h"
#include "blk/error.h"

static atomic_int level = -1;    /* -1: neither read from BLK_LOG nor set yet */
static atomic_int env_read = 0;  /* 1 once a thread has taken the job of reading BLK_LOG */
static atomic_int log_rank = -1; /* outside a master's call */

_Thread_local const blk__context *blk__context_now;

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

/* The level BLK_LOG asks for: warn when unset or not a level. */
static blk_log_level env_level(const char **bad) {
  blk_log_level parsed = BLK_LOG_WARN;
  const char *env = getenv("BLK_LOG");
  *bad = NULL;
  if (env && blk_log_parse_level(&parsed, env) != 0) {
    *bad = env;
    parsed = BLK_LOG_WARN;
  }
  return parsed;
}

/* Makes BLK_LOG's level the level unless one is set already (a level the
 * program set wins). */
static void adopt(blk_log_level l) {
  int unset = -1;
  atomic_compare_exchange_strong(&level, &unset, (int)l);
}

void blk__log_init(void) {
  int first = 0;
  if (!atomic_compare_exchange_strong(&env_read, &first, 1)) return;
  const char *bad = NULL;
  blk_log_level l = env_level(&bad);
  if (bad) {
    char line[512];
    snprintf(line, sizeof line,
             "blk: BLK_LOG=%.200s is not a level (none, error, warn, info, debug, trace, or "
             "0-5); ignoring it (the default level is warn)\n",
             bad);
    fputs(line, stderr);
  }
  adopt(l);
}

void blk_log_set_level(blk_log_level l) {
  blk__log_init(); /* a bad BLK_LOG is still reported, once */
  atomic_store(&level, (int)l);
}

blk_log_level blk_log_get_level(void) {
  int l = atomic_load_explicit(&level, memory_order_relaxed);
  if (l >= 0) return (blk_log_level)l;
  blk__log_init();
  l = atomic_load(&level);
  if (l >= 0) return (blk_log_level)l;
  /* Another thread is reading BLK_LOG right now: read it too, quietly. */
  const char *bad = NULL;
  adopt(env_level(&bad));
  return (blk_log_level)atomic_load(&level);
}

void blk__log_set_rank(int rank) {
  atomic_store(&log_rank, rank);
}

int blk__log_enabled(blk_log_level l) {
  const blk__context *c = blk__context_now;
  int limit = c && c->level >= 0 ? c->level : (int)blk_log_get_level();
  return l != BLK_LOG_NONE && (int)l <= limit;
}

/* One line, prefixed, to the context's log or to stderr in one write. */
static void emit(blk_log_level l, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 0)))
#endif
    ;
static void emit(blk_log_level l, const char *fmt, va_list ap) {
  const blk__context *c = blk__context_now;
  char line[1024];
  int rank = c ? c->rank : atomic_load(&log_rank);
  int n = rank >= 0 ? snprintf(line, sizeof line, "blk[%d] %s: ", rank, level_names[l])
                    : snprintf(line, sizeof line, "blk %s: ", level_names[l]);
  if (n < 0) return;
  size_t used = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  vsnprintf(line + used, sizeof line - used, fmt, ap);
  if (c && c->log) {
    c->log(l, line, c->log_user);
    return;
  }
  size_t len = strlen(line);
  if (len + 1 < sizeof line) {
    line[len] = '\n';
    line[len + 1] = '\0';
  } else {
    line[sizeof line - 2] = '\n';
  }
  fputs(line, stderr);
}

void blk__vlog(blk_log_level l, const char *fmt, va_list ap) {
  if (blk__log_enabled(l)) emit(l, fmt, ap);
}

void blk__log_fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(BLK_LOG_ERROR, fmt, ap);
  va_end(ap);
  fflush(stderr);
}

void blk_log(blk_log_level l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  blk__vlog(l, fmt, ap);
  va_end(ap);
}
