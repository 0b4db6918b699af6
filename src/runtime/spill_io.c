/*
 * spill_io.c: the codec and I/O threads of an out-of-core master; see
 * spill_io.h.
 *
 * Invariants: todo and finished are singly linked FIFO lists under lock;
 * a job is in exactly one of: todo, a thread's hands, finished, or the
 * driver's. pending (driver only) counts jobs submitted and not taken
 * back. stopping is set once, by destroy, after which the threads drain
 * todo and return.
 */
#include "runtime/spill_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "base/pages.h"
#include "base/thread.h"
#include "base/trace.h"

struct blk__io {
  blk__storage *storage;
  const blk__context *context;
  blk__thread *threads[BLK__IO_MAX_THREADS];
  int nthreads; /* started */
  blk__mutex *lock;
  blk__cond *work; /* todo became non-empty, or stopping */
  blk__cond *done; /* finished became non-empty */
  blk__io_job *todo, *todo_tail;
  blk__io_job *finished, *finished_tail;
  int stopping;
  int pending; /* driver only */
};

static void append(blk__io_job **head, blk__io_job **tail, blk__io_job *job) {
  job->next = NULL;
  if (*tail)
    (*tail)->next = job;
  else
    *head = job;
  *tail = job;
}

static blk__io_job *take(blk__io_job **head, blk__io_job **tail) {
  blk__io_job *job = *head;
  if (job) {
    *head = job->next;
    if (!*head) *tail = NULL;
    job->next = NULL;
  }
  return job;
}

/* The job's work, with the lock not held. A put's bytes stay: the driver
 * may read them while the job is under way (a block loaded again from
 * them), and frees them when it takes the job back. Before the put reads
 * them, their pages that nothing wrote are made real (base/pages.h): the
 * program's allocator gets them back, and its next write to a page this
 * read had mapped to the zero page would interrupt every other core. */
static void work(blk__io *io, blk__io_job *job) {
  if (job->op == BLK__IO_PUT) (void)blk__pages_populate(job->bytes.data, job->bytes.size);
  if (job->op == BLK__IO_PUT && job->over) {
    job->rc = blk__storage_put_over(io->storage, job->gid, job->kind, job->bytes.data,
                                    job->bytes.size, job->shuffle, &job->rec, NULL);
  } else if (job->op == BLK__IO_PUT) {
    job->rc = blk__storage_put(io->storage, job->gid, job->kind, job->bytes.data, job->bytes.size,
                               job->shuffle, &job->rec);
  } else {
    job->rc = blk__storage_get(io->storage, &job->rec, &job->bytes);
  }
  if (job->rc) snprintf(job->why, sizeof job->why, "%s", blk_last_error());
}

static void thread_main(void *arg) {
  blk__io *io = arg;
  blk__context_enter(io->context);
  if (blk__trace_here()) blk__trace_name_thread(blk__trace_here(), "I/O");
  blk__mutex_lock(io->lock);
  for (;;) {
    blk__io_job *job = take(&io->todo, &io->todo_tail);
    if (!job) {
      if (io->stopping) break;
      blk__cond_wait(io->work, io->lock);
      continue;
    }
    blk__mutex_unlock(io->lock);
    work(io, job);
    blk__mutex_lock(io->lock);
    append(&io->finished, &io->finished_tail, job);
    blk__cond_signal(io->done);
  }
  blk__mutex_unlock(io->lock);
}

/* Stops the threads started (they drain todo first) and joins them. */
static void join_all(blk__io *io) {
  blk__mutex_lock(io->lock);
  io->stopping = 1;
  blk__cond_broadcast(io->work);
  blk__mutex_unlock(io->lock);
  for (int i = 0; i < io->nthreads; i++) blk__thread_join(io->threads[i]);
  io->nthreads = 0;
}

static void free_io(blk__io *io) {
  blk__cond_destroy(io->done);
  blk__cond_destroy(io->work);
  blk__mutex_destroy(io->lock);
  free(io);
}

int blk__io_create(blk__io **out, blk__storage *s, int nthreads, const blk__context *context) {
  *out = NULL;
  if (nthreads < 1) nthreads = 1;
  if (nthreads > BLK__IO_MAX_THREADS) nthreads = BLK__IO_MAX_THREADS;
  blk__io *io = blk__calloc(1, sizeof *io);
  if (!io) return blk__fail(BLK_ENOMEM, "out-of-core: no memory for the I/O threads");
  io->storage = s;
  io->context = context;
  int rc = blk__mutex_create(&io->lock);
  if (!rc) rc = blk__cond_create(&io->work);
  if (!rc) rc = blk__cond_create(&io->done);
  if (rc) {
    free_io(io);
    return rc;
  }
  while (io->nthreads < nthreads && !rc)
    if (!(rc = blk__thread_start(&io->threads[io->nthreads], thread_main, io))) io->nthreads++;
  if (rc) {
    join_all(io);
    free_io(io);
    return rc;
  }
  *out = io;
  return BLK_OK;
}

static void free_job(blk__io *io, blk__io_job *job) {
  if (job->op == BLK__IO_PUT && !job->rc) blk__storage_release(io->storage, &job->rec);
  blk_buffer_free(&job->bytes);
  free(job);
}

void blk__io_destroy(blk__io *io) {
  if (!io) return;
  join_all(io);
  blk__io_job *job;
  while ((job = take(&io->finished, &io->finished_tail))) free_job(io, job);
  free_io(io);
}

void blk__io_submit(blk__io *io, blk__io_job *job) {
  job->rc = 0;
  job->why[0] = '\0';
  io->pending++;
  blk__mutex_lock(io->lock);
  append(&io->todo, &io->todo_tail, job);
  blk__cond_signal(io->work);
  blk__mutex_unlock(io->lock);
}

blk__io_job *blk__io_done(blk__io *io, int wait) {
  if (!io->pending) return NULL;
  blk__mutex_lock(io->lock);
  blk__io_job *job;
  while (!(job = take(&io->finished, &io->finished_tail)) && wait)
    blk__cond_wait(io->done, io->lock);
  blk__mutex_unlock(io->lock);
  if (job) io->pending--;
  return job;
}

int blk__io_pending(const blk__io *io) {
  return io ? io->pending : 0;
}
