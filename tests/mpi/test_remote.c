/*
 * test_remote: messages to any gid (blk_proxy_enqueue_to), delivered by
 * blk_master_exchange_remote and within blk_master_iexchange, checked
 * against what a serial reckoning says every block must hold.
 *
 * The blocks sit on a ring (links to gid - 1 and gid + 1), contiguous over
 * the ranks. Every choice below is a hash of gids, epochs and token ids, so
 * each block can work out alone what every other block sent it.
 *
 * (1) Remote exchange, 3 epochs: each block sends 0-4 records to gids drawn
 *     at random (itself, link neighbours and repeats included) and one
 *     record over its right link. Every block checks its in list: its two
 *     link queues, then one queue per sending gid in ascending order, each
 *     with exactly the records sent to it, in the order sent.
 * (2) Failures, on every rank alike (same code, same detail, nobody hangs,
 *     the master works after): queues to any gid given to
 *     blk_master_exchange; a gid the assigner does not have; an assigner
 *     that puts blocks where they are not; a NULL assigner.
 * (3) iexchange, hot potato: 4 tokens per block, each passed on a number
 *     of hops (0-6) to random gids or over the right link, then kept where
 *     it stops; the initial tokens are handed out two per run (the
 *     callback returns 1 while some are left). Every block's kept tokens
 *     must be exactly those a serial walk ends at it. --delays sleeps
 *     up to 300 us in some runs, so the order of the runs varies.
 * (4) iexchange failures: a run that fails (gid 1, its second run: every
 *     rank returns BLK_ECALLBACK naming it), a message to a gid nobody
 *     has, a NULL callback; the master works after each.
 * (5) At 3 ranks and more, a message that crosses a wave: X (on rank 0)
 *     is idle at once and joins the first wave; Y (rank 1) sends X a
 *     message after it joined; X passes one on to Z (rank 2) and goes on
 *     working for 300 ms, then sends Y another; Z, busy for 100 ms, takes
 *     X's before it joins. The first wave then counts as many received as
 *     sent while X works: a test of one wave would end there, and lose
 *     X's last message.
 * (6) On each rank with two blocks or more, its last block (in memory after
 *     a foreach, with --mem-blocks 1) asks to run again until a message
 *     comes from its first block (out): a scheduler that always runs blocks
 *     in memory first would never load the sender (it ran 50 million times
 *     before blk made blocks ready in generations).
 *
 *   test_remote --blocks N --threads T [--mem-blocks M] [--delays]
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <blk/blk.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static int nblocks = 13, delays = 0;

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) {
  return mix(mix(mix(a) ^ b) ^ c);
}

typedef struct block {
  int gid;
  int next_token; /* iexchange: the next of its initial tokens to hand out */
  int n, cap;     /* tokens kept */
  int64_t *kept;
} block;

static int create(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b);
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  *out = b;
  return 0;
}

static void destroy(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data;
  free(b->kept);
  free(b);
}

static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  const block *b = data;
  blk_buffer_write(out, b, sizeof *b);
  return blk_buffer_write(out, b->kept, (size_t)b->n * sizeof *b->kept);
}

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  block *b = data;
  int rc = blk_buffer_read(in, b, sizeof *b);
  CHECK_EQ_INT(b->gid, gid);
  b->cap = b->n;
  b->kept = b->n ? malloc((size_t)b->n * sizeof *b->kept) : NULL;
  if (b->n && !b->kept) return BLK_ENOMEM;
  if (!rc) rc = blk_buffer_read(in, b->kept, (size_t)b->n * sizeof *b->kept);
  return rc;
}

/* ---- (1) remote exchange ---- */

typedef struct record {
  int32_t src, epoch, j, dst;
} record;

static int sends(int src, int epoch) {
  return (int)(hash3((uint64_t)src, (uint64_t)epoch, 99) % 5);
}
static int dest(int src, int epoch, int j) {
  return (int)(hash3((uint64_t)src, (uint64_t)epoch, (uint64_t)j) % (uint64_t)nblocks);
}

