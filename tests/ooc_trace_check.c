/*
 * ooc_trace_check: checks the timelines `blk-ooc-bench --trace` wrote, the
 * way a viewer reads them.
 *
 *   ooc_trace_check --ranks R FILE...
 *
 * Each FILE is one out-of-core run's trace (bench/ooc_bench.c). Checked:
 * it parses as JSON (strictly) and as trace events (trace_checks.h: names,
 * ranks, threads); every rank has an operation span, callback spans, and
 * store and load spans of the out-of-core category whose arguments are a
 * record's (raw bytes > 0, stored bytes at least the 64-byte header and at
 * most the raw bytes plus it, codec and I/O times >= 0 that fit in the
 * span); callbacks of one thread do not overlap, nor do the stores and
 * loads of one thread.
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "trace_checks.h"

/* Spans of category cat on rank pid named name, or of any name (NULL). */
static int collect(tj_trace *t, int pid, const char *cat, const char *name, tj_event **out) {
  int n = 0;
  for (size_t i = 0; i < t->n; i++) {
    tj_event *e = &t->events[i];
    if (strcmp(e->ph, "X") || e->pid != pid || strcmp(e->cat, cat)) continue;
    if (name && strcmp(e->name, name)) continue;
    out[n++] = e;
  }
  return n;
}

/* A store or load span says what it moved, and its times fit in it. */
static void check_record(const tj_event *e) {
  CHECK_MSG(e->raw_bytes > 0, "rank %g: a %s of %g raw bytes", e->pid, e->name, e->raw_bytes);
  CHECK_MSG(e->stored_bytes >= 64 && e->stored_bytes <= e->raw_bytes + 64,
            "rank %g: a %s of %g raw bytes stored as %g", e->pid, e->name, e->raw_bytes,
            e->stored_bytes);
  CHECK_MSG(e->codec_us >= 0 && e->io_us >= 0, "rank %g: a %s with codec %g us, I/O %g us", e->pid,
            e->name, e->codec_us, e->io_us);
  /* (1 us of slack: the span's ends and the times are rounded apart.) */
  CHECK_MSG(e->codec_us + e->io_us <= e->dur + 1.0, "rank %g: a %s of %g us holds %g + %g us",
            e->pid, e->name, e->dur, e->codec_us, e->io_us);
}

static void check_file(const char *path, int ranks) {
  tj_trace t;
  CHECK_MSG(tj_read_file(&t, path) == 0, "%s: %s", path, t.error);
  tj_check_names(&t, ranks);
  tj_event **spans = calloc(t.n + 1, sizeof *spans);
  CHECK(spans != NULL);
  int stores = 0, loads = 0, callbacks = 0;
  for (int r = 0; r < ranks; r++) {
    CHECK_MSG(collect(&t, r, "operation", NULL, spans) >= 1, "%s: rank %d has no operation", path,
              r);
    int n = collect(&t, r, "callback", NULL, spans);
    CHECK_MSG(n >= 1, "%s: rank %d has no callback span", path, r);
    tj_check_tracks(spans, n);
    callbacks += n;
    int s = collect(&t, r, "out-of-core", "store", spans);
    int l = collect(&t, r, "out-of-core", "load", spans + s);
    CHECK_MSG(s >= 1 && l >= 1, "%s: rank %d has %d stores and %d loads", path, r, s, l);
    for (int i = 0; i < s + l; i++) check_record(spans[i]);
    tj_check_tracks(spans, s + l);
    stores += s;
    loads += l;
  }
  printf("ooc_trace_check: %s: %zu events; %d callbacks, %d stores, %d loads\n", path, t.n,
         callbacks, stores, loads);
  free(spans);
  tj_free(&t);
}

int main(int argc, char **argv) {
  int ranks = 0, first = 1;
  if (argc > 2 && !strcmp(argv[1], "--ranks")) {
    ranks = atoi(argv[2]);
    first = 3;
  }
  CHECK_MSG(ranks > 0 && first < argc, "usage: ooc_trace_check --ranks R FILE...");
  for (int i = first; i < argc; i++) check_file(argv[i], ranks);
  return 0;
}
