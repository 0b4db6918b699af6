/*
 * pool.c: the persistent thread pool (see pool.h), on the threads, locks
 * and condition variables of thread.h.
 *
 * State, all guarded by p->lock unless noted:
 *   - two rings of the same capacity `cap`: `queue` holds submitted tasks not
 *     yet started: first the `first_count` submitted first, then the others,
 *     each in FIFO order; `finished` holds the args of finished tasks not yet
 *     collected, in completion order.
 *   - who waits: `sleeping` counts workers waiting on `work` (`signaled` of
 *     them were signaled and are not up yet), `driver_asleep` says the driver
 *     sleeps on `done`.
 *   - done_seq, an atomic counter written under the lock and polled without
 *     it, bumped whenever a worker finishes a task.
 *   - `outstanding` and `may_spin` (driver only, no lock): tasks submitted
 *     but not collected, and whether collect's next wait may spin.
 *
 * Invariants:
 *   - queued + running + finished == outstanding <= cap. The driver grows
 *     both rings in submit before the count would pass cap, so a worker never
 *     allocates and a finished task can never be dropped.
 *
 * Waiting. On a virtual machine a condition variable hand-off wakes a halted
 * vCPU through the hypervisor: measured on a 2-vCPU KVM guest, a round trip
 * cost 59-67 us against 0.2-0.9 us through a polled atomic.
 *   - A worker with nothing queued sleeps on `work` at once. It used to poll
 *     for 30 us after each task first; on 2 cores with the driver and other
 *     ranks running, those polls took the core the driver needed to move the
 *     results on (docs/performance.md section 13.4: a 1 MiB broadcast at 1
 *     rank x 8 blocks took 1.9x as long as with one thread, 1.3x without the
 *     polls). The scheduler hands a worker only callbacks long enough to pay
 *     for its wake-up (runtime/schedule.h), so it can afford to sleep.
 *   - The driver's waits (collect with a timeout) poll done_seq for up to
 *     SPIN_NS (no longer than the timeout), then sleep on `done` (on
 *     CLOCK_MONOTONIC, for timed collects) with driver_asleep set. After a
 *     spin that found nothing, collect sleeps without spinning until the
 *     driver has submitted or collected a task again, so a driver that keeps
 *     collecting with short timeouts while long callbacks run sleeps rather
 *     than spins. The spin pauses the CPU between polls and yields the core
 *     about every microsecond, offering it to a worker computing a callback.
 *   - Wake-ups are sent only to sleepers: submit signals `work` only if a
 *     worker sleeps unsignaled and the queued tasks outnumber the workers
 *     already signaled, and a worker signals `done` only if driver_asleep is
 *     set (only the driver waits there, so a signal is enough).
 * No wake-up can be lost: every thread decides to sleep, and counts itself
 * as sleeping, under the lock, after checking its predicate there; whoever
 * changes the predicate does so under the lock and then sees the count. The
 * driver's polling only makes a change noticed sooner; after it, it always
 * checks again under the lock. Callbacks run without the lock.
 *
 * With one thread there are no workers; submit runs the task on the caller
 * and puts the arg straight into `finished`.
 *
 * What a hand-off costs (blk__pool_handoff_ns), measured on the tasks
 * themselves so that the scheduler can tell when handing a callback over
 * pays (runtime/schedule.c): the pickup (submit to start) of tasks that found
 * a worker asleep, and the return (finish to collect) of tasks the driver
 * was waiting for. Each is an exponentially weighted average (average_in),
 * updated under the lock; a pickup of a task that had to queue behind busy
 * workers says nothing about a wake-up and is not counted.
 */
#define _POSIX_C_SOURCE 200809L

#include "base/pool.h"
#include "base/alloc.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fail.h"
#include "base/thread.h"
#include "base/trace.h"

#define MIN_RING ((size_t)16)
#define SPIN_NS 30000L /* how long the driver polls before it sleeps (see above) */
#define SPIN_POLLS 16  /* polls between clock reads and yields (~0.5 us of PAUSEs on Zen 5) */
/* Hand-off costs assumed until measured: a condition-variable wake-up each
 * way, as on the 2-vCPU VM of docs/performance.md (a round trip took 59-67 us). */
#define PICKUP_NS_GUESS 30000L
#define RETURN_NS_GUESS 30000L

typedef struct task {
  void (*fn)(void *arg);
  void *arg;
  int64_t submitted; /* blk__now_ns() at submit */
  int woke;          /* a sleeping worker had to be woken for it */
} task;

typedef struct finished_task {
  void *arg;
  int64_t ended; /* blk__now_ns() when it finished */
} finished_task;