static int send_records(void *data, blk_proxy *p, void *user) {
  const block *b = data;
  int epoch = *(int *)user;
  for (int j = 0; j < sends(b->gid, epoch); j++) {
    record r = {b->gid, epoch, j, dest(b->gid, epoch, j)};
    int rc = blk_proxy_enqueue_to(p, r.dst, &r, sizeof r);
    if (rc) return rc;
  }
  CHECK_EQ_INT(blk_proxy_link_count(p), 2);
  CHECK(blk_proxy_out_count(p) >= 2 + (sends(b->gid, epoch) > 0)); /* one per destination */
  record link = {b->gid, epoch, -1, (b->gid + 1) % nblocks};
  CHECK_EQ_INT(blk_proxy_out_gid(p, 1), link.dst);
  CHECK(blk_proxy_link(p, 1) != NULL);
  return blk_proxy_enqueue(p, 1, &link, sizeof link);
}

static int check_records(void *data, blk_proxy *p, void *user) {
  const block *b = data;
  int epoch = *(int *)user, g = b->gid;
  CHECK(blk_proxy_in_count(p) >= 2);
  /* The links: one record from the left neighbour, nothing from the right. */
  record r;
  CHECK_EQ_INT(blk_proxy_incoming_remaining(p, 0), sizeof r);
  blk_proxy_dequeue(p, 0, &r, sizeof r);
  CHECK(r.src == (g + nblocks - 1) % nblocks && r.epoch == epoch && r.j == -1 && r.dst == g);
  CHECK_EQ_INT(blk_proxy_incoming_remaining(p, 1), 0);
  /* Then a queue per gid that sent here, ascending. */
  int q = 2;
  for (int src = 0; src < nblocks; src++) {
    int mine = 0;
    for (int j = 0; j < sends(src, epoch); j++) mine += dest(src, epoch, j) == g;
    if (!mine) continue;
    CHECK_MSG(q < blk_proxy_in_count(p), "gid %d, epoch %d: no queue from gid %d", g, epoch, src);
    CHECK_EQ_INT(blk_proxy_in_gid(p, q), src);
    CHECK(blk_proxy_link(p, q) == NULL);
    CHECK_EQ_INT(blk_proxy_incoming_remaining(p, q), (size_t)mine * sizeof r);
    for (int j = 0; j < sends(src, epoch); j++) {
      if (dest(src, epoch, j) != g) continue;
      blk_proxy_dequeue(p, q, &r, sizeof r);
      CHECK(r.src == src && r.epoch == epoch && r.j == j && r.dst == g);
    }
    q++;
  }
  CHECK_EQ_INT(blk_proxy_in_count(p), q);
  CHECK_EQ_INT(blk_proxy_link_count(p), 2);
  CHECK_EQ_INT(blk_proxy_out_count(p), 2); /* the queues to any gid went with the exchange */
  return 0;
}

