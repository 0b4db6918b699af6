/*
 * context.h: whose call is running on this thread, for what blk says and
 * how it stops the job.
 *
 * A master has a context: its rank (the prefix of every line), its log
 * level, where its lines go (the master's log callback, or stderr) and how
 * its job stops (the master's stop callback, then MPI_Abort on the
 * master's communicator). Every call into a master makes the master's
 * context the calling thread's for the call's duration, and the master's
 * pool threads hold it from their start, so two masters in one process
 * (on different communicators, say) each log and stop their own way.
 * Outside any master's call the process's defaults apply: the level from
 * BLK_LOG or blk_log_set_level, stderr, and abort().
 *
 * Any thread; a context must outlive every thread that holds it.
 */
#ifndef BLK_CONTEXT_H
#define BLK_CONTEXT_H

#include "blk/log.h"

typedef struct blk__context {
  int rank;       /* in every line's prefix; -1: none */
  int level;      /* lines above it are dropped; < 0: the process's level */
  blk_log_fn log; /* receives every line; NULL: stderr */
  void *log_user;
  /* Stops the job after the message that says why was logged; must not
   * return. NULL: abort(). Only the driver thread calls it (a pool thread
   * hands its message over: fail.h). */
  void (*stop)(const char *message, void *ctx);
  void *stop_ctx;
  struct blk__trace *trace; /* its timeline (trace.h); NULL: not traced */
} blk__context;

/* The calling thread's context, or NULL outside any master's call. */
extern _Thread_local const blk__context *blk__context_now;

/* Makes c the calling thread's context; returns the one it replaces, for
 * blk__context_leave. */
static inline const blk__context *blk__context_enter(const blk__context *c) {
  const blk__context *previous = blk__context_now;
  blk__context_now = c;
  return previous;
}

static inline void blk__context_leave(const blk__context *previous) {
  blk__context_now = previous;
}

#endif
