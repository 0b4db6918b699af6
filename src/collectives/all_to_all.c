/*
 * all_to_all.c: every block to every block, through k-ary swap rounds.
 *
 * The blocks are numbered 0..n-1 along one axis and swap partners are built
 * for it (partners.h). In round e a block's group is the blocks that differ
 * from it only in digit e of their gid, listed by that digit, so the block
 * forwards a message for destination d to the member in d's position
 * (blk_partners_round_position). After the last round every digit agrees:
 * the message is at d.
 *
 * Messages travel as items: [src int32][dst int32][size uint64][bytes], all
 * items for one group member packed into that round's one message. A block
 * holds only the items passing through it, so what it carries per round
 * does not depend on n when most destinations are empty.
 *
 * With one round (n <= k, or n prime: a direct exchange) a message carries
 * exactly one block's bytes for its receiver, so it goes without item
 * headers: the queue send_fn filled becomes the round's out queue, and the
 * message that arrives becomes receive_fn's in queue, both by swapping
 * storage. Bytes are then copied only by the user (enqueue, dequeue) and by
 * MPI.
 *
 * The driver is blk_reduce; the callback below runs the user's send_fn in
 * round 0, only forwards in rounds 1..R-1, and runs receive_fn in round R.
 * Per-block state is touched only by the pool thread running that block.
 * A round that finds no memory returns BLK_ENOMEM (the driver fails the
 * block and what depends on it); so does a send phase in which an enqueue
 * failed, even if send_fn went on and returned 0, so nothing is lost
 * silently.
 *
 * Cost (n blocks, m bytes sent per block, R = log_k n rounds): alpha per
 * group member per round, (k-1)/k of the carried bytes per round across,
 * and R + 1 copies of every byte by blk with R > 1 (packing, R - 1 forwards,
 * unpacking), none with R = 1.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "blk/all_to_all.h"
#include "blk/partners.h"
#include "blk/reduce.h"
#include "collectives/reduce_run.h"
#include "master/master_state.h"
#include "runtime/callback.h"
#include "runtime/proxy_state.h"

typedef struct item_header {
  int32_t src, dst;
  uint64_t size;
} item_header;

/* The send phase's out queues: created on first enqueue to a gid. */
typedef struct a2a_block {
  blk__gid_map index; /* dst gid -> out queue */
  int *gids;
  blk_buffer *queues;
  int n, cap;
  int lost; /* an enqueue in the send phase found no memory */
} a2a_block;

typedef struct a2a {
  blk_master *m;
  const blk_partners *p;
  blk_foreach_fn send_fn, receive_fn;
  void *user;
  int nblocks, rounds;
  a2a_block *blocks; /* by lid */
} a2a;

typedef struct send_hook {
  const a2a *s;
  a2a_block *b;
} send_hook;

/* proxy open_out hook: the out queue for gid, created if new; -2 (with the
 * detail set) when there is no memory for it. */
static int open_out(blk_proxy *p, int gid) {
  send_hook *h = p->hook;
  a2a_block *b = h->b;
  if (gid < 0 || gid >= h->s->nblocks)
    blk__proxy_misuse(p, "all_to_all: enqueue to gid %d, outside 0..%d", gid, h->s->nblocks - 1);
  int i = blk__gid_map_get(&b->index, gid);
  if (i >= 0) return i;
  if (b->n == b->cap) {
    int ncap = b->cap ? 2 * b->cap : 8;
    int *gids = blk__realloc(b->gids, (size_t)ncap * sizeof *gids);
    if (gids) b->gids = gids;
    blk_buffer *queues = gids ? blk__realloc(b->queues, (size_t)ncap * sizeof *queues) : NULL;
    if (!queues) goto no_memory;
    b->queues = queues;
    b->cap = ncap;
  }
  if (blk__gid_map_put(&b->index, gid, b->n)) goto no_memory;
  i = b->n++;
  b->gids[i] = gid;
  blk_buffer_init(&b->queues[i]);
  p->out_gids = b->gids;
  p->out = b->queues;
  p->nout = b->n;
  return i;
no_memory:
  b->lost = 1;
  blk__fail(BLK_ENOMEM, "all_to_all: gid %d has no memory for a queue to gid %d", blk_proxy_gid(p),
            gid);
  return -2;
}

/* Appends one item to the out queue of the group member that matches dst in
 * this round's digit. */