/* The detail of the last failure is the same on every rank. */
static void same_everywhere(const char *what) {
  const char *s = blk_last_error();
  long h = (long)(mix(strlen(s)) & 0xffffff);
  for (const char *c = s; *c; c++) h = (long)((mix((uint64_t)h ^ (uint64_t)*c)) & 0xffffff);
  long lo, hi;
  MPI_Allreduce(&h, &lo, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  CHECK_MSG(lo == hi, "%s: the detail differs between ranks; here: %s", what, s);
}

static void expect_error(int rc, int code, const char *needle, const char *what) {
  CHECK_MSG(rc == code, "%s: returned %d (%s), expected %d; detail: %s", what, rc, blk_strerror(rc),
            code, blk_last_error());
  CHECK_MSG(strstr(blk_last_error(), needle), "%s: the detail does not say \"%s\": %s", what,
            needle, blk_last_error());
  same_everywhere(what);
}

static int send_to(void *data, blk_proxy *p, void *user) {
  const block *b = data;
  const int *to = user; /* {from gid, to gid} */
  if (b->gid != to[0]) return 0;
  int x = 7;
  return blk_proxy_enqueue_to(p, to[1], &x, sizeof x);
}

static int nothing(void *data, blk_proxy *p, void *user) {
  (void)data;
  (void)p;
  (void)user;
  return 0;
}

/* ---- (3) iexchange: hot potato ---- */

#define TOKENS_PER_BLOCK 4

typedef struct token {
  int64_t id;
  int32_t hops; /* still to go */
  int32_t pad;
} token;

static int hops_of(int64_t id) {
  return (int)(hash3((uint64_t)id, 1, 2) % 7);
}
/* Where a token at gid with h hops left goes: -1 over the right link,
 * else a gid. */
static int next_of(int64_t id, int h, int gid) {
  uint64_t x = hash3((uint64_t)id, (uint64_t)h, (uint64_t)gid);
  return x % 4 == 0 ? -1 : (int)((x >> 8) % (uint64_t)nblocks);
}
/* Where the serial walk ends. */
static int end_of(int64_t id) {
  int g = (int)(id % nblocks);
  for (int h = hops_of(id); h > 0; h--) {
    int n = next_of(id, h, g);
    g = n < 0 ? (g + 1) % nblocks : n;
  }
  return g;
}

static int keep(block *b, int64_t id) {
  if (b->n == b->cap) {
    int ncap = b->cap ? 2 * b->cap : 8;
    int64_t *k = realloc(b->kept, (size_t)ncap * sizeof *k);
    if (!k) return BLK_ENOMEM;
    b->kept = k;
    b->cap = ncap;
  }
  b->kept[b->n++] = id;
  return 0;
}

static int pass_on(block *b, blk_proxy *p, token t) {
  if (delays && hash3((uint64_t)t.id, (uint64_t)t.hops, 5) % 3 == 0)
    nanosleep(&(struct timespec){0, (long)(hash3((uint64_t)t.id, 7, 7) % 300) * 1000}, NULL);
  if (t.hops == 0) return keep(b, t.id);
  int n = next_of(t.id, t.hops, b->gid);
  t.hops--;
  if (n < 0) return blk_proxy_enqueue(p, 1, &t, sizeof t);
  return blk_proxy_enqueue_to(p, n, &t, sizeof t);
}

static int potato(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  int rc = 0;
  for (int i = 0; i < blk_proxy_in_count(p) && !rc; i++) {
    size_t left = blk_proxy_incoming_remaining(p, i);
    CHECK_EQ_INT(left % sizeof(token), 0);
    CHECK(i >= 2 || i == 0 || left == 0); /* nothing comes over the left link's reverse */
    for (; left && !rc; left -= sizeof(token)) {
      token t;
      blk_proxy_dequeue(p, i, &t, sizeof t);
      rc = pass_on(b, p, t);
    }
  }
  /* The block's own tokens, two per run. */
  for (int k = 0; k < 2 && b->next_token < TOKENS_PER_BLOCK && !rc; k++) {
    int64_t id = (int64_t)b->next_token++ * nblocks + b->gid;
    rc = pass_on(b, p, (token){id, hops_of(id), 0});
  }
  if (rc) return rc;
  return b->next_token < TOKENS_PER_BLOCK;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int check_kept(void *data, blk_proxy *p, void *user) {
  (void)p;
  block *b = data;
  qsort(b->kept, (size_t)b->n, sizeof *b->kept, cmp64);
  int want = 0;
  for (int64_t id = 0; id < (int64_t)TOKENS_PER_BLOCK * nblocks; id++) {
    if (end_of(id) != b->gid) continue;
    CHECK_MSG(want < b->n, "gid %d kept %d tokens; token %lld should end here too", b->gid, b->n,
              (long long)id);
    CHECK_MSG(b->kept[want] == id, "gid %d: kept token %lld where %lld should be", b->gid,
              (long long)b->kept[want], (long long)id);
    want++;
  }
  CHECK_EQ_INT(b->n, want);
  atomic_fetch_add((atomic_long *)user, b->n); /* blocks run at once */
  b->n = 0;
  b->next_token = 0;
  return 0;
}

/* An iexchange of hot potato, every block's kept tokens checked, and the
 * total over all ranks. */
static void hot_potato(blk_master *m, const blk_assigner *a) {
  CHECK_OK(blk_master_iexchange(m, a, potato, NULL));
  atomic_long kept = 0;
  CHECK_OK(blk_master_foreach(m, check_kept, &kept));
  long mine = atomic_load(&kept), all;
  MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  CHECK_EQ_INT(all, (long)TOKENS_PER_BLOCK * nblocks);
}

/* ---- (4) iexchange failures ---- */

static int fail_second(void *data, blk_proxy *p, void *user) {
  (void)user;
  block *b = data;
  if (b->gid == 1 && blk_proxy_round(p) == 1) return -7;
  /* Everyone sends gid 1 something on its first run, so that it runs twice. */
  int x = 3;
  if (blk_proxy_round(p) == 0) return blk_proxy_enqueue_to(p, 1, &x, sizeof x);
  return 0;
}

static int to_nobody(void *data, blk_proxy *p, void *user) {
  (void)user;
  const block *b = data;
  int x = 5;
  if (b->gid == nblocks - 1 && blk_proxy_round(p) == 0)
    return blk_proxy_enqueue_to(p, nblocks + 3, &x, sizeof x);
  return 0;
}

/* ---- (5) a message across a wave ---- */

typedef struct crossing {
  int x, y, z;
} crossing;

static void sleep_ms(int ms) {
  nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000}, NULL);
}

