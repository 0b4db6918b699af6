/*
 * polite_mpi.c: MPI's blocking collectives for the MPI tests, waiting
 * without spinning.
 *
 * MPICH (ch4:ucx) busy-polls while a rank waits in a blocking collective.
 * The suite runs 3 and 4 ranks on 2 cores, so a rank waiting in the tests'
 * own MPI_Allgather or MPI_Barrier holds a core the rank it waits for needs,
 * until the scheduler takes it away: each such wait cost a scheduler slice
 * (the fault sweep at 3 ranks, about 470 operations each checked by two
 * MPI_Allgather and an MPI_Bcast: 7 s; with the waits below, 0.23 s).
 *
 * Linked into every MPI test executable, these definitions take the place
 * of MPICH's (through the MPI profiling interface, PMPI_): each starts the
 * nonblocking collective and tests it, yielding the processor between tests
 * and, after a while, sleeping a little. The results and the order of
 * collectives on a communicator are MPI's own; only the wait differs. blk's
 * own waits do the same (base/backoff.h), and the benchmarks do not link
 * this: they time MPI as MPI is.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <mpi.h>
#include <sched.h>
#include <time.h>

/* Polls before the first sleep: a partner that is running answers within a
 * few yields. */
#define YIELDS_BEFORE_SLEEP 64

static int polite_wait(int rc, MPI_Request *req) {
  if (rc != MPI_SUCCESS) return rc;
  for (int polls = 0;; polls++) {
    int done = 0;
    rc = PMPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    if (polls < YIELDS_BEFORE_SLEEP) {
      sched_yield();
    } else {
      struct timespec pause = {0, 20000};
      nanosleep(&pause, NULL);
    }
  }
}

int MPI_Barrier(MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Ibarrier(comm, &req), &req);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Ibcast(buf, count, type, root, comm, &req), &req);
}

int MPI_Allreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Iallreduce(in, out, count, type, op, comm, &req), &req);
}

int MPI_Reduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Ireduce(in, out, count, type, op, root, comm, &req), &req);
}

int MPI_Scan(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Iscan(in, out, count, type, op, comm, &req), &req);
}

int MPI_Exscan(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Iexscan(in, out, count, type, op, comm, &req), &req);
}

int MPI_Gather(const void *in, int incount, MPI_Datatype intype, void *out, int outcount,
               MPI_Datatype outtype, int root, MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Igather(in, incount, intype, out, outcount, outtype, root, comm, &req),
                     &req);
}

int MPI_Gatherv(const void *in, int incount, MPI_Datatype intype, void *out, const int outcounts[],
                const int displs[], MPI_Datatype outtype, int root, MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(
      PMPI_Igatherv(in, incount, intype, out, outcounts, displs, outtype, root, comm, &req), &req);
}

int MPI_Allgather(const void *in, int incount, MPI_Datatype intype, void *out, int outcount,
                  MPI_Datatype outtype, MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Iallgather(in, incount, intype, out, outcount, outtype, comm, &req),
                     &req);
}

int MPI_Allgatherv(const void *in, int incount, MPI_Datatype intype, void *out,
                   const int outcounts[], const int displs[], MPI_Datatype outtype, MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(
      PMPI_Iallgatherv(in, incount, intype, out, outcounts, displs, outtype, comm, &req), &req);
}

int MPI_Alltoall(const void *in, int incount, MPI_Datatype intype, void *out, int outcount,
                 MPI_Datatype outtype, MPI_Comm comm) {
  MPI_Request req;
  return polite_wait(PMPI_Ialltoall(in, incount, intype, out, outcount, outtype, comm, &req), &req);
}