struct blk__pool {
  int nthreads;
  const blk__context *context; /* the workers' (context.h) */
  int nstarted;                /* worker threads running (joined by destroy) */
  blk__thread **threads;
  blk__mutex *lock;
  blk__cond *work; /* workers wait here */
  blk__cond *done; /* the driver waits here */
  int stopping;
  int sleeping;          /* workers waiting on `work` */
  int signaled;          /* sleepers signaled and not yet awake (for the measurements) */
  int driver_asleep;     /* the driver waits on `done` */
  atomic_ulong done_seq; /* bumped when a task finishes */
  int may_spin;          /* driver only: collect may spin before it sleeps */

  /* A worker's panic, for the driver to stop the job with (fail.h): only
   * the driver may call MPI_Abort. Set once, under the lock. */
  char panic[512];

  size_t cap; /* capacity of both rings */
  task *queue;
  size_t queue_head, queue_count;
  size_t first_count; /* of the queued, those at the head that were submitted first */
  finished_task *finished;
  size_t finished_head, finished_count;
  size_t outstanding;

  /* Measured hand-off costs (see the top), in ns, from the guesses, and
   * their sum, stored under the lock and read without it: the scheduler
   * asks for it once a pump, and a lock round trip was an eighth of an
   * operation whose callbacks do nothing. */
  int64_t pickup_ns, return_ns;
  _Atomic int64_t handoff_ns;
};

/* Publishes the sum after either average moved (under the lock). */
static void handoff_changed(blk__pool *p) {
  atomic_store_explicit(&p->handoff_ns, p->pickup_ns + p->return_ns, memory_order_relaxed);
}

/* An exponentially weighted average over about the last 4 samples, starting
 * from the guess; a sample counts at most 4 times the average (plus 1 us,
 * so a tiny average can still grow), so one
 * stretched by the operating system (a thread's first wake-up, a preempted
 * vCPU: milliseconds, seen) does not stop every hand-off for good (no
 * hand-off, no new sample), while a machine whose wake-ups really cost
 * more gets there in a few samples. */
static void average_in(int64_t *avg, int64_t sample) {
  if (sample < 0) sample = 0;
  if (sample > 4 * *avg + 1000) sample = 4 * *avg + 1000;
  *avg += (sample - *avg) / 4;
}

/* Tells the CPU this is a spin-wait loop (x86's PAUSE lowers the cost of
 * polling and of leaving the loop); elsewhere just a compiler barrier. */
static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

/* Polls *seq until it differs from seen or blk__now_ns() reaches until; returns
 * whether it changed. Every SPIN_POLLS polls it reads the clock and offers
 * the core to any runnable thread (see the top of the file). */
static int spin_for_change(atomic_ulong *seq, unsigned long seen, int64_t until) {
  for (unsigned k = 1;; k++) {
    if (atomic_load_explicit(seq, memory_order_relaxed) != seen) return 1;
    cpu_relax();
    if (k % SPIN_POLLS == 0) {
      if (blk__now_ns() >= until) return 0;
      sched_yield();
    }
  }
}

/* Tells the pollers of seq that what it counts has changed; called with the
 * lock held, after the change. Relaxed is enough: a poller that sees the new
 * value takes the lock before it looks at what changed. */
static void bump(atomic_ulong *seq) {
  atomic_fetch_add_explicit(seq, 1, memory_order_relaxed);
}

/* The pool of the calling worker thread (NULL on other threads). */
static _Thread_local blk__pool *my_pool;

/* blk__panic on a worker: hands the message to the driver, wakes it, and
 * parks this thread for good (its callback cannot go on; the driver stops
 * the job). */
static void worker_panic(const char *message) {
  blk__pool *p = my_pool;
  blk__mutex_lock(p->lock);
  if (!p->panic[0]) snprintf(p->panic, sizeof p->panic, "%s", message);
  bump(&p->done_seq);
  if (p->driver_asleep) blk__cond_signal(p->done);
  for (;;) blk__cond_wait(p->work, p->lock);
}

/* On the driver, with the lock held: stops the job if a worker panicked. */
static void check_panic(blk__pool *p) {
  if (!p->panic[0]) return;
  char message[sizeof p->panic];
  memcpy(message, p->panic, sizeof message);
  blk__mutex_unlock(p->lock);
  blk__panic("%s", message);
}