static int cross(void *data, blk_proxy *p, void *user) {
  block *b = data;
  const crossing *c = user;
  int round = blk_proxy_round(p), x = b->gid;
  for (int i = 0; i < blk_proxy_in_count(p); i++)
    while (blk_proxy_incoming_remaining(p, i)) {
      int v;
      blk_proxy_dequeue(p, i, &v, sizeof v);
      CHECK_OK(keep(b, v));
    }
  if (b->gid == c->y && round == 0) {
    sleep_ms(20); /* X has joined the first wave by now */
    return blk_proxy_enqueue_to(p, c->x, &x, sizeof x);
  }
  if (b->gid == c->z && round == 0) sleep_ms(100);
  /* X: once Y's message came, pass one on to Z and ask to run again; on
   * that run, work for 300 ms and send Y the last. (By what came, not by
   * the round: on a loaded machine Y's message may come before X's first
   * run.) next_token counts X's steps. */
  if (b->gid == c->x && b->n == 1 && b->next_token == 0) {
    b->next_token = 1;
    CHECK_OK(blk_proxy_enqueue_to(p, c->z, &x, sizeof x));
    return 1;
  }
  if (b->gid == c->x && b->next_token == 1) {
    b->next_token = 2;
    sleep_ms(300);
    x = 1000 + b->gid;
    return blk_proxy_enqueue_to(p, c->y, &x, sizeof x);
  }
  return 0;
}

static int check_crossing(void *data, blk_proxy *p, void *user) {
  (void)p;
  block *b = data;
  const crossing *c = user;
  if (b->gid == c->x) {
    CHECK_EQ_INT(b->n, 1);
    CHECK_EQ_INT(b->kept[0], c->y);
  } else if (b->gid == c->y) {
    CHECK_MSG(b->n == 1, "gid %d (Y) kept %d messages, not X's last", b->gid, b->n);
    CHECK_EQ_INT(b->kept[0], 1000 + c->x);
  } else if (b->gid == c->z) {
    CHECK_EQ_INT(b->n, 1);
    CHECK_EQ_INT(b->kept[0], c->x);
  } else {
    CHECK_EQ_INT(b->n, 0);
  }
  b->n = 0;
  b->next_token = 0;
  return 0;
}

/* ---- (6) a block that waits for one that is out ---- */

typedef struct waiting {
  int waiter, sender;
  double deadline; /* MPI_Wtime: the waiter starves past it */
} waiting;

/* The sender is slow, so that with two threads it is still on a worker
 * while the waiter, short, runs again and again on the driver: the driver
 * must still take in what the worker finished (a run failed this way
 * once, under ThreadSanitizer). */
static int wait_for(void *data, blk_proxy *p, void *user) {
  block *b = data;
  const waiting *w = user;
  int x = b->gid;
  if (b->gid == w->sender && blk_proxy_round(p) == 0) {
    nanosleep(&(struct timespec){0, 30 * 1000 * 1000}, NULL);
    return blk_proxy_enqueue_to(p, w->waiter, &x, sizeof x);
  }
  if (b->gid != w->waiter) return 0;
  for (int i = 0; i < blk_proxy_in_count(p); i++)
    if (blk_proxy_incoming_remaining(p, i)) {
      CHECK_EQ_INT(blk_proxy_in_gid(p, i), w->sender);
      return 0;
    }
  return MPI_Wtime() < w->deadline ? 1 : -9; /* -9: starved */
}

