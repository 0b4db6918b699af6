/*
 * reduce_run.h: the reduction driver as blk's own drivers use it (the array
 * collectives, all_to_all): with a name for messages, a say over which
 * rounds need the block in memory, and codes reported as they are.
 */
#ifndef BLK_REDUCE_RUN_H
#define BLK_REDUCE_RUN_H

#include "blk/reduce.h"
#include "master/master_state.h"

typedef struct blk__driver {
  const char *name; /* the operation, in messages: "reduce", "all_to_all", ... */
  /* needs_block(round, user) == 0 runs that round's callback without
   * loading the block (its block argument is then NULL); NULL: every round
   * needs it. all_to_all's forwarding rounds touch only messages. */
  int (*needs_block)(int round, void *user);
  /* The callback is blk's own: a failing code is reported as it is, with
   * the detail blk gave it, rather than as BLK_ECALLBACK. */
  int own_codes;
  /* Where a message of `bytes` from gid src on another rank for (block,
   * gid) in `round` may be received in place: memory of the block's that
   * nothing reads or writes until the round's callback runs, which then
   * finds its in queue referring to it; NULL: into blk's own storage. Asked
   * only in-core, on the driver's thread while no callback of the block
   * runs, for the round the block waits in, and only when the message is
   * the block's only one from that partner; NULL (the function) never. */
  void *(*place)(void *block, int gid, int src, int round, size_t bytes, void *user);
  /* place may also be asked for a round after the one the block waits in,
   * and while a callback of the block runs or waits to run (block is then
   * NULL): it must answer without the block, and give memory no callback
   * before `round` reads or writes. A message that comes early then lands
   * where it is read, not in blk's storage to be copied from. */
  int place_ahead;
  /* The rounds write memory the block sent from by reference before (a
   * tree's array comes back down where it went up from): a block whose
   * reference to another rank is still being sent runs no callback, and
   * has nothing placed in its memory, until that send is complete (MPI
   * must not see a send buffer written before then). 0: the callbacks
   * never write what they sent. */
  int hold_for_refs;
  /* With hold_for_refs, 0: every reference holds every round. n > 0: the
   * rounds are two phases, and only references sent before round n hold,
   * only the rounds after it (SPLIT: the gather writes where the scatter
   * sent from; the scatter writes only what it keeps, the gather only what
   * it has not sent). */
  int hold_split;
  /* A round whose inputs all came empty or landed in place (place) and
   * that sends nothing leaves its callback nothing to do: the driver moves
   * the block on without running it (a kilobyte's all-gather or broadcast
   * then runs one callback round fewer on the receiving side). 0: every
   * round's callback runs. */
  int done_when_placed;
} blk__driver;

/* blk_reduce, run as d says. */
int blk__reduce_run(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
                    void *user, const blk__driver *d);

/* For a driver whose setup failed on this rank before the reduction (code,
 * detail in blk_last_error()): takes part in the operation the other ranks
 * run, aborting it, and returns the agreed code. */
int blk__reduce_abort(blk_master *m, int code, const char *name);

#endif
