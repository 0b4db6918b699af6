/*
 * pool.c: the persistent thread pool and blk__mutex (see pool.h). The only
 * file in blk that includes pthread.h.
 *
 * State, all guarded by p->lock unless noted:
 *   - a parallel_for job: fn, ctx, n, a generation number and `job_open`.
 *     Indices are claimed one at a time from the atomic counter job_next
 *     (a compare-and-swap that never moves past n, so no n is too large).
 *     A worker joins a job at most once (it remembers the generation), and
 *     counts itself in job_busy while it claims and runs indices.
 *   - two rings of the same capacity `cap`: `queue` holds submitted tasks not
 *     yet started (FIFO), `finished` holds the args of finished tasks not yet
 *     collected, in completion order.
 *   - who waits how: `spinning` and `sleeping` count workers polling for or
 *     sleeping on new work, `driver_asleep` says the driver sleeps on `done`.
 *   - two atomic counters, written under the lock and polled without it:
 *     work_seq, bumped whenever work is published (a task queued, a job
 *     opened, stop), and done_seq, bumped whenever a worker finishes a task
 *     or closes a job.
 *   - `outstanding` and `may_spin` (driver only, no lock): tasks submitted
 *     but not collected, and whether collect's next wait may spin.
 *
 * Invariants:
 *   - queued + running + finished == outstanding <= cap. The driver grows
 *     both rings in submit before the count would pass cap, so a worker never
 *     allocates and a finished task can never be dropped.
 *   - A job is complete when job_next has reached n and job_busy is 0: a
 *     worker leaves only after failing to claim an index, so the last one out
 *     knows every index has been claimed and every claimed one has run. It
 *     closes the job (job_open = 0) and wakes the driver. Because the driver
 *     resets job_next only after that, and workers join only while the job is
 *     open (both under the lock), no worker can carry an index of one job into
 *     the next.
 *
 * Waiting: spin briefly, then sleep. On a virtual machine a condition
 * variable hand-off wakes a halted vCPU through the hypervisor: measured on
 * a 2-vCPU KVM guest, a round trip cost 59-67 us against 0.2-0.9 us through
 * a polled atomic, so each task paid ~31 us in wake-ups, far more than a
 * small callback costs. So a waiter first polls its counter for up to
 * SPIN_NS, about what one wake-up costs (so a waiter that gives up has
 * wasted at most what sleeping at once would have cost it), then sleeps on
 * its condition variable:
 *   - A worker that finds nothing to do counts itself in `spinning`, drops
 *     the lock and polls work_seq, until SPIN_NS after it finished its last
 *     piece of work; after each change it looks under the lock (another
 *     worker may have taken the work: it polls on). Once the time is up it
 *     counts itself in `sleeping` and waits on `work`. So an idle worker
 *     spins at most SPIN_NS per piece of work it ran.
 *   - The driver's waits (parallel_for, and collect with a timeout) poll
 *     done_seq the same way (collect no longer than its timeout), then sleep
 *     on `done` (on CLOCK_MONOTONIC, for timed collects) with driver_asleep
 *     set. After a spin that found nothing, collect sleeps without spinning
 *     until the driver has submitted or collected a task again, so a driver
 *     that keeps collecting with short timeouts while long callbacks run
 *     sleeps rather than spins.
 *   - Wake-ups are sent only to sleepers: submit signals `work` only if a
 *     worker sleeps and the queued tasks outnumber the spinning workers (each
 *     of those takes one when it looks again), opening a job broadcasts it
 *     if any worker sleeps, and a worker signals `done` only if driver_asleep
 *     is set (only the driver waits there, so a signal is enough).
 *   - The spin pauses the CPU between polls and yields the core about every
 *     microsecond, offering it to a runnable thread (a worker computing a
 *     callback, another rank on a shared core). Linux may hand the core
 *     straight back when that thread has had more than its share, so it is
 *     the SPIN_NS bound that limits what a spin can take from others.
 * No wake-up can be lost: every thread decides to sleep, and counts itself
 * as sleeping, under the lock, after checking its predicate there; whoever
 * changes the predicate does so under the lock and then sees the count. The
 * polling only makes a change noticed sooner; after it the poller always
 * checks again under the lock. Callbacks run without the lock.
 *
 * With one thread there are no workers; parallel_for and submit run the
 * callbacks on the caller and submit puts the arg straight into `finished`.
 */
