/*
 * test_all_to_all: every block sends to a pattern of destinations (some
 * none, some all), and every receiver checks, against the rule that made
 * them, exactly which sources reached it, in ascending order, with which
 * bytes. Over block counts 1..47 (primes and non-powers of k; 47 is folded
 * into 45, a prime above 16), k = 2, 3, 4, 8 and both orders, under the
 * round-robin assigner and, for some counts up to 64 (not with --big), the
 * contiguous one (whose ranks hold runs of gids, so early rounds lie inside
 * a rank), each run twice:
 *
 *  - by copy: every message is two blk_proxy_enqueue_gid calls;
 *  - by reference: the message is enqueued by blk_proxy_enqueue_ref_gid, as
 *    a whole, or as a reference followed by a copy, by a second reference,
 *    or by bytes written through blk_proxy_outgoing (each of which makes
 *    the queue copy the referenced bytes first), or by two copies, chosen
 *    by (src, dst); some blocks also enqueue empty references and copies to
 *    gids they send nothing, which must not arrive. The referenced memory
 *    is freed as soon as the call returns, so a sanitizer build sees any
 *    read after that.
 *
 * Receivers read each source one of four ways, chosen by (src, dst): the
 * buffer of blk_proxy_incoming, blk_proxy_dequeue, blk_proxy_dequeue_view,
 * or taking the buffer's storage with blk_buffer_swap and freeing it (so a
 * queue that referred to memory blk does not own must have been given
 * storage of its own). In-core, a message enqueued whole by reference from
 * a block on the same rank must arrive without a copy: its view is the
 * sender's memory.
 *
 * The rounds: blk runs all of at most 64 blocks on one rank as one round
 * (a count k folds too), and so any count up to 64 when some rank has a
 * memory budget (--mem-blocks, here on every rank); otherwise it merges
 * consecutive rounds whose groups lie inside one rank, up to a group of
 * 16. The test works out which by brute force, from the group lists of the
 * rounds k makes (each block's merged group is every gid reachable through
 * the rounds' groups, all on one rank), and checks that receive_fn runs in
 * the round after the last of those: the merged rounds are what the
 * on-rank and placement checks below follow.
 *
 * A third run, placed, sends as by reference through blk_all_to_all_with
 * with a place callback that gives every local block a receive area (one
 * slot per source, allocated before the call and freed after it), refuses
 * some messages (NULL) and some whose slot is one byte short (the
 * contract: place compares bytes with its room). It checks that blk asks
 * only where it may (a source on another rank, a direct exchange, no
 * budget, the exact size, at most once per message), that a placed
 * message's bytes are in its slot before receive_fn reads them and that
 * its view is the slot; everything else is checked as in the other runs,
 * whatever place said. Then, in-core with one block per rank and one
 * thread, where blk can always place, that something was placed; a place
 * callback that refuses and a receive_fn that fails for that (the way to
 * fail) give BLK_ECALLBACK on every rank; a config of an unknown version
 * gives BLK_EINVAL on every rank, also when only one rank passed it.
 *
 *   test_all_to_all --threads T [--big] [--mem-blocks M]
 * --big makes some messages larger than the size that rides in a header
 * (16 KiB): MPI receives those where place says; a smaller one is copied
 * there from the header message.
 */
#include <blk/blk.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fold_reference.h"

#define NB_MAX 64

enum { BY_COPY, BY_REFERENCE, PLACED };

typedef struct ctx {
  int nblocks, big, mode;
  int swaps;  /* this rank's budget may swap a block out (room for fewer than its blocks) */
  int budget; /* some rank has a budget (master's mem_blocks; alike on every rank here) */
  int rank;
  const blk_assigner *a;
  blk_partners *swap; /* the rounds blk_all_to_all runs (k, order); folded: between */
  int fold;           /* the count folded: odd gids below 2 fold go to gid - 1 first */
  long asked, placed; /* place calls and placements (on the master's thread) */
  int fail_gid;       /* the failure runs: the gid whose receive fails, or -1 */
  int fail_send_gid;  /* and the gid whose send fails, or -1 */
} ctx;

