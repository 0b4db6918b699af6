/*
 * operation.c: the running operation's messages, failures and closing
 * agreement; see operation.h.
 *
 * Invariants:
 * - running is set between begin and end; route is the running operation's
 *   router (or NULL when it has no messages of its own).
 * - The stash holds only messages of epoch + 1 (no rank is further ahead).
 * - has[k] says arrived[k] holds the agreement message with key k of the
 *   running operation (keys of its second agreement are offset by
 *   BLK__AGREE_KEYS); each key comes once (one peer per step).
 *
 * An agreement record travels as one inline message: a fixed part (the
 * failure's numbers, the length of its text, the values' count and flags),
 * then the text, then the values. With nothing failed and nothing posted
 * that is 32 bytes.
 */
#include "runtime/operation.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/backoff.h"
#include "base/buffer_cache.h"
#include "base/logger.h"
#include "base/thread.h"
#include "base/trace.h"

typedef struct wire {
  int32_t code, rank, gid, round, ranks, what_len;
  int32_t nvalues, vflags;
} wire;

void blk__op_init(blk__op *o, blk__comm *c, blk__buffer_cache *cache) {
  memset(o, 0, sizeof *o);
  o->comm = c;
  o->cache = cache;
  o->rank = blk__comm_rank(c);
  o->size = blk__comm_size(c);
  o->nsteps = blk__agree_plan(o->rank, o->size, o->steps);
  blk__failure_clear(&o->failure);
  blk__failure_clear(&o->next);
  for (int k = 0; k < 2 * BLK__AGREE_KEYS; k++) blk_buffer_init(&o->arrived[k]);
}

void blk__op_free(blk__op *o) {
  for (size_t i = 0; i < o->nstash; i++) blk_buffer_free(&o->stash[i].payload);
  free(o->stash);
  o->stash = NULL;
  o->nstash = o->cap_stash = 0;
  for (int k = 0; k < 2 * BLK__AGREE_KEYS; k++) blk_buffer_free(&o->arrived[k]);
  for (int i = 0; i < BLK__KEPT_SLOTS; i++) {
    blk__kept *k = &o->kept[i];
    if (k->mem) (k->release ? k->release : free)(k->mem);
    memset(k, 0, sizeof *k);
  }
}

blk__kept *blk__op_kept(blk__op *o, const void *owner, void (*release)(void *mem)) {
  for (int i = 0; i < BLK__KEPT_SLOTS; i++) {
    blk__kept *k = &o->kept[i];
    if (k->owner == owner) return k;
    if (!k->owner) {
      k->owner = owner;
      k->release = release;
      return k;
    }
  }
  blk__panic("operation: more than %d drivers keep memory", BLK__KEPT_SLOTS);
}

void *blk__op_scratch(blk__op *o, const void *owner, size_t bytes) {
  blk__kept *k = blk__op_kept(o, owner, NULL);
  if (k->bytes >= bytes && k->mem) return k->mem;
  void *grown = blk__realloc(k->mem, bytes ? bytes : 1);
  if (!grown) {
    blk__fail(BLK_ENOMEM, "no memory for %zu bytes of an operation's records", bytes);
    return NULL;
  }
  k->mem = grown;
  k->bytes = bytes;
  return grown;
}

static double seconds(void) {
  return MPI_Wtime();
}

/* The failure's text as the format of blk__failure_note. */
static void note(blk__failure *f, int code, int rank, int gid, int round, const char *fmt,
                 va_list ap) BLK__PRINTF(6, 0);
static void note(blk__failure *f, int code, int rank, int gid, int round, const char *fmt,
                 va_list ap) {
  char what[BLK__FAILURE_WHAT];
  vsnprintf(what, sizeof what, fmt, ap);
  blk__failure_note(f, code, rank, gid, round, "%s", what);
}

