/* consumer: a program built against an installed blk. It checks that the
 * header and the library it runs with are the same version, then runs one
 * exchange around a periodic ring of blocks out-of-core (one block in memory,
 * the others zstd-compressed in memory), so that it needs every part of
 * libblk and every library behind it (MPI, pthreads, zstd, libm) at link time
 * and at run time, and checks what arrived. */
#include <blk/blk.h>
#include <stdio.h>
#include <stdlib.h>

enum { NBLOCKS = 5 };

typedef struct ring_block {
  int gid, left, right; /* left and right: the gids received, -1 before */
} ring_block;

static void fail(const char *what, int rc) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, blk_strerror(rc), blk_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static int create_block(void **out, int gid, void *user) {
  (void)user;
  ring_block *b = malloc(sizeof *b);
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  b->left = b->right = -1;
  *out = b;
  return 0;
}

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  free(block);
}

static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  return blk_buffer_write(out, block, sizeof(ring_block));
}

static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  return blk_buffer_read(in, block, sizeof(ring_block));
}

/* Sends the block's gid to both neighbours. */
static int send_gid(void *block, blk_proxy *p, void *user) {
  (void)user;
  const ring_block *b = block;
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    int rc = blk_proxy_enqueue(p, i, &b->gid, sizeof b->gid);
    if (rc) return rc;
  }
  return 0;
}

/* Keeps the gids that arrived; 1 if they are not the neighbours'. */
static int receive_gids(void *block, blk_proxy *p, void *user) {
  (void)user;
  ring_block *b = block;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    int gid = -1;
    blk_proxy_dequeue(p, i, &gid, sizeof gid);
    if (gid == (b->gid + NBLOCKS - 1) % NBLOCKS) b->left = gid;
    if (gid == (b->gid + 1) % NBLOCKS) b->right = gid;
  }
  return b->left >= 0 && b->right >= 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (blk_version() != BLK_VERSION_NUMBER) {
    fprintf(stderr, "consumer: header %d, library %d\n", BLK_VERSION_NUMBER, blk_version());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  blk_master_config cfg = BLK_MASTER_CONFIG_INIT;
  cfg.create = create_block;
  cfg.destroy = destroy_block;
  cfg.save = save_block;
  cfg.load = load_block;
  cfg.mem_blocks = 1;
  cfg.spill_in_memory = 1;
  blk_master *m = NULL;
  int rc = blk_master_create(&m, MPI_COMM_WORLD, &cfg);
  if (rc) fail("create", rc);

  const int64_t lo[1] = {0}, hi[1] = {NBLOCKS * 10 - 1};
  blk_bounds domain;
  blk_decomposer_config dcfg = BLK_DECOMPOSER_CONFIG_INIT;
  dcfg.wrap[0] = 1;
  blk_decomposer *d = NULL;
  blk_assigner *a = NULL;
  if ((rc = blk_bounds_set(&domain, 1, lo, hi))) fail("bounds", rc);
  if ((rc = blk_decomposer_create(&d, &domain, NBLOCKS, &dcfg))) fail("decomposer", rc);
  if ((rc = blk_assigner_create_contiguous(&a, size, NBLOCKS))) fail("assigner", rc);
  if ((rc = blk_master_decompose(m, d, a))) fail("decompose", rc);
  if ((rc = blk_master_foreach(m, send_gid, NULL))) fail("send", rc);
  if ((rc = blk_master_exchange(m))) fail("exchange", rc);
  if ((rc = blk_master_foreach(m, receive_gids, NULL))) fail("receive", rc);

  blk_master_stats stats;
  blk_master_stats_get(m, &stats);
  if (blk_master_local_count(m) > 1 && stats.evictions == 0) {
    fprintf(stderr, "consumer: %d blocks and one in memory, but none went out\n",
            blk_master_local_count(m));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  printf("consumer: blk %s on rank %d of %d, %d blocks: ok\n", blk_version_string(),
         blk_master_rank(m), blk_master_size(m), blk_master_local_count(m));
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  blk_master_destroy(m);
  MPI_Finalize();
  return 0;
}
