/*
 * test_exchange: neighbour exchange and the value all-reduce, checked
 * against what every block can work out on its own.
 *
 * Every block sends, over every link and in every epoch, a message whose
 * size and bytes are a function of (sender, receiver, the sender's link
 * direction, epoch): some empty, some small, some above the size at which
 * payloads leave the header message. Every receiver recomputes what each of
 * its in-links must carry and compares byte by byte. Sums of bytes sent and
 * received, and sum/min/max of gids, go through the value all-reduce and are
 * compared with closed forms.
 *
 *   test_exchange --blocks N --threads T --dim D --wrap W --epochs E
 */
#include <blk/blk.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct opts {
  int blocks, threads, dim, wrap, epochs, mem_blocks;
} opts;

static int dir_code(const int *dir, int sign, int dim) {
  int code = 0;
  for (int a = dim - 1; a >= 0; a--) code = code * 3 + (sign * dir[a] + 1);
  return code;
}

static size_t message_size(int src, int dst, int code, int epoch) {
  if ((src * 7 + dst * 13 + code + epoch) % 5 == 0) return 0;
  if ((src + code + epoch) % 7 == 0) return 40000 + (size_t)(src % 3) * 1000; /* over eager */
  return 8 + (size_t)((src * 131 + code * 17 + epoch * 7) % 64);
}

static unsigned char message_byte(int src, int code, int epoch, size_t j) {
  return (unsigned char)(src * 31 + code * 7 + epoch * 3 + (int)j);
}

typedef struct block {
  int gid;
  int64_t sent, received;
} block;

typedef struct ctx {
  opts o;
  int epoch;
} ctx;

static int create(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b);
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  *out = b;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

/* Out-of-core: the whole block, field by field. */
static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)user;
  const block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  blk_buffer_write_i32(out, b->gid);
  blk_buffer_write_i64(out, b->sent);
  return blk_buffer_write_i64(out, b->received);
}

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  block *b = data;
  int32_t g = -1;
  blk_buffer_read_i32(in, &g);
  blk_buffer_read_i64(in, &b->sent);
  blk_buffer_read_i64(in, &b->received);
  CHECK_EQ_INT(g, gid);
  CHECK_EQ_INT(blk_buffer_remaining(in), 0);
  return blk_buffer_error(in);
}

static int send_all(void *data, blk_proxy *p, void *user) {
  ctx *c = user;
  block *b = data;
  CHECK_EQ_INT(b->gid, blk_proxy_gid(p));
  CHECK_EQ_INT(blk_proxy_in_count(p), blk_proxy_out_count(p));
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    const blk_link *l = blk_proxy_link(p, i);
    CHECK_EQ_INT(l->gid, blk_proxy_out_gid(p, i));
    int code = dir_code(l->dir, 1, c->o.dim);
    size_t n = message_size(b->gid, l->gid, code, c->epoch);
    unsigned char *msg = malloc(n ? n : 1);
    CHECK(msg);
    for (size_t j = 0; j < n; j++) msg[j] = message_byte(b->gid, code, c->epoch, j);
    CHECK_OK(blk_proxy_enqueue(p, i, msg, n));
    b->sent += (int64_t)n;
    free(msg);
  }
  return 0;
}

static int receive_all(void *data, blk_proxy *p, void *user) {
  ctx *c = user;
  block *b = data;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    const blk_link *l = blk_proxy_link(p, i);
    int src_code = dir_code(l->dir, -1, c->o.dim); /* the sender's direction */
    size_t want = message_size(l->gid, b->gid, src_code, c->epoch);
    CHECK_MSG(blk_proxy_incoming_remaining(p, i) == want,
              "gid %d link %d from gid %d epoch %d: %zu bytes, expected %zu", b->gid, i, l->gid,
              c->epoch, blk_proxy_incoming_remaining(p, i), want);
    for (size_t j = 0; j < want; j++) {
      unsigned char byte;
      blk_proxy_dequeue(p, i, &byte, 1);
      CHECK_MSG(byte == message_byte(l->gid, src_code, c->epoch, j),
                "gid %d link %d from gid %d epoch %d: byte %zu differs", b->gid, i, l->gid,
                c->epoch, j);
    }
    b->received += (int64_t)want;
  }
  CHECK_OK(blk_proxy_all_reduce_i64(p, b->sent, BLK_OP_SUM));
  CHECK_OK(blk_proxy_all_reduce_i64(p, b->received, BLK_OP_SUM));
  CHECK_OK(blk_proxy_all_reduce_f64(p, (double)b->gid, BLK_OP_SUM));
  CHECK_OK(blk_proxy_all_reduce_i64(p, b->gid, BLK_OP_MIN));
  CHECK_OK(blk_proxy_all_reduce_i64(p, b->gid, BLK_OP_MAX));
  return 0;
}

