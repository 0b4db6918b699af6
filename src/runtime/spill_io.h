/*
 * spill_io.h: the out-of-core codec and I/O, on threads of their own.
 *
 * Encoding a block (zstd at about 1 GB/s) and decoding it cost far more
 * than the user's save and load, which copy its bytes. So the budget hands
 * the codec and the file to one background thread: an eviction saves the
 * block on the driver and hands the bytes over to be encoded and written
 * behind; a load ahead of use has them read and decoded while the driver
 * runs other blocks' callbacks. The user's callbacks (create, destroy,
 * save, load) never run here, so a master with threads = 1 still calls
 * them from one thread only.
 *
 * A job is a put (its bytes into a new record) or a get (a record into
 * bytes). The driver submits it and later takes it back finished, in any
 * order; in between the job belongs to the thread, and the driver must not
 * change it (but for the cancelled flag, which the thread never reads): a
 * put's bytes may be read, the thread only reads them too. A finished job
 * carries its code and, on failure, the detail the thread's call gave
 * (blk_last_error() is per thread), for the driver to raise again as its
 * own.
 *
 * Threads: submit, done and wait on the driver; the work on the I/O
 * threads, as many as the master has callback threads but no more than
 * the rank's share of the node's processors (master.c): zstd at level 1
 * encodes at about 1 GB/s on one core, so with two cores the codec work of
 * an out-of-core pass that runs light callbacks takes half the time on
 * two threads. (The storage is shared with the driver, which also puts,
 * gets and releases records: storage.h says it may.) A thread sleeps on a
 * condition variable while it has nothing to do: it never spins against
 * the callbacks.
 */
#ifndef BLK_SPILL_IO_H
#define BLK_SPILL_IO_H

#include <stddef.h>

#include "base/context.h"
#include "blk/buffer.h"
#include "storage/storage.h"

enum { BLK__IO_PUT = 1, BLK__IO_GET = 2 };

typedef struct blk__io_job {
  int op;           /* BLK__IO_PUT or BLK__IO_GET */
  int lid;          /* the block it is for (the caller's label) */
  int gid;          /* put: the record's gid */
  int kind;         /* put: the record's kind */
  size_t shuffle;   /* put: the shuffle element size */
  blk_buffer bytes; /* put: what to write; get: what was read (empty on failure) */
  blk__record rec;  /* put: the record written; get: the record to read */
  int over;         /* put: over the record in rec (blk__storage_put_over) */
  int cancelled;    /* put: its result is not wanted (the driver's only) */
  int rc;           /* when finished: 0 or the error */
  char why[320];    /* when rc != 0: the detail */
  struct blk__io_job *next;
} blk__io_job;

typedef struct blk__io blk__io;

/* The most threads an io runs. */
#define BLK__IO_MAX_THREADS 8

/* Starts nthreads threads (1 to BLK__IO_MAX_THREADS) for storage s, which
 * take the jobs in the order submitted, each one at a time; they log and
 * stop the job in context's way. BLK_ENOMEM. */
int blk__io_create(blk__io **out, blk__storage *s, int nthreads, const blk__context *context);

/* Waits for every job submitted, stops the thread and frees it; jobs not
 * taken back with done are freed with their bytes (a put's record is
 * released). NULL does nothing. */
void blk__io_destroy(blk__io *io);

/* Hands job (malloc'd, owned by the thread until done returns it) over. */
void blk__io_submit(blk__io *io, blk__io_job *job);

/* A finished job, or NULL if none has finished; with wait, waits for one
 * when jobs are under way (NULL only when none is). */
blk__io_job *blk__io_done(blk__io *io, int wait);

/* Jobs submitted and not yet taken back. */
int blk__io_pending(const blk__io *io);

#endif