static int forward(const a2a *s, blk_proxy *p, int32_t src, int32_t dst, const void *data,
                   uint64_t size) {
  int j = blk_partners_round_position(s->p, blk_proxy_round(p), dst);
  item_header h = {src, dst, size};
  int rc = blk_proxy_enqueue(p, j, &h, sizeof h);
  if (!rc) rc = blk_proxy_enqueue(p, j, data, (size_t)size);
  return rc;
}

/* Reads the next item of in queue i; its bytes stay in the queue. */
static const void *next_item(blk_proxy *p, int i, item_header *h) {
  blk_proxy_dequeue(p, i, h, sizeof *h);
  const void *data = blk_buffer_read_view(blk_proxy_incoming(p, i), (size_t)h->size);
  if (!data && h->size)
    blk__proxy_misuse(p, "all_to_all: an item from gid %d claims %llu bytes past the message end",
                      (int)h->src, (unsigned long long)h->size);
  return data;
}

typedef struct arrival {
  int32_t src;
  uint64_t size;
  const void *data;
} arrival;

static int by_source(const void *a, const void *b) {
  int32_t x = ((const arrival *)a)->src, y = ((const arrival *)b)->src;
  return (x > y) - (x < y);
}

/* Runs receive_fn with the n in queues in[] from gids[] (ascending). */
static int receive(const a2a *s, void *block, const blk_proxy *p, int n, const int *gids,
                   blk_buffer *in) {
  blk_proxy user = *p;
  user.nin = n;
  user.in_gids = gids;
  user.in = in;
  user.nout = 0;
  user.out_gids = NULL;
  user.out = NULL;
  user.phase = "all_to_all receive";
  user.partners = NULL; /* the swap rounds are blk's, not the caller's */
  blk__clear_error();
  int rc = s->receive_fn(block, &user, s->user);
  return rc ? blk__callback_error("receive callback", rc) : BLK_OK;
}

/* Round 0: runs send_fn with the open_out hook; a failed enqueue fails the
 * send phase whatever send_fn returned. */
static int send_phase(const a2a *s, void *block, const blk_proxy *p, a2a_block *b) {
  send_hook hook = {s, b};
  blk_proxy user = *p;
  user.nin = user.nout = 0;
  user.in_gids = user.out_gids = NULL;
  user.in = user.out = NULL;
  user.open_out = open_out;
  user.hook = &hook;
  user.partners = NULL;
  user.phase = "all_to_all send";
  blk__clear_error();
  int rc = s->send_fn(block, &user, s->user);
  if (rc) return blk__callback_error("send callback", rc);
  for (int i = 0; i < b->n && !b->lost; i++) b->lost = b->queues[i].error != 0;
  if (b->lost)
    return blk__fail(BLK_ENOMEM,
                     "all_to_all: gid %d: an enqueue of its send phase found no memory (and the "
                     "send callback returned 0)",
                     blk_proxy_gid(p));
  return BLK_OK;
}

/* Round R: hand the user one in queue per source, ascending. */
static int deliver_to_user(a2a *s, void *block, blk_proxy *p, arrival *got, int n) {
  qsort(got, (size_t)n, sizeof *got, by_source);
  int *gids = blk__malloc((size_t)(n ? n : 1) * sizeof *gids);
  blk_buffer *in = blk__calloc((size_t)(n ? n : 1), sizeof *in);
  int rc = BLK_OK;
  if (!gids || !in) {
    rc = blk__fail(BLK_ENOMEM, "all_to_all: gid %d has no memory for %d arrivals", blk_proxy_gid(p),
                   n);
    goto exit;
  }
  for (int i = 0; i < n; i++) {
    gids[i] = got[i].src;
    if (i > 0 && gids[i] == gids[i - 1])
      blk__proxy_misuse(p, "all_to_all: two messages from gid %d", gids[i]);
    if (blk__buffer_cache_reserve(s->m->cache, &in[i], (size_t)got[i].size) ||
        blk_buffer_write(&in[i], got[i].data, (size_t)got[i].size)) {
      rc = blk__fail(BLK_ENOMEM, "all_to_all: gid %d has no memory for %llu bytes from gid %d",
                     blk_proxy_gid(p), (unsigned long long)got[i].size, gids[i]);
      goto exit;
    }
  }
  rc = receive(s, block, p, n, gids, in);
exit:
  for (int i = 0; in && i < n; i++) blk__buffer_cache_give(s->m->cache, &in[i]);
  free(in);
  free(gids);
  return rc;
}