static void worker_main(void *arg) {
  blk__pool *p = arg;
  my_pool = p;
  blk__context_enter(p->context);
  if (blk__trace_here()) blk__trace_name_thread(blk__trace_here(), "worker");
  blk__set_panic_handoff(worker_panic);
  blk__mutex_lock(p->lock);
  for (;;) {
    if (p->queue_count > 0) {
      task t = p->queue[p->queue_head];
      p->queue_head = (p->queue_head + 1) % p->cap;
      p->queue_count--;
      if (p->first_count) p->first_count--;
      if (t.woke) {
        average_in(&p->pickup_ns, blk__now_ns() - t.submitted);
        handoff_changed(p);
      }
      blk__mutex_unlock(p->lock);
      t.fn(t.arg);
      int64_t ended = blk__now_ns();
      blk__mutex_lock(p->lock);
      p->finished[(p->finished_head + p->finished_count) % p->cap] = (finished_task){t.arg, ended};
      p->finished_count++;
      bump(&p->done_seq);
      if (p->driver_asleep) blk__cond_signal(p->done);
    } else if (p->stopping) {
      break;
    } else {
      /* Nothing queued: sleep at once (see the top: a polling worker takes
       * the core the driver needs). */
      p->sleeping++;
      blk__cond_wait(p->work, p->lock);
      p->sleeping--;
      if (p->signaled > 0) p->signaled--;
    }
  }
  blk__mutex_unlock(p->lock);
}

/* Stops the workers and frees everything that was set up; NULL does nothing. */
static void teardown(blk__pool *p) {
  if (!p) return;
  if (p->nstarted > 0) {
    blk__mutex_lock(p->lock);
    p->stopping = 1;
    blk__cond_broadcast(p->work);
    blk__mutex_unlock(p->lock);
    for (int i = 0; i < p->nstarted; i++) blk__thread_join(p->threads[i]);
  }
  blk__cond_destroy(p->done);
  blk__cond_destroy(p->work);
  blk__mutex_destroy(p->lock);
  free(p->threads);
  free(p->queue);
  free(p->finished);
  free(p);
}

int blk__pool_create(blk__pool **out, int nthreads, const blk__context *context) {
  *out = NULL;
  if (nthreads < 1)
    return blk__fail(BLK_EINVAL, "pool: nthreads = %d, must be at least 1", nthreads);
  blk__pool *p = blk__calloc(1, sizeof *p);
  if (!p) return blk__fail(BLK_ENOMEM, "pool: cannot allocate a pool of %d threads", nthreads);
  p->nthreads = nthreads;
  p->context = context;
  p->pickup_ns = PICKUP_NS_GUESS;
  p->return_ns = RETURN_NS_GUESS;
  atomic_init(&p->handoff_ns, p->pickup_ns + p->return_ns);
  atomic_init(&p->done_seq, 0);
  int rc = blk__mutex_create(&p->lock);
  if (!rc) rc = blk__cond_create(&p->work);
  if (!rc) rc = blk__cond_create(&p->done);
  if (!rc && nthreads > 1 && !(p->threads = blk__calloc((size_t)nthreads, sizeof *p->threads)))
    rc = blk__fail(BLK_ENOMEM, "pool: cannot allocate %d thread handles", nthreads);
  for (int i = 0; !rc && nthreads > 1 && i < nthreads; i++)
    if (!(rc = blk__thread_start(&p->threads[i], worker_main, p))) p->nstarted++;
  if (rc) {
    teardown(p); /* stops what was started */
    return rc;
  }
  *out = p;
  return BLK_OK;
}

void blk__pool_destroy(blk__pool *p) {
  teardown(p);
}

int blk__pool_nthreads(const blk__pool *p) {
  return p->nthreads;
}

/* The driver's spin: drops the lock, polls done_seq until blk__now_ns()
 * reaches until and takes the lock again. Returns whether a worker finished
 * something. */
static int driver_spin(blk__pool *p, int64_t until) {
  unsigned long seen = atomic_load_explicit(&p->done_seq, memory_order_relaxed);
  blk__mutex_unlock(p->lock);
  int changed = spin_for_change(&p->done_seq, seen, until);
  blk__mutex_lock(p->lock);
  return changed;
}

/* The driver's sleep on `done`, with the lock held, until a worker signals
 * or deadline_ns passes (< 0: no limit). Returns 0 if the time ran out. */
static int driver_sleep(blk__pool *p, int64_t deadline_ns) {
  p->driver_asleep = 1;
  int woken = 1;
  if (deadline_ns < 0)
    blk__cond_wait(p->done, p->lock);
  else
    woken = blk__cond_wait_until(p->done, p->lock, deadline_ns);
  p->driver_asleep = 0;
  return woken;
}

