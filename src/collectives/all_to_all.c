/*
 * all_to_all.c: every block to every block, through k-ary swap rounds.
 *
 * The blocks are numbered 0..n-1 along one axis and swap partners are built
 * for it (partners.h), with the rounds inside a rank merged
 * (swap_partners.h: all of at most 64 blocks on one rank, or at most 64
 * with a budget on some rank, in one round, else runs of rounds whose
 * groups lie on one rank; such a round only forwards, and under a budget
 * every forward is a trip through storage).
 * In round e a block's group is the blocks that differ
 * from it only in digit e of their gid, listed by that digit, so the block
 * forwards a message for destination d to the member in d's position
 * (blk_partners_round_position). After the last round every digit agrees:
 * the message is at d. A count with a prime factor above max(k, 16) is
 * folded first, unless it is one round on one rank (patterns/
 * partners_folded.h): the extras hand everything
 * to their stand-ins, the rest swap as virtual blocks, and a last round
 * hands the extras what is theirs; 1009 blocks would otherwise send 1009
 * messages each in one round.
 *
 * What a block sends to one destination travels as an item (src, dst,
 * size, bytes); all items for one group member go in that round's one
 * message, in one of two forms:
 *
 * - packed, [src int32][dst int32][size uint64][bytes] per item: to a member
 *   on another rank, and to every member under a memory budget (a message
 *   must then be whole in itself, since it may be spilled);
 * - a list of references (struct item: the header and where the bytes are),
 *   to a member on the same rank without a budget. The bytes stay where
 *   they are: in the caller's memory (blk_proxy_enqueue_ref), in the
 *   sender's arena (what it enqueued by copy, moved there in one buffer at
 *   the end of the send phase, so that its queues, one per destination, go
 *   back to the cache at once), or in a packed message that came from
 *   another rank, which the block that received it keeps (held) for the
 *   rest of the operation. All of it is freed when blk_all_to_all returns,
 *   once every callback has run and every send is complete.
 *
 * ("A budget" here is one that may swap a block out: blk__budget_may_swap.)
 * So without a budget a byte enqueued by reference is copied by blk once
 * per round that crosses ranks and never inside a rank; a byte enqueued by
 * copy once more, into the arena. Under a budget every byte is copied once
 * per round, as a packed message. The last round hands receive_fn in queues that refer to
 * the items' bytes (no copy); blk_proxy_incoming copies one into storage of
 * its own when the user asks for the buffer, so it may still be kept
 * (blk/proxy.h).
 *
 * With one round (n <= k, a prime up to 16, or at most 64 blocks all on one
 * rank: a direct exchange) a message carries
 * exactly one block's bytes for its receiver, so it goes without item
 * headers: the queue send_fn filled (bytes, or a reference) becomes the
 * round's out queue, and the message that arrives becomes receive_fn's in
 * queue, both by swapping. Bytes are then copied by MPI and by the user
 * only; with the caller's place callback (blk_all_to_all_with) by MPI
 * alone: the driver asks it where a message from another rank goes when
 * its header arrives (place_direct, through blk__driver.place and comm's
 * place function, the broadcast's mechanism), MPI receives the payload
 * there, and receive_fn's in queue refers to it.
 *
 * The driver is blk_reduce; the callback below runs the user's send_fn in
 * round 0, only forwards in rounds 1..R-1, and runs receive_fn in round R.
 * Per-block state is touched only by the pool thread running that block;
 * other blocks only read the bytes its items point at, which nobody writes
 * after the round that made them. A round that finds no memory returns
 * BLK_ENOMEM (the driver fails the block and what depends on it); so does
 * a send phase in which an enqueue failed, even if send_fn went on and
 * returned 0, and a receive in which a copy blk_proxy_incoming made found
 * none, so nothing is lost silently.
 *
 * Cost (n blocks, m bytes sent per block, R = log_k n rounds): alpha per
 * group member per round, (k-1)/k of the carried bytes per round across.
 * Copies by blk without a budget: delta m' per round for the m' bytes that
 * cross ranks in it (an item, once per round in which it crosses), delta m
 * for the bytes enqueued by copy (the arena), and 24 bytes per item per
 * round inside a rank; under a budget R copies of every byte (packing, then
 * one forward per later round). Memory without a budget: the arenas and
 * every packed message received before the last round, until the call
 * returns.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/copy.h"
#include "base/settings.h"
#include "blk/all_to_all.h"
#include "blk/partners.h"
#include "blk/reduce.h"
#include "collectives/reduce_run.h"
#include "collectives/swap_partners.h"
#include "master/master_state.h"
#include "patterns/partners_folded.h"
#include "runtime/callback.h"
#include "runtime/proxy_state.h"

/* A packed item's header. */
typedef struct item_header {
  int32_t src, dst;
  uint64_t size;
} item_header;