/* Round 0 of several: every destination's queue, as one item, into the
 * message for the group member on its way; each message sized first, so it
 * is written without growing. */
static int pack(const a2a *s, blk_proxy *p, a2a_block *b) {
  int gid = blk_proxy_gid(p), nout = blk_proxy_out_count(p);
  size_t *bytes = blk__calloc((size_t)(nout ? nout : 1), sizeof *bytes);
  if (!bytes)
    return blk__fail(BLK_ENOMEM, "all_to_all: gid %d has no memory for %d messages", gid, nout);
  for (int i = 0; i < b->n; i++)
    if (b->queues[i].size)
      bytes[blk_partners_round_position(s->p, 0, b->gids[i])] +=
          sizeof(item_header) + b->queues[i].size;
  int rc = BLK_OK;
  for (int j = 0; j < nout && !rc; j++)
    if (bytes[j]) rc = blk__buffer_cache_reserve(s->m->cache, &p->out[j], bytes[j]);
  free(bytes);
  for (int i = 0; i < b->n && !rc; i++)
    if (b->queues[i].size)
      rc = forward(s, p, gid, b->gids[i], b->queues[i].data, b->queues[i].size);
  if (rc) return blk__fail(rc, "all_to_all: gid %d has no memory to pack its messages", gid);
  return BLK_OK;
}

/* The last round of a direct exchange: in queue i holds exactly what in-
 * partner i sent this block, so the non-empty ones are receive_fn's in
 * queues as they are (and go back to their slots after, for reuse). */
static int deliver_direct(a2a *s, void *block, blk_proxy *p) {
  enum { ON_STACK = 16 }; /* small groups need no allocation */
  int n = blk_proxy_in_count(p), used = 0;
  int gids_here[ON_STACK], slot_here[ON_STACK];
  blk_buffer in_here[ON_STACK];
  int *gids = gids_here, *slot = slot_here;
  blk_buffer *in = in_here;
  if (n > ON_STACK) {
    gids = blk__malloc((size_t)n * sizeof *gids);
    slot = blk__malloc((size_t)n * sizeof *slot);
    in = blk__malloc((size_t)n * sizeof *in);
    if (!gids || !slot || !in) {
      free(in);
      free(slot);
      free(gids);
      return blk__fail(BLK_ENOMEM, "all_to_all: gid %d has no memory for %d arrivals",
                       blk_proxy_gid(p), n);
    }
  }
  /* The group lists members by their digit, which for one round is the gid:
   * ascending already. */
  for (int i = 0; i < n; i++)
    if (blk_proxy_incoming_remaining(p, i)) {
      gids[used] = blk_proxy_in_gid(p, i);
      if (used && gids[used] <= gids[used - 1])
        blk__panic("all_to_all: in-partners of gid %d out of order (%d after %d)", blk_proxy_gid(p),
                   gids[used], gids[used - 1]);
      slot[used] = i;
      blk_buffer_init(&in[used]);
      blk_buffer_swap(&in[used++], &p->in[i]);
    }
  int rc = receive(s, block, p, used, gids, in);
  for (int i = 0; i < used; i++) blk_buffer_swap(&in[i], &p->in[slot[i]]);
  if (n > ON_STACK) {
    free(in);
    free(slot);
    free(gids);
  }
  return rc;
}

