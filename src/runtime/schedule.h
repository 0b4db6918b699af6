/*
 * schedule.h: running block tasks on the pool under the memory budget.
 *
 * An operation (foreach, a reduction) marks blocks ready; the scheduler hands
 * them to the pool, at most `threads` at a time, preferring blocks already
 * in memory. A block not in memory is loaded first on the driver thread
 * (evicting a least recently used idle block). While every worker is busy,
 * the driver loads the next ready block ahead of time, so I/O overlaps the
 * callbacks. A block that is running is pinned and never evicted.
 *
 * A task that does not need its block (all_to_all's forwarding rounds) is
 * run without loading it.
 *
 * Driver thread only. Cost per task: one pool hand-off (none with one
 * thread) plus, out-of-core, at most one eviction and one load.
 */
#ifndef BLK_SCHEDULE_H
#define BLK_SCHEDULE_H

#include <stddef.h>

#include "base/pool.h"
#include "runtime/budget.h"
#include "runtime/operation.h"

struct blk__sched;
typedef struct blk__task {
  struct blk__sched *s;
  int lid;
} blk__task;

typedef struct blk__sched {
  blk__budget *budget; /* the blocks, and which are in memory */
  blk__pool *pool;
  blk__task *tasks;          /* per lid: what the pool runs */
  void (*run)(void *arg);    /* the task body, on a pool thread */
  int (*prepare)(void *arg); /* on the driver before run (may be NULL): bring queues in */
  void **args;               /* per lid: the argument of its task */
  int *ready;                /* lids waiting to run, in order */
  int nready;
  unsigned char *queued; /* per lid: in ready */
  unsigned char *needs;  /* per lid: its task needs the block in memory */
  unsigned char *pinned; /* per lid: acquired for its running task */
  int *failed;           /* lids whose block could not be loaded: done, not run */
  int nfailed;
  int running, limit;
  /* Told of every load, eviction or hand-off that failed, on the driver
   * right when it happens (blk_last_error() says why); the operation goes
   * on. lid is the block that was to run (an eviction's victim is named in
   * the detail). NULL: nobody is told. */
  void (*on_error)(void *ctx, int lid, int code);
  void *on_error_ctx;
} blk__sched;

/* A scheduler for the budget's blocks on pool, for one operation of o
 * (whose kept memory holds its arrays). run(args[lid]) is a block's task;
 * prepare (may be NULL) runs on the driver just before it. BLK_ENOMEM. */
int blk__sched_init(blk__sched *s, blk__budget *budget, blk__pool *pool, blk__op *o,
                    void (*run)(void *arg), int (*prepare)(void *arg), void **args);
void blk__sched_free(blk__sched *s);

/* Marks lid ready to run (once); needs_block says whether to load it. */
void blk__sched_ready(blk__sched *s, int lid, int needs_block);

/* Starts as many ready tasks as workers and memory allow, and prefetches.
 * A block that cannot be loaded (a corrupt record, no memory), prepared or
 * handed to the pool is not run: on_error is told, and the lid comes back
 * from collect with ran = 0, so a collective operation still completes on
 * every rank. A failed eviction is told too, but the block runs (it is
 * loaded over the budget: nothing is lost). */
void blk__sched_pump(blk__sched *s);

/* Moves up to max finished tasks' lids into lids (unpinning their blocks),
 * waiting up to timeout_ns for one (see blk__pool_collect); ran[i] says
 * whether the task ran (0: its block could not be loaded). */
size_t blk__sched_collect(blk__sched *s, int *lids, int *ran, size_t max, long timeout_ns);

#endif
