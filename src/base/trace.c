/*
 * trace.c: spans per thread, written as trace-event JSON; see trace.h.
 *
 * Invariants: threads is a list under lock, appended to and never shrunk
 * until destroy; a track's spans are written only by its own thread (key
 * is the address of that thread's cache, unique among live threads). The
 * cache names the trace by a serial number, not its address, so a trace
 * created where a destroyed one was is not mistaken for it.
 */
#include "base/trace.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "base/thread.h"

typedef struct track {
  struct track *next;
  const void *key; /* its thread's cache */
  int tid;
  const char *name; /* static storage */
  int number;       /* among the tracks of its name, from 1 */
  blk__trace_span *spans;
  size_t n, cap;
  uint64_t dropped;
  int64_t idle_since; /* blk__trace_idle's first moment; 0: busy */
} track;

struct blk__trace {
  blk__mutex *lock;
  uint64_t serial;
  int rank;
  int64_t origin_ns;
  track *tracks; /* in the order threads came, tid 0 first */
  int ntracks;
};

static _Thread_local struct {
  uint64_t serial;
  track *mine;
} cache;

static atomic_uint_fast64_t serials;

int blk__trace_create(blk__trace **out, int rank, int64_t origin_ns) {
  *out = NULL;
  blk__trace *t = blk__calloc(1, sizeof *t);
  if (!t || blk__mutex_create(&t->lock)) {
    free(t);
    return blk__fail(BLK_ENOMEM, "trace: no memory");
  }
  t->serial = atomic_fetch_add(&serials, 1) + 1;
  t->rank = rank;
  t->origin_ns = origin_ns;
  *out = t;
  return BLK_OK;
}

void blk__trace_set_origin(blk__trace *t, int64_t origin_ns) {
  t->origin_ns = origin_ns;
}

void blk__trace_destroy(blk__trace *t) {
  if (!t) return;
  for (track *k = t->tracks, *next; k; k = next) {
    next = k->next;
    free(k->spans);
    free(k);
  }
  blk__mutex_destroy(t->lock);
  free(t);
}

/* The calling thread's track, made on its first call (with the lock held
 * then); NULL without memory. */
static track *mine(blk__trace *t) {
  if (cache.serial == t->serial) return cache.mine;
  blk__mutex_lock(t->lock);
  track *k = t->tracks, *last = NULL;
  for (; k && k->key != &cache; k = k->next) last = k;
  if (!k && (k = blk__calloc(1, sizeof *k))) {
    k->key = &cache;
    k->tid = t->ntracks++;
    k->name = "thread";
    if (last)
      last->next = k;
    else
      t->tracks = k;
  }
  blk__mutex_unlock(t->lock);
  if (k) {
    cache.serial = t->serial;
    cache.mine = k;
  }
  return k;
}

void blk__trace_name_thread(blk__trace *t, const char *name) {
  track *k = mine(t);
  if (!k) return; /* its spans, if any fit, go under "thread" */
  blk__mutex_lock(t->lock);
  int same = 0;
  for (const track *o = t->tracks; o; o = o->next)
    if (o != k && !strcmp(o->name, name)) same++;
  k->name = name;
  k->number = same + 1;
  blk__mutex_unlock(t->lock);
}

void blk__trace_idle(blk__trace *t, int64_t now_ns) {
  track *k = mine(t);
  if (k && !k->idle_since) k->idle_since = now_ns;
}

static void append(track *k, const blk__trace_span *span);

void blk__trace_record(blk__trace *t, const blk__trace_span *span) {
  track *k = mine(t);
  if (!k) return; /* no track, nowhere to count it: the trace's total misses it */
  if (k->idle_since) {
    int64_t since = k->idle_since;
    k->idle_since = 0;
    if (since < span->start_ns)
      append(k, &(blk__trace_span){"wait for messages", since, span->start_ns, BLK__TRACE_WAIT, -1,
                                   -1, 0, 0, 0, 0});
  }
  append(k, span);
}

static void append(track *k, const blk__trace_span *span) {
  if (k->n == k->cap) {
    size_t cap = k->cap ? 2 * k->cap : 256;
    blk__trace_span *grown = NULL;
    if (cap <= BLK__TRACE_MAX_SPANS) grown = blk__realloc(k->spans, cap * sizeof *grown);
    if (!grown) {
      k->dropped++;
      return;
    }
    k->spans = grown;
    k->cap = cap;
  }
  k->spans[k->n++] = *span;
}

