/*
 * pool.h: blk's persistent thread pool.
 *
 * A pool of T threads lives as long as its master. It runs tasks: the
 * driver submits them (blk__pool_submit) and collects the finished ones
 * (blk__pool_collect), so it can keep polling MPI while callbacks run.
 * With T == 1 no thread is created and everything runs on the caller, in
 * order, so a single-threaded run is deterministic and easy to debug.
 *
 * Waiting (T > 1): a worker with nothing queued sleeps on a condition
 * variable at once (polling for more work took the core the driver needs on
 * a machine with few cores). The driver's waits for a finished task poll
 * briefly, for about 30 us, before they sleep: on a virtual machine waking a
 * sleeping thread goes through the hypervisor and costs tens of
 * microseconds, far more than a polled atomic (docs/performance.md has the
 * figures). The polling yields the core about every microsecond, offering
 * it to a worker, and is bounded: at most ~30 us per task the driver
 * submits or collects.
 *
 * Threads: one driver thread owns a pool. Only it may call the functions
 * below on that pool, one at a time. Tasks run on the pool's worker threads
 * (or on the driver when T == 1) and must not call back into the pool.
 */
#ifndef BLK_POOL_H
#define BLK_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/context.h"

typedef struct blk__pool blk__pool;

/* Creates a pool of nthreads >= 1. nthreads == 1 creates no thread: all work
 * runs inline on the caller. nthreads == T > 1 starts T worker threads that
 * live until blk__pool_destroy(), each holding context (context.h; may be
 * NULL) as its own, so what a task logs goes where its master's lines go. Returns 0 and sets *out,
 * or BLK_EINVAL for nthreads < 1, BLK_ENOMEM if memory or a thread cannot be had (anything already
 * started is stopped and freed; *out is NULL). */
int blk__pool_create(blk__pool **out, int nthreads, const blk__context *context);

/* Stops and joins the workers and frees the pool. NULL does nothing. Must
 * not be called with tasks outstanding (submitted but not collected):
 * collect them first. Tasks still queued are run before
 * the workers exit, but their args are lost. */
void blk__pool_destroy(blk__pool *p);

/* The T given at creation. */
int blk__pool_nthreads(const blk__pool *p);

/* Queues fn(arg) to run on a worker (tasks start in FIFO order). With T == 1
 * it runs fn(arg) right away, on the caller, before returning. Either way arg
 * is later returned by blk__pool_collect(). Returns 0, or BLK_ENOMEM if the
 * queues cannot grow (then fn is not run and nothing is queued). */
int blk__pool_submit(blk__pool *p, void (*fn)(void *arg), void *arg);

/* blk__pool_submit, but the task starts before the tasks queued by
 * blk__pool_submit (after those queued by this call before it): a
 * reduction's later round, whose messages are in memory, ahead of the first
 * round's blocks (runtime/schedule.c). Costs a move of each task queued
 * by it and not yet started. */
int blk__pool_submit_first(blk__pool *p, void (*fn)(void *arg), void *arg);

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

/* What handing a task to a worker that sleeps costs the driver, in ns: the
 * measured wake-up of a sleeping worker (submit to start) plus the measured
 * wait of the driver for a finished task (finish to collect), each averaged
 * over the last few tasks that paid it, starting from a guess of a virtual
 * machine's condition-variable wake-ups; one sample moves it at most 4 times
 * itself (a stretched one must not stop hand-offs for good). 0 with T == 1. */
int64_t blk__pool_handoff_ns(blk__pool *p);

#endif
