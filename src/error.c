/*
 * error.c: the error table, per-thread error detail, and the panic path.
 *
 * The detail message lives in thread-local storage so threads that fail at
 * the same time do not overwrite each other's message.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "fail.h"
#include "logger.h"

#define BLK__DETAIL_MAX 512

static _Thread_local char last_detail[BLK__DETAIL_MAX];
static blk__stop_fn stop_handler;

const char *blk_strerror(int code) {
  switch (code) {
#define BLK__ERROR_CASE(name, value, str) \
  case (value):                           \
    return (str);
    BLK_ERROR_MAP(BLK__ERROR_CASE)
#undef BLK__ERROR_CASE
  }
  return "unknown error";
}

const char *blk_last_error(void) {
  return last_detail;
}

void blk__clear_error(void) {
  last_detail[0] = '\0';
}

int blk__fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_detail, sizeof last_detail, fmt, ap);
  va_end(ap);
  blk_log(BLK_LOG_ERROR, "%s (%s)", last_detail, blk_strerror(code));
  return code;
}

void blk__set_stop_handler(blk__stop_fn fn) {
  stop_handler = fn;
}

void blk__panic(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char line[BLK__DETAIL_MAX];
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* Printed whatever the log level: the job is about to stop. */
  blk_log_level saved = blk_log_get_level();
  if (saved < BLK_LOG_ERROR) blk_log_set_level(BLK_LOG_ERROR);
  blk_log(BLK_LOG_ERROR, "fatal: %s", line);
  fflush(stderr);
  if (stop_handler) stop_handler();
  abort();
}