uint64_t blk__trace_dropped(blk__trace *t) {
  uint64_t n = 0;
  blk__mutex_lock(t->lock);
  for (const track *k = t->tracks; k; k = k->next) n += k->dropped;
  blk__mutex_unlock(t->lock);
  return n;
}

/* ---- JSON ------------------------------------------------------------- */

/* Appends printf's output; on failure the buffer's sticky error says so. */
static void put(blk_buffer *out, const char *fmt, ...) BLK__PRINTF(2, 3);
static void put(blk_buffer *out, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1; /* names are short literals */
  blk_buffer_write(out, line, (size_t)n);
}

/* A name as a JSON string's contents: blk's names are literals, but a
 * quote or a control character must still not break the file. */
static const char *escaped(const char *name, char *buf, size_t cap) {
  size_t j = 0;
  for (const char *c = name; *c && j + 7 < cap; c++) {
    unsigned char u = (unsigned char)*c;
    if (u == '"' || u == '\\') {
      buf[j++] = '\\';
      buf[j++] = (char)u;
    } else if (u < 0x20) {
      j += (size_t)snprintf(buf + j, cap - j, "\\u%04x", u);
    } else {
      buf[j++] = (char)u;
    }
  }
  buf[j] = '\0';
  return buf;
}

static double us(int64_t ns) {
  return (double)ns / 1000.0;
}

static const char *category(blk__trace_kind kind) {
  switch (kind) {
    case BLK__TRACE_OPERATION:
      return "operation";
    case BLK__TRACE_CALLBACK:
      return "callback";
    case BLK__TRACE_WAIT:
      return "wait";
    case BLK__TRACE_PROGRESS:
      return "mpi";
    case BLK__TRACE_STORE:
    case BLK__TRACE_LOAD:
      return "out-of-core";
  }
  return "blk";
}

/* What a span's kind says beyond its time, as a JSON object's members. */
static void put_args(blk_buffer *out, const blk__trace_span *s) {
  switch (s->kind) {
    case BLK__TRACE_CALLBACK:
      put(out, "\"gid\":%d,\"round\":%d,\"bytes_in\":%" PRId64 ",\"bytes_out\":%" PRId64, s->gid,
          s->round, s->a, s->b);
      break;
    case BLK__TRACE_PROGRESS:
      put(out, "\"messages\":%" PRId64, s->a);
      break;
    case BLK__TRACE_STORE:
    case BLK__TRACE_LOAD:
      put(out,
          "\"gid\":%d,\"raw_bytes\":%" PRId64 ",\"stored_bytes\":%" PRId64
          ",\"codec_us\":%.3f,\"io_us\":%.3f",
          s->gid, s->a, s->b, us(s->c), us(s->d));
      break;
    case BLK__TRACE_OPERATION:
    case BLK__TRACE_WAIT:
      break;
  }
}

int blk__trace_json(blk__trace *t, blk_buffer *out) {
  char name[128];
  uint64_t dropped = blk__trace_dropped(t);
  put(out, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":\"rank %d\"}}",
      t->rank, t->rank);
  put(out,
      ",\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d}}",
      t->rank, t->rank);
  if (dropped)
    put(out,
        ",\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_labels\",\"args\":{\"labels\":\"%" PRIu64
        " spans dropped (no memory, or more than %u on a thread)\"}}",
        t->rank, dropped, BLK__TRACE_MAX_SPANS);
  for (const track *k = t->tracks; k; k = k->next) {
    int numbered = 0;
    for (const track *o = t->tracks; o; o = o->next)
      numbered |= o != k && !strcmp(o->name, k->name);
    put(out,
        ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s",
        t->rank, k->tid, escaped(k->name, name, sizeof name));
    if (numbered) put(out, " %d", k->number);
    put(out, "\"}}");
    put(out,
        ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_"
        "index\":%d}}",
        t->rank, k->tid, k->tid);
  }
  for (const track *k = t->tracks; k; k = k->next) {
    for (size_t i = 0; i < k->n; i++) {
      const blk__trace_span *s = &k->spans[i];
      put(out,
          ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"cat\":\"%s\",\"name\":\"%s\",\"ts\":%.3f,"
          "\"dur\":%.3f,\"args\":{",
          t->rank, k->tid, category(s->kind), escaped(s->name, name, sizeof name),
          us(s->start_ns - t->origin_ns), us(s->end_ns - s->start_ns));
      put_args(out, s);
      put(out, "}}");
    }
  }
  if (blk_buffer_error(out)) {
    blk_buffer_clear(out);
    return blk__fail(BLK_ENOMEM, "trace: no memory to write rank %d's %s", t->rank, "spans");
  }
  return BLK_OK;
}