static void works(blk_master *m, const char *after) {
  int rc = blk_master_foreach(m, nothing, NULL);
  CHECK_MSG(rc == 0, "after %s, a foreach returned %d: %s", after, rc, blk_last_error());
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int threads = 1, mem_blocks = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
      nblocks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      mem_blocks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--delays"))
      delays = 1;
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  CHECK_MSG(nblocks >= 3, "--blocks %d: the ring needs 3", nblocks);
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blk_assigner *a, *elsewhere;
  CHECK_OK(blk_assigner_create_contiguous(&a, size, nblocks));
  CHECK_OK(blk_assigner_create_round_robin(&elsewhere, size, nblocks));
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  mc.queue_spill_bytes = 16; /* out of core, queues go out with their blocks */
  blk_master *m;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  int *gids = malloc((size_t)nblocks * sizeof *gids);
  CHECK(gids);
  int local = blk_assigner_local_gids(a, rank, gids, nblocks);
  for (int i = 0; i < local; i++) {
    blk_link links[2];
    memset(links, 0, sizeof links);
    links[0].gid = (gids[i] + nblocks - 1) % nblocks;
    links[1].gid = (gids[i] + 1) % nblocks;
    for (int l = 0; l < 2; l++) links[l].rank = blk_assigner_rank(a, links[l].gid);
    void *b;
    CHECK_OK(create(&b, gids[i], NULL));
    CHECK_OK(blk_master_add(m, gids[i], b, links, 2));
  }

  /* (1) */
  for (int epoch = 0; epoch < 3; epoch++) {
    CHECK_OK(blk_master_foreach(m, send_records, &epoch));
    CHECK_OK(blk_master_exchange_remote(m, a));
    CHECK_OK(blk_master_foreach(m, check_records, &epoch));
  }

  /* (2) */
  int to[2] = {nblocks - 1, 0};
  CHECK_OK(blk_master_foreach(m, send_to, to));
  expect_error(blk_master_exchange(m), BLK_EINVAL, "blk_master_exchange_remote",
               "queues to any gid in blk_master_exchange");
  CHECK_OK(blk_master_exchange_remote(m, a)); /* the failed queue is gone */
  to[1] = nblocks + 5;
  CHECK_OK(blk_master_foreach(m, send_to, to));
  expect_error(blk_master_exchange_remote(m, a), BLK_EINVAL, "has no rank for",
               "a gid the assigner does not have");
  CHECK_OK(blk_master_exchange_remote(m, a));
  if (size > 1 && nblocks > size) {
    /* Round robin puts gid 1 on rank 1; contiguously it is on rank 0. */
    to[0] = 0;
    to[1] = 1;
    CHECK_OK(blk_master_foreach(m, send_to, to));
    expect_error(blk_master_exchange_remote(m, elsewhere), BLK_EINVAL, "has no block 1",
                 "an assigner that puts blocks elsewhere");
  }
  expect_error(blk_master_exchange_remote(m, NULL), BLK_EINVAL, "the assigner is NULL",
               "a NULL assigner");
  works(m, "the failed exchanges");

  /* (3), twice: the master is ready for another iexchange after one. */
  for (int twice = 0; twice < 2; twice++) {
    hot_potato(m, a);
  }

  /* (4) */
  expect_error(blk_master_iexchange(m, a, fail_second, NULL), BLK_ECALLBACK, "returned -7",
               "a run that fails");
  CHECK_MSG(strstr(blk_last_error(), "gid 1"), "the detail does not name gid 1: %s",
            blk_last_error());
  works(m, "a failed run");
  expect_error(blk_master_iexchange(m, a, to_nobody, NULL), BLK_EINVAL, "has no rank for",
               "an iexchange to a gid nobody has");
  expect_error(blk_master_iexchange(m, a, NULL, NULL), BLK_EINVAL, "the callback is NULL",
               "a NULL callback");
  hot_potato(m, a);

  /* (5) */
  if (size >= 3) {
    int first[3];
    for (int r = 0; r < 3; r++) CHECK(blk_assigner_local_gids(a, r, &first[r], 1) >= 1);
    crossing c = {first[0], first[1], first[2]};
    CHECK_OK(blk_master_iexchange(m, a, cross, &c));
    CHECK_OK(blk_master_foreach(m, check_crossing, &c));
  }

  /* (6) */
  waiting w = {-1, -1, MPI_Wtime() + 30};
  if (local >= 2) w = (waiting){gids[local - 1], gids[0], w.deadline};
  CHECK_OK(blk_master_foreach(m, nothing, NULL)); /* the last block stays in memory */
  CHECK_OK(blk_master_iexchange(m, a, wait_for, &w));

  if (mem_blocks) {
    blk_master_stats st;
    blk_master_stats_get(m, &st);
    CHECK_MSG(st.blocks_in_memory_peak <= mem_blocks, "peak %d blocks in memory, budget %d",
              st.blocks_in_memory_peak, mem_blocks);
    CHECK_MSG(local <= mem_blocks || st.evictions > 0, "out of core, nothing was evicted");
  }
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_assigner_destroy(elsewhere);
  free(gids);
  if (rank == 0)
    printf("test_remote: ok (%d blocks, %d ranks, %d threads)\n", nblocks, size, threads);
  MPI_Finalize();
  return 0;
}
