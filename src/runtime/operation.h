/*
 * operation.h: the collective operation that is running: its number, where
 * its messages go, what failed on this rank, and the agreement that ends it.
 *
 * Every collective call (foreach, exchange, decompose, a reduction, an
 * array collective) is one operation, with the next number
 * (epoch); every rank runs the same operations in the same order. Messages
 * carry the epoch. While an operation runs, its messages go to its router;
 * a message for the next operation (a faster rank is already there) waits
 * in the stash and is replayed when this rank begins it. No rank can be
 * more than one operation ahead, because each operation ends with an
 * agreement that no rank finishes before every rank has started it
 * (agreement.h).
 *
 * Failure: what fails on this rank (a callback, a load, no memory for a
 * message) is recorded with blk__op_fail and the operation goes on, so no
 * rank is left waiting; the drivers mark what depends on it as failed
 * (messages flagged BLK__MSG_FAILED). A rank that cannot take part at all
 * (its setup failed before it sent anything) aborts: every other rank gets
 * an ABORT message, and every block of the operation then fails. The
 * agreement merges the ranks' failures, and every rank returns the same
 * code with the same detail (failure.h). After a failed operation,
 * messages that were already under way may still arrive: those are
 * dropped (with no failure, a message of an earlier operation cannot
 * exist, and one stops the job as corrupt).
 *
 * The driver thread only.
 */
#ifndef BLK_OPERATION_H
#define BLK_OPERATION_H

#include <stdint.h>

#include "base/agreement.h"
#include "base/failure.h"
#include "base/values.h"
#include "runtime/comm.h"

/* Message flags. */
enum {
  BLK__MSG_FAILED = 1, /* the sender's round failed: the payload is empty, do not use it */
  BLK__MSG_AGREE = 2,  /* a step of the closing agreement (key: the step) */
  BLK__MSG_ABORT = 4   /* a rank cannot take part: every block of the operation fails */
};

/* Where a message of the running operation goes; may take the payload's
 * storage with blk_buffer_swap. */
typedef void (*blk__route_fn)(const blk__msg *msg, blk_buffer *payload, void *ctx);

/* Where the payload of a data message of the running operation should be
 * received (comm.h's blk__place_fn, with the router's ctx): the memory must
 * stay valid until blk__comm_placed_recvs is 0. The router then gets the
 * payload as that reference. */
typedef int (*blk__op_place_fn)(const blk__msg *msg, blk_buffer *into, void *ctx);

typedef struct blk__stashed {
  blk__msg msg;
  blk_buffer payload;
} blk__stashed;

/* Memory a driver keeps from one operation to the next (its per-block
 * records, the scheduler's arrays), so that an operation of small messages
 * does not spend its time in malloc. Found by owner, a static address of
 * the driver's; blk__op_free frees it with release (NULL: free). */
typedef struct blk__kept {
  const void *owner;
  void *mem;
  size_t bytes;
  void (*release)(void *mem);
} blk__kept;
#define BLK__KEPT_SLOTS 12

/* Agreement keys are 0 .. log2(ranks) + 1; an operation's second agreement
 * adds BLK__AGREE_KEYS to them. */
#define BLK__AGREE_KEYS 33

typedef struct blk__op {
  blk__comm *comm;
  blk__buffer_cache *cache; /* storage for messages kept */
  int rank, size;
  uint32_t epoch;   /* the running or last operation */
  const char *name; /* "reduce", "exchange", ... for messages */
  int running;
  blk__route_fn route;
  blk__op_place_fn place; /* NULL: payloads land in comm's storage */
  void *route_ctx;
  blk__stashed *stash; /* messages of the next operation */
  size_t nstash, cap_stash;
  int next_abort;       /* a message of the next operation was lost: abort it */
  blk__failure next;    /* why (recorded when the next operation begins) */
  blk__failure failure; /* this rank's while running; everyone's after the agreement */
  int aborted;          /* some rank aborted: every block fails */
  int some_failed;      /* an operation has failed: late messages may come */
  /* The agreements (agreement.h): at most a barrier, then the closing one. */
  blk__agree_step steps[BLK__AGREE_MAX_STEPS];
  int nsteps, step;
  int agreements;     /* started in this operation: 0, 1 or 2 */
  int carrying;       /* the running one carries records (else: a barrier) */
  int sealed;         /* the closing agreement started: later failures are not counted */
  blk__values values; /* combined along (the exchange's posted values) */
  /* This rank's record as sent: big enough for any (the send copies it,
   * so one is enough), so an agreement needs no memory of its own. */
  unsigned char record[sizeof(blk__failure) + sizeof(blk__values) + 64];
  blk_buffer arrived[2 * BLK__AGREE_KEYS];
  unsigned char has[2 * BLK__AGREE_KEYS];
  /* What the info log line says about the operation. */
  int logging; /* the info line is written (the level when it began) */
  blk__comm_counts sent_before;
  double started;
  uint64_t handed, handed_bytes, callbacks;
  int rounds; /* a reduction's rounds (0: not a reduction) */
  blk__kept kept[BLK__KEPT_SLOTS];
  /* Traced (trace.h): when the operation began, and messages delivered. */
  int64_t trace_start;
  int64_t delivered;
  int woke; /* the message being delivered gave the driver work (blk__op_woke) */
} blk__op;

