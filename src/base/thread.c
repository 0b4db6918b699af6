/*
 * thread.c: thread.h over POSIX threads. The only file that includes
 * pthread.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "base/thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/fail.h"

#define NSEC_PER_SEC 1000000000L

int64_t blk__now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * NSEC_PER_SEC + t.tv_nsec;
}

/* A failed setup call: pthread reports only resource shortages (EAGAIN,
 * ENOMEM) for these, hence BLK_ENOMEM. */
static int setup_failed(int e, const char *what) {
  char why[128];
  if (strerror_r(e, why, sizeof why) != 0) why[0] = '\0';
  return blk__fail(BLK_ENOMEM, "thread: %s failed: %s (errno %d)", what, why, e);
}

struct blk__mutex {
  pthread_mutex_t m;
};

int blk__mutex_create(blk__mutex **out) {
  *out = NULL;
  blk__mutex *m = blk__malloc(sizeof *m);
  if (!m) return blk__fail(BLK_ENOMEM, "thread: no memory for a mutex");
  int e = pthread_mutex_init(&m->m, NULL);
  if (e) {
    free(m);
    return setup_failed(e, "pthread_mutex_init");
  }
  *out = m;
  return BLK_OK;
}

void blk__mutex_destroy(blk__mutex *m) {
  if (!m) return;
  pthread_mutex_destroy(&m->m);
  free(m);
}

void blk__mutex_lock(blk__mutex *m) {
  int e = pthread_mutex_lock(&m->m);
  if (e) blk__panic("thread: pthread_mutex_lock failed (errno %d)", e);
}

void blk__mutex_unlock(blk__mutex *m) {
  int e = pthread_mutex_unlock(&m->m);
  if (e) blk__panic("thread: pthread_mutex_unlock failed (errno %d)", e);
}

struct blk__cond {
  pthread_cond_t c;
};

int blk__cond_create(blk__cond **out) {
  *out = NULL;
  blk__cond *c = blk__malloc(sizeof *c);
  if (!c) return blk__fail(BLK_ENOMEM, "thread: no memory for a condition variable");
  pthread_condattr_t attr;
  int e = pthread_condattr_init(&attr);
  if (e) {
    free(c);
    return setup_failed(e, "pthread_condattr_init");
  }
  e = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (!e) e = pthread_cond_init(&c->c, &attr);
  pthread_condattr_destroy(&attr);
  if (e) {
    free(c);
    return setup_failed(e, "a CLOCK_MONOTONIC condition variable");
  }
  *out = c;
  return BLK_OK;
}

void blk__cond_destroy(blk__cond *c) {
  if (!c) return;
  pthread_cond_destroy(&c->c);
  free(c);
}

void blk__cond_wait(blk__cond *c, blk__mutex *m) {
  int e = pthread_cond_wait(&c->c, &m->m);
  if (e) blk__panic("thread: pthread_cond_wait failed (errno %d)", e);
}

int blk__cond_wait_until(blk__cond *c, blk__mutex *m, int64_t deadline_ns) {
  struct timespec until = {(time_t)(deadline_ns / NSEC_PER_SEC),
                           (long)(deadline_ns % NSEC_PER_SEC)};
  int e = pthread_cond_timedwait(&c->c, &m->m, &until);
  if (e == ETIMEDOUT) return 0;
  if (e) blk__panic("thread: pthread_cond_timedwait failed (errno %d)", e);
  return 1;
}

void blk__cond_signal(blk__cond *c) {
  pthread_cond_signal(&c->c);
}

void blk__cond_broadcast(blk__cond *c) {
  pthread_cond_broadcast(&c->c);
}

struct blk__thread {
  pthread_t id;
  void (*fn)(void *arg);
  void *arg;
};

static void *thread_main(void *arg) {
  blk__thread *t = arg;
  t->fn(t->arg);
  return NULL;
}

int blk__thread_start(blk__thread **out, void (*fn)(void *arg), void *arg) {
  *out = NULL;
  blk__thread *t = blk__malloc(sizeof *t);
  if (!t) return blk__fail(BLK_ENOMEM, "thread: no memory for a thread");
  t->fn = fn;
  t->arg = arg;
  int e = pthread_create(&t->id, NULL, thread_main, t);
  if (e) {
    free(t);
    return setup_failed(e, "pthread_create");
  }
  *out = t;
  return BLK_OK;
}

void blk__thread_join(blk__thread *t) {
  if (!t) return;
  pthread_join(t->id, NULL);
  free(t);
}
