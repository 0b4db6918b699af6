/*
 * schedule.h: running block tasks under the memory budget, on the driver or
 * on the pool.
 *
 * An operation (foreach, a reduction) marks blocks ready; the scheduler runs
 * them, preferring blocks already in memory. The next ready blocks that are
 * out are read and decoded ahead on the budget's I/O threads while the
 * callbacks run; a block is made resident on the driver (evicting an idle
 * block: the one the operation needs furthest in the future, which it says
 * through future) just before it runs. A load waits until the operation has
 * taken in the tasks the driver ran, so its choice of what to evict knows
 * which blocks are done. A block that is running is pinned and never
 * evicted. Once its blocks are done, the operation drains the writes still
 * under way (blk__sched_drain), so a failed one is its own.
 *
 * Where a task runs (threads > 1): handing a task to a worker costs a
 * wake-up each way (tens of microseconds on a virtual machine), far more
 * than a short callback. So the driver runs a task itself unless handing it
 * over pays: the scheduler keeps the measured run time of the operation's
 * callbacks (averages per kind of callback and round, kept between
 * operations), on the driver (c) and on the workers (c': two callbacks side
 * by side share the memory bandwidth, and a worker starts with cold caches,
 * so a copy or a sum of large arrays can take longer there), and asks the
 * pool what a hand-off costs (h), and hands a task to a worker when
 *   - nothing is known yet about its kind and round (the first ones), or
 *   - the ready tasks run in parallel save more than the hand-off costs:
 *     h + ceil(n / T) c' <= (1 - margin) n c for n ready tasks on T
 *     workers, or
 *   - it is long on its own (c >= 16 h) and about as fast on a worker: the
 *     hand-off is small next to it, and the driver stays free to move
 *     messages while it runs.
 * Once the driver is to run a task of a round, it runs that round's other
 * ready tasks too without asking again, so the policy costs a lookup per
 * round, not per task.
 * A callback the driver runs itself holds up this rank's messages until it
 * returns; one that waits for something only another rank's callback can
 * do (outside blk's messages) must therefore not be short the rest of the
 * time (it is measured long once it waits, and runs on a worker from then
 * on).
 *
 * In core every task handed over goes to the pool at once; a reduction's
 * (depth_first) task of a later round than those queued starts before them
 * (blk__pool_submit_first), so a group's receiver runs as soon as its
 * senders have, and gives their messages' storage back for the next group.
 *
 * A task that does not need its block (all_to_all's forwarding rounds) is
 * run without loading it.
 *
 * Out-of-core, a load that would evict a block needed sooner than the one
 * it brings in waits instead while that block may soon be ready without
 * it: while a callback runs on the pool (it frees a block that is done),
 * or, for a few loads' time (BLK__SCHED_HOLD_LOADS), while the victim
 * waits for a message from another rank. Without the second, a rank whose
 * partner rank was a little behind loaded the next group's blocks over the
 * group waiting for the partner's messages, and loaded those again a
 * moment later (a swap of 2 x 64 blocks with 8 in memory: 13-17 extra
 * loads a rank). The wait is bounded, and shortened when it ends without
 * the message, because the other rank may itself wait for a block of this
 * one that only the load would run.
 *
 * Driver thread only. Cost per task: a table lookup and, when handed over,
 * one pool hand-off; out-of-core, at most one eviction and one load.
 */
#ifndef BLK_SCHEDULE_H
#define BLK_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "base/pool.h"
#include "runtime/budget.h"
#include "runtime/operation.h"

/* The longest a load waits for another rank's message to a block it would
 * evict (see the top): BLK__SCHED_HOLD_LOADS times what reading a record
 * back has cost on average (blk__budget_load_ns; 0 before the first read:
 * no wait), and never more than BLK__SCHED_HOLD_NS. A wait that ends with
 * the message saves loading the block again, and while a rank waits, a rank
 * that shares its cores and is behind gets them. So it may last a few loads:
 * in a swap of 2 x 64 blocks of 4 MiB with 8 in memory (a load about 1 ms),
 * where the ranks drift up to 10-20 ms apart, a wait of 2 or 5 ms saved a
 * few of the extra loads, and 20 ms all of them (docs/out-of-core.md). A
 * wait that runs out costs this much at most, and halves the next (down to
 * 2^-BLK__SCHED_HOLD_HALVINGS of the limit); one that ends in time doubles
 * it back. The small blocks of a test wait microseconds, not milliseconds. */
#define BLK__SCHED_HOLD_LOADS 16
#define BLK__SCHED_HOLD_NS 20000000
#define BLK__SCHED_HOLD_HALVINGS 6

/* A load's wait for another rank's message (see the top), kept between a
 * master's operations. A wait begins when a load is first held; once it
 * has lasted its limit, loads go ahead without waiting again until a block
 * in memory runs (blk__hold_over). */
typedef struct blk__hold {
  int64_t since; /* when the wait under way began (0: none) */
  int shift;     /* the limit is halved this many times: waits ran out lately */
  int expired;   /* the wait under way lasted its limit: loads go ahead */
} blk__hold;

void blk__hold_init(blk__hold *h);
/* Whether a load held at now_ns (blk__now_ns) keeps waiting, with limit_ns
 * the longest wait before halvings (<= 0: no wait, and nothing changes);
 * the first call of a wait begins it. */
