/*
 * pool.h: blk's persistent thread pool, and a mutex for files that must not
 * include pthread.h.
 *
 * A pool of T threads lives as long as its master. It runs work in two ways:
 *   - blk__pool_parallel_for(): fn(i, ctx) for i in [0, n), returning when
 *     all are done (the callback phase of a round);
 *   - blk__pool_submit() / blk__pool_collect(): asynchronous tasks, for a
 *     driver thread that keeps polling MPI while callbacks run.
 * With T == 1 no thread is created and everything runs on the caller, in
 * order, so a single-threaded run is deterministic and easy to debug.
 *
 * Waiting (T > 1): every wait polls briefly, for about 30 us, before it
 * sleeps on a condition variable: a worker that has finished a task polls
 * for the next one, and the driver polls for a finished task or job. On a
 * virtual machine waking a sleeping thread goes through the hypervisor; on a
 * 2-vCPU KVM guest a condition-variable round trip measured 59-67 us against
 * 0.2-0.9 us through a polled atomic, which made every task cost ~31 us of
 * wake-ups. The polling yields the core about every microsecond, offering it
 * to a thread that has work (a worker, another rank), and is bounded: a
 * worker polls at most ~30 us per task it ran, the driver at most ~30 us per
 * parallel_for and per task it submits or collects.
 *
 * Threads: one driver thread owns a pool. Only it may call the functions
 * below on that pool, one at a time (parallel_for and submit/collect may be
 * mixed, but not called concurrently from different threads). Callbacks run
 * on the pool's worker threads (or on the driver when T == 1) and must not
 * call back into the pool.
 */
#ifndef BLK_POOL_H
#define BLK_POOL_H

#include <stddef.h>

typedef struct blk__pool blk__pool;

/* Creates a pool of nthreads >= 1. nthreads == 1 creates no thread: all work
 * runs inline on the caller. nthreads == T > 1 starts T worker threads that
 * live until blk__pool_destroy(). Returns 0 and sets *out, or BLK_EINVAL for
 * nthreads < 1, BLK_ENOMEM if memory or a thread cannot be had (anything
 * already started is stopped and freed; *out is NULL). */
int blk__pool_create(blk__pool **out, int nthreads);

/* Stops and joins the workers and frees the pool. NULL does nothing. Must
 * not be called while parallel_for runs or with tasks outstanding (submitted
 * but not collected): collect them first. Tasks still queued are run before
 * the workers exit, but their args are lost. */
void blk__pool_destroy(blk__pool *p);

/* The T given at creation. */
int blk__pool_nthreads(const blk__pool *p);

/* Runs fn(i, ctx) for every i in [0, n) and returns when all have finished;
 * what the callbacks wrote is visible to the caller afterwards. With T > 1
 * indices are handed out one at a time, as workers become free, to the T
 * workers; the caller waits (polls, then sleeps) until the last one
 * finishes, so at most T callbacks run at once and none on the caller. With
 * T == 1 they run in order on the caller. n == 0 returns at once. */
void blk__pool_parallel_for(blk__pool *p, size_t n, void (*fn)(size_t i, void *ctx), void *ctx);

/* Queues fn(arg) to run on a worker (tasks start in FIFO order). With T == 1
 * it runs fn(arg) right away, on the caller, before returning. Either way arg
 * is later returned by blk__pool_collect(). Returns 0, or BLK_ENOMEM if the
 * queues cannot grow (then fn is not run and nothing is queued). */
int blk__pool_submit(blk__pool *p, void (*fn)(void *arg), void *arg);

/* Moves the args of up to max finished tasks into done[], in the order they
 * finished, and returns how many. If none has finished it waits until one
 * does or timeout_ns nanoseconds pass: timeout_ns == 0 does not wait,
 * timeout_ns < 0 waits without limit. It returns 0 at once, whatever the
 * timeout, when max == 0 or no task is outstanding. A wait polls for up to
 * about 30 us (no longer than timeout_ns) and then sleeps; after a poll that
 * found nothing, later waits only sleep until the driver next submits or
 * collects a task, so calling collect in a loop with short timeouts while
 * long callbacks run does not keep a core busy. */
size_t blk__pool_collect(blk__pool *p, void **done, size_t max, long timeout_ns);

/* Tasks submitted but not yet collected (running, queued or finished). */
size_t blk__pool_outstanding(const blk__pool *p);

/* A plain (non-recursive) mutex for code that must not include pthread.h.
 * create returns 0, or BLK_ENOMEM (*out is NULL). destroy(NULL) does
 * nothing; the mutex must be unlocked. Locking a mutex the thread already
 * holds, or unlocking one it does not hold, is a bug. */
typedef struct blk__mutex blk__mutex;
int blk__mutex_create(blk__mutex **out);
void blk__mutex_destroy(blk__mutex *m);
void blk__mutex_lock(blk__mutex *m);
void blk__mutex_unlock(blk__mutex *m);

#endif