/* Doubles both rings so that one more task fits; copies them unwrapped. */
static int grow_rings(blk__pool *p) {
  size_t cap = p->cap < MIN_RING ? MIN_RING : p->cap;
  if (p->cap > 0) {
    if (cap > SIZE_MAX / 2 / sizeof(task))
      return blk__fail(BLK_ENOMEM, "pool: %zu outstanding tasks are too many", p->outstanding);
    cap *= 2;
  }
  task *queue = blk__malloc(cap * sizeof *queue);
  finished_task *finished = blk__malloc(cap * sizeof *finished);
  if (!queue || !finished) {
    free(queue);
    free(finished);
    return blk__fail(BLK_ENOMEM, "pool: cannot grow the task queues to %zu tasks", cap);
  }
  blk__mutex_lock(p->lock);
  for (size_t k = 0; k < p->queue_count; k++) queue[k] = p->queue[(p->queue_head + k) % p->cap];
  for (size_t k = 0; k < p->finished_count; k++)
    finished[k] = p->finished[(p->finished_head + k) % p->cap];
  task *old_queue = p->queue;
  finished_task *old_finished = p->finished;
  p->queue = queue;
  p->finished = finished;
  p->queue_head = 0;
  p->finished_head = 0;
  p->cap = cap;
  blk__mutex_unlock(p->lock);
  free(old_queue);
  free(old_finished);
  return 0;
}

static int submit(blk__pool *p, void (*fn)(void *arg), void *arg, int first) {
  if (p->outstanding == p->cap) {
    int rc = grow_rings(p);
    if (rc != 0) return rc;
  }
  p->outstanding++;
  if (p->nthreads == 1) {
    fn(arg);
    blk__mutex_lock(p->lock);
    p->finished[(p->finished_head + p->finished_count) % p->cap] = (finished_task){arg, 0};
    p->finished_count++;
    blk__mutex_unlock(p->lock);
    return 0;
  }
  int64_t now = blk__now_ns();
  blk__mutex_lock(p->lock);
  /* Wake a sleeper for each queued task beyond what the sleepers already
   * signaled will take; its pickup then measures a wake-up (a task queued
   * without one waits for a busy worker, which says nothing about it). */
  int wake = p->sleeping > p->signaled && p->queue_count + 1 > (size_t)p->signaled;
  p->signaled += wake;
  const task t = {fn, arg, now, wake};
  if (first) { /* behind the others submitted first: their places move up one */
    p->queue_head = (p->queue_head + p->cap - 1) % p->cap;
    for (size_t k = 0; k < p->first_count; k++)
      p->queue[(p->queue_head + k) % p->cap] = p->queue[(p->queue_head + k + 1) % p->cap];
    p->queue[(p->queue_head + p->first_count) % p->cap] = t;
    p->first_count++;
  } else {
    p->queue[(p->queue_head + p->queue_count) % p->cap] = t;
  }
  p->queue_count++;
  if (wake) blk__cond_signal(p->work);
  blk__mutex_unlock(p->lock);
  p->may_spin = 1;
  return 0;
}

int blk__pool_submit(blk__pool *p, void (*fn)(void *arg), void *arg) {
  return submit(p, fn, arg, 0);
}

int blk__pool_submit_first(blk__pool *p, void (*fn)(void *arg), void *arg) {
  return submit(p, fn, arg, 1);
}

size_t blk__pool_collect(blk__pool *p, void **done, size_t max, long timeout_ns) {
  if (max == 0 || p->outstanding == 0) return 0;
  blk__mutex_lock(p->lock);
  int waited = p->finished_count == 0;
  if (p->finished_count == 0 && timeout_ns != 0) {
    /* Something is outstanding, so a worker will finish it and bump or
     * signal. The deadline counts from before the spin. */
    int64_t start = blk__now_ns();
    int64_t deadline = timeout_ns > 0 ? start + timeout_ns : -1;
    long spin_ns = timeout_ns > 0 && timeout_ns < SPIN_NS ? timeout_ns : SPIN_NS;
    /* A spin that found nothing: sleep only, until a task is submitted or
     * collected, so polling collect in a loop does not become a busy wait. */
    if (p->may_spin) p->may_spin = driver_spin(p, start + spin_ns);
    while (p->finished_count == 0 && !p->panic[0])
      if (!driver_sleep(p, deadline)) break;
  }
  check_panic(p);
  size_t n = p->finished_count < max ? p->finished_count : max;
  /* The driver was waiting: how long the first one took to reach it. */
  if (waited && n > 0 && p->nthreads > 1) {
    average_in(&p->return_ns, blk__now_ns() - p->finished[p->finished_head].ended);
    handoff_changed(p);
  }
  for (size_t k = 0; k < n; k++) {
    done[k] = p->finished[p->finished_head].arg;
    p->finished_head = (p->finished_head + 1) % p->cap;
  }
  p->finished_count -= n;
  blk__mutex_unlock(p->lock);
  p->outstanding -= n;
  if (n > 0) p->may_spin = 1;
  return n;
}

size_t blk__pool_outstanding(const blk__pool *p) {
  return p->outstanding;
}

int64_t blk__pool_handoff_ns(blk__pool *p) {
  if (p->nthreads == 1) return 0;
  return atomic_load_explicit(&p->handoff_ns, memory_order_relaxed);
}