/* The memory each local block sent by reference, by gid, and where its
 * message to each dst starts; freed when blk_all_to_all returns. */
static unsigned char *sent[NB_MAX];
static const unsigned char *sent_at[NB_MAX][NB_MAX];

/* Placed: each local block's receive area, where source src's slot starts
 * and how much room it has; where place put a message (NULL: not placed). */
static unsigned char *area[NB_MAX];
static size_t slot_at[NB_MAX][NB_MAX], slot_room[NB_MAX][NB_MAX];
static unsigned char *placed_at[NB_MAX][NB_MAX];

/* Whether src sends to dst, and how many bytes. */
static size_t message_size(int src, int dst, int nblocks, int big) {
  if (src % 5 == 4) return 0;                                          /* some send nothing */
  if (src % 5 == 3) return (size_t)(1 + dst % 3);                      /* some send to all */
  if (big && src % 5 == 1 && dst % 2 == 0) return 17000 + (size_t)dst; /* crosses ranks */
  if ((src * 7 + dst * 3) % 4 != 0) return 0;                          /* others to a few */
  if (big && (src + dst) % 3 == 0) return 20000 + (size_t)dst;
  return (size_t)(4 + (src + dst + nblocks) % 29);
}

static unsigned char byte_of(int src, int dst, size_t j) {
  return (unsigned char)(src * 13 + dst * 7 + (int)j);
}

/* How a message is enqueued by reference (see the top). */
enum { WHOLE, REF_THEN_COPY, REF_THEN_REF, TWO_COPIES, REF_THEN_OUTGOING, NSTYLES };
static int send_style(int src, int dst) {
  return (src + 2 * dst) % NSTYLES;
}

