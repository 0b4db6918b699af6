/*
 * trace.h: a timeline of what a master's threads did, for BLK_TRACE.
 *
 * A trace keeps spans, each a start, an end and what ran in between: a
 * collective call, a user's callback with its gid and round, the driver
 * waiting for messages or workers, MPI moving messages, an out-of-core
 * record stored or loaded with its bytes and the codec's and the file's
 * time. blk__trace_json writes them as Chrome trace-event JSON, which
 * Perfetto and chrome://tracing open: one process per rank, one track per
 * thread.
 *
 * A master that traces puts its trace in its context (context.h), which its
 * driver, pool and I/O threads hold; blk__trace_here() reads it. A master
 * that does not trace (the default) has none there, so every place that
 * could record costs a thread-local load and a test.
 *
 * Locking: each thread appends to a list of its own and takes no lock to
 * record; it finds its list through a thread-local cache and takes the
 * trace's lock only the first time. blk__trace_json reads every list, so it
 * runs when no other thread records (the master's threads are joined). A
 * thread keeps at most BLK__TRACE_MAX_SPANS spans; later ones are counted,
 * and the trace says how many were dropped, so nothing is lost silently.
 */
#ifndef BLK_TRACE_H
#define BLK_TRACE_H

#include <stdint.h>

#include "base/context.h"
#include "blk/buffer.h"

#define BLK__TRACE_MAX_SPANS (1u << 20)

typedef struct blk__trace blk__trace;

typedef enum blk__trace_kind {
  BLK__TRACE_OPERATION, /* a collective call (name) on the driver */
  BLK__TRACE_CALLBACK,  /* name: its phase; gid, round; a: bytes in, b: bytes out */
  BLK__TRACE_WAIT,      /* the driver had nothing to do until a message or worker came */
  BLK__TRACE_PROGRESS,  /* MPI moved messages; a: how many arrived */
  BLK__TRACE_STORE,     /* a record written; gid; a: raw bytes, b: stored, c: codec ns, d: I/O ns */
  BLK__TRACE_LOAD       /* a record read back; as STORE */
} blk__trace_kind;

typedef struct blk__trace_span {
  const char *name;         /* static storage (a literal): it is read when the trace is written */
  int64_t start_ns, end_ns; /* blk__now_ns() */
  blk__trace_kind kind;
  int gid, round; /* -1: none */
  int64_t a, b, c, d;
} blk__trace_span;

/* The trace of the calling thread's master, or NULL when it does not trace. */
static inline blk__trace *blk__trace_here(void) {
  return blk__context_now ? blk__context_now->trace : NULL;
}

/* A trace of the given rank, whose times count from origin_ns (blk__now_ns()
 * on this rank when the ranks were together, so the ranks' tracks line
 * up). BLK_ENOMEM. */
int blk__trace_create(blk__trace **out, int rank, int64_t origin_ns);
void blk__trace_destroy(blk__trace *t);

/* Moves the origin (before any span is recorded). */
void blk__trace_set_origin(blk__trace *t, int64_t origin_ns);

/* Names the calling thread's track ("driver", "worker", "I/O"; threads of
 * one name are numbered). Any thread, before or after it records. */
void blk__trace_name_thread(blk__trace *t, const char *name);

/* Appends a span to the calling thread's track (one it has not named is
 * "thread"). Any thread; no lock after its first. A span that finds no
 * memory, or more than BLK__TRACE_MAX_SPANS on its thread, is dropped and
 * counted. */
void blk__trace_record(blk__trace *t, const blk__trace_span *span);

/* The calling thread found nothing to do at now_ns: a "wait for messages"
 * span runs from the first such moment to the start of the thread's next
 * span (recorded with it). Any thread. */
void blk__trace_idle(blk__trace *t, int64_t now_ns);

/* Spans dropped so far, over every thread. */
uint64_t blk__trace_dropped(blk__trace *t);

/* Appends this rank's trace to out as trace events separated by ",\n" (no
 * separator before the first or after the last): the process's and
 * threads' names, then every span. No other thread may record meanwhile.
 * BLK_ENOMEM (out is then cleared). */
int blk__trace_json(blk__trace *t, blk_buffer *out);

#endif
