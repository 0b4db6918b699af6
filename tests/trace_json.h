/*
 * trace_json.h: reads a trace file blk wrote (BLK_TRACE) the way a viewer
 * would, for the tests: a strict JSON parser (RFC 8259: objects, arrays,
 * strings with every escape, numbers, true, false, null; nothing after the
 * value) and the trace-event fields the tests look at. Header-only; the
 * parser is written here and knows nothing of blk's writer.
 */
#ifndef BLK_TEST_TRACE_JSON_H
#define BLK_TEST_TRACE_JSON_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One trace event, with the fields blk writes; absent ones are -1 / "". */
typedef struct tj_event {
  char ph[4], name[64], cat[32];
  double pid, tid, ts, dur;
  /* args: */
  double gid, round, bytes_in, bytes_out, raw_bytes, stored_bytes, codec_us, io_us;
  char arg_name[64]; /* metadata's args.name */
} tj_event;

typedef struct tj_trace {
  tj_event *events;
  size_t n, cap;
  char error[320]; /* why parsing failed ("" when it did not) */
} tj_trace;

typedef struct tj_parser {
  const char *begin, *p, *end;
  tj_trace *t;
  int depth;
} tj_parser;

static int tj_fail(tj_parser *s, const char *what) {
  if (!s->t->error[0])
    snprintf(s->t->error, sizeof s->t->error, "%s at byte %ld", what, (long)(s->p - s->begin));
  return -1;
}

static void tj_ws(tj_parser *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int tj_hex4(tj_parser *s) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    if (s->p >= s->end || !isxdigit((unsigned char)*s->p)) return -1;
    char c = *s->p++;
    v = v * 16 + (isdigit((unsigned char)c) ? c - '0' : (tolower((unsigned char)c) - 'a' + 10));
  }
  return v;
}

/* A string into out (cut at cap, ASCII escapes kept as their character). */
static int tj_string(tj_parser *s, char *out, size_t cap) {
  size_t j = 0;
  if (s->p >= s->end || *s->p != '"') return tj_fail(s, "expected a string");
  s->p++;
  for (;;) {
    if (s->p >= s->end) return tj_fail(s, "unterminated string");
    unsigned char c = (unsigned char)*s->p++;
    if (c == '"') break;
    if (c < 0x20) return tj_fail(s, "control character in a string");
    if (c == '\\') {
      if (s->p >= s->end) return tj_fail(s, "unterminated escape");
      char e = *s->p++;
      switch (e) {
        case '"':
          c = '"';
          break;
        case '\\':
          c = '\\';
          break;
        case '/':
          c = '/';
          break;
        case 'b':
          c = '\b';
          break;
        case 'f':
          c = '\f';
          break;
        case 'n':
          c = '\n';
          break;
        case 'r':
          c = '\r';
          break;
        case 't':
          c = '\t';
          break;
        case 'u': {
          int v = tj_hex4(s);
          if (v < 0) return tj_fail(s, "bad \\u escape");
          c = v < 0x80 ? (unsigned char)v : '?';
          break;
        }
        default:
          return tj_fail(s, "unknown escape");
      }
    }
    if (out && j + 1 < cap) out[j++] = (char)c;
  }
  if (out) out[j] = '\0';
  return 0;
}

static int tj_number(tj_parser *s, double *out) {
  const char *b = s->p;
  if (s->p < s->end && *s->p == '-') s->p++;
  if (s->p >= s->end || !isdigit((unsigned char)*s->p)) return tj_fail(s, "bad number");
  if (*s->p == '0')
    s->p++;
  else
    while (s->p < s->end && isdigit((unsigned char)*s->p)) s->p++;
  if (s->p < s->end && *s->p == '.') {
    s->p++;
    if (s->p >= s->end || !isdigit((unsigned char)*s->p)) return tj_fail(s, "bad fraction");
    while (s->p < s->end && isdigit((unsigned char)*s->p)) s->p++;
  }
  if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
    s->p++;
    if (s->p < s->end && (*s->p == '+' || *s->p == '-')) s->p++;
    if (s->p >= s->end || !isdigit((unsigned char)*s->p)) return tj_fail(s, "bad exponent");
    while (s->p < s->end && isdigit((unsigned char)*s->p)) s->p++;
  }
  char buf[64];
  size_t n = (size_t)(s->p - b);
  if (n >= sizeof buf) return tj_fail(s, "number too long");
  memcpy(buf, b, n);
  buf[n] = '\0';
  if (out) *out = strtod(buf, NULL);
  return 0;
}

