/*
 * thread.h: threads, mutexes and condition variables, and the monotonic
 * clock their timed waits use. The only file that includes pthread.h is
 * thread.c; everything else in blk that needs a thread or a lock comes
 * here, so the way blk uses the OS's threads is in one place.
 *
 * The objects are opaque and made by create functions (pthread's types
 * would otherwise need pthread.h in every includer). A create that fails
 * returns BLK_ENOMEM with a detail (pthread reports only resource
 * shortages for them) and sets *out to NULL; destroy(NULL) does nothing.
 * A lock, unlock or wait that fails is a bug in blk and stops the job.
 */
#ifndef BLK_THREAD_H
#define BLK_THREAD_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t blk__now_ns(void);

/* A plain (non-recursive) mutex. Locking one the thread holds, or
 * unlocking one it does not hold, is a bug. Destroy only unlocked. */
typedef struct blk__mutex blk__mutex;
int blk__mutex_create(blk__mutex **out);
void blk__mutex_destroy(blk__mutex *m);
void blk__mutex_lock(blk__mutex *m);
void blk__mutex_unlock(blk__mutex *m);

/* A condition variable whose timed waits run on blk__now_ns's clock. */
typedef struct blk__cond blk__cond;
int blk__cond_create(blk__cond **out);
void blk__cond_destroy(blk__cond *c);
/* Waits on c with m held (m is held again on return; wake-ups may be
 * spurious: check the predicate). */
void blk__cond_wait(blk__cond *c, blk__mutex *m);
/* The same, until deadline_ns (blk__now_ns); 0 if the deadline passed. */
int blk__cond_wait_until(blk__cond *c, blk__mutex *m, int64_t deadline_ns);
void blk__cond_signal(blk__cond *c);
void blk__cond_broadcast(blk__cond *c);

/* A thread running fn(arg) until it returns; join waits for that and frees
 * the thread. Every started thread must be joined. */
typedef struct blk__thread blk__thread;
int blk__thread_start(blk__thread **out, void (*fn)(void *arg), void *arg);
void blk__thread_join(blk__thread *t);

#endif