void blk__op_fail(blk__op *o, int code, int gid, int round, const char *fmt, ...) {
  if (o->sealed) {
    BLK__LOG(BLK_LOG_DEBUG, "%s %u: not counted, after the agreement began: code %d, gid %d",
             o->name, o->epoch, code, gid);
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  note(&o->failure, code, o->rank, gid, round, fmt, ap);
  va_end(ap);
}

/* Sends a control message (agreement step or ABORT) to rank. These carry
 * the protocol itself: one that cannot start leaves a rank waiting for
 * good, so after one retry the job stops. */
static void send_control(blk__op *o, int rank, int flags, int key, blk_buffer *payload) {
  blk__msg msg = {o->epoch, o->rank, -1, key, 0, flags, (int64_t)payload->size};
  for (int attempt = 0; attempt < 2; attempt++)
    if (blk__comm_send(o->comm, rank, &msg, payload, 0) == BLK_OK) return;
  blk__panic("%s %u: cannot send the %s message to rank %d: %s", o->name, o->epoch,
             flags & BLK__MSG_AGREE ? "agreement" : "abort", rank, blk_last_error());
}

void blk__op_abort(blk__op *o, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  note(&o->failure, code, o->rank, -1, -1, fmt, ap);
  va_end(ap);
  o->aborted = 1;
  for (int r = 0; r < o->size; r++) {
    if (r == o->rank) continue;
    blk_buffer none = BLK_BUFFER_INIT;
    send_control(o, r, BLK__MSG_ABORT, 0, &none);
  }
}

void blk__op_send(blk__op *o, int rank, const blk__msg *msg, blk_buffer *payload, int round,
                  int *refs_in_flight) {
  int rc = blk__comm_send_counted(o->comm, rank, msg, payload, 0, refs_in_flight);
  if (rc == BLK_OK) return;
  blk__op_fail(o, rc, msg->src_gid, round, "the message to gid %d could not be sent: %s",
               msg->dst_gid, blk_last_error());
  blk__msg failed = *msg;
  failed.flags |= BLK__MSG_FAILED;
  failed.size = 0;
  blk_buffer none = BLK_BUFFER_INIT;
  if (blk__comm_send(o->comm, rank, &failed, &none, 0) == BLK_OK) return;
  blk__panic("%s %u: gid %d cannot send to gid %d on rank %d, not even an empty message: %s",
             o->name, o->epoch, msg->src_gid, msg->dst_gid, rank, blk_last_error());
}

/* Storage of its own for a message comm lent (an inline one); a large
 * payload already has its own, or is in the place its router gave, and is
 * swapped. BLK_ENOMEM: nothing kept. */
static int own(blk__op *o, const blk__msg *msg, blk_buffer *dst, blk_buffer *payload) {
  if (!blk__buffer_is_ref(payload) || (msg->flags & BLK__COMM_PLACED)) {
    blk_buffer_swap(dst, payload);
    return BLK_OK;
  }
  if (payload->size && (blk__buffer_cache_reserve(o->cache, dst, payload->size) ||
                        blk_buffer_write(dst, payload->data, payload->size)))
    return blk__fail(BLK_ENOMEM, "no memory for a %zu-byte message", payload->size);
  return BLK_OK;
}

/* Keeps a message of the next operation until it begins. A message that
 * cannot be kept is lost: the next operation then fails on this rank (a
 * data message kept without its bytes fails its block; one that could not
 * be kept at all aborts the operation); an agreement message cannot be
 * lost: that stops the job. */
static void stash(blk__op *o, const blk__msg *msg, blk_buffer *payload) {
  int control = (msg->flags & (BLK__MSG_AGREE | BLK__MSG_ABORT)) != 0;
  if (o->nstash == o->cap_stash) {
    size_t ncap = o->cap_stash ? 2 * o->cap_stash : 16;
    blk__stashed *grown = blk__realloc(o->stash, ncap * sizeof *grown);
    if (!grown) {
      if (control)
        blk__panic("%s %u: no memory to keep an agreement message from rank %d", o->name, o->epoch,
                   msg->src_gid);
      o->next_abort = 1;
      blk__failure_note(&o->next, BLK_ENOMEM, o->rank, msg->dst_gid, -1,
                        "no memory to keep an early message from gid %d", msg->src_gid);
      return;
    }
    o->stash = grown;
    o->cap_stash = ncap;
  }
  blk__stashed *s = &o->stash[o->nstash++];
  s->msg = *msg;
  blk_buffer_init(&s->payload);
  if (own(o, msg, &s->payload, payload) == BLK_OK) return;
  if (control)
    blk__panic("%s %u: no memory to keep an agreement message from rank %d", o->name, o->epoch,
               msg->src_gid);
  blk__failure_note(&o->next, BLK_ENOMEM, o->rank, msg->dst_gid, -1,
                    "the message from gid %d was lost: %s", msg->src_gid, blk_last_error());
  s->msg.flags |= BLK__MSG_FAILED;
}

/* A message of the running operation. */
static void take(blk__op *o, const blk__msg *msg, blk_buffer *payload) {
  if (msg->flags & BLK__MSG_ABORT) {
    o->aborted = 1;
    o->woke = 1;
    return;
  }
  if (msg->flags & BLK__MSG_AGREE) {
    /* Copied into storage kept from the last agreement: no memory needed
     * once the first agreement is done. */
    int k = msg->key;
    if (k < 0 || k >= 2 * BLK__AGREE_KEYS || o->has[k])
      blk__panic("%s %u: agreement step %d from rank %d came %s", o->name, o->epoch, k,
                 msg->src_gid, k < 0 || k >= 2 * BLK__AGREE_KEYS ? "out of range" : "twice");
    blk_buffer_clear(&o->arrived[k]);
    if (blk_buffer_write(&o->arrived[k], payload->data, payload->size))
      blk__panic("%s %u: no memory for the agreement message from rank %d", o->name, o->epoch,
                 msg->src_gid);
    o->has[k] = 1;
    o->woke = 1; /* the agreement may be done */
    return;
  }
  if (!o->route) {
    if (o->some_failed || o->aborted) return; /* late, from a failed operation */
    blk__panic("%s %u: a message from gid %d to gid %d, but this operation sends none", o->name,
               o->epoch, msg->src_gid, msg->dst_gid);
  }
  blk_buffer mine = BLK_BUFFER_INIT;
  if (own(o, msg, &mine, payload) == BLK_OK) {
    o->route(msg, &mine, o->route_ctx);
  } else { /* lost on arrival: the block it was for fails (a reduction's key is its round) */
    blk__op_fail(o, BLK_ENOMEM, msg->dst_gid, o->rounds ? msg->key : -1,
                 "the message from gid %d was lost: %s", msg->src_gid, blk_last_error());
    blk__msg failed = *msg;
    failed.flags |= BLK__MSG_FAILED;
    o->route(&failed, &mine, o->route_ctx);
  }
  blk__buffer_cache_give(o->cache, &mine);
}

/* comm's delivery callback: by epoch, to the running operation, to the
 * stash (the next one), or nowhere (late, from an operation that failed).
 * Whether the driver has work from it now (blk__op_woke). */
static int deliver(const blk__msg *msg, blk_buffer *payload, void *ctx) {
  blk__op *o = ctx;
  o->delivered++;
  o->woke = 0;
  int32_t ahead = (int32_t)(msg->op - o->epoch);
  if (ahead == 0 && o->running)
    take(o, msg, payload);
  else if (ahead == 1)
    stash(o, msg, payload);
  else if (ahead <= 0 && o->some_failed)
    BLK__LOG(BLK_LOG_DEBUG, "dropping a late message from gid %d to gid %d of operation %u",
             msg->src_gid, msg->dst_gid, msg->op);
  else
    blk__panic(
        "rank %d is at operation %u (%s) and got a message from gid %d to gid %d for "
        "operation %u",
        o->rank, o->epoch, o->running ? "running" : "ended", msg->src_gid, msg->dst_gid, msg->op);
  return o->woke;
}

/* comm's question for a payload on its way: the running operation's router
 * answers for its own data messages (not for the next operation's, nor for
 * failed, agreement or abort messages). */
static int place(const blk__msg *msg, blk_buffer *into, void *ctx) {
  blk__op *o = ctx;
  if (!o->place || !o->running || msg->op != o->epoch || msg->flags) return 0;
  return o->place(msg, into, o->route_ctx);
}

void blk__op_progress(blk__op *o, int *progressed) {
  blk__trace *t = blk__trace_here();
  if (!t) {
    blk__comm_progress(o->comm, deliver, place, o, 1, progressed);
    return;
  }
  /* Traced: a pass that moved something is a span; one that did not
   * starts a wait, which the thread's next span ends (trace.h). */
  int64_t start = blk__now_ns(), before = o->delivered;
  int moved = 0;
  blk__comm_progress(o->comm, deliver, place, o, 1, &moved);
  if (!moved) blk__trace_idle(t, start); /* until the next span of this thread */
  if (moved) {
    *progressed = 1;
    blk__trace_record(
        t, &(blk__trace_span){"MPI progress", start, blk__now_ns(), BLK__TRACE_PROGRESS, -1, -1,
                              o->delivered - before, 0, 0, 0});
  }
}

void blk__op_wait(blk__op *o, int (*done)(blk__op *o, void *ctx), void *ctx) {
  blk__backoff wait = {0};
  while (!done(o, ctx)) {
    int progressed = 0;
    blk__op_progress(o, &progressed);
    if (progressed)
      blk__backoff_reset(&wait);
    else
      blk__backoff_idle(&wait);
  }
}

void blk__op_begin(blk__op *o, const char *name, blk__route_fn route, void *ctx) {
  o->epoch++;
  o->name = name;
  o->running = 1;
  o->route = route;
  o->place = NULL;
  o->route_ctx = ctx;
  o->aborted = 0;
  o->agreements = o->carrying = o->sealed = 0;
  o->step = 0;
  o->failure = o->next;
  blk__failure_clear(&o->next);
  blk__values_clear(&o->values);
  o->handed = o->handed_bytes = o->callbacks = 0;
  o->rounds = 0;
  o->trace_start = blk__trace_here() ? blk__now_ns() : 0;
  o->logging = blk__log_enabled(BLK_LOG_INFO);
  if (o->logging) {
    blk__comm_counts_get(o->comm, &o->sent_before);
    o->started = seconds();
  }
  if (o->next_abort) {
    o->next_abort = 0;
    blk__op_abort(o, o->failure.code, "%s", o->failure.what);
  }
  size_t kept = 0;
  for (size_t i = 0; i < o->nstash; i++) {
    blk__stashed *s = &o->stash[i];
    if (s->msg.op == o->epoch) {
      take(o, &s->msg, &s->payload);
      blk__buffer_cache_give(o->cache, &s->payload);
    } else {
      o->stash[kept++] = *s;
    }
  }
  o->nstash = kept;
}

/* This rank's record so far, in o->record; returns its size. */
static size_t encode(blk__op *o) {
  const blk__failure *f = &o->failure;
  size_t len = f->code ? strlen(f->what) : 0;
  size_t nvalues = (size_t)o->values.count * sizeof o->values.items[0];
  wire w = {f->code,  f->rank,      f->gid,          f->round,
            f->ranks, (int32_t)len, o->values.count, o->values.flags};
  memcpy(o->record, &w, sizeof w);
  memcpy(o->record + sizeof w, f->what, len);
  memcpy(o->record + sizeof w + len, o->values.items, nvalues);
  return sizeof w + len + nvalues;
}

/* Reads a peer's record; a record that does not add up stops the job. */
static void decode(const blk__op *o, blk_buffer *in, int peer, blk__failure *f, blk__values *v) {
  wire w;
  memset(&w, 0, sizeof w);
  blk_buffer_read(in, &w, sizeof w);
  if (in->error || w.what_len < 0 || (size_t)w.what_len >= sizeof f->what || w.nvalues < 0 ||
      w.nvalues > BLK__VALUES_MAX ||
      blk_buffer_remaining(in) != (size_t)w.what_len + (size_t)w.nvalues * sizeof v->items[0])
    blk__panic("%s %u: the agreement message from rank %d is malformed", o->name, o->epoch, peer);
  f->code = w.code;
  f->rank = w.rank;
  f->gid = w.gid;
  f->round = w.round;
  f->ranks = w.ranks;
  blk_buffer_read(in, f->what, (size_t)w.what_len);
  f->what[w.what_len] = '\0';
  v->count = w.nvalues;
  v->flags = w.vflags;
  blk_buffer_read(in, v->items, (size_t)w.nvalues * sizeof v->items[0]);
}

static void start(blk__op *o, int carrying) {
  if (o->agreements == 2) blk__panic("%s %u: a third agreement", o->name, o->epoch);
  o->agreements++;
  o->carrying = carrying;
  o->step = 0;
}

void blk__op_barrier_start(blk__op *o) {
  start(o, 0);
}

void blk__op_agree_start(blk__op *o, const blk__values *values) {
  if (values) blk__values_combine(&o->values, values);
  o->sealed = 1;
  start(o, 1);
}

int blk__op_agree_done(blk__op *o) {
  if (!o->agreements) return 0;
  int offset = (o->agreements - 1) * BLK__AGREE_KEYS;
  while (o->step < o->nsteps) {
    const blk__agree_step *st = &o->steps[o->step];
    int key = st->key + offset;
    if (st->send) {
      blk_buffer out = BLK_BUFFER_INIT;
      blk__buffer_ref(&out, o->record, o->carrying ? encode(o) : 0);
      send_control(o, st->peer, BLK__MSG_AGREE, key, &out);
      blk__buffer_release(&out);
    } else {
      if (!o->has[key]) return 0;
      o->has[key] = 0;
      if (o->carrying) {
        blk__failure f;
        blk__values v;
        decode(o, &o->arrived[key], st->peer, &f, &v);
        if (st->replace) {
          o->failure = f;
          blk__values_copy(&o->values, &v);
        } else {
          blk__failure_merge(&o->failure, &f);
          blk__values_combine(&o->values, &v);
        }
      }
      blk__buffer_release(&o->arrived[key]);
    }
    o->step++;
  }
  return 1;
}

/* The info line: what the operation moved, and how long it took. */
static void log_operation(const blk__op *o) {
  blk__comm_counts now;
  blk__comm_counts_get(o->comm, &now);
  char rounds[32] = "";
  if (o->rounds) snprintf(rounds, sizeof rounds, ", %d rounds", o->rounds);
  blk_log(BLK_LOG_INFO,
          "%s %u: %.3f ms%s, %llu callbacks; to other ranks %llu messages, %llu bytes (with the "
          "agreement's); inside the rank %llu messages, %llu bytes%s",
          o->name, o->epoch, (seconds() - o->started) * 1e3, rounds,
          (unsigned long long)o->callbacks,
          (unsigned long long)(now.messages - o->sent_before.messages),
          (unsigned long long)(now.bytes - o->sent_before.bytes), (unsigned long long)o->handed,
          (unsigned long long)o->handed_bytes, o->failure.code ? "; failed" : "");
}

int blk__op_end(blk__op *o, blk__values *values) {
  if (o->logging) log_operation(o);
  blk__trace *t = blk__trace_here();
  if (t && o->trace_start)
    blk__trace_record(t, &(blk__trace_span){o->name, o->trace_start, blk__now_ns(),
                                            BLK__TRACE_OPERATION, -1, -1, 0, 0, 0, 0});
  o->running = 0;
  o->route = NULL;
  o->place = NULL;
  o->route_ctx = NULL;
  if (values) blk__values_copy(values, &o->values);
  if (!o->failure.code) {
    blk__clear_error(); /* a collective that succeeded leaves no stale detail */
    return BLK_OK;
  }
  o->some_failed = 1;
  char op[64];
  snprintf(op, sizeof op, "%s %u", o->name, o->epoch);
  return blk__failure_report(&o->failure, op);
}

static int agreed(blk__op *o, void *ctx) {
  (void)ctx;
  return blk__op_agree_done(o);
}

int blk__op_close(blk__op *o) {
  blk__op_agree_start(o, NULL);
  blk__op_wait(o, agreed, NULL);
  return blk__op_end(o, NULL);
}

int blk__op_agree_once(MPI_Comm comm, blk__failure *f, const char *name) {
  int rank = 0, lowest = INT_MAX, ranks = 0, failed = f->code != 0;
  MPI_Comm_rank(comm, &rank);
  int mine = failed ? rank : INT_MAX;
  MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm);
  if (lowest == INT_MAX) return BLK_OK;
  /* Only on failure: how many ranks failed, and the lowest one's record. */
  MPI_Allreduce(&failed, &ranks, 1, MPI_INT, MPI_SUM, comm);
  MPI_Bcast(f, (int)sizeof *f, MPI_BYTE, lowest, comm);
  f->ranks = ranks;
  return blk__failure_report(f, name);
}
