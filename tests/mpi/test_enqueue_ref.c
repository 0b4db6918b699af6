/*
 * test_enqueue_ref: where a collective cannot carry a reference, an enqueue
 * by reference copies. In a foreach (delivered by the next exchange) and in
 * a reduction (delivered in the next round) the callback enqueues two
 * messages per out queue by blk_proxy_enqueue_ref (the second makes the
 * queue copy the first: a queue holds at most one reference), from a buffer
 * on its stack, and scribbles over the buffer before it returns; every
 * receiver checks, against the rule that made them, that it got the bytes as
 * they were at the enqueue. A sanitizer build also sees any read of the dead
 * stack frame.
 *
 *   test_enqueue_ref --blocks N --threads T [--mem-blocks M]
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct block {
  int gid;
  int64_t arrivals; /* messages checked */
} block;

#include "flat_block.h"

/* The two messages from src to dst in round r: what the rule says. */
static void message(int64_t v[2][3], int src, int dst, int r) {
  v[0][0] = src, v[0][1] = dst, v[0][2] = r;
  v[1][0] = 1000 + src, v[1][1] = 1000 + dst, v[1][2] = 1000 + r;
}

/* Enqueues both messages to every out queue by reference, then scribbles. */
static int send_refs(blk_proxy *p) {
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    int64_t v[2][3];
    message(v, blk_proxy_gid(p), blk_proxy_out_gid(p, i), blk_proxy_round(p));
    int rc = blk_proxy_enqueue_ref(p, i, v[0], sizeof v[0]);
    if (!rc) rc = blk_proxy_enqueue_ref(p, i, v[1], sizeof v[1]);
    memset(v, 0xa5, sizeof v); /* the queue must hold a copy by now */
    if (rc) return rc;
  }
  return 0;
}

/* Checks every in queue against the messages of round r. */
static void receive(block *b, blk_proxy *p, int r) {
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    int src = blk_proxy_in_gid(p, i);
    int64_t want[2][3], got[2][3];
    message(want, src, b->gid, r);
    CHECK_MSG(blk_proxy_incoming_remaining(p, i) == sizeof got, "gid %d from %d: %zu bytes", b->gid,
              src, blk_proxy_incoming_remaining(p, i));
    blk_proxy_dequeue(p, i, got, sizeof got);
    CHECK_MSG(!memcmp(got, want, sizeof got), "gid %d from %d round %d: bytes differ", b->gid, src,
              r);
    b->arrivals++;
  }
}

static int foreach_send(void *data, blk_proxy *p, void *user) {
  (void)data;
  (void)user;
  return send_refs(p);
}

static int foreach_receive(void *data, blk_proxy *p, void *user) {
  (void)user;
  receive(data, p, 0); /* a foreach is round 0 */
  return 0;
}

static int reduce_step(void *data, blk_proxy *p, void *user) {
  (void)user;
  if (blk_proxy_round(p) > 0) receive(data, p, blk_proxy_round(p) - 1);
  return send_refs(p);
}

static int count_arrivals(void *data, blk_proxy *p, void *user) {
  block *b = data;
  int64_t *total = user; /* blocks of this rank run one at a time: threads = 1 */
  (void)p;
  *total += b->arrivals;
  b->arrivals = 0;
  return 0;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int nblocks = 7, threads = 1, mem_blocks = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
      nblocks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      mem_blocks = atoi(argv[++i]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  blk_bounds dom;
  int64_t lo[1] = {0}, hi[1] = {999};
  CHECK_OK(blk_bounds_set(&dom, 1, lo, hi));
  blk_decomposer *d;
  blk_assigner *a;
  blk_master *m;
  blk_decomposer_config dc = BLK_DECOMPOSER_CONFIG_INIT;
  dc.wrap[0] = 1; /* every block has two neighbours (one, itself twice, alone) */
  CHECK_OK(blk_decomposer_create(&d, &dom, nblocks, &dc));
  CHECK_OK(blk_assigner_create_round_robin(&a, size, nblocks));
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_OK(blk_master_decompose(m, d, a));

  /* foreach, then the exchange delivers. */
  CHECK_OK(blk_master_foreach(m, foreach_send, NULL));
  CHECK_OK(blk_master_exchange(m));
  CHECK_OK(blk_master_foreach(m, foreach_receive, NULL));

  /* A reduction: each round's messages are checked in the next. */
  static const int radices[] = {2, 3};
  for (int ki = 0; ki < 2; ki++)
    for (int kind = 0; kind < 2; kind++) {
      blk_partners *p;
      CHECK_OK(blk_partners_create(&p, kind ? BLK_SWAP : BLK_MERGE, 1, &nblocks, radices[ki], 1));
      CHECK_OK(blk_reduce(m, a, p, reduce_step, NULL));
      blk_partners_destroy(p);
    }

  int64_t mine = 0, total = 0;
  if (threads == 1) {
    CHECK_OK(blk_master_foreach(m, count_arrivals, &mine));
    MPI_Allreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK_MSG(total > 0, "no message arrived (%lld)", (long long)total);
  }
  if (rank == 0)
    printf("test_enqueue_ref: %d blocks, %d threads, %d in memory: %lld messages checked\n",
           nblocks, threads, mem_blocks, (long long)total);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  MPI_Finalize();
  return 0;
}
