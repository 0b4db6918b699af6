/*
 * test_all_to_all: every block sends to a pattern of destinations (some
 * none, some all), and every receiver checks, against the rule that made
 * them, exactly which sources reached it, in ascending order, with which
 * bytes. Over block counts 1..64 (primes and non-powers of k), k = 2, 3, 4,
 * 8 and both orders.
 *
 *   test_all_to_all --threads T [--big]
 * --big makes some messages larger than the size that rides in a header.
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct ctx {
  int nblocks, big, sent_total;
} ctx;

/* Whether src sends to dst, and how many bytes. */
static size_t message_size(int src, int dst, int nblocks, int big) {
  if (src % 5 == 4) return 0;                     /* some send nothing */
  if (src % 5 == 3) return (size_t)(1 + dst % 3); /* some send to all */
  if ((src * 7 + dst * 3) % 4 != 0) return 0;     /* others to a few */
  if (big && (src + dst) % 3 == 0) return 20000 + (size_t)dst;
  return (size_t)(4 + (src + dst + nblocks) % 29);
}

static unsigned char byte_of(int src, int dst, size_t j) {
  return (unsigned char)(src * 13 + dst * 7 + (int)j);
}

static int create(void **out, int gid, void *user) {
  (void)user;
  int *b = malloc(sizeof *b);
  if (!b) return BLK_ENOMEM;
  *b = gid;
  *out = b;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

/* Out-of-core: the block is its gid. */
static int save(blk_buffer *out, const void *b, int gid, void *user) {
  (void)user;
  CHECK_EQ_INT(*(const int *)b, gid);
  return blk_buffer_write_i32(out, *(const int *)b);
}

static int load(void *b, blk_buffer *in, int gid, void *user) {
  (void)user;
  blk_buffer_read_i32(in, (int32_t *)b);
  CHECK_EQ_INT(*(int *)b, gid);
  return blk_buffer_error(in);
}

static int send(void *block, blk_proxy *p, void *user) {
  ctx *c = user;
  int src = *(int *)block;
  CHECK_EQ_INT(blk_proxy_in_count(p), 0);
  /* Destinations in a scrambled order: the receiver must still see sources sorted. */
  for (int t = 0; t < c->nblocks; t++) {
    int dst = (t * 5 + src) % c->nblocks;
    size_t n = message_size(src, dst, c->nblocks, c->big);
    if (!n) continue;
    /* Two enqueues to the same destination append to one message. */
    size_t half = n / 2;
    unsigned char *msg = malloc(n);
    CHECK(msg);
    for (size_t j = 0; j < n; j++) msg[j] = byte_of(src, dst, j);
    CHECK_OK(blk_proxy_enqueue_gid(p, dst, msg, half));
    CHECK_OK(blk_proxy_enqueue_gid(p, dst, msg + half, n - half));
    free(msg);
  }
  return 0;
}

static int receive(void *block, blk_proxy *p, void *user) {
  ctx *c = user;
  int dst = *(int *)block;
  CHECK_EQ_INT(blk_proxy_out_count(p), 0);
  int i = 0;
  for (int src = 0; src < c->nblocks; src++) {
    size_t n = message_size(src, dst, c->nblocks, c->big);
    if (!n) continue;
    CHECK_MSG(i < blk_proxy_in_count(p), "gid %d: only %d sources arrived, gid %d missing", dst,
              blk_proxy_in_count(p), src);
    CHECK_EQ_INT(blk_proxy_in_gid(p, i), src);
    CHECK_EQ_INT(blk_proxy_incoming_remaining(p, i), n);
    blk_buffer *in = blk_proxy_incoming(p, i);
    for (size_t j = 0; j < n; j++)
      CHECK_MSG(in->data[j] == byte_of(src, dst, j), "gid %d from %d: byte %zu differs", dst, src,
                j);
    i++;
  }
  CHECK_EQ_INT(blk_proxy_in_count(p), i);
  return 0;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int threads = 1, big = 0, mem_blocks = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--big"))
      big = 1;
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      mem_blocks = atoi(argv[++i]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  static const int counts[] = {1, 2, 7, 9, 12, 13, 44, 64}; /* 13: a prime above every k */
  static const int radices[] = {2, 3, 4, 8};
  int runs = 0;
  for (int ci = 0; ci < 8; ci++) {
    ctx c = {counts[ci], big, 0};
    blk_assigner *a;
    blk_master *m;
    CHECK_OK(blk_assigner_create_round_robin(&a, size, c.nblocks));
    blk_master_config mc = BLK_MASTER_CONFIG_INIT;
    mc.threads = threads;
    mc.destroy = destroy;
    mc.create = create;
    mc.save = save;
    mc.load = load;
    mc.mem_blocks = mem_blocks;
    CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
    int n = blk_assigner_local_count(a, rank);
    int gids[64];
    blk_assigner_local_gids(a, rank, gids, 64);
    for (int i = 0; i < n; i++) {
      void *b;
      CHECK_OK(create(&b, gids[i], NULL));
      CHECK_OK(blk_master_add(m, gids[i], b, NULL, 0));
    }
    for (int ki = 0; ki < 4; ki++)
      for (int contiguous = 0; contiguous <= 1; contiguous++) {
        CHECK_OK(blk_all_to_all(m, a, radices[ki], contiguous, send, receive, &c));
        runs++;
      }
    blk_log_set_level(BLK_LOG_NONE);
    CHECK_ERR(blk_all_to_all(m, a, 1, 1, send, receive, &c), BLK_EINVAL, "k = 1");
    blk_log_set_level(BLK_LOG_WARN);
    check_budget(m, mem_blocks);
    blk_master_destroy(m);
    blk_assigner_destroy(a);
  }
  if (rank == 0)
    printf("test_all_to_all: ok (%d runs over 1..64 blocks, %d ranks, %d threads%s)\n", runs, size,
           threads, big ? ", big messages" : "");
  MPI_Finalize();
  return 0;
}