#define _POSIX_C_SOURCE 200809L

#include "base/pool.h"
#include "base/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fail.h"

#define MIN_RING ((size_t)16)
#define NSEC_PER_SEC 1000000000L
#define SPIN_NS 30000L /* how long a waiter polls before it sleeps (see above) */
#define SPIN_POLLS 16  /* polls between clock reads and yields (~0.5 us of PAUSEs on Zen 5) */

typedef struct task {
  void (*fn)(void *arg);
  void *arg;
} task;

struct blk__pool {
  int nthreads;
  int nstarted; /* worker threads running (joined by destroy) */
  int ninit;    /* pthread objects initialised: 1 lock, 2 work, 3 done */
  pthread_t *threads;
  pthread_mutex_t lock;
  pthread_cond_t work; /* workers wait here */
  pthread_cond_t done; /* the driver waits here, on CLOCK_MONOTONIC */
  int stopping;
  int spinning, sleeping; /* workers polling work_seq, waiting on `work` */
  int driver_asleep;      /* the driver waits on `done` */
  atomic_ulong work_seq;  /* bumped when work is published */
  atomic_ulong done_seq;  /* bumped when a task finishes or a job closes */
  int may_spin;           /* driver only: collect may spin before it sleeps */

  void (*job_fn)(size_t i, void *ctx);
  void *job_ctx;
  size_t job_n;
  atomic_size_t job_next;
  unsigned long job_gen;
  int job_open;
  int job_busy;

  /* A worker's panic, for the driver to stop the job with (fail.h): only
   * the driver may call MPI_Abort. Set once, under the lock. */
  char panic[512];

  size_t cap; /* capacity of both rings */
  task *queue;
  size_t queue_head, queue_count;
  void **finished;
  size_t finished_head, finished_count;
  size_t outstanding;
};

static void mutex_lock(pthread_mutex_t *m) {
  int e = pthread_mutex_lock(m);
  if (e != 0) blk__panic("pool: pthread_mutex_lock failed (errno %d)", e);
}

static void mutex_unlock(pthread_mutex_t *m) {
  int e = pthread_mutex_unlock(m);
  if (e != 0) blk__panic("pool: pthread_mutex_unlock failed (errno %d)", e);
}

static void cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
  int e = pthread_cond_wait(c, m);
  if (e != 0) blk__panic("pool: pthread_cond_wait failed (errno %d)", e);
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

/* CLOCK_MONOTONIC in nanoseconds. */
static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * NSEC_PER_SEC + t.tv_nsec;
}

/* Polls *seq until it differs from seen or now_ns() reaches until; returns
 * whether it changed. Every SPIN_POLLS polls it reads the clock and offers
 * the core to any runnable thread (see the top of the file). */
