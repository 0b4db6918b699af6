/*
 * master_state.h: what a master is made of, for the collectives built on
 * it (collectives/): its communicator and running operation, its threads,
 * its blocks and the budget that keeps them in memory, spare message
 * storage, and the settings it was made with.
 *
 * Each part has its own interface (runtime/); the master only holds them
 * together. Every collective call is one operation (runtime/operation.h):
 * it gets the next epoch, its messages carry it, and it ends with the
 * agreement that makes a failure on any rank every rank's.
 *
 * The driver thread (the one that created the master) only.
 */
#ifndef BLK_MASTER_STATE_H
#define BLK_MASTER_STATE_H

#include "base/buffer_cache.h"
#include "base/context.h"
#include "base/pool.h"
#include "base/tuning.h"
#include "base/values.h"
#include "blk/master.h"
#include "runtime/block_table.h"
#include "runtime/budget.h"
#include "runtime/comm.h"
#include "runtime/operation.h"
#include "runtime/trace_file.h"

struct blk_master {
  blk__comm *comm;
  blk__op op; /* the running (or last) collective operation */
  blk__pool *pool;
  blk__buffer_cache *cache; /* spare message storage, shared with comm */
  blk__table table;         /* this rank's blocks */
  blk__budget budget;       /* which of them are in memory */
  blk_master_config cfg;    /* in this blk's layout (version) */
  blk__context context;     /* how its calls log and stop (context.h) */
  int exchanges;            /* exchanges so far: a foreach callback's round */
  blk__values results;      /* of the last exchange */
  blk__tuning *tuning;      /* blk-tune's measurements (cfg.tuning); NULL: none */
  int any_budget;           /* some rank has a memory budget (alike on every rank) */
  blk__trace_file *trace;   /* where its timeline goes (cfg.trace); NULL: not traced */
};

/* Runs a master's call with its context (context.h) as the calling
 * thread's: BLK__ENTER at the top (after m was checked), BLK__LEAVE before
 * every return. */
#define BLK__ENTER(m) const blk__context *blk__outer = blk__context_enter(&(m)->context)
#define BLK__LEAVE() blk__context_leave(blk__outer)

#endif