void blk__op_init(blk__op *o, blk__comm *c, blk__buffer_cache *cache);
/* Frees the stash and what drivers kept. */
void blk__op_free(blk__op *o);

/* The slot of owner's kept memory (empty the first time); release frees
 * its mem at blk__op_free. There are BLK__KEPT_SLOTS slots, one per driver
 * that keeps memory: running out is a bug in blk and stops the job. */
blk__kept *blk__op_kept(blk__op *o, const void *owner, void (*release)(void *mem));

/* Flat kept storage of at least bytes for owner (grown as needed; the
 * contents are not kept when it grows). NULL without memory (the detail
 * says so). */
void *blk__op_scratch(blk__op *o, const void *owner, size_t bytes);

/* Begins the next operation: its router (NULL: it has no messages of its
 * own), and what was stashed for it. */
void blk__op_begin(blk__op *o, const char *name, blk__route_fn route, void *ctx);

/* Lets the running operation say where its payloads are received (see
 * blk__op_place_fn); until it ends. */
static inline void blk__op_set_place(blk__op *o, blk__op_place_fn place) {
  o->place = place;
}

/* Records a failure of this rank: the code, the block (or -1), the round
 * (or -1) and why. The earliest by (round, gid) is kept. A failure after
 * the closing agreement started is not counted (logged at debug): the
 * drivers make sure that only happens to blocks that already failed. */
void blk__op_fail(blk__op *o, int code, int gid, int round, const char *fmt, ...) BLK__PRINTF(5, 6);

/* This rank cannot take part in the operation: records the failure and
 * tells every other rank (ABORT), so that nobody waits for this rank's
 * blocks. The caller sends nothing else and goes to the agreement. */
void blk__op_abort(blk__op *o, int code, const char *fmt, ...) BLK__PRINTF(3, 4);

/* Sends a message of the running operation whose receiver counts on it (a
 * round's message). If it cannot start, the failure is recorded (naming the
 * sending gid and its round) and an empty message flagged BLK__MSG_FAILED
 * goes instead; if even that cannot start, the job stops. refs_in_flight:
 * as blk__comm_send_counted (NULL: not counted). */
void blk__op_send(blk__op *o, int rank, const blk__msg *msg, blk_buffer *payload, int round,
                  int *refs_in_flight);

/* Said by a driver's router: the message it is routing made a block ready
 * to run. The pass of progress then takes in no more messages, so the block
 * runs (and its messages go out) before the driver reads the next ones. */
static inline void blk__op_woke(blk__op *o) {
  o->woke = 1;
}

/* One pass of progress of blk's messages, delivered to this operation. */
void blk__op_progress(blk__op *o, int *progressed);

/* Progresses until done(ctx) returns nonzero, waiting without spinning
 * against worker threads (backoff.h). */
void blk__op_wait(blk__op *o, int (*done)(blk__op *o, void *ctx), void *ctx);

/* Starts a barrier: done once every rank has started one. An operation
 * may run one before its closing agreement (the exchange: every message
 * is matched once it is done, so the closing agreement counts every
 * failure of a delivery). */
void blk__op_barrier_start(blk__op *o);
/* Starts the closing agreement; values (NULL: none) are all-reduced along. */
void blk__op_agree_start(blk__op *o, const blk__values *values);
/* Takes the agreement (or barrier) started last as far as the arrivals
 * allow; 1 once it is done. */
int blk__op_agree_done(blk__op *o);

/* Ends the operation once the agreement is done: returns 0, or the agreed
 * failure's code with blk_last_error() naming its rank, gid, round and
 * cause (the same on every rank). *values (if not NULL) receives the
 * all-reduced values. */
int blk__op_end(blk__op *o, blk__values *values);

/* The agreement and the end, for an operation with nothing else in flight. */
int blk__op_close(blk__op *o);

/* The agreement of a step that is not an operation of a master (creating
 * one): an MPI_Allreduce on comm, and the lowest failing rank's record
 * broadcast when there is one. Returns 0 or the agreed failure's code (the
 * detail set as by blk__op_end). */
int blk__op_agree_once(MPI_Comm comm, blk__failure *f, const char *name);

/* Counts what the info log line reports: a message handed over inside the
 * rank, a callback run. */
static inline void blk__op_count_handed(blk__op *o, size_t bytes) {
  o->handed++;
  o->handed_bytes += bytes;
}
static inline void blk__op_count_callback(blk__op *o) {
  o->callbacks++;
}

#endif
