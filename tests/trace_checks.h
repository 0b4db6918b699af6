/*
 * trace_checks.h: what every trace file blk writes must satisfy, checked
 * on a parsed file (trace_json.h) with check.h's assertions; shared by
 * test_trace and trace_check (the examples' traces).
 *
 *  - tj_check_names: a process per rank, named "rank r", thread 0 of each
 *    named "driver", every event metadata ("M") or a complete span ("X")
 *    of a rank in range, on a named thread, after the create (ts >= 0) and
 *    of length >= 0;
 *  - tj_check_tracks: spans of one thread do not overlap (one callback at a
 *    time per thread).
 */
#ifndef BLK_TEST_TRACE_CHECKS_H
#define BLK_TEST_TRACE_CHECKS_H

#include "check.h"
#include "trace_json.h"

/* The name of thread (pid, tid), or NULL. */
static inline const char *tj_thread_name(const tj_trace *t, double pid, double tid) {
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->events[i].ph, "M") && !strcmp(t->events[i].name, "thread_name") &&
        t->events[i].pid == pid && t->events[i].tid == tid)
      return t->events[i].arg_name;
  return NULL;
}

/* Spans of rank pid in category cat named name. */
static inline int tj_count_spans(const tj_trace *t, int pid, const char *cat, const char *name) {
  int n = 0;
  for (size_t i = 0; i < t->n; i++) {
    const tj_event *e = &t->events[i];
    n += !strcmp(e->ph, "X") && e->pid == pid && !strcmp(e->cat, cat) && !strcmp(e->name, name);
  }
  return n;
}

static inline void tj_check_names(const tj_trace *t, int ranks) {
  for (int r = 0; r < ranks; r++) {
    int named = 0;
    char want[32];
    snprintf(want, sizeof want, "rank %d", r);
    for (size_t i = 0; i < t->n; i++)
      if (!strcmp(t->events[i].name, "process_name") && t->events[i].pid == r) {
        CHECK_STR(t->events[i].arg_name, want);
        named++;
      }
    CHECK_EQ_INT(named, 1);
    const char *driver = tj_thread_name(t, r, 0);
    CHECK_MSG(driver && !strcmp(driver, "driver"), "rank %d: thread 0 is %s", r,
              driver ? driver : "unnamed");
  }
  for (size_t i = 0; i < t->n; i++) {
    const tj_event *e = &t->events[i];
    CHECK_MSG(e->pid >= 0 && e->pid < ranks, "event %zu (%s): pid %g", i, e->name, e->pid);
    if (!strcmp(e->ph, "M")) continue;
    CHECK_MSG(!strcmp(e->ph, "X"), "event %zu has ph %s", i, e->ph);
    CHECK_MSG(e->ts >= 0 && e->dur >= 0, "%s: ts %g dur %g", e->name, e->ts, e->dur);
    CHECK_MSG(tj_thread_name(t, e->pid, e->tid), "rank %g thread %g has spans but no name", e->pid,
              e->tid);
  }
}

static int tj_by_start(const void *x, const void *y) {
  const tj_event *a = *(tj_event *const *)x, *b = *(tj_event *const *)y;
  return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* Sorts spans by start; none may overlap another of its thread. */
static inline void tj_check_tracks(tj_event **spans, int n) {
  qsort(spans, (size_t)n, sizeof *spans, tj_by_start);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n && spans[j]->ts < spans[i]->ts + spans[i]->dur; j++)
      CHECK_MSG(spans[j]->pid != spans[i]->pid || spans[j]->tid != spans[i]->tid,
                "rank %g thread %g: spans at %g (+%g) and %g overlap", spans[i]->pid, spans[i]->tid,
                spans[i]->ts, spans[i]->dur, spans[j]->ts);
}

#endif