/* An item where it is: a packed one's header and bytes, or an entry of a
 * list of references. */
typedef struct item {
  int32_t src, dst;
  uint64_t size;
  const unsigned char *data;
} item;

typedef struct a2a_block {
  /* The send phase's out queues, created on first enqueue to a gid. */
  blk__gid_map index; /* dst gid -> out queue */
  int *gids;
  blk_buffer *queues;
  int n, cap;
  int lost; /* an enqueue in the send phase found no memory */
  /* What the send phase enqueued by copy, and packed messages from other
   * ranks: items point into them until the call returns. */
  blk_buffer arena;
  blk_buffer *held;
  int nheld, cap_held;
  /* This round's items, and bytes per out queue (scratch, kept). */
  item *items;
  size_t nitems, cap_items;
  size_t *bytes;
  unsigned char *listed; /* out queue j is a list of references */
  int cap_out;
  /* The last round's in queues and their gids (scratch, kept). */
  blk_buffer *in;
  int *in_gids;
  size_t cap_in;
} a2a_block;

/* Swap rounds over one axis run at most one round per factor of n, and
 * two more when n is folded. */
#define MAX_ROUNDS 34

typedef struct a2a {
  blk_master *m;
  const blk_assigner *a;
  const blk_partners *p;
  blk_foreach_fn send_fn, receive_fn;
  blk_all_to_all_place_fn place; /* the caller's, or NULL */
  void *user;
  int nblocks, k, rounds, me;
  int refs; /* no budget: items inside the rank travel as references */
  int fold; /* folded (partners_folded.h): gids 2i+1 for i < fold are extras */
  /* Round e's digit of a gid, (gid / step[e]) % radix[e]: the partners'
   * blk_partners_round_position over one axis, without a call per item
   * (folded: of the virtual block the gid stands as). */
  int step[MAX_ROUNDS], radix[MAX_ROUNDS];
  a2a_block *blocks; /* by lid, kept from one call to the next */
} a2a;

/* The per-block records, kept by the master between calls so that a call
 * of small messages does not spend its time in malloc (operation.h); and
 * the digits of the partners they were worked out for (swap_partners.h). */
typedef struct a2a_kept {
  a2a_block *blocks;
  int cap;
  const blk_partners *digits_of; /* NULL: none yet */
  int fold, step[MAX_ROUNDS], radix[MAX_ROUNDS];
} a2a_kept;

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

/* Whether messages between this rank's blocks and gid are lists of
 * references (see the top). */
static int by_reference(const a2a *s, int gid) {
  return s->refs && blk_assigner_rank(s->a, gid) == s->me;
}

/* The member of round's group on the way to dst. Folded, round 0 gives
 * everything to the stand-in (or keeps it), the last round gives an
 * extra's items to it, and the rounds between route by virtual blocks. */
static int position(const a2a *s, int round, int dst) {
  if (s->fold) {
    if (round == 0) return 0;
    if (round == s->rounds - 1) return dst < 2 * s->fold && (dst & 1);
    dst = dst < 2 * s->fold ? dst / 2 : dst - s->fold;
  }
  return (dst / s->step[round]) % s->radix[round];
}

