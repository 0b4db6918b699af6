/*
 * trace_file.h: the file a traced master's ranks write their timelines to.
 *
 * One file for the whole job, {"traceEvents":[...]} with every rank's
 * events (trace.h), which Perfetto and chrome://tracing open as they are.
 * Rank 0 names it (its config's trace, or its BLK_TRACE) and creates it when
 * the master is created, so a path that cannot be written fails the create
 * on every rank; at destroy each rank's events come to rank 0 in pieces of
 * at most 256 MiB a round, which writes each where it belongs. Collective;
 * driver thread.
 */
#ifndef BLK_TRACE_FILE_H
#define BLK_TRACE_FILE_H

#include <mpi.h>

#include "base/trace.h"

typedef struct blk__trace_file blk__trace_file;

/* Rank 0 decides whether the job traces: path (its own) or, if NULL, its
 * BLK_TRACE; empty or unset: *out is NULL on every rank. Otherwise rank 0
 * creates (truncates) the file, and every rank gets a trace file and a
 * trace of its own, whose times count from now. Collective over comm. On
 * failure *out is NULL, the detail is set on the rank that failed (BLK_EIO
 * on rank 0 for a file it cannot create; BLK_ENOMEM), and the caller agrees
 * it with the other ranks. */
int blk__trace_file_open(blk__trace_file **out, MPI_Comm comm, const char *path);

/* The trace the ranks record into (trace.h). */
blk__trace *blk__trace_file_trace(blk__trace_file *f);

/* Writes every rank's trace into the file, closes it and frees f (and its
 * trace). No thread may record meanwhile. Collective over comm (of the same
 * ranks as open's); all ranks trace or none do. What fails is logged as a
 * warning where it happens, and the job goes on (a timeline is not its
 * result): a rank whose events find no memory is left out of a file that
 * is still whole, a write that fails leaves the file cut short, and if
 * rank 0 has no memory to gather the file is removed. */
void blk__trace_file_close(blk__trace_file *f, MPI_Comm comm);

/* Frees f (and its trace) without writing: for a create that failed.
 * Rank 0 removes the file it created, so a failed create leaves none. Not
 * collective. NULL does nothing. */
void blk__trace_file_discard(blk__trace_file *f);

#endif