static int tj_literal(tj_parser *s, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n)) return tj_fail(s, "bad literal");
  s->p += n;
  return 0;
}

/* What a value is read into: an event's field, or nothing. */
typedef struct tj_slot {
  char *str;
  size_t cap;
  double *num;
} tj_slot;

static int tj_value(tj_parser *s, tj_slot slot, tj_event *ev, int level);

/* An object; level 1 is an event, level 2 its args. */
static int tj_object(tj_parser *s, tj_event *ev, int level) {
  s->p++; /* { */
  tj_ws(s);
  if (s->p < s->end && *s->p == '}') {
    s->p++;
    return 0;
  }
  for (;;) {
    char key[64];
    tj_ws(s);
    if (tj_string(s, key, sizeof key)) return -1;
    tj_ws(s);
    if (s->p >= s->end || *s->p != ':') return tj_fail(s, "expected ':'");
    s->p++;
    tj_ws(s);
    tj_slot slot = {NULL, 0, NULL};
    int next = 0;
    if (ev && level == 1) {
      if (!strcmp(key, "ph")) slot = (tj_slot){ev->ph, sizeof ev->ph, NULL};
      if (!strcmp(key, "name")) slot = (tj_slot){ev->name, sizeof ev->name, NULL};
      if (!strcmp(key, "cat")) slot = (tj_slot){ev->cat, sizeof ev->cat, NULL};
      if (!strcmp(key, "pid")) slot.num = &ev->pid;
      if (!strcmp(key, "tid")) slot.num = &ev->tid;
      if (!strcmp(key, "ts")) slot.num = &ev->ts;
      if (!strcmp(key, "dur")) slot.num = &ev->dur;
      if (!strcmp(key, "args")) next = 2;
    } else if (ev && level == 2) {
      if (!strcmp(key, "name")) slot = (tj_slot){ev->arg_name, sizeof ev->arg_name, NULL};
      if (!strcmp(key, "gid")) slot.num = &ev->gid;
      if (!strcmp(key, "round")) slot.num = &ev->round;
      if (!strcmp(key, "bytes_in")) slot.num = &ev->bytes_in;
      if (!strcmp(key, "bytes_out")) slot.num = &ev->bytes_out;
      if (!strcmp(key, "raw_bytes")) slot.num = &ev->raw_bytes;
      if (!strcmp(key, "stored_bytes")) slot.num = &ev->stored_bytes;
      if (!strcmp(key, "codec_us")) slot.num = &ev->codec_us;
      if (!strcmp(key, "io_us")) slot.num = &ev->io_us;
    }
    if (tj_value(s, slot, next ? ev : NULL, next)) return -1;
    tj_ws(s);
    if (s->p < s->end && *s->p == ',') {
      s->p++;
      continue;
    }
    if (s->p < s->end && *s->p == '}') {
      s->p++;
      return 0;
    }
    return tj_fail(s, "expected ',' or '}'");
  }
}

static void tj_event_clear(tj_event *e) {
  memset(e, 0, sizeof *e);
  e->pid = e->tid = e->ts = e->dur = -1;
  e->gid = e->round = e->bytes_in = e->bytes_out = -1;
  e->raw_bytes = e->stored_bytes = e->codec_us = e->io_us = -1;
}