/* Room for count more items. */
static int room_for_items(a2a_block *b, size_t count) {
  if (count <= b->cap_items - b->nitems) return BLK_OK;
  size_t ncap = b->cap_items ? 2 * b->cap_items : 64;
  if (ncap - b->nitems < count) ncap = b->nitems + count;
  item *grown = blk__realloc(b->items, ncap * sizeof *grown);
  if (!grown) return BLK_ENOMEM;
  b->items = grown;
  b->cap_items = ncap;
  return BLK_OK;
}

/* Appends the items of packed message m (from gid src) to b->items; their
 * bytes stay in m. A header that claims bytes past the end stops the job. */
static int add_packed(blk_proxy *p, a2a_block *b, const blk_buffer *m, int src) {
  size_t at = m->pos;
  while (at < m->size) {
    item_header h;
    if (m->size - at < sizeof h)
      blk__proxy_misuse(p, "all_to_all: %zu stray bytes at the end of the message from gid %d",
                        m->size - at, src);
    memcpy(&h, m->data + at, sizeof h);
    at += sizeof h;
    if (h.size > m->size - at)
      blk__proxy_misuse(p, "all_to_all: an item from gid %d claims %llu bytes past the message end",
                        (int)h.src, (unsigned long long)h.size);
    if (room_for_items(b, 1)) return BLK_ENOMEM;
    b->items[b->nitems++] = (item){h.src, h.dst, h.size, m->data + at};
    at += (size_t)h.size;
  }
  return BLK_OK;
}

/* Appends the items of a list of references to b->items. */
static int add_references(blk_proxy *p, a2a_block *b, const blk_buffer *m, int src) {
  size_t bytes = m->size - m->pos;
  if (bytes % sizeof(item))
    blk__proxy_misuse(p, "all_to_all: a list of references from gid %d of %zu bytes", src, bytes);
  size_t count = bytes / sizeof(item);
  if (room_for_items(b, count)) return BLK_ENOMEM;
  blk__copy(b->items + b->nitems, m->data + m->pos, count * sizeof(item));
  b->nitems += count;
  return BLK_OK;
}

/* Keeps in queue i's storage for the rest of the operation (items point
 * into it) and returns where it went. */
static blk_buffer *hold(a2a_block *b, blk_buffer *in) {
  if (b->nheld == b->cap_held) {
    int ncap = b->cap_held ? 2 * b->cap_held : 8;
    blk_buffer *grown = blk__realloc(b->held, (size_t)ncap * sizeof *grown);
    if (!grown) return NULL;
    b->held = grown;
    b->cap_held = ncap;
  }
  blk_buffer *kept = &b->held[b->nheld++];
  blk_buffer_init(kept);
  blk_buffer_swap(kept, in);
  return kept;
}

/* This round's items: what send_fn enqueued in round 0, what the in queues
 * brought later. A packed message from another rank is held if its items
 * may travel on as references (before the last round, without a budget). */
static int gather(const a2a *s, blk_proxy *p, a2a_block *b, int round) {
  b->nitems = 0;
  if (round == 0) {
    /* Bytes enqueued by copy move to the block's one arena (the queues go
     * back to the cache now, as many as there are destinations); bytes
     * enqueued by reference stay in the caller's memory. */
    size_t copied = 0;
    for (int i = 0; i < b->n; i++)
      if (!blk__buffer_is_ref(&b->queues[i])) copied += b->queues[i].size;
    if (s->refs && copied && blk__buffer_cache_reserve(s->m->cache, &b->arena, copied))
      return BLK_ENOMEM;
    for (int i = 0; i < b->n; i++) {
      const blk_buffer *q = &b->queues[i];
      if (!q->size) continue;
      if (room_for_items(b, 1)) return BLK_ENOMEM;
      const unsigned char *at = q->data;
      if (s->refs && !blk__buffer_is_ref(q)) {
        at = b->arena.data + b->arena.size;
        blk_buffer_write(&b->arena, q->data, q->size);
      }
      b->items[b->nitems++] = (item){blk_proxy_gid(p), b->gids[i], q->size, at};
    }
    return BLK_OK;
  }
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    int src = blk_proxy_in_gid(p, i);
    blk_buffer *m = &p->in[i];
    int rc;
    if (by_reference(s, src)) {
      rc = add_references(p, b, m, src);
    } else {
      if (s->refs && round < s->rounds && m->size && !(m = hold(b, m))) return BLK_ENOMEM;
      rc = add_packed(p, b, m, src);
    }
    if (rc) return rc;
  }
  return BLK_OK;
}

