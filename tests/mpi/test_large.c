/*
 * test_large: a message over 2 GiB (more than an int can count) through a
 * neighbour exchange, checked word by word. Two blocks on a line: on two
 * ranks the message crosses MPI in pieces; on one rank it is handed over.
 *
 *   test_large [--gib G]   (default 2.25)
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static size_t nbytes;

static uint64_t word(uint64_t i) {
  return i * 0x9E3779B97F4A7C15ull ^ (i >> 7);
}

static int send_big(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  if (blk_proxy_gid(p) != 0) return 0;
  blk_buffer *out = blk_proxy_outgoing(p, 0);
  uint64_t *data = blk_buffer_append(out, nbytes);
  CHECK(data);
  for (size_t i = 0; i < nbytes / 8; i++) data[i] = word(i);
  return 0;
}

static int receive_big(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  if (blk_proxy_gid(p) != 1) return 0;
  CHECK_EQ_INT(blk_proxy_incoming_remaining(p, 0), nbytes);
  const uint64_t *data = blk_buffer_read_view(blk_proxy_incoming(p, 0), nbytes);
  CHECK(data);
  for (size_t i = 0; i < nbytes / 8; i++)
    if (data[i] != word(i)) CHECK_MSG(0, "word %zu of %zu differs", i, nbytes / 8);
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  double gib = 2.25;
  if (argc == 3 && !strcmp(argv[1], "--gib")) gib = atof(argv[2]);
  nbytes = (size_t)(gib * 1024 * 1024 * 1024) / 8 * 8;
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blk_bounds dom;
  int64_t lo[1] = {0}, hi[1] = {1};
  CHECK_OK(blk_bounds_set(&dom, 1, lo, hi));
  blk_decomposer *d;
  blk_assigner *a;
  blk_master *m;
  CHECK_OK(blk_decomposer_create(&d, &dom, 2, NULL));
  CHECK_OK(blk_assigner_create_contiguous(&a, size, 2));
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, NULL));
  int gids[2], n = blk_assigner_local_gids(a, rank, gids, 2);
  for (int i = 0; i < n; i++) {
    blk_link *links;
    int nlinks;
    CHECK_OK(blk_decomposer_links(d, a, gids[i], &links, &nlinks));
    CHECK_OK(blk_master_add(m, gids[i], NULL, links, nlinks));
    blk_links_free(links);
  }
  double t0 = MPI_Wtime();
  CHECK_OK(blk_master_foreach(m, send_big, NULL));
  CHECK_OK(blk_master_exchange(m));
  double t1 = MPI_Wtime();
  CHECK_OK(blk_master_foreach(m, receive_big, NULL));
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  if (rank == 0)
    printf("test_large: ok (%zu bytes over %d ranks, fill + exchange %.2f s)\n", nbytes, size,
           t1 - t0);
  MPI_Finalize();
  return 0;
}