static int spin_for_change(atomic_ulong *seq, unsigned long seen, int64_t until) {
  for (unsigned k = 1;; k++) {
    if (atomic_load_explicit(seq, memory_order_relaxed) != seen) return 1;
    cpu_relax();
    if (k % SPIN_POLLS == 0) {
      if (now_ns() >= until) return 0;
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

/* Claims and runs indices of the current job until none is left. */
static void run_indices(blk__pool *p, void (*fn)(size_t, void *), void *ctx, size_t n) {
  size_t i = atomic_load_explicit(&p->job_next, memory_order_relaxed);
  for (;;) {
    if (i >= n) return;
    if (atomic_compare_exchange_weak_explicit(&p->job_next, &i, i + 1, memory_order_relaxed,
                                              memory_order_relaxed)) {
      fn(i, ctx);
      i = atomic_load_explicit(&p->job_next, memory_order_relaxed);
    }
  }
}

/* The pool of the calling worker thread (NULL on other threads). */
static _Thread_local blk__pool *my_pool;

/* blk__panic on a worker: hands the message to the driver, wakes it, and
 * parks this thread for good (its callback cannot go on; the driver stops
 * the job). */
static void worker_panic(const char *message) {
  blk__pool *p = my_pool;
  mutex_lock(&p->lock);
  if (!p->panic[0]) snprintf(p->panic, sizeof p->panic, "%s", message);
  bump(&p->done_seq);
  if (p->driver_asleep) pthread_cond_signal(&p->done);
  for (;;) cond_wait(&p->work, &p->lock);
}

/* On the driver, with the lock held: stops the job if a worker panicked. */
static void check_panic(blk__pool *p) {
  if (!p->panic[0]) return;
  char message[sizeof p->panic];
  memcpy(message, p->panic, sizeof message);
  mutex_unlock(&p->lock);
  blk__panic("%s", message);
}

static void *worker_main(void *arg) {
  blk__pool *p = arg;
  my_pool = p;
  blk__set_panic_handoff(worker_panic);
  unsigned long joined = 0; /* generation of the last job this worker joined */
  int64_t spin_until = 0;   /* after running work, poll for more until then */
  mutex_lock(&p->lock);
  for (;;) {
    if (p->job_open && p->job_gen != joined) {
      joined = p->job_gen;
      p->job_busy++;
      void (*fn)(size_t, void *) = p->job_fn;
      void *ctx = p->job_ctx;
      size_t n = p->job_n;
      mutex_unlock(&p->lock);
      run_indices(p, fn, ctx, n);
      spin_until = now_ns() + SPIN_NS;
      mutex_lock(&p->lock);
      if (--p->job_busy == 0) {
        p->job_open = 0;
        bump(&p->done_seq);
        if (p->driver_asleep) pthread_cond_signal(&p->done);
      }
    } else if (p->queue_count > 0) {
      task t = p->queue[p->queue_head];
      p->queue_head = (p->queue_head + 1) % p->cap;
      p->queue_count--;
      mutex_unlock(&p->lock);
      t.fn(t.arg);
      spin_until = now_ns() + SPIN_NS;
      mutex_lock(&p->lock);
      p->finished[(p->finished_head + p->finished_count) % p->cap] = t.arg;
      p->finished_count++;
      bump(&p->done_seq);
      if (p->driver_asleep) pthread_cond_signal(&p->done);
    } else if (p->stopping) {
      break;
    } else if (now_ns() < spin_until) {
      /* Also after a change another worker took first: keep polling. */
      unsigned long seen = atomic_load_explicit(&p->work_seq, memory_order_relaxed);
      p->spinning++;
      mutex_unlock(&p->lock);
      spin_for_change(&p->work_seq, seen, spin_until);
      mutex_lock(&p->lock);
      p->spinning--;
    } else {
      p->sleeping++;
      cond_wait(&p->work, &p->lock);
      p->sleeping--;
    }
  }
  mutex_unlock(&p->lock);
  return NULL;
}

/* Stops the workers and frees everything that was set up; NULL does nothing. */
static void teardown(blk__pool *p) {
  if (!p) return;
  if (p->nstarted > 0) {
    mutex_lock(&p->lock);
    p->stopping = 1;
    bump(&p->work_seq);
    pthread_cond_broadcast(&p->work);
    mutex_unlock(&p->lock);
    for (int i = 0; i < p->nstarted; i++) pthread_join(p->threads[i], NULL);
  }
  if (p->ninit >= 3) pthread_cond_destroy(&p->done);
  if (p->ninit >= 2) pthread_cond_destroy(&p->work);
  if (p->ninit >= 1) pthread_mutex_destroy(&p->lock);
  free(p->threads);
  free(p->queue);
  free(p->finished);
  free(p);
}

/* Reports a failed pthread setup call; pthread reports only resource
 * shortages (EAGAIN, ENOMEM) for these, hence BLK_ENOMEM. */
static int setup_failed(int e, const char *what, int nthreads) {
  char why[128];
  if (strerror_r(e, why, sizeof why) != 0) why[0] = '\0';
  return blk__fail(BLK_ENOMEM, "pool: %s failed for a pool of %d threads: %s (errno %d)", what,
                   nthreads, why, e);
}

int blk__pool_create(blk__pool **out, int nthreads) {
  int rc = 0, e = 0, have_attr = 0;
  blk__pool *p = NULL;
  pthread_condattr_t attr;
  *out = NULL;
  if (nthreads < 1) {
    rc = blk__fail(BLK_EINVAL, "pool: nthreads = %d, must be at least 1", nthreads);
    goto out;
  }
  p = blk__calloc(1, sizeof *p);
  if (!p) {
    rc = blk__fail(BLK_ENOMEM, "pool: cannot allocate a pool of %d threads", nthreads);
    goto out;
  }
  p->nthreads = nthreads;
  atomic_init(&p->job_next, 0);
  atomic_init(&p->work_seq, 0);
  atomic_init(&p->done_seq, 0);
  if ((e = pthread_mutex_init(&p->lock, NULL)) != 0) {
    rc = setup_failed(e, "pthread_mutex_init", nthreads);
    goto out;
  }
  p->ninit = 1;
  if ((e = pthread_cond_init(&p->work, NULL)) != 0) {
    rc = setup_failed(e, "pthread_cond_init", nthreads);
    goto out;
  }
  p->ninit = 2;
  if ((e = pthread_condattr_init(&attr)) != 0) {
    rc = setup_failed(e, "pthread_condattr_init", nthreads);
    goto out;
  }
  have_attr = 1;
  if ((e = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)) != 0 ||
      (e = pthread_cond_init(&p->done, &attr)) != 0) {
    rc = setup_failed(e, "a CLOCK_MONOTONIC condition variable", nthreads);
    goto out;
  }
  p->ninit = 3;
  if (nthreads > 1) {
    p->threads = blk__calloc((size_t)nthreads, sizeof *p->threads);
    if (!p->threads) {
      rc = blk__fail(BLK_ENOMEM, "pool: cannot allocate %d thread handles", nthreads);
      goto out;
    }
    for (int i = 0; i < nthreads; i++) {
      if ((e = pthread_create(&p->threads[i], NULL, worker_main, p)) != 0) {
        rc = setup_failed(e, "pthread_create", nthreads);
        goto out;
      }
      p->nstarted++;
    }
  }
  *out = p;
  p = NULL;
out:
  if (have_attr) pthread_condattr_destroy(&attr);
  teardown(p); /* NULL on success; otherwise stops what was started */
  return rc;
}

void blk__pool_destroy(blk__pool *p) {
  teardown(p);
}

int blk__pool_nthreads(const blk__pool *p) {
  return p->nthreads;
}

/* The driver's spin: drops the lock, polls done_seq until now_ns() reaches
 * until and takes the lock again. Returns whether a worker finished something. */
static int driver_spin(blk__pool *p, int64_t until) {
  unsigned long seen = atomic_load_explicit(&p->done_seq, memory_order_relaxed);
  mutex_unlock(&p->lock);
  int changed = spin_for_change(&p->done_seq, seen, until);
  mutex_lock(&p->lock);
  return changed;
}

/* The driver's sleep on `done`, with the lock held, until a worker signals or
 * *until passes (NULL: no limit). Returns 0 if the time ran out. */
static int driver_sleep(blk__pool *p, const struct timespec *until) {
  p->driver_asleep = 1;
  int e = until ? pthread_cond_timedwait(&p->done, &p->lock, until)
                : pthread_cond_wait(&p->done, &p->lock);
  p->driver_asleep = 0;
  if (e == ETIMEDOUT) return 0;
  if (e != 0) blk__panic("pool: waiting for a worker failed (errno %d)", e);
  return 1;
}

void blk__pool_parallel_for(blk__pool *p, size_t n, void (*fn)(size_t i, void *ctx), void *ctx) {
  if (n == 0) return;
  if (p->nthreads == 1) {
    for (size_t i = 0; i < n; i++) fn(i, ctx);
    return;
  }
  mutex_lock(&p->lock);
  p->job_fn = fn;
  p->job_ctx = ctx;
  p->job_n = n;
  atomic_store_explicit(&p->job_next, 0, memory_order_relaxed);
  p->job_gen++;
  p->job_open = 1;
  bump(&p->work_seq);
  if (p->sleeping > 0) pthread_cond_broadcast(&p->work);
  /* done_seq also counts tasks finishing: spin on until the job closes. */
  int64_t spin_until = now_ns() + SPIN_NS;
  while (p->job_open && !p->panic[0] && driver_spin(p, spin_until)) continue;
  while (p->job_open && !p->panic[0]) driver_sleep(p, NULL);
  check_panic(p);
  p->job_fn = NULL;
  p->job_ctx = NULL;
  mutex_unlock(&p->lock);
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
  void **finished = blk__malloc(cap * sizeof *finished);
  if (!queue || !finished) {
    free(queue);
    free(finished);
    return blk__fail(BLK_ENOMEM, "pool: cannot grow the task queues to %zu tasks", cap);
  }
  mutex_lock(&p->lock);
  for (size_t k = 0; k < p->queue_count; k++) queue[k] = p->queue[(p->queue_head + k) % p->cap];
  for (size_t k = 0; k < p->finished_count; k++)
    finished[k] = p->finished[(p->finished_head + k) % p->cap];
  task *old_queue = p->queue;
  void **old_finished = p->finished;
  p->queue = queue;
  p->finished = finished;
  p->queue_head = 0;
  p->finished_head = 0;
  p->cap = cap;
  mutex_unlock(&p->lock);
  free(old_queue);
  free(old_finished);
  return 0;
}

int blk__pool_submit(blk__pool *p, void (*fn)(void *arg), void *arg) {
  if (p->outstanding == p->cap) {
    int rc = grow_rings(p);
    if (rc != 0) return rc;
  }
  p->outstanding++;
  if (p->nthreads == 1) {
    fn(arg);
    mutex_lock(&p->lock);
    p->finished[(p->finished_head + p->finished_count) % p->cap] = arg;
    p->finished_count++;
    mutex_unlock(&p->lock);
    return 0;
  }
  mutex_lock(&p->lock);
  p->queue[(p->queue_head + p->queue_count) % p->cap] = (task){fn, arg};
  p->queue_count++;
  bump(&p->work_seq);
  /* Each spinning worker takes a task without being woken; wake a sleeper
   * only for a task they would leave queued. */
  if (p->sleeping > 0 && p->queue_count > (size_t)p->spinning) pthread_cond_signal(&p->work);
  mutex_unlock(&p->lock);
  p->may_spin = 1;
  return 0;
}

/* The CLOCK_MONOTONIC time timeout_ns (> 0) from now. */
static struct timespec deadline_after(long timeout_ns) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += (time_t)(timeout_ns / NSEC_PER_SEC);
  t.tv_nsec += timeout_ns % NSEC_PER_SEC;
  if (t.tv_nsec >= NSEC_PER_SEC) {
    t.tv_sec++;
    t.tv_nsec -= NSEC_PER_SEC;
  }
  return t;
}

size_t blk__pool_collect(blk__pool *p, void **done, size_t max, long timeout_ns) {
  if (max == 0 || p->outstanding == 0) return 0;
  mutex_lock(&p->lock);
  if (p->finished_count == 0 && timeout_ns != 0) {
    /* Something is outstanding, so a worker will finish it and bump or
     * signal. The deadline counts from before the spin. */
    struct timespec until = {0, 0};
    if (timeout_ns > 0) until = deadline_after(timeout_ns);
    long spin_ns = timeout_ns > 0 && timeout_ns < SPIN_NS ? timeout_ns : SPIN_NS;
    /* A spin that found nothing: sleep only, until a task is submitted or
     * collected, so polling collect in a loop does not become a busy wait. */
    if (p->may_spin) p->may_spin = driver_spin(p, now_ns() + spin_ns);
    while (p->finished_count == 0 && !p->panic[0])
      if (!driver_sleep(p, timeout_ns > 0 ? &until : NULL)) break;
  }
  check_panic(p);
  size_t n = p->finished_count < max ? p->finished_count : max;
  for (size_t k = 0; k < n; k++) {
    done[k] = p->finished[p->finished_head];
    p->finished_head = (p->finished_head + 1) % p->cap;
  }
  p->finished_count -= n;
  mutex_unlock(&p->lock);
  p->outstanding -= n;
  if (n > 0) p->may_spin = 1;
  return n;
}

size_t blk__pool_outstanding(const blk__pool *p) {
  return p->outstanding;
}

struct blk__mutex {
  pthread_mutex_t m;
};

int blk__mutex_create(blk__mutex **out) {
  *out = NULL;
  blk__mutex *m = blk__malloc(sizeof *m);
  if (!m) return blk__fail(BLK_ENOMEM, "mutex: cannot allocate %zu bytes", sizeof *m);
  int e = pthread_mutex_init(&m->m, NULL);
  if (e != 0) {
    free(m);
    return blk__fail(BLK_ENOMEM, "mutex: pthread_mutex_init failed (errno %d)", e);
  }
  *out = m;
  return 0;
}

void blk__mutex_destroy(blk__mutex *m) {
  if (!m) return;
  pthread_mutex_destroy(&m->m);
  free(m);
}

void blk__mutex_lock(blk__mutex *m) {
  mutex_lock(&m->m);
}

void blk__mutex_unlock(blk__mutex *m) {
  mutex_unlock(&m->m);
}