/* Sends every item to the group member on its way: each message sized
 * first, so it is written without growing. */
static int route(const a2a *s, blk_proxy *p, a2a_block *b, int round) {
  int nout = blk_proxy_out_count(p);
  if (nout > b->cap_out) {
    size_t *bytes = blk__realloc(b->bytes, (size_t)nout * sizeof *bytes);
    if (bytes) b->bytes = bytes;
    unsigned char *listed = bytes ? blk__realloc(b->listed, (size_t)nout) : NULL;
    if (!listed) return BLK_ENOMEM;
    b->listed = listed;
    b->cap_out = nout;
  }
  for (int j = 0; j < nout; j++) {
    b->bytes[j] = 0;
    b->listed[j] = (unsigned char)by_reference(s, blk_proxy_out_gid(p, j));
  }
  for (size_t t = 0; t < b->nitems; t++) {
    const item *it = &b->items[t];
    int j = position(s, round, it->dst);
    b->bytes[j] += b->listed[j] ? sizeof(item) : sizeof(item_header) + it->size;
  }
  for (int j = 0; j < nout; j++)
    if (b->bytes[j] && blk__buffer_cache_reserve(s->m->cache, &p->out[j], b->bytes[j]))
      return BLK_ENOMEM;
  for (size_t t = 0; t < b->nitems; t++) {
    const item *it = &b->items[t];
    int j = position(s, round, it->dst);
    if (b->listed[j]) {
      blk_buffer_write(&p->out[j], it, sizeof *it);
    } else {
      item_header h = {it->src, it->dst, it->size};
      blk_buffer_write(&p->out[j], &h, sizeof h);
      blk_buffer_write(&p->out[j], it->data, (size_t)it->size);
    }
  }
  return BLK_OK;
}

static int by_source(const void *a, const void *b) {
  int32_t x = ((const item *)a)->src, y = ((const item *)b)->src;
  return (x > y) - (x < y);
}

/* Runs receive_fn with the n in queues in[] from gids[] (ascending), which
 * may be references (see the top); what the callback left in them is given
 * back to the cache. */
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
  user.in_lent = 1;
  user.in_lost = 0;
  blk__clear_error();
  int rc = s->receive_fn(block, &user, s->user);
  if (rc) return blk__callback_error("receive callback", rc);
  if (user.in_lost)
    return blk__fail(BLK_ENOMEM,
                     "all_to_all: gid %d: a message its receive callback asked for found no "
                     "memory for a copy (and the callback returned 0)",
                     blk_proxy_gid(p));
  return BLK_OK;
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
  user.refs = s->refs;
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

/* The last round of several: every item here is for this block; receive_fn
 * gets one in queue per source, ascending, referring to the item's bytes. */