/* An array; events_here: its elements are the trace's events. */
static int tj_array(tj_parser *s, int events_here) {
  s->p++; /* [ */
  tj_ws(s);
  if (s->p < s->end && *s->p == ']') {
    s->p++;
    return 0;
  }
  for (;;) {
    tj_ws(s);
    if (events_here) {
      if (s->p >= s->end || *s->p != '{') return tj_fail(s, "an event is not an object");
      tj_trace *t = s->t;
      if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        tj_event *grown = realloc(t->events, cap * sizeof *grown);
        if (!grown) return tj_fail(s, "no memory");
        t->events = grown;
        t->cap = cap;
      }
      tj_event *ev = &t->events[t->n++];
      tj_event_clear(ev);
      if (tj_object(s, ev, 1)) return -1;
    } else if (tj_value(s, (tj_slot){NULL, 0, NULL}, NULL, 0)) {
      return -1;
    }
    tj_ws(s);
    if (s->p < s->end && *s->p == ',') {
      s->p++;
      continue;
    }
    if (s->p < s->end && *s->p == ']') {
      s->p++;
      return 0;
    }
    return tj_fail(s, "expected ',' or ']'");
  }
}

static int tj_value(tj_parser *s, tj_slot slot, tj_event *ev, int level) {
  if (++s->depth > 64) return tj_fail(s, "nested too deep");
  int rc;
  tj_ws(s);
  if (s->p >= s->end) return tj_fail(s, "expected a value");
  switch (*s->p) {
    case '{':
      rc = tj_object(s, ev, level);
      break;
    case '[':
      rc = tj_array(s, 0);
      break;
    case '"':
      rc = tj_string(s, slot.str, slot.cap);
      break;
    case 't':
      rc = tj_literal(s, "true");
      break;
    case 'f':
      rc = tj_literal(s, "false");
      break;
    case 'n':
      rc = tj_literal(s, "null");
      break;
    default:
      rc = tj_number(s, slot.num);
      break;
  }
  s->depth--;
  return rc;
}

/* Reads text: either a JSON array of events or an object whose
 * "traceEvents" member is one (the two forms viewers take). 0, or -1 with
 * t->error set. */
static int tj_parse(tj_trace *t, const char *text, size_t n) {
  memset(t, 0, sizeof *t);
  tj_parser s = {text, text, text + n, t, 0};
  tj_ws(&s);
  int found = 0;
  if (s.p < s.end && *s.p == '[') {
    if (tj_array(&s, 1)) return -1;
    found = 1;
  } else if (s.p < s.end && *s.p == '{') {
    s.p++;
    for (;;) {
      char key[64];
      tj_ws(&s);
      if (tj_string(&s, key, sizeof key)) return -1;
      tj_ws(&s);
      if (s.p >= s.end || *s.p != ':') return tj_fail(&s, "expected ':'");
      s.p++;
      tj_ws(&s);
      if (!strcmp(key, "traceEvents")) {
        if (s.p >= s.end || *s.p != '[') return tj_fail(&s, "traceEvents is not an array");
        if (tj_array(&s, 1)) return -1;
        found = 1;
      } else if (tj_value(&s, (tj_slot){NULL, 0, NULL}, NULL, 0)) {
        return -1;
      }
      tj_ws(&s);
      if (s.p < s.end && *s.p == ',') {
        s.p++;
        continue;
      }
      if (s.p < s.end && *s.p == '}') {
        s.p++;
        break;
      }
      return tj_fail(&s, "expected ',' or '}'");
    }
  } else {
    return tj_fail(&s, "neither an array nor an object");
  }
  tj_ws(&s);
  if (s.p != s.end) return tj_fail(&s, "text after the value");
  if (!found) return tj_fail(&s, "no traceEvents");
  return 0;
}

/* Reads a whole file and parses it; -1 with t->error set. */
static int tj_read_file(tj_trace *t, const char *path) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(t->error, sizeof t->error, "cannot open %s", path);
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  char *text = malloc(cap);
  for (size_t got; text && (got = fread(text + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *grown = realloc(text, cap *= 2);
      if (!grown) free(text);
      text = grown;
    }
  }
  fclose(f);
  if (!text) {
    snprintf(t->error, sizeof t->error, "no memory for %s", path);
    return -1;
  }
  int rc = tj_parse(t, text, n);
  free(text);
  return rc;
}

static void tj_free(tj_trace *t) {
  free(t->events);
  t->events = NULL;
  t->n = t->cap = 0;
}

#endif