/* How the receiver reads a source (see the top). */
enum { INCOMING, DEQUEUE, VIEW, TAKE };
static int receive_style(int src, int dst) {
  return (src * 3 + dst) % 4;
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

/* The index of the out queue to gid (the send phase lists the gids
 * enqueued to so far). */
static int out_index(blk_proxy *p, int gid) {
  for (int i = 0; i < blk_proxy_out_count(p); i++)
    if (blk_proxy_out_gid(p, i) == gid) return i;
  CHECK_MSG(0, "no out queue to gid %d", gid);
  return -1;
}

static void send_by_reference(blk_proxy *p, int src, int dst, const unsigned char *msg, size_t n) {
  size_t half = n / 2;
  switch (send_style(src, dst)) {
    case WHOLE:
      CHECK_OK(blk_proxy_enqueue_ref_gid(p, dst, msg, n));
      break;
    case REF_THEN_COPY:
      CHECK_OK(blk_proxy_enqueue_ref_gid(p, dst, msg, half));
      CHECK_OK(blk_proxy_enqueue_gid(p, dst, msg + half, n - half));
      break;
    case REF_THEN_REF:
      CHECK_OK(blk_proxy_enqueue_ref_gid(p, dst, msg, half));
      CHECK_OK(blk_proxy_enqueue_ref_gid(p, dst, msg + half, n - half));
      break;
    case TWO_COPIES:
      CHECK_OK(blk_proxy_enqueue_gid(p, dst, msg, half));
      CHECK_OK(blk_proxy_enqueue_gid(p, dst, msg + half, n - half));
      break;
    default: /* REF_THEN_OUTGOING */
      CHECK_OK(blk_proxy_enqueue_ref_gid(p, dst, msg, half));
      CHECK_OK(blk_buffer_write(blk_proxy_outgoing(p, out_index(p, dst)), msg + half, n - half));
      break;
  }
}

static int send(void *block, blk_proxy *p, void *user) {
  ctx *c = user;
  int src = *(int *)block;
  CHECK_EQ_INT(blk_proxy_in_count(p), 0);
  size_t total = 0;
  for (int dst = 0; dst < c->nblocks; dst++) total += message_size(src, dst, c->nblocks, c->big);
  /* By reference, the messages live here until blk_all_to_all returns. */
  unsigned char *all = malloc(total ? total : 1);
  CHECK(all);
  sent[src] = all;
  /* Destinations in a scrambled order: the receiver must still see sources sorted. */
  for (int t = 0; t < c->nblocks; t++) {
    int dst = (t * 5 + src) % c->nblocks;
    size_t n = message_size(src, dst, c->nblocks, c->big);
    if (!n) {
      if (c->mode != BY_COPY && (src + dst) % 2 == 0) { /* empty: nothing arrives */
        CHECK_OK(blk_proxy_enqueue_ref_gid(p, dst, all, 0));
        CHECK_OK(blk_proxy_enqueue_gid(p, dst, NULL, 0));
      }
      continue;
    }
    unsigned char *msg = all;
    all += n;
    for (size_t j = 0; j < n; j++) msg[j] = byte_of(src, dst, j);
    sent_at[src][dst] = msg;
    if (c->mode != BY_COPY) {
      send_by_reference(p, src, dst, msg, n);
    } else { /* two enqueues to the same destination append to one message */
      CHECK_OK(blk_proxy_enqueue_gid(p, dst, msg, n / 2));
      CHECK_OK(blk_proxy_enqueue_gid(p, dst, msg + n / 2, n - n / 2));
    }
  }
  return src == c->fail_send_gid ? 5 : 0;
}

static void check_bytes(const unsigned char *got, int src, int dst, size_t from, size_t n) {
  for (size_t j = 0; j < n; j++)
    CHECK_MSG(got[j] == byte_of(src, dst, from + j), "gid %d from %d: byte %zu differs", dst, src,
              from + j);
}

/* Whether the message from src to dst stays on this rank all the way: at
 * every block it passes (swap rounds, partners.h) on the way. */
/* Folding (fold_reference.h): after the gids 2i+1 (i < fold) gave their
 * items to 2i, gid g stands as the virtual block g / 2 below 2 fold,
 * g - fold above. */
static int virtual_of(const ctx *c, int gid) {
  return gid < 2 * c->fold ? gid / 2 : gid - c->fold;
}

static int real_of(const ctx *c, int v) {
  return v < c->fold ? 2 * v : v + c->fold;
}

/* Whether an item from src to dst stays on this rank all the way. */
static int stays_on_rank(const ctx *c, int src, int dst) {
  int here = src, group[NB_MAX];
  if (c->fold) { /* to the stand-in first */
    if (blk_assigner_rank(c->a, here) != c->rank) return 0;
    here = real_of(c, virtual_of(c, src));
  }
  for (int e = 0; e < blk_partners_rounds(c->swap); e++) {
    if (blk_assigner_rank(c->a, here) != c->rank) return 0;
    blk_partners_out(c->swap, e, virtual_of(c, here), group, NB_MAX);
    here = real_of(c, group[blk_partners_round_position(c->swap, e, virtual_of(c, dst))]);
  }
  if (c->fold) { /* and to the extra last */
    if (blk_assigner_rank(c->a, here) != c->rank) return 0;
    here = dst;
  }
  CHECK_EQ_INT(here, dst);
  return blk_assigner_rank(c->a, here) == c->rank;
}

/* Reads the message from src, n bytes, in queue i, the way (src, dst) says;
 * placed: where blk received it, or NULL. */
static void read_source(const ctx *c, blk_proxy *p, int i, int src, int dst, size_t n,
                        const unsigned char *placed) {
  unsigned char copy[NB_MAX];
  switch (receive_style(src, dst)) {
    case INCOMING: {
      blk_buffer *in = blk_proxy_incoming(p, i);
      CHECK_EQ_INT(blk_buffer_error(in), 0);
      CHECK_EQ_INT(in->pos, 0);
      CHECK_EQ_INT(in->size, n);
      check_bytes(in->data, src, dst, 0, n);
      CHECK(blk_buffer_read_view(in, n) == in->data);
      break;
    }
    case DEQUEUE:
      for (size_t at = 0; at < n; at += sizeof copy) {
        size_t len = n - at < sizeof copy ? n - at : sizeof copy;
        blk_proxy_dequeue(p, i, copy, len);
        check_bytes(copy, src, dst, at, len);
      }
      break;
    case VIEW: {
      const unsigned char *v = blk_proxy_dequeue_view(p, i, n / 3);
      check_bytes(v, src, dst, 0, n / 3);
      if (placed)
        CHECK_MSG(v == placed, "gid %d from %d: placed, but its view is elsewhere", dst, src);
      if (c->mode != BY_COPY && send_style(src, dst) == WHOLE && !c->swaps &&
          stays_on_rank(c, src, dst))
        CHECK_MSG(v == sent_at[src][dst], "gid %d from %d (same rank, by reference): copied", dst,
                  src);
      v = blk_proxy_dequeue_view(p, i, n - n / 3);
      check_bytes(v, src, dst, n / 3, n - n / 3);
      CHECK(blk_proxy_dequeue_view(p, i, 0) != NULL);
      break;
    }
    default: { /* TAKE: the storage is the callback's now */
      blk_buffer mine = BLK_BUFFER_INIT;
      blk_buffer_swap(&mine, blk_proxy_incoming(p, i));
      CHECK_EQ_INT(blk_buffer_error(&mine), 0);
      CHECK_EQ_INT(blk_buffer_remaining(&mine), n);
      check_bytes(mine.data + mine.pos, src, dst, 0, n);
      CHECK_OK(blk_buffer_write(&mine, "more", 4)); /* it may grow, too */
      blk_buffer_free(&mine);
      break;
    }
  }
  CHECK_EQ_INT(blk_proxy_incoming_remaining(p, i), 0);
}

/* The number of swap rounds blk_all_to_all runs. */
static int rounds_of(const ctx *c) {
  return blk_partners_rounds(c->swap) + (c->fold ? 2 : 0);
}

static int receive(void *block, blk_proxy *p, void *user) {
  ctx *c = user;
  int dst = *(int *)block;
  CHECK_EQ_INT(blk_proxy_out_count(p), 0);
  CHECK_MSG(blk_proxy_round(p) == rounds_of(c), "gid %d: received in round %d, not %d", dst,
            blk_proxy_round(p), rounds_of(c));
  int i = 0;
  for (int src = 0; src < c->nblocks; src++) {
    size_t n = message_size(src, dst, c->nblocks, c->big);
    if (!n) continue;
    CHECK_MSG(i < blk_proxy_in_count(p), "gid %d: only %d sources arrived, gid %d missing", dst,
              blk_proxy_in_count(p), src);
    CHECK_EQ_INT(blk_proxy_in_gid(p, i), src);
    CHECK_EQ_INT(blk_proxy_incoming_remaining(p, i), n);
    const unsigned char *placed = c->mode == PLACED ? placed_at[dst][src] : NULL;
    if (placed) check_bytes(placed, src, dst, 0, n); /* there before anything is read */
    read_source(c, p, i, src, dst, n, placed);
    i++;
  }
  CHECK_EQ_INT(blk_proxy_in_count(p), i);
  return dst == c->fail_gid ? 7 : 0;
}

/* blk asks only where it may (see the top); every third message is
 * refused, and so is one whose slot is too small for it. */
static void *place(void *block, int gid, int src, size_t bytes, void *user) {
  ctx *c = user;
  CHECK_EQ_INT(*(int *)block, gid);
  CHECK_EQ_INT(c->mode, PLACED);
  CHECK_EQ_INT(c->swaps, 0);
  CHECK_EQ_INT(rounds_of(c), 1);
  CHECK_MSG(src >= 0 && src < c->nblocks && blk_assigner_rank(c->a, src) != c->rank,
            "gid %d: asked to place a message from gid %d, on this rank or none", gid, src);
  CHECK_EQ_INT(bytes, message_size(src, gid, c->nblocks, c->big));
  CHECK_MSG(!placed_at[gid][src], "gid %d: asked twice for the message from gid %d", gid, src);
  c->asked++;
  if ((src + gid) % 3 == 2 || bytes > slot_room[gid][src]) return NULL;
  c->placed++;
  return placed_at[gid][src] = area[gid] + slot_at[gid][src];
}

/* Receive areas for the local blocks: a slot per source, one byte short
 * for some (place then refuses). */
static void make_areas(const ctx *c, const int *gids, int n) {
  for (int i = 0; i < n; i++) {
    int dst = gids[i];
    size_t at = 0;
    for (int src = 0; src < c->nblocks; src++) {
      size_t bytes = message_size(src, dst, c->nblocks, c->big);
      slot_at[dst][src] = at;
      slot_room[dst][src] = bytes && (src * dst) % 7 == 2 ? bytes - 1 : bytes;
      placed_at[dst][src] = NULL;
      at += bytes;
    }
    area[dst] = malloc(at ? at : 1);
    CHECK(area[dst]);
    memset(area[dst], 0xEE, at);
  }
}

static void free_areas(void) {
  for (int g = 0; g < NB_MAX; g++) { /* a write after the return shows under ASan */
    free(area[g]);
    area[g] = NULL;
  }
}

static void free_sent(void) {
  for (int g = 0; g < NB_MAX; g++) { /* a read after the return shows under ASan */
    free(sent[g]);
    sent[g] = NULL;
  }
}

/* Whether the gids reachable from every gid through the groups of rounds
 * first..last of p lie on one rank of a and number at most 16; the
 * reachable count of gid 0 in *size. By lists, not by digits. */
static int merged_group_local(const blk_partners *p, const blk_assigner *a, int first, int last,
                              int *size) {
  int n = blk_partners_nblocks(p), group[NB_MAX];
  for (int g = 0; g < n; g++) {
    int seen[NB_MAX] = {0}, list[NB_MAX], count = 1;
    list[0] = g;
    seen[g] = 1;
    for (int at = 0; at < count; at++)
      for (int e = first; e <= last; e++) {
        int m = blk_partners_out(p, e, list[at], group, NB_MAX);
        for (int j = 0; j < m; j++)
          if (!seen[group[j]]) {
            seen[group[j]] = 1;
            list[count++] = group[j];
          }
      }
    for (int j = 0; j < count; j++)
      if (blk_assigner_rank(a, list[j]) != blk_assigner_rank(a, g)) return 0;
    if (count > 16) return 0;
    if (g == 0) *size = count;
  }
  return 1;
}

/* Sets c->swap (and c->fold) to the rounds blk runs for k and the order,
 * from those of blk_partners_create (c->swap, over the gids folding
 * leaves): with all of at most 64 blocks on this rank, or at most 64 and a
 * budget, one round of all of them; unfolded, each run of consecutive
 * rounds that stays on one rank merged into one, greedily from the first,
 * while its group has at most 16 members. */
static void merge_rounds(ctx *c, int contiguous) {
  int n = c->nblocks, one_rank = 1, axes[40] = {0}, radices[40];
  for (int g = 1; g < n; g++) one_rank &= blk_assigner_rank(c->a, g) == blk_assigner_rank(c->a, 0);
  int merged = 0;
  if (rounds_of(c) > 1 && n <= 64 && (one_rank || c->budget)) {
    radices[merged++] = n;
    c->fold = 0;
  } else if (!c->fold) {
    int rounds = blk_partners_rounds(c->swap), first = 0;
    for (int e = 0; e < rounds; e++) {
      int size = 0;
      if (merged && merged_group_local(c->swap, c->a, first, e, &size)) {
        radices[merged - 1] = size;
        continue;
      }
      first = e;
      radices[merged++] = blk_partners_round_radix(c->swap, e);
    }
    if (merged == rounds) return;
  } else {
    return;
  }
  blk_partners_destroy(c->swap);
  c->swap = NULL;
  CHECK_OK(
      blk_partners_create_rounds(&c->swap, BLK_SWAP, 1, &n, merged, axes, radices, contiguous));
}

/* One all-to-all in c's mode; placed through blk_all_to_all_with. */
static int run(blk_master *m, ctx *c, int k, int contiguous, const int *gids, int n) {
  c->fold = folded_count(c->nblocks, k);
  int between = c->nblocks - c->fold;
  CHECK_OK(blk_partners_create(&c->swap, BLK_SWAP, 1, &between, k, contiguous));
  merge_rounds(c, contiguous);
  int rc;
  if (c->mode == PLACED) {
    blk_all_to_all_config cfg;
    CHECK_OK(blk_all_to_all_config_init(&cfg, BLK_ALL_TO_ALL_CONFIG_VERSION));
    cfg.place = place;
    make_areas(c, gids, n);
    rc = blk_all_to_all_with(m, c->a, k, contiguous, send, receive, &cfg, c);
    free_areas();
  } else {
    rc = blk_all_to_all(m, c->a, k, contiguous, send, receive, c);
  }
  free_sent();
  blk_partners_destroy(c->swap);
  c->swap = NULL;
  return rc;
}

static int noop(void *block, blk_proxy *p, void *user) {
  (void)block;
  (void)p;
  (void)user;
  return 0;
}

/* A master with this rank's blocks of a. */
/* Whether a budget of mem_blocks may swap one of rank's blocks out: one
 * that holds them all counts as none (messages refer, place is asked). */
static int swaps_of(const blk_assigner *a, int rank, int mem_blocks) {
  return mem_blocks > 0 && mem_blocks < blk_assigner_local_count(a, rank);
}

static blk_master *master_of(const blk_assigner *a, int rank, int threads, int mem_blocks) {
  blk_master *m;
  blk_master_config mc = check_master_config(threads, mem_blocks, create, destroy, save, load);
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  int gids[NB_MAX], n = blk_assigner_local_count(a, rank);
  blk_assigner_local_gids(a, rank, gids, NB_MAX);
  check_add_blocks(m, gids, n, create);
  return m;
}

/* One block per rank, one round (k = ranks), big messages: blk can place
 * every message from another rank (in-core, one thread: the driver reads
 * headers only once the block's send phase is done). Then the failure
 * paths: a place that refuses and a receive that fails for it, and a
 * config of an unknown version. */
static void placement_and_failures(int size, int rank, int threads, int big, int mem_blocks) {
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_round_robin(&a, size, size));
  /* One block per rank: any budget holds it, so blk may refer and place. */
  ctx c = {.nblocks = size,
           .big = big,
           .mode = PLACED,
           .swaps = swaps_of(a, rank, mem_blocks),
           .budget = mem_blocks > 0,
           .rank = rank,
           .a = a,
           .fail_gid = -1,
           .fail_send_gid = -1};
  blk_master *m = master_of(a, rank, threads, mem_blocks);
  int k = size < 2 ? 2 : size;
  for (int rep = 0; rep < 3; rep++) CHECK_OK(run(m, &c, k, 1, &rank, 1));
  long placed = 0; /* (some ranks' messages are all refused or too big for their slot) */
  MPI_Allreduce(&c.placed, &placed, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  /* Messages cross ranks here with --big, or from gid 3 (message_size);
   * only the big ones follow their header, the others are copied from it. */
  if (size > 1 && !c.swaps && threads == 1 && (big || size > 3))
    CHECK_MSG(placed > 0, "nothing placed in 3 direct exchanges (rank %d: %ld asked)", rank,
              c.asked);
  else if (c.swaps)
    CHECK_MSG(c.asked == 0, "rank %d: place asked %ld times under a budget", rank, c.asked);

  /* Failing: the last gid's receive fails (as a place that could not
   * find room would make it); every rank returns the same code. */
  blk_log_set_level(BLK_LOG_NONE);
  c.fail_gid = size - 1;
  CHECK_ERR(run(m, &c, k, 1, &rank, 1), BLK_ECALLBACK, "receive");
  c.fail_gid = -1;
  /* A sender fails after its send phase enqueued: the others' messages
   * may be placed already, or under way, when the failure reaches them. */
  c.fail_send_gid = 0;
  CHECK_ERR(run(m, &c, k, 1, &rank, 1), BLK_ECALLBACK, "send");
  c.fail_send_gid = -1;
  /* An unknown config version, here on rank 0 only: every rank fails. */
  blk_all_to_all_config cfg = BLK_ALL_TO_ALL_CONFIG_INIT;
  if (rank == 0) cfg.version = BLK_ALL_TO_ALL_CONFIG_VERSION + 1;
  CHECK_ERR(blk_all_to_all_with(m, a, k, 1, noop, noop, &cfg, NULL), BLK_EINVAL, "version");
  CHECK_ERR(blk_all_to_all_config_init(&cfg, 0), BLK_EINVAL, "version");
  CHECK_ERR(blk_all_to_all_config_init(NULL, 1), BLK_EINVAL, "NULL");
  blk_log_set_level(BLK_LOG_WARN);
  CHECK_OK(blk_all_to_all_with(m, a, k, 1, noop, noop, NULL, NULL)); /* NULL: the defaults */
  check_budget(m, mem_blocks);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
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
  /* 13: a prime above every k, one wide round; 47: folded (gids 0..3 into
   * 0 and 2, across ranks under the round-robin assigner) */
  static const int counts[] = {1, 2, 7, 9, 12, 13, 44, 47};
  /* Under the contiguous assigner, counts whose runs of gids on a rank hold
   * whole early groups at some rank counts and k (12: 4 a rank at 3 ranks;
   * 16: 8 a rank at 2 ranks; 64: one round of 64 at 1 rank, 16 a rank at
   * 4). */
  static const int contiguous_counts[] = {12, 16, 64};
  static const int radices[] = {2, 3, 4, 8};
  int runs = 0, most = 0;
  long placed = 0, asked = 0;
  for (int ci = 0; ci < 11; ci++) {
    int by_runs = ci >= 8, nblocks = by_runs ? contiguous_counts[ci - 8] : counts[ci];
    if (by_runs && big) continue; /* (the rounds do not depend on the sizes) */
    if (nblocks > most) most = nblocks;
    blk_assigner *a;
    if (by_runs)
      CHECK_OK(blk_assigner_create_contiguous(&a, size, nblocks));
    else
      CHECK_OK(blk_assigner_create_round_robin(&a, size, nblocks));
    ctx c = {.nblocks = nblocks,
             .big = big,
             .mode = BY_COPY,
             .swaps = swaps_of(a, rank, mem_blocks),
             .budget = mem_blocks > 0,
             .rank = rank,
             .a = a,
             .fail_gid = -1,
             .fail_send_gid = -1};
    blk_master *m = master_of(a, rank, threads, mem_blocks);
    int n = blk_assigner_local_count(a, rank);
    int gids[NB_MAX];
    blk_assigner_local_gids(a, rank, gids, NB_MAX);
    for (int ki = 0; ki < 4; ki++)
      for (int contiguous = 0; contiguous <= 1; contiguous++)
        for (c.mode = BY_COPY; c.mode <= PLACED; c.mode++) {
          /* Big messages over 44 and 47 blocks (n^2 of them, most of the
           * suite's time under the sanitizers) with k = 2 and 8 only:
           * k = 3 and 4 have them at up to 13 blocks, and every k at 44
           * and 47 blocks without --big. */
          if (big && nblocks > 13 && (radices[ki] == 3 || radices[ki] == 4)) continue;
          CHECK_OK(run(m, &c, radices[ki], contiguous, gids, n));
          runs++;
        }
    blk_log_set_level(BLK_LOG_NONE);
    CHECK_ERR(blk_all_to_all(m, a, 1, 1, send, receive, &c), BLK_EINVAL, "k = 1");
    blk_log_set_level(BLK_LOG_WARN);
    check_budget(m, mem_blocks);
    blk_master_destroy(m);
    blk_assigner_destroy(a);
    placed += c.placed;
    asked += c.asked;
    if (c.swaps)
      CHECK_MSG(c.asked == 0, "rank %d: place asked %ld times under a budget", rank, c.asked);
  }
  placement_and_failures(size, rank, threads, big, mem_blocks);
  if (rank == 0)
    printf(
        "test_all_to_all: ok (%d runs over 1..%d blocks, %d ranks, %d threads%s%s; rank 0 "
        "placed %ld of %ld asked)\n",
        runs, most, size, threads, big ? ", big messages" : "", mem_blocks ? ", out-of-core" : "",
        placed, asked);
  MPI_Finalize();
  return 0;
}