static int deliver_items(a2a *s, void *block, blk_proxy *p, a2a_block *b) {
  int gid = blk_proxy_gid(p);
  size_t n = b->nitems;
  for (size_t i = 1; i < n; i++) /* often in order already */
    if (b->items[i].src < b->items[i - 1].src) {
      qsort(b->items, n, sizeof *b->items, by_source);
      break;
    }
  if (n > b->cap_in) {
    int *gids = blk__realloc(b->in_gids, n * sizeof *gids);
    if (gids) b->in_gids = gids;
    blk_buffer *in = gids ? blk__realloc(b->in, n * sizeof *in) : NULL;
    if (!in)
      return blk__fail(BLK_ENOMEM, "all_to_all: gid %d has no memory for %zu arrivals", gid, n);
    b->in = in;
    b->cap_in = n;
  }
  for (size_t i = 0; i < n; i++) {
    const item *it = &b->items[i];
    if (it->dst != gid)
      blk__proxy_misuse(p, "all_to_all: an item for gid %d from gid %d ended here", (int)it->dst,
                        (int)it->src);
    if (i > 0 && it->src == b->in_gids[i - 1])
      blk__proxy_misuse(p, "all_to_all: two messages from gid %d", (int)it->src);
    b->in_gids[i] = it->src;
    blk__buffer_ref(&b->in[i], it->data, (size_t)it->size);
  }
  int rc = receive(s, block, p, (int)n, b->in_gids, b->in);
  for (size_t i = 0; i < n; i++) blk__buffer_cache_give(s->m->cache, &b->in[i]);
  return rc;
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

/* One block (no rounds): what it sent itself is all it receives. */
static int deliver_to_itself(a2a *s, void *block, blk_proxy *p, a2a_block *b) {
  int gid = blk_proxy_gid(p), n = b->n && b->queues[0].size ? 1 : 0;
  int rc = receive(s, block, p, n, &gid, b->queues);
  return rc;
}

/* Round 0: the send phase, then the first forward (or, with one round, the
 * queues become the messages). Without a budget the queues stay until the
 * call returns: later rounds' references may point into them. */
static int first_round(a2a *s, void *block, blk_proxy *p) {
  a2a_block *b = &s->blocks[blk__table_lid(&s->m->table, blk_proxy_gid(p))];
  int rc = send_phase(s, block, p, b);
  if (rc) {
    /* nothing goes out: the driver sends failed messages */
  } else if (s->rounds == 0) {
    rc = deliver_to_itself(s, block, p, b);
  } else if (s->rounds == 1) {
    for (int i = 0; i < b->n; i++) { /* a direct exchange: the queue is the message */
      int j = position(s, 0, b->gids[i]);
      blk_buffer_swap(&p->out[j], &b->queues[i]);
    }
  } else if ((rc = gather(s, p, b, 0)) || (rc = route(s, p, b, 0))) {
    rc = blk__fail(rc, "all_to_all: gid %d has no memory to pack its messages", blk_proxy_gid(p));
  }
  blk__gid_map_clear(&b->index);
  for (int i = 0; i < b->n; i++) blk__buffer_cache_give(s->m->cache, &b->queues[i]);
  b->n = 0;
  return rc;
}

static int a2a_round(void *block, blk_proxy *p, void *user) {
  a2a *s = user;
  int r = blk_proxy_round(p), gid = blk_proxy_gid(p);
  if (r == 0) return first_round(s, block, p);
  if (r == s->rounds && s->rounds == 1) return deliver_direct(s, block, p);
  a2a_block *b = &s->blocks[blk__table_lid(&s->m->table, gid)];
  int rc = gather(s, p, b, r);
  if (!rc && r < s->rounds) rc = route(s, p, b, r);
  if (rc)
    return blk__fail(rc, "all_to_all: gid %d has no memory to forward %zu items in round %d", gid,
                     b->nitems, r);
  return r < s->rounds ? BLK_OK : deliver_items(s, block, p, b);
}

/* Where a direct exchange's message from another rank lands: the
 * caller's answer. The driver asks only in-core, for the round the block
 * waits in (the receive: its only one after the send phase) and not while
 * the block is with the scheduler. */
static void *place_direct(void *block, int gid, int src, int round, size_t bytes, void *user) {
  const a2a *s = user;
  if (round != s->rounds || s->rounds != 1) return NULL;
  return s->place(block, gid, src, bytes, s->user);
}

/* The user's callbacks, and so the block, only run in the first and last
 * rounds; out-of-core, the forwarding rounds leave the block where it is. */
static int needs_block(int round, void *user) {
  const a2a *s = user;
  return round == 0 || round == s->rounds;
}

/* Gives back the storage a block's messages used (also after a failure);
 * the records stay for the next call. */
static void end_block(blk__buffer_cache *cache, a2a_block *b) {
  for (int q = 0; q < b->n; q++) blk__buffer_cache_give(cache, &b->queues[q]);
  for (int q = 0; q < b->nheld; q++) blk__buffer_cache_give(cache, &b->held[q]);
  blk__buffer_cache_give(cache, &b->arena);
  b->n = b->nheld = 0;
  b->nitems = 0;
  b->lost = 0;
  blk__gid_map_clear(&b->index);
}

static void free_kept(void *mem) {
  a2a_kept *k = mem;
  for (int i = 0; i < k->cap; i++) {
    a2a_block *b = &k->blocks[i];
    end_block(NULL, b);
    free(b->gids);
    free(b->queues);
    free(b->held);
    free(b->items);
    free(b->bytes);
    free(b->listed);
    free(b->in);
    free(b->in_gids);
    blk__gid_map_free(&b->index);
  }
  free(k->blocks);
  free(k);
}

/* What the master keeps for all_to_all, with records for nlocal blocks;
 * NULL without memory. */
static a2a_kept *take_kept(blk_master *m, int nlocal) {
  static const char owner = 0;
  blk__kept *kept = blk__op_kept(&m->op, &owner, free_kept);
  a2a_kept *k = kept->mem;
  if (!k && !(k = kept->mem = blk__calloc(1, sizeof *k))) return NULL;
  if (nlocal > k->cap || !k->blocks) {
    int ncap = nlocal > 2 * k->cap ? nlocal : 2 * k->cap;
    if (ncap < 1) ncap = 1;
    a2a_block *grown = blk__realloc(k->blocks, (size_t)ncap * sizeof *grown);
    if (!grown) return NULL;
    memset(grown + k->cap, 0, (size_t)(ncap - k->cap) * sizeof *grown);
    for (int i = k->cap; i < ncap; i++) blk__gid_map_init(&grown[i].index);
    k->blocks = grown;
    k->cap = ncap;
  }
  return k;
}

/* The digit arithmetic of the rounds (see a2a), checked against the
 * partners where it is cheap to: a difference is a bug in blk. */
static void digits(a2a *s) {
  s->fold = 0; /* (a direct exchange of a count k would fold is not folded) */
  for (int e = 0; e < s->rounds; e++)
    if (blk_partners_round_radix(s->p, e) < 0)
      s->fold = s->nblocks - blk__fold_base(s->nblocks, s->k);
  for (int e = 0; e < s->rounds; e++) {
    s->radix[e] = blk_partners_round_radix(s->p, e); /* (-1 for the fold rounds) */
    s->step[e] = blk_partners_round_step(s->p, e);
    for (int g = 0; g < s->nblocks && g < 64; g++)
      if (position(s, e, g) != blk_partners_round_position(s->p, e, g))
        blk__panic("all_to_all: round %d puts gid %d at %d, not %d", e, g,
                   blk_partners_round_position(s->p, e, g), position(s, e, g));
  }
}

/* The swap partners of s's blocks for k and the order, kept by the
 * master, with their digits in s: worked out when the partners are new. */
static int partners_of(blk_master *m, a2a_kept *k, a2a *s, int contiguous) {
  static const char owner = 0;
  const blk_partners *p = NULL;
  int made = 0;
  /* (any_budget, not this rank's budget: the rounds must be alike on every rank) */
  int rc = blk__swap_partners_merged_kept(m, &owner, s->a, s->nblocks, s->k, contiguous,
                                          m->any_budget, &p, &made);
  if (rc) return rc;
  if (blk_partners_rounds(p) > MAX_ROUNDS) /* (n < 2^31 has fewer) */
    return blk__fail(BLK_EINVAL, "all_to_all: %d rounds", blk_partners_rounds(p));
  s->p = p;
  s->rounds = blk_partners_rounds(p);
  if (made || k->digits_of != p) {
    digits(s);
    k->digits_of = p;
    k->fold = s->fold;
    memcpy(k->step, s->step, sizeof k->step);
    memcpy(k->radix, s->radix, sizeof k->radix);
    return BLK_OK;
  }
  s->fold = k->fold;
  memcpy(s->step, k->step, sizeof s->step);
  memcpy(s->radix, k->radix, sizeof s->radix);
  return BLK_OK;
}

int blk_all_to_all_config_init(blk_all_to_all_config *cfg, unsigned int version) {
  static const blk_all_to_all_config defaults = BLK_ALL_TO_ALL_CONFIG_INIT;
  return blk__settings_init(cfg, &defaults, sizeof defaults, NULL, version,
                            BLK_ALL_TO_ALL_CONFIG_VERSION, "all_to_all: config init");
}

int blk_all_to_all(blk_master *m, const blk_assigner *a, int k, int contiguous,
                   blk_foreach_fn send_fn, blk_foreach_fn receive_fn, void *user) {
  return blk_all_to_all_with(m, a, k, contiguous, send_fn, receive_fn, NULL, user);
}

int blk_all_to_all_with(blk_master *m, const blk_assigner *a, int k, int contiguous,
                        blk_foreach_fn send_fn, blk_foreach_fn receive_fn,
                        const blk_all_to_all_config *cfg, void *user) {
  static const blk__driver driver = {"all_to_all", needs_block, 1, NULL, 0, 0, 0, 0};
  static const blk__driver placing = {"all_to_all", needs_block, 1, place_direct, 0, 0, 0, 0};
  if (!m) return blk__fail(BLK_EINVAL, "all_to_all: the master is NULL");
  if (!a || !send_fn || !receive_fn)
    return blk__fail(BLK_EINVAL, "all_to_all: the assigner, send_fn or receive_fn is NULL");
  a2a s = {.m = m, .a = a, .send_fn = send_fn, .receive_fn = receive_fn, .user = user};
  s.nblocks = blk_assigner_nblocks(a);
  s.k = k;
  s.me = blk__comm_rank(m->comm);
  /* A reference cannot be spilled, so under a budget that may swap a block
   * out every message is whole in itself (as the array collectives do); one
   * that holds every block counts as none. */
  s.refs = !blk__budget_may_swap(&m->budget);
  a2a_kept *kept = NULL;
  int rc = BLK_OK, nlocal = blk__table_count(&m->table);
  /* A bad config aborts (rather than returns): every rank then returns the
   * same code, even when only this one was given it. */
  if (cfg && (cfg->version < 1 || cfg->version > BLK_ALL_TO_ALL_CONFIG_VERSION))
    rc = blk__fail(BLK_EINVAL,
                   "all_to_all: the config has version %u; this blk knows 1..%u (initialise it "
                   "with BLK_ALL_TO_ALL_CONFIG_INIT or blk_all_to_all_config_init)",
                   cfg->version, BLK_ALL_TO_ALL_CONFIG_VERSION);
  if (!rc && !(kept = take_kept(m, nlocal)))
    rc = blk__fail(BLK_ENOMEM, "all_to_all: no memory for %d blocks", nlocal);
  if (!rc) {
    s.blocks = kept->blocks;
    rc = partners_of(m, kept, &s, contiguous);
  }
  if (rc) { /* the other ranks may be under way: take part, failed */
    rc = blk__reduce_abort(m, rc, driver.name);
    goto exit;
  }
  s.place = cfg ? cfg->place : NULL;
  /* Only a direct exchange's messages are whole for one receiver. */
  rc = blk__reduce_run(m, a, s.p, a2a_round, &s, s.place && s.rounds == 1 ? &placing : &driver);
exit:
  for (int i = 0; s.blocks && i < nlocal; i++) end_block(m->cache, &s.blocks[i]);
  return rc;
}