int blk__hold_wait(blk__hold *h, int64_t now_ns, int64_t limit_ns);
/* A block in memory ran: the wait under way, if any, is over. */
void blk__hold_over(blk__hold *h);

/* What a master's scheduler keeps from one operation to the next: the
 * loads' wait for other ranks, and depth_first's timing of the driver's
 * runs (started afresh, an operation of one short callback timed every
 * run: two clock reads, 3 % of a 1 KiB broadcast's profile). */
typedef struct blk__sched_kept {
  blk__hold hold;
  int64_t depth_ns;    /* depth_first: the driver's last timed run, or half the one before */
  unsigned depth_skip; /* depth_first: runs since, while they were short */
} blk__sched_kept;

struct blk__sched;
typedef struct blk__task {
  struct blk__sched *s;
  int lid;
  int64_t ran_ns; /* how long its last run took, measured on the worker */
} blk__task;

/* What kind of callback an operation runs (its function), for the
 * estimates; any function pointer, never called. */
typedef void (*blk__task_kind)(void);

struct blk__task_costs;

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
  int *round;            /* per lid: the round its task runs (the estimates' key) */
  int *failed;           /* lids whose block could not be loaded: done, not run */
  int nfailed;
  int *done; /* lids the driver ran itself, not yet collected */
  int ndone;
  int running, limit; /* tasks on the pool; its threads */
  /* A reduction's order (set by its driver): the ready block in the latest
   * round first, and pump returns after each long task the driver ran, so
   * its messages go out and the block that needs them next runs while
   * they are still in the cache, instead of every ready block running
   * before any message moves. */
  int depth_first;
  int top_round;  /* depth_first: at least the latest round in ready, a hint */
  int back_round; /* depth_first: the round of the last task queued behind the others */
  int yield;      /* depth_first: the driver just ran a long task */
  blk__task_kind kind;
  struct blk__task_costs *costs; /* the estimates, kept by the operation */
  /* Told of every load, eviction or hand-off that failed, on the driver
   * right when it happens (blk_last_error() says why); the operation goes
   * on. lid is the block that was to run (an eviction's victim is named in
   * the detail). NULL: nobody is told. */
  void (*on_error)(void *ctx, int lid, int code);
  void *on_error_ctx;
  /* Out-of-core: when a block that is not ready is needed next (smaller
   * sooner; UINT64_MAX: not again in this operation), for the budget's
   * choice of what to evict. NULL: not again (a foreach). */
  uint64_t (*future)(void *ctx, int lid);
  void *future_ctx;
  /* Out-of-core: whether lid's block waits for a message from another
   * rank (future_ctx is its context). A load that would evict such a
   * block, needed sooner than the one loaded, waits a while for the
   * message instead (see pump). NULL: never. */
  int (*waits_elsewhere)(void *ctx, int lid);
  blk__sched_kept *kept; /* the master's (or own, without memory for it) */
  blk__sched_kept own;
} blk__sched;

/* A scheduler for the budget's blocks on pool, for one operation of o
 * (whose kept memory holds its arrays and the estimates). run(args[lid]) is
 * a block's task, of the given kind; prepare (may be NULL) runs on the
 * driver just before it. BLK_ENOMEM. */
int blk__sched_init(blk__sched *s, blk__budget *budget, blk__pool *pool, blk__op *o,
                    blk__task_kind kind, void (*run)(void *arg), int (*prepare)(void *arg),
                    void **args);
void blk__sched_free(blk__sched *s);

/* Waits for the out-of-core writes under way; a failed one is told
 * through on_error. An operation calls it once its blocks are done, so
 * what failed is its own. */
void blk__sched_drain(blk__sched *s);

/* Marks lid ready to run (once) in the given round; needs_block says
 * whether to load it. */
void blk__sched_ready(blk__sched *s, int lid, int round, int needs_block);

/* Runs or starts as many ready tasks as workers and memory allow (see the
 * top), and starts reading ahead. A block that cannot be loaded (a corrupt
 * record, no memory), prepared or handed to the pool is not run: on_error
 * is told, and the lid comes back from collect with ran = 0, so a
 * collective operation still completes on every rank. A failed eviction
 * (a save, or a write behind) is told too, but the block runs (the bytes
 * that could not be written stay in memory: nothing is lost). */
void blk__sched_pump(blk__sched *s);

/* Moves up to max finished tasks' lids into lids (unpinning their blocks),
 * waiting up to timeout_ns for one on the pool (see blk__pool_collect) when
 * none has finished; ran[i] says whether the task ran (0: its block could
 * not be loaded). */
size_t blk__sched_collect(blk__sched *s, int *lids, int *ran, size_t max, long timeout_ns);

/* Tasks on the pool, started and not yet collected. */
static inline int blk__sched_running(const blk__sched *s) {
  return s->running;
}

/* The policy above, for n ready tasks whose callbacks are expected to take
 * here_ns each on the driver and pool_ns on a worker (< 0: unknown, taken
 * as the other), on a pool of threads workers whose hand-off costs
 * handoff_ns: 1 to hand the next one to a worker, 0 to run it on the
 * driver. */
int blk__sched_hand_over(int64_t here_ns, int64_t pool_ns, int n, int threads, int64_t handoff_ns);

/* For tests: 0 lets the policy decide (the default); 1 hands every task to
 * the pool, -1 runs every task on the driver (threads > 1 only). Set on the
 * driver thread between operations. */
void blk__sched_force(int mode);

#endif
