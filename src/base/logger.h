/*
 * logger.h: blk's internal logging calls.
 *
 * BLK__LOG checks the level before formatting, so a debug line on a hot path
 * costs two loads when debug is off.
 */
#ifndef BLK_LOGGER_H
#define BLK_LOGGER_H

#include <stdarg.h>

#include "blk/log.h"

/* Reads and checks BLK_LOG, once per process: an invalid value is reported
 * on stderr in one line naming it and the valid levels, even by a run that
 * then logs nothing or sets its own level. Later calls, and calls racing
 * with the first, return at once. The master calls it when it is created;
 * the first blk_log_get_level or blk_log_set_level calls it too. Any thread. */
void blk__log_init(void);

/* The rank printed in the prefix of lines outside any master's call (a
 * master's own lines carry its rank: context.h); -1 prints no rank. */
void blk__log_set_rank(int rank);

/* Whether a line at level l is written on this thread now: the running
 * master's level, else the process's. */
int blk__log_enabled(blk_log_level l);

/* Writes one line at error level whatever the level, and flushes: for the
 * message that says why the job stops. */
void blk__log_fatal(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

void blk__vlog(blk_log_level level, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 0)))
#endif
    ;

#define BLK__LOG(level, ...)                                    \
  do {                                                          \
    if (blk__log_enabled(level)) blk_log((level), __VA_ARGS__); \
  } while (0)

#endif