static int check_results(void *data, blk_proxy *p, void *user) {
  ctx *c = user;
  (void)data;
  int n = c->o.blocks;
  CHECK_EQ_INT(blk_proxy_result_i64(p, 0), blk_proxy_result_i64(p, 1));
  CHECK_NEAR(blk_proxy_result_f64(p, 2), (double)n * (n - 1) / 2.0, 0.0);
  CHECK_EQ_INT(blk_proxy_result_i64(p, 3), 0);
  CHECK_EQ_INT(blk_proxy_result_i64(p, 4), n - 1);
  return 0;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  opts o = {12, 1, 2, 1, 3, 0};
  for (int i = 1; i + 1 < argc; i += 2) {
    int v = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--blocks"))
      o.blocks = v;
    else if (!strcmp(argv[i], "--threads"))
      o.threads = v;
    else if (!strcmp(argv[i], "--dim"))
      o.dim = v;
    else if (!strcmp(argv[i], "--wrap"))
      o.wrap = v;
    else if (!strcmp(argv[i], "--epochs"))
      o.epochs = v;
    else if (!strcmp(argv[i], "--mem-blocks"))
      o.mem_blocks = v;
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  blk_bounds domain;
  int64_t lo[BLK_MAX_DIM] = {0}, hi[BLK_MAX_DIM];
  for (int a = 0; a < o.dim; a++) hi[a] = 40 + 7 * a;
  CHECK_OK(blk_bounds_set(&domain, o.dim, lo, hi));
  blk_decomposer_config dc = BLK_DECOMPOSER_CONFIG_INIT;
  for (int a = 0; a < o.dim; a++) dc.wrap[a] = o.wrap && a != 1; /* axis 1 never wraps */
  blk_decomposer *d;
  blk_assigner *asg;
  blk_master *m;
  CHECK_OK(blk_decomposer_create(&d, &domain, o.blocks, &dc));
  CHECK_OK(blk_assigner_create_round_robin(&asg, size, o.blocks));
  blk_master_config mc = check_master_config(o.threads, o.mem_blocks, create, destroy, save, load);
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  CHECK_OK(blk_master_decompose(m, d, asg));
  CHECK_EQ_INT(blk_master_local_count(m), blk_assigner_local_count(asg, rank));
  for (int lid = 0; lid < blk_master_local_count(m); lid++) {
    int gid = blk_master_gid(m, lid);
    CHECK_EQ_INT(blk_master_lid(m, gid), lid);
    block *b = blk_master_block(m, lid); /* NULL when swapped out */
    CHECK(b || o.mem_blocks > 0);
    if (b) CHECK_EQ_INT(b->gid, gid);
    CHECK_EQ_INT(blk_assigner_rank(asg, gid), rank);
  }

  ctx c = {o, 0};
  for (c.epoch = 0; c.epoch < o.epochs; c.epoch++) {
    CHECK_OK(blk_master_foreach(m, send_all, &c));
    CHECK_OK(blk_master_exchange(m));
    CHECK_OK(blk_master_foreach(m, receive_all, &c));
    CHECK_OK(blk_master_exchange(m));
    CHECK_OK(blk_master_foreach(m, check_results, &c));
    CHECK_EQ_INT(blk_master_result_count(m), 5);
    CHECK_EQ_INT(blk_master_result_i64(m, 4), o.blocks - 1);
  }
  /* An exchange where nobody sends: everything arrives empty, no hang. */
  CHECK_OK(blk_master_exchange(m));
  CHECK_EQ_INT(blk_master_result_count(m), 0);

  check_budget(m, o.mem_blocks);

  blk_master_destroy(m);
  blk_assigner_destroy(asg);
  blk_decomposer_destroy(d);
  if (rank == 0)
    printf("test_exchange: ok (%d blocks, %d ranks, %d threads, %dD, wrap %d)\n", o.blocks, size,
           o.threads, o.dim, o.wrap);
  MPI_Finalize();
  return 0;
}
