/*
 * error.c: the error table, per-thread error detail, and the panic path.
 *
 * The detail message and its code live in thread-local storage so threads
 * that fail at the same time do not overwrite each other's message, and so
 * a driver can tell whether a callback's failing code is one blk gave it on
 * that thread (and name blk's reason).
 *
 * A returned error is not printed (BLK_LOG=debug shows it): the caller gets
 * the code and blk_last_error(), and printing as well made every failure
 * appear twice. What stops the job is printed, at error level whatever the
 * log level, once, by the thread that stops it. A pool worker cannot stop
 * an MPI job itself (only the thread that makes MPI calls may call
 * MPI_Abort), so a worker hands its message to the driver (the handoff the
 * pool installs) and the driver stops the job, the way the running master
 * says (context.h): its stop callback, then MPI_Abort on its communicator.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/context.h"
#include "base/fail.h"
#include "base/logger.h"

#define BLK__DETAIL_MAX 512

static _Thread_local char last_detail[BLK__DETAIL_MAX];
static _Thread_local int last_code;
static _Thread_local blk__handoff_fn handoff;

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
  last_code = 0;
}

int blk__last_code(void) {
  return last_code;
}

int blk__fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_detail, sizeof last_detail, fmt, ap);
  va_end(ap);
  last_code = code;
  BLK__LOG(BLK_LOG_DEBUG, "returning %s: %s", blk_strerror(code), last_detail);
  return code;
}

void blk__set_panic_handoff(blk__handoff_fn fn) {
  handoff = fn;
}

void blk__panic(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char line[BLK__DETAIL_MAX];
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (handoff) handoff(line); /* a pool worker: the driver stops the job */
  /* Printed whatever the log level: the job is about to stop. */
  blk__log_fatal("fatal: %s", line);
  const blk__context *c = blk__context_now;
  if (c && c->stop) c->stop(line, c->stop_ctx);
  abort();
}