static int a2a_round(void *block, blk_proxy *p, void *user) {
  a2a *s = user;
  int r = blk_proxy_round(p), rc = BLK_OK;
  int gid = blk_proxy_gid(p);
  if (r == 0) {
    a2a_block *b = &s->blocks[blk__table_lid(&s->m->table, gid)];
    rc = send_phase(s, block, p, b);
    if (rc) {
      /* nothing goes out: the driver sends failed messages */
    } else if (s->rounds == 0) {
      /* One block: what it sent to itself is all it receives. */
      arrival got = {gid, 0, NULL};
      int n = 0;
      if (b->n && b->queues[0].size) {
        got.size = b->queues[0].size;
        got.data = b->queues[0].data;
        n = 1;
      }
      rc = deliver_to_user(s, block, p, &got, n);
    } else if (s->rounds == 1) {
      for (int i = 0; i < b->n; i++) { /* a direct exchange: the queue is the message */
        int j = blk_partners_round_position(s->p, 0, b->gids[i]);
        blk_buffer_swap(&p->out[j], &b->queues[i]);
      }
    } else {
      rc = pack(s, p, b);
    }
    for (int i = 0; i < b->n; i++) blk__buffer_cache_give(s->m->cache, &b->queues[i]);
    b->n = 0;
    b->lost = 0;
    blk__gid_map_free(&b->index);
    return rc;
  }
  if (r < s->rounds) {
    for (int i = 0; i < blk_proxy_in_count(p); i++)
      while (blk_proxy_incoming_remaining(p, i)) {
        item_header h;
        const void *data = next_item(p, i, &h);
        if ((rc = forward(s, p, h.src, h.dst, data, h.size)))
          return blk__fail(rc, "all_to_all: gid %d has no memory to forward %llu bytes to gid %d",
                           gid, (unsigned long long)h.size, (int)h.dst);
      }
    return BLK_OK;
  }
  if (s->rounds == 1) return deliver_direct(s, block, p);
  /* The last round: everything here is for this block. */
  int n = 0, cap = 16;
  arrival *got = blk__malloc((size_t)cap * sizeof *got);
  if (!got) return blk__fail(BLK_ENOMEM, "all_to_all: gid %d has no memory for its arrivals", gid);
  for (int i = 0; i < blk_proxy_in_count(p); i++)
    while (blk_proxy_incoming_remaining(p, i)) {
      item_header h;
      const void *data = next_item(p, i, &h);
      if (h.dst != gid)
        blk__proxy_misuse(p, "all_to_all: an item for gid %d from gid %d ended here", (int)h.dst,
                          (int)h.src);
      if (n == cap) {
        cap *= 2;
        arrival *grown = blk__realloc(got, (size_t)cap * sizeof *got);
        if (!grown) {
          free(got);
          return blk__fail(BLK_ENOMEM, "all_to_all: gid %d has no memory for %d arrivals", gid,
                           cap);
        }
        got = grown;
      }
      got[n++] = (arrival){h.src, h.size, data};
    }
  rc = deliver_to_user(s, block, p, got, n);
  free(got);
  return rc;
}

/* The user's callbacks, and so the block, only run in the first and last
 * rounds; out-of-core, the forwarding rounds leave the block where it is. */
static int needs_block(int round, void *user) {
  const a2a *s = user;
  return round == 0 || round == s->rounds;
}

int blk_all_to_all(blk_master *m, const blk_assigner *a, int k, int contiguous,
                   blk_foreach_fn send_fn, blk_foreach_fn receive_fn, void *user) {
  static const blk__driver driver = {"all_to_all", needs_block, 1, NULL};
  if (!m) return blk__fail(BLK_EINVAL, "all_to_all: the master is NULL");
  if (!a || !send_fn || !receive_fn)
    return blk__fail(BLK_EINVAL, "all_to_all: the assigner, send_fn or receive_fn is NULL");
  a2a s = {.m = m, .send_fn = send_fn, .receive_fn = receive_fn, .user = user};
  s.nblocks = blk_assigner_nblocks(a);
  blk_partners *p = NULL;
  int rc = blk_partners_create(&p, BLK_SWAP, 1, &s.nblocks, k, contiguous);
  int nlocal = blk__table_count(&m->table);
  if (!rc && !(s.blocks = blk__calloc((size_t)(nlocal ? nlocal : 1), sizeof *s.blocks)))
    rc = blk__fail(BLK_ENOMEM, "all_to_all: no memory for %d blocks", nlocal);
  if (rc) { /* the other ranks may be under way: take part, failed */
    rc = blk__reduce_abort(m, rc, driver.name);
    goto exit;
  }
  s.p = p;
  s.rounds = blk_partners_rounds(p);
  for (int i = 0; i < nlocal; i++) blk__gid_map_init(&s.blocks[i].index);
  rc = blk__reduce_run(m, a, p, a2a_round, &s, &driver);
exit:
  if (s.blocks)
    for (int i = 0; i < nlocal; i++) {
      for (int q = 0; q < s.blocks[i].n; q++) blk_buffer_free(&s.blocks[i].queues[q]);
      free(s.blocks[i].gids);
      free(s.blocks[i].queues);
      blk__gid_map_free(&s.blocks[i].index);
    }
  free(s.blocks);
  blk_partners_destroy(p);
  return rc;
}
