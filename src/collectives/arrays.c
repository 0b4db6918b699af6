/*
 * arrays.c: element-wise collectives over one array per block; see
 * blk/arrays.h for the algorithms.
 *
 * SPLIT runs swap rounds in halving order, so a block's share after each
 * round is a contiguous range of gids [lo, hi) and of elements
 * [piece(lo), piece(hi)): round e splits the range into k_e equal gid
 * ranges and member j of the group keeps range j. After the last round the
 * range is [g, g+1): piece g, at its place in g's own array. The all-gather
 * runs the same groups in the reverse order (contiguous order over the
 * reversed radices gives the same steps), growing the range back.
 *
 * A block's message to itself is sent empty: its own contribution is
 * already in place in its array, which saves a copy of its share per round.
 *
 * Cost, n blocks, m bytes per array, radix k, R = log_k n rounds:
 *   TREE all-reduce: 2R rounds, (k-1) messages of m into each parent:
 *     2R (alpha + (k-1) beta m) on the critical path; one round less when
 *     its top is an exchange (top_across_ranks).
 *   BUTTERFLY all-reduce: R rounds, each block sends and combines (k-1)
 *     whole arrays per round: R (alpha + (k-1) (beta + gamma) m).
 *   SPLIT all-reduce: 2R rounds; round e moves (k_e - 1)/k_e of a share that
 *     shrinks by k_e each round: 2 (alpha R + beta m (n-1)/n) per block.
 * Copies: in-core, a message refers to the sender's array instead of
 * copying it, except where a later round writes what went before a member
 * on the same rank has read it (BUTTERFLY's members on this rank), and out
 * of core, where every byte sent is copied once into its message. Where a
 * later round does write what went (TREE's array comes back down,
 * BUTTERFLY's next round, SPLIT's gather filling the ranges its scatter
 * sent), the receiver on this rank has read it first (the write waits for a
 * message it sends after), and the driver holds the block while such a
 * send to another rank is under way (hold_for_refs, SPLIT's hold_split). A
 * received byte is read once (summed or copied into the array), except a
 * message from another rank that lands straight in the array (place_array,
 * place_share, and the rings' and pipelined tree's place functions).
 */
#include "blk/arrays.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/combine.h"
#include "base/copy.h"
#include "base/fail.h"
#include "base/memory_limit.h"
#include "base/settings.h"
#include "blk/partners.h"
#include "blk/reduce.h"
#include "collectives/reduce_run.h"
#include "master/master_state.h"
#include "patterns/partners_folded.h"
#include "patterns/partners_joined.h"
#include "patterns/partners_pipeline.h"
#include "patterns/partners_ring.h"
#include "patterns/partners_top.h"
#include "runtime/comm.h"
#include "runtime/proxy_state.h"

typedef struct job {
  const blk_arrays *spec;
  const blk_partners *p;
  int nblocks;
  size_t elem;
  int copy;       /* tree rounds copy what arrives (broadcasting) instead of combining */
  int by_ref;     /* messages refer to the block's array instead of copying it */
  int place_from; /* from this round a message from another rank lands in the array */
  /* SPLIT over a folded count (partners_folded.h; 0 otherwise): the extras,
   * the scatter's fold rounds before its inner rounds, its inner rounds, and
   * the gather's fold rounds before its inner rounds. */
  int fold, off, inner, goff;
  /* SPLIT in core: each local block's array by lid, asked before the rounds,
   * so that place_share answers while the block's callbacks run (the
   * array function may not be called then); NULL: ask the block. */
  unsigned char *const *arrays;
  const blk__table *table;
  /* The inner rounds' radices and steps (fold_job), so that share is
   * arithmetic; NULL: asked of p (more rounds than they hold). */
  const int *radix, *step;
} job;

/* Room for fold_job's digits. */
#define MAX_DIGITS 40
typedef struct digits {
  int radix[MAX_DIGITS], step[MAX_DIGITS];
} digits;

#define NO_PLACE INT_MAX

/* A job that sums what comes in, receives into blk's storage and is not
 * folded; callers set what differs. */
static job new_job(const blk_arrays *spec, const blk_partners *p, int n, size_t elem, int by_ref) {
  return (job){
      .spec = spec, .p = p, .nblocks = n, .elem = elem, .by_ref = by_ref, .place_from = NO_PLACE};
}

/* Out queue i gets the n bytes at data: a reference when the pattern never
 * changes what it sent before the operation ends (see by_ref), else a copy. */
static int send_bytes(const job *j, blk_proxy *p, int i, const void *data, size_t n) {
  if (!j->by_ref) return blk_proxy_enqueue(p, i, data, n);
  blk__proxy_enqueue_ref(p, i, data, n);
  return BLK_OK;
}

/* acc[i] = acc[i] op in[i] for i < n: the spec's own op, or blk's. */
static void combine(const job *j, void *acc, const void *in, size_t n) {
  blk_array_op_fn f = j->spec->version >= 3 ? j->spec->combine : NULL;
  if (f)
    f(acc, in, n, j->spec->user);
  else
    blk__combine(j->spec->type, j->spec->op, acc, in, n);
}

/* The exclusive scan's value for gid 0: the op's identity; a program's
 * own op has none blk knows, so the array keeps what it holds then, the
 * op over all blocks (the last round's total). */
static void identity(const job *j, void *a) {
  if (!(j->spec->version >= 3 && j->spec->combine))
    blk__identity(j->spec->type, j->spec->op, a, j->spec->count);
}

static size_t type_size(blk_type t) {
  switch (t) {
    case BLK_FLOAT:
      return sizeof(float);
    case BLK_DOUBLE:
      return sizeof(double);
    case BLK_INT32:
      return sizeof(int32_t);
    case BLK_INT64:
      return sizeof(int64_t);
  }
  return 0;
}

size_t blk_arrays_piece_begin(size_t count, int nblocks, int g) {
  /* floor(g * count / n) without overflow for any count below 2^64 / n */
  size_t q = count / (size_t)nblocks, r = count % (size_t)nblocks;
  return q * (size_t)g + r * (size_t)g / (size_t)nblocks;
}

static unsigned char *array_of(const job *j, void *block, int gid) {
  return j->spec->array(block, gid, j->spec->user);
}

/* Where the piece of virtual block v (folded: of the gids it covers)
 * begins; v = the virtual count gives the end of the array. */
static size_t piece(const job *j, int v) {
  int g = v < j->fold ? 2 * v : v + j->fold;
  return blk_arrays_piece_begin(j->spec->count, j->nblocks, g);
}

/* Where gid g's own piece begins. */
static size_t own_piece(const job *j, int g) {
  return blk_arrays_piece_begin(j->spec->count, j->nblocks, g);
}

/* The virtual block range a block holds in SPLIT after `done` inner
 * exchange rounds (folded: of the virtual block it stands as). */
static void share(const job *j, int gid, int done, int *lo, int *hi) {
  *lo = 0;
  *hi = j->nblocks - j->fold;
  if (j->radix) { /* the position in inner round i is digit i of gid's virtual block */
    int v = gid < 2 * j->fold ? gid / 2 : gid - j->fold;
    for (int i = 0; i < done; i++) {
      int width = (*hi - *lo) / j->radix[i];
      *lo += v / j->step[i] % j->radix[i] * width;
      *hi = *lo + width;
    }
    return;
  }
  for (int e = j->off; e < j->off + done; e++) {
    int k = blk_partners_round_radix(j->p, e), width = (*hi - *lo) / k;
    int pos = blk_partners_round_position(j->p, e, gid);
    *lo += pos * width;
    *hi = *lo + width;
  }
}

static void check_size(blk_proxy *p, int i, size_t want) {
  size_t got = blk_proxy_incoming_remaining(p, i);
  if (got != want)
    blk__proxy_misuse(p, "arrays: %zu bytes from gid %d, expected %zu", got, blk_proxy_in_gid(p, i),
                      want);
}

/* Tree rounds (merge, broadcast or both): sum what comes in while merging,
 * copy it while broadcasting; send the whole array on. */
static void tree_receive(const job *j, blk_proxy *p, int gid, unsigned char *a, size_t bytes) {
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    if (blk_proxy_in_gid(p, i) == gid) continue; /* own data is in place */
    check_size(p, i, bytes);
    const void *in = blk_buffer_read_view(blk_proxy_incoming(p, i), bytes);
    if (j->copy) {
      if (in != a) blk__copy(a, in, bytes); /* (received in place: place_array) */
    } else
      combine(j, a, in, j->spec->count);
  }
}

static int tree_send(const job *j, blk_proxy *p, int gid, const unsigned char *a, size_t bytes) {
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    if (blk_proxy_out_gid(p, i) == gid) continue; /* empty to itself */
    int rc = send_bytes(j, p, i, a, bytes);
    if (rc) return rc;
  }
  return BLK_OK;
}

static int tree_round(void *block, blk_proxy *p, void *user) {
  const job *j = user;
  int gid = blk_proxy_gid(p);
  unsigned char *a = array_of(j, block, gid);
  size_t bytes = j->spec->count * j->elem;
  tree_receive(j, p, gid, a, bytes);
  return tree_send(j, p, gid, a, bytes);
}

/* BUTTERFLY: every member of the group sends its whole array to the others
 * and each combines the group's arrays, so after the last round every block
 * holds the op over all. Members combine in the group's order (by digit),
 * so every block computes the same sequence of operations and ends with the
 * same bits; with two members (or this block first) the op is applied in
 * place, which is the same thing because sum, min and max are commutative.
 * Each round writes what the last one sent: a member on this rank gets a
 * copy (it reads it while this block writes), one on another rank a
 * reference, which the driver holds the block for (hold_for_refs). */
typedef struct butterfly_job {
  job j; /* first: blk__reduce_run passes it */
  const blk_assigner *a;
  int me; /* this rank */
} butterfly_job;

/* The group's arrays (the in queues, this block's own among them)
 * combined into a, in the group's order. */
static int combine_group(const job *j, blk_proxy *p, int gid, unsigned char *a, size_t bytes) {
  int nin = blk_proxy_in_count(p);
  int in_place = nin == 2 || blk_proxy_in_gid(p, 0) == gid;
  unsigned char *acc = a;
  if (!in_place && !(acc = blk__malloc(bytes ? bytes : 1)))
    return blk__fail(BLK_ENOMEM, "arrays: gid %d has no memory for a %zu-byte array", gid, bytes);
  int first = 1;
  for (int i = 0; i < nin; i++) {
    int src = blk_proxy_in_gid(p, i);
    if (in_place && src == gid) continue; /* a is already in acc */
    const void *in = a;
    if (src != gid) {
      check_size(p, i, bytes);
      in = blk_buffer_read_view(blk_proxy_incoming(p, i), bytes);
    }
    if (!in_place && first)
      blk__copy(acc, in, bytes);
    else
      combine(j, acc, in, j->spec->count);
    first = 0;
  }
  if (!in_place) {
    blk__copy(a, acc, bytes);
    free(acc);
  }
  return BLK_OK;
}

/* a to every out-partner but this block, when this block writes a in its
 * next round: a copy to a member on this rank (it may read while this block
 * writes), a reference to one on another (the driver holds the block). */
static int send_before_write(const job *j, const blk_assigner *as, int me, blk_proxy *p, int gid,
                             const unsigned char *a, size_t bytes) {
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    int dst = blk_proxy_out_gid(p, i);
    if (dst == gid) continue; /* empty to itself */
    if (j->by_ref && blk_assigner_rank(as, dst) != me) {
      blk__proxy_enqueue_ref(p, i, a, bytes);
    } else {
      int rc = blk_proxy_enqueue(p, i, a, bytes);
      if (rc) return rc;
    }
  }
  return BLK_OK;
}

static int butterfly_round(void *block, blk_proxy *p, void *user) {
  const butterfly_job *bj = user;
  const job *j = &bj->j;
  int gid = blk_proxy_gid(p), nin = blk_proxy_in_count(p);
  unsigned char *a = array_of(j, block, gid);
  size_t bytes = j->spec->count * j->elem;
  if (nin == 1 && blk_proxy_in_gid(p, 0) != gid) { /* an extra, unfolded */
    check_size(p, 0, bytes);
    if (bytes) blk__copy(a, blk_proxy_dequeue_view(p, 0, bytes), bytes);
  } else if (nin > 1) {
    int rc = combine_group(j, p, gid, a, bytes);
    if (rc) return rc;
  }
  return send_before_write(j, bj->a, bj->me, p, gid, a, bytes);
}

/* SPLIT, first half: send piece j of the share to member j; sum the pieces
 * the group sent for this block's share. */
static int scatter_step(const job *j, void *block, blk_proxy *p, int sends) {
  int gid = blk_proxy_gid(p), e = blk_proxy_round(p) - j->off; /* the inner round */
  unsigned char *a = array_of(j, block, gid);
  if (e > j->inner) { /* unfolded: an extra gets its piece from its stand-in */
    size_t from = own_piece(j, gid), to = own_piece(j, gid + 1), bytes = (to - from) * j->elem;
    for (int i = 0; i < blk_proxy_in_count(p); i++) {
      if (blk_proxy_in_gid(p, i) == gid) continue; /* (the others: from themselves) */
      check_size(p, i, bytes);
      if (bytes) blk__copy(a + from * j->elem, blk_proxy_dequeue_view(p, i, bytes), bytes);
    }
    return BLK_OK;
  }
  int lo, hi;
  share(j, gid, e < 0 ? 0 : e, &lo, &hi); /* (e < 0: an extra's fold: all of it) */
  size_t from = piece(j, lo), to = piece(j, hi);
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    if (blk_proxy_in_gid(p, i) == gid) continue;
    check_size(p, i, (to - from) * j->elem);
    const void *in = blk_buffer_read_view(blk_proxy_incoming(p, i), (to - from) * j->elem);
    combine(j, a + from * j->elem, in, to - from);
  }
  int nout = sends ? blk_proxy_out_count(p) : 0;
  for (int i = 0; i < nout; i++) {
    int to_gid = blk_proxy_out_gid(p, i);
    if (to_gid == gid) continue;
    size_t pf, pt;
    if (e == j->inner) { /* the unfold: the extra's own piece */
      pf = own_piece(j, to_gid);
      pt = own_piece(j, to_gid + 1);
    } else {
      int width = (hi - lo) / nout, plo = lo + i * width;
      pf = piece(j, plo);
      pt = piece(j, plo + width);
    }
    int rc = send_bytes(j, p, i, a + pf * j->elem, (pt - pf) * j->elem);
    if (rc) return rc;
  }
  return BLK_OK;
}

static int scatter_round(void *block, blk_proxy *p, void *user) {
  return scatter_step(user, block, p, 1);
}

/* SPLIT, second half: send the share to the group, put the members' shares
 * in place. The gather partners run the scatter's rounds backwards, so
 * after gather round r the share is the scatter's after R - r rounds. */
static int gather_step(const job *j, void *block, blk_proxy *p, int receives) {
  int gid = blk_proxy_gid(p), e = blk_proxy_round(p) - j->goff; /* the inner round */
  int R = j->inner;
  unsigned char *a = array_of(j, block, gid);
  size_t from, to;
  for (int i = 0; i < (receives ? blk_proxy_in_count(p) : 0); i++) {
    int src = blk_proxy_in_gid(p, i);
    if (src == gid) continue;
    if (e == 0) { /* the fold: an extra's own piece */
      from = own_piece(j, src);
      to = own_piece(j, src + 1);
    } else { /* (after the last inner round: the whole array, to an extra) */
      int lo, hi;
      share(j, src, R - e + 1, &lo, &hi);
      from = piece(j, lo);
      to = piece(j, hi);
    }
    size_t bytes = (to - from) * j->elem;
    check_size(p, i, bytes);
    const void *in = blk_buffer_read_view(blk_proxy_incoming(p, i), bytes);
    if (bytes && in != a + from * j->elem) /* (received in place: place_share) */
      blk__copy(a + from * j->elem, in, bytes);
  }
  if (e < 0) { /* an extra's fold: its own piece to its stand-in */
    from = own_piece(j, gid);
    to = own_piece(j, gid + 1);
  } else {
    int lo, hi;
    share(j, gid, R - e, &lo, &hi);
    from = piece(j, lo);
    to = piece(j, hi);
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    if (blk_proxy_out_gid(p, i) == gid) continue;
    int rc = send_bytes(j, p, i, a + from * j->elem, (to - from) * j->elem);
    if (rc) return rc;
  }
  return BLK_OK;
}

static int gather_round(void *block, blk_proxy *p, void *user) {
  return gather_step(user, block, p, 1);
}

/* SPLIT as one reduction (PATTERN_SPLIT): the scatter's rounds, then the
 * gather's from round goff, which is both the scatter's last (its pieces
 * arrive) and the gather's first (the share leaves). */
static int split_round(void *block, blk_proxy *p, void *user) {
  const job *j = user;
  int r = blk_proxy_round(p);
  if (r < j->goff) return scatter_step(j, block, p, 1);
  if (r > j->goff) return gather_step(j, block, p, 1);
  int rc = scatter_step(j, block, p, 0);
  return rc ? rc : gather_step(j, block, p, 0);
}

/* A member's share in an inner gather round, from another rank, is
 * received where gather_round would copy it: that range of the array is
 * written once, by this copy, and the shares this block sent before (by
 * reference) lie outside it. The fold's rounds copy as before. */
static void *place_share(void *block, int gid, int src, int round, size_t bytes, void *user) {
  const job *j = user;
  int e = round - j->goff, lo, hi;
  if (src == gid || e < 1 || e > j->inner) return NULL;
  share(j, src, j->inner - e + 1, &lo, &hi);
  size_t from = piece(j, lo), to = piece(j, hi);
  if (bytes != (to - from) * j->elem) return NULL;
  unsigned char *a = block ? array_of(j, block, gid) : j->arrays[blk__table_lid(j->table, gid)];
  return a + from * j->elem;
}

/* Scan: block g's prefix over the blocks before it (exclusive) or up to it
 * (inclusive). Swap rounds in contiguous order, so that after rounds
 * 0..e-1 a block stands for a gid range of its own, and the members of its
 * round-e group stand for adjacent ranges in the order of their positions.
 * A block carries two arrays: its range's total T (in the block's array,
 * which is what it sends its group) and its prefix P (in the message it
 * sends itself, which also takes it out of core with the block). In round
 * e the block at position d gets the totals T_0..T_(k-1) of its group and
 *     L = T_0 op ... op T_(d-1),   P = L op P,   T = L op T_d op ... op T_(k-1),
 * every member combining in position order, so the group's totals agree to
 * the bit. P starts as the block's array (inclusive) or empty (exclusive:
 * no identity needed), and stays empty until a lower gid's total comes.
 * After the last round the array takes P; gid 0 of an exclusive scan,
 * which never gets one, the op's identity (or, for a program's op, keeps
 * the total).
 *
 * Over a folded count (partners_folded.h) the rounds above run over the
 * virtual blocks, each of which stands for adjacent gids in order, so the
 * same arithmetic holds for their ranges. In the fold an extra (gid 2i+1)
 * sends its array X' to its stand-in (gid 2i, array X), whose T becomes
 * X op X'. The stand-in runs the rounds as an exclusive scan and keeps X
 * ahead of P in its message to itself: after them it holds the prefix P of
 * the gids below 2i, takes P (exclusive) or P op X (inclusive) and sends
 * P op X to its extra in the unfold, which takes it (exclusive) or it op
 * X' (inclusive). */
typedef struct scan_job {
  job j; /* first: reduce() passes it (j.fold, j.off, j.inner: fold_job's) */
  int inclusive;
} scan_job;

static int out_index(blk_proxy *p, int gid) {
  for (int i = 0; i < blk_proxy_out_count(p); i++)
    if (blk_proxy_out_gid(p, i) == gid) return i;
  return -1;
}

static int in_index(blk_proxy *p, int gid) {
  for (int i = 0; i < blk_proxy_in_count(p); i++)
    if (blk_proxy_in_gid(p, i) == gid) return i;
  return -1;
}

/* The block's message to itself, which holds `base` bytes (a stand-in's
 * own array, else none) and then the prefix P (round 0: made here). P is
 * absent while the block has none: an exclusive scan's block that has met
 * no lower gid yet (so no identity is needed, and a program's op works). */
static blk_buffer *scan_prefix(const scan_job *s, blk_proxy *p, int gid, const unsigned char *a,
                               size_t bytes, size_t base) {
  if (blk_proxy_round(p) > 0) {
    int i = in_index(p, gid);
    if (i < 0) blk__proxy_misuse(p, "arrays: scan: gid %d has no message from itself", gid);
    size_t got = blk_proxy_incoming_remaining(p, i);
    if (got != base && got != base + bytes) check_size(p, i, base + bytes);
    return blk_proxy_incoming(p, i);
  }
  blk_buffer *q = blk_proxy_outgoing(p, out_index(p, gid));
  if ((base || s->inclusive) && bytes) {
    unsigned char *at = blk_buffer_append(q, bytes);
    if (!at) return NULL;
    blk__copy(at, a, bytes);
  }
  return q;
}

/* Round e's group totals into the block's T (its array a) and P (after
 * base bytes of pq), as the comment above says. */
static int scan_totals(const job *j, blk_proxy *p, int gid, int e, unsigned char *a, blk_buffer *pq,
                       size_t base) {
  size_t count = j->spec->count, bytes = count * j->elem;
  int k = blk_partners_round_radix(j->p, e), d = blk_partners_round_position(j->p, e, gid);
  const unsigned char *tot[64], **t = k <= 64 ? tot : blk__calloc((size_t)k, sizeof *t);
  unsigned char *acc = d > 0 ? blk__malloc(bytes ? bytes : 1) : a;
  if (!t || !acc) {
    if (t != tot) free(t);
    if (acc != a) free(acc);
    return blk__fail(BLK_ENOMEM, "arrays: scan: gid %d has no memory for a %zu-byte array", gid,
                     bytes);
  }
  for (int i = 0; i < k; i++) t[i] = NULL;
  t[d] = a;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    int src = blk_proxy_in_gid(p, i);
    if (src == gid) continue;
    int at = blk_partners_round_position(j->p, e, src);
    if (at < 0 || at >= k || t[at])
      blk__proxy_misuse(p, "arrays: scan: gid %d from gid %d, at place %d of %d", gid, src, at, k);
    check_size(p, i, bytes);
    t[at] = blk_proxy_dequeue_view(p, i, bytes);
  }
  for (int i = 0; i < k; i++)
    if (!t[i]) blk__proxy_misuse(p, "arrays: scan: gid %d has no total from place %d", gid, i);
  /* L = T_0 op ... op T_(d-1) in acc; P = L op P (or L, if none yet);
   * then T in acc. */
  int rc = BLK_OK;
  if (d > 0) {
    blk__copy(acc, t[0], bytes);
    for (int i = 1; i < d; i++) combine(j, acc, t[i], count);
    if (pq->size > base)
      combine(j, pq->data + base, acc, count);
    else if (blk_buffer_write(pq, acc, bytes))
      rc = blk__fail(BLK_ENOMEM, "arrays: scan: gid %d has no memory for a %zu-byte prefix", gid,
                     bytes);
  }
  for (int i = d > 0 ? d : 1; i < k && !rc; i++) combine(j, acc, t[i], count);
  if (acc != a) {
    if (!rc) blk__copy(a, acc, bytes);
    free(acc);
  }
  if (t != tot) free(t);
  return rc;
}

/* After the last round over the virtual blocks: the array takes the
 * block's result; a stand-in sends its extra P op X. */
static int scan_finish(const scan_job *s, blk_proxy *p, int gid, unsigned char *a, blk_buffer *pq,
                       size_t base) {
  const job *j = &s->j;
  size_t count = j->spec->count, bytes = count * j->elem;
  int has = pq->size > base; /* a prefix */
  if (!s->inclusive || !base) {
    if (has)
      blk__copy(a, pq->data + base, bytes);
    else if (bytes > 0)
      identity(j, a); /* an exclusive scan's gid 0 */
  }
  if (!base) return BLK_OK;
  unsigned char *q = has ? pq->data + base : pq->data; /* P op X, or X */
  if (has) combine(j, q, pq->data, count);
  if (s->inclusive) blk__copy(a, q, bytes);
  return blk_proxy_enqueue(p, out_index(p, gid + 1), q, bytes);
}

/* An extra's two callbacks over a folded count: its array to its stand-in
 * in the fold, its result from it after the unfold. */
static int scan_extra(const scan_job *s, blk_proxy *p, int gid, unsigned char *a) {
  const job *j = &s->j;
  size_t count = j->spec->count, bytes = count * j->elem;
  if (blk_proxy_round(p) == 0) return blk_proxy_enqueue(p, out_index(p, gid - 1), a, bytes);
  int i = in_index(p, gid - 1);
  if (i < 0) blk__proxy_misuse(p, "arrays: scan: extra %d has nothing from gid %d", gid, gid - 1);
  check_size(p, i, bytes);
  blk_buffer *q = blk_proxy_incoming(p, i);
  if (s->inclusive) combine(j, q->data + q->pos, a, count);
  blk__copy(a, q->data + q->pos, bytes);
  return BLK_OK;
}

static int scan_round(void *block, blk_proxy *p, void *user) {
  const scan_job *s = user;
  const job *j = &s->j;
  const blk_arrays *spec = j->spec;
  int gid = blk_proxy_gid(p), c = blk_proxy_round(p);
  unsigned char *a = array_of(j, block, gid);
  size_t bytes = spec->count * j->elem;
  if (blk_partners_rounds(j->p) == 0) { /* one block: its prefix is itself, or nothing */
    if (!s->inclusive) identity(j, a);
    return BLK_OK;
  }
  int paired = gid < 2 * j->fold, r = c - j->off; /* r: round over the virtual blocks */
  if (paired && (gid & 1)) return scan_extra(s, p, gid, a);
  if (r > j->inner) return BLK_OK; /* the unfold's end: done a round ago */
  size_t base = paired ? bytes : 0;
  blk_buffer *pq = scan_prefix(s, p, gid, a, bytes, base);
  if (!pq || blk_buffer_error(pq))
    return blk__fail(BLK_ENOMEM, "arrays: scan: gid %d has no memory for a %zu-byte prefix", gid,
                     bytes);
  if (r < 0) return BLK_OK; /* the fold: only the message to itself */
  if (r == 0 && paired) {   /* after the fold: T = X op X' */
    int i = in_index(p, gid + 1);
    if (i < 0) blk__proxy_misuse(p, "arrays: scan: gid %d has nothing from its extra", gid);
    check_size(p, i, bytes);
    combine(j, a, blk_proxy_dequeue_view(p, i, bytes), spec->count);
  }
  if (r > 0) {
    int rc = scan_totals(j, p, gid, c - 1, a, pq, base);
    if (rc) return rc;
  }
  if (r == j->inner) return scan_finish(s, p, gid, a, pq, base);
  /* On: the total to the group (a copy: the array changes next round, while
   * the others may still read it), the prefix to itself (its storage). */
  int self = out_index(p, gid);
  if (c > 0) {
    blk_buffer_rewind(pq);
    blk_buffer_swap(blk_proxy_outgoing(p, self), pq);
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    if (i == self) continue;
    int rc = blk_proxy_enqueue(p, i, a, bytes);
    if (rc) return rc;
  }
  return BLK_OK;
}

/* RING and SEGMENTED_RING (blk/arrays.h). Step t of 2 (n-1): in the first
 * n-1 steps a block sends piece g - t (mod n) to g + 1 and adds what comes
 * into piece g - t - 1, so after them it holds the whole op of piece g + 1;
 * in the last n-1 (s = t - (n-1)) it sends piece g + 1 - s and puts what
 * comes in place as piece g - s. Each step is S rounds, one segment of the
 * piece each: round r sends segment r % S of step r / S and takes in what
 * g - 1 sent in round r - 1. A piece is reduced along one chain of blocks
 * and then copied, so every block ends with the same bits. The first
 * n-1 steps send copies: a block overwrites a piece it sent there before
 * g + 1 must have read it (with S = 1, g + 1 may be a round behind). A
 * piece sent in the last n-1 is final, so those go as references where
 * blocks stay in memory (by_ref), and what arrives from another rank is
 * received in place (place_piece). */
typedef struct ring_job {
  job j; /* first: blk__reduce_run passes it */
  int segments;
} ring_job;

/* The most rounds a (segmented) ring may take. */
#define RING_MAX_ROUNDS (1 << 24)

static int mod(long v, int n) {
  long m = v % n;
  return (int)(m < 0 ? m + n : m);
}

/* Elements [from, to) of segment seg of piece `piece`. */
static void ring_span(const ring_job *rj, int piece, int seg, size_t *from, size_t *to) {
  const job *j = &rj->j;
  size_t pb = blk_arrays_piece_begin(j->spec->count, j->nblocks, piece);
  size_t len = blk_arrays_piece_begin(j->spec->count, j->nblocks, piece + 1) - pb;
  *from = pb + blk_arrays_piece_begin(len, rj->segments, seg);
  *to = pb + blk_arrays_piece_begin(len, rj->segments, seg + 1);
}

static int ring_round(void *block, blk_proxy *p, void *user) {
  const ring_job *rj = user;
  const job *j = &rj->j;
  int gid = blk_proxy_gid(p), r = blk_proxy_round(p), n = j->nblocks, S = rj->segments;
  int steps = n - 1, R = blk_partners_rounds(j->p);
  unsigned char *a = array_of(j, block, gid);
  size_t from, to;
  if (r > 0) {
    int t = (r - 1) / S,
        piece = t < steps ? mod((long)gid - 1 - t, n) : mod((long)gid - (t - steps), n);
    ring_span(rj, piece, (r - 1) % S, &from, &to);
    size_t bytes = (to - from) * j->elem;
    check_size(p, 0, bytes);
    const void *in = blk_proxy_dequeue_view(p, 0, bytes);
    if (t < steps)
      combine(j, a + from * j->elem, in, to - from);
    else if (bytes && in != a + from * j->elem) /* (received in place: place_piece) */
      blk__copy(a + from * j->elem, in, bytes);
  }
  if (r < R) {
    int t = r / S, piece = t < steps ? mod((long)gid - t, n) : mod((long)gid + 1 - (t - steps), n);
    ring_span(rj, piece, r % S, &from, &to);
    const unsigned char *seg = a + from * j->elem;
    size_t bytes = (to - from) * j->elem;
    int rc = t < steps ? blk_proxy_enqueue(p, 0, seg, bytes) : send_bytes(j, p, 0, seg, bytes);
    if (rc) return rc;
  }
  return BLK_OK;
}

/* A segment of the last n-1 steps from another rank is received where
 * ring_round would copy it: that part of the array is written once, by
 * this copy, and no message refers to it before (the first n-1 steps sent
 * copies of it). */
static void *place_piece(void *block, int gid, int src, int round, size_t bytes, void *user) {
  const ring_job *rj = user;
  const job *j = &rj->j;
  int S = rj->segments, steps = j->nblocks - 1, t = (round - 1) / S;
  (void)src; /* (the one in-partner: g - 1) */
  if (round < 1 || t < steps) return NULL;
  size_t from, to;
  ring_span(rj, mod((long)gid - (t - steps), j->nblocks), (round - 1) % S, &from, &to);
  if (bytes != (to - from) * j->elem) return NULL;
  return array_of(j, block, gid) + from * j->elem;
}

/* The segments of a piece: 1 for RING; for SEGMENTED_RING, enough that
 * none is over the segment size. 0 when the rounds would pass
 * RING_MAX_ROUNDS (the segment is too small for the array). The default
 * segment (blk/arrays.h) is the larger one when no rank holds two blocks:
 * a segment costs a round, and pays only where the next block of the ring
 * reads it on the same rank while it is still in cache. */
static int ring_segments(const blk_arrays *spec, size_t elem, int n, int ranks) {
  if (spec->algorithm != BLK_ARRAYS_SEGMENTED_RING || n < 2) return 1;
  size_t seg = spec->version >= 2 && spec->segment ? spec->segment
               : n <= ranks                        ? BLK_ARRAYS_SEGMENT_BYTES_SPREAD
                                                   : BLK_ARRAYS_SEGMENT_BYTES;
  size_t per = seg / elem ? seg / elem : 1; /* elements a segment */
  size_t piece = spec->count / (size_t)n + (spec->count % (size_t)n != 0);
  size_t S = piece / per + (piece % per != 0);
  if (S < 1) S = 1;
  if (S > (size_t)RING_MAX_ROUNDS / (2 * (size_t)(n - 1))) return 0;
  return (int)S;
}

int blk_arrays_init(blk_arrays *spec, unsigned int version) {
  static const blk_arrays defaults = BLK_ARRAYS_INIT;
  /* Only the fields of that layout: a caller built against it has no more. */
  static const size_t bytes_of[BLK_ARRAYS_VERSION + 1] = {
      0, offsetof(blk_arrays, segment), offsetof(blk_arrays, combine), sizeof(blk_arrays)};
  return blk__settings_init(spec, &defaults, sizeof defaults, bytes_of, version, BLK_ARRAYS_VERSION,
                            "arrays: init");
}

static int check_spec(const blk_assigner *a, const blk_arrays *s, size_t *elem) {
  if (!s || !a) return blk__fail(BLK_EINVAL, "arrays: the spec or the assigner is NULL");
  if (s->version < 1 || s->version > BLK_ARRAYS_VERSION)
    return blk__fail(BLK_EINVAL,
                     "arrays: the spec has version %u; this blk knows 1..%u (initialise it with "
                     "BLK_ARRAYS_INIT or blk_arrays_init)",
                     s->version, BLK_ARRAYS_VERSION);
  if (!s->array) return blk__fail(BLK_EINVAL, "arrays: the spec has no array callback");
  if (s->k < 2) return blk__fail(BLK_EINVAL, "arrays: k = %d, must be >= 2", s->k);
  *elem = type_size(s->type);
  if (!*elem) return blk__fail(BLK_EINVAL, "arrays: unknown type %d", (int)s->type);
  if (s->op != BLK_OP_SUM && s->op != BLK_OP_MIN && s->op != BLK_OP_MAX)
    return blk__fail(BLK_EINVAL, "arrays: unknown op %d", (int)s->op);
  if (s->algorithm != BLK_ARRAYS_AUTO && s->algorithm != BLK_ARRAYS_TREE &&
      s->algorithm != BLK_ARRAYS_SPLIT && s->algorithm != BLK_ARRAYS_BUTTERFLY &&
      s->algorithm != BLK_ARRAYS_RING && s->algorithm != BLK_ARRAYS_SEGMENTED_RING &&
      s->algorithm != BLK_ARRAYS_PIPELINED_TREE)
    return blk__fail(BLK_EINVAL, "arrays: unknown algorithm %d", (int)s->algorithm);
  if (s->count > SIZE_MAX / *elem)
    return blk__fail(BLK_EINVAL, "arrays: %zu elements of %zu bytes overflow", s->count, *elem);
  return BLK_OK;
}

/* The arguments (alike on every rank, so every rank returns the same), then
 * the memory: no block can hold a larger array than the process can, and
 * messages copy whole arrays, so a count this large is found here rather
 * than by a crash. The limit may differ between ranks, so a rank that finds
 * it too large takes part in the operation, aborting it. */
static int check_call(blk_master *m, const blk_assigner *a, const blk_arrays *s, size_t *elem) {
  if (!m) return blk__fail(BLK_EINVAL, "arrays: the master is NULL");
  int rc = check_spec(a, s, elem);
  if (rc) return rc;
  if ((rc = blk__memory_check(s->count, *elem, "arrays: count = %zu elements of one block's array",
                              s->count)))
    return blk__reduce_abort(m, rc, "arrays");
  return BLK_OK;
}

/* Whether messages may refer to the blocks' arrays instead of copying them:
 * not where a memory budget may swap a block (and its array) out while a
 * message still refers to it. The round functions that use it
 * never change bytes they sent before the operation ends: a merge child is
 * done once it sent, a broadcast only reads what it sends, and SPLIT writes
 * only ranges other than those it sent. The driver waits for remote sends
 * of references to complete before it returns. */
static int refs_allowed(const blk_master *m) {
  return !blk__budget_may_swap(&m->budget);
}

/* A broadcasting round's message from another rank is the whole array a
 * tree round would copy into the block's array: it is received there
 * instead (blk__driver.place), which saves that copy. Such a round has one
 * in-partner besides the block itself (its parent), and the array is not
 * read or written before the round's callback runs. */
static void *place_array(void *block, int gid, int src, int round, size_t bytes, void *user) {
  const job *j = user;
  (void)src; /* (the one in-partner: the parent) */
  if (round < j->place_from || bytes != j->spec->count * j->elem) return NULL;
  return array_of(j, block, gid);
}

/* The reduction as the array collectives run it: their round functions
 * return blk's codes (an enqueue that found no memory) as they are. */
static int reduce(blk_master *m, const blk_assigner *a, const blk_partners *p, blk_reduce_fn fn,
                  job *j) {
  static const blk__driver driver = {"arrays", NULL, 1, NULL, 0, 0, 0, 0};
  static const blk__driver placing = {"arrays", NULL, 1, place_array, 0, 0, 0, 1};
  return blk__reduce_run(m, a, p, fn, j, j->place_from == NO_PLACE ? &driver : &placing);
}

/* SPLIT's second half (j->p the first half's partners, for the shares). */
static int gather(blk_master *m, const blk_assigner *a, const blk_partners *back, job *j) {
  static const blk__driver driver = {"arrays", NULL, 1, place_share, 0, 0, 0, 1};
  return blk__reduce_run(m, a, back, gather_round, j, &driver);
}

/* Partners are made once per pattern and kept by the master for the calls
 * that follow (they never change once made): making them allocates, and on
 * one rank that was a fifth of a small collective. A few are kept, the
 * least recently used one making room: enough for a program that calls
 * several array collectives in turn (TREE's all-reduce alone looks up two,
 * the tree and, across ranks, the one with its top an exchange). */
#define KEPT_PARTNERS 8

/* What fold_width's answer depends on. */
typedef struct fold_key {
  int pattern, n, k, contiguous, split, nranks;
  size_t bytes;
  uint64_t print; /* assigner_print */
} fold_key;

static int same_key(const fold_key *x, const fold_key *y) {
  return x->pattern == y->pattern && x->n == y->n && x->k == y->k &&
         x->contiguous == y->contiguous && x->split == y->split && x->nranks == y->nranks &&
         x->bytes == y->bytes && x->print == y->print;
}

typedef struct kept_partners {
  struct {
    blk_partners *p;
    int pattern, n, k, contiguous; /* pattern: blk_pattern's or PATTERN_ below */
    int width;                     /* of the fold (make_pattern) */
    unsigned used;
  } e[KEPT_PARTNERS];
  /* fold_width's answers: predicting costs O(rounds x min(n, 512) x k)
   * (170 us over 1009 blocks), so a call like one before takes its answer.
   * The key holds what the answer depends on: the assigner through the ranks
   * of sampled gids (assigner_print). Filled by the same collective calls on
   * every rank, so every rank finds the same entries. */
  struct {
    fold_key key;
    int width;
    unsigned used;
  } w[KEPT_PARTNERS];
  unsigned clock;
} kept_partners;

static void kept_partners_free(void *mem) {
  kept_partners *kp = mem;
  for (int i = 0; i < KEPT_PARTNERS; i++) blk_partners_destroy(kp->e[i].p);
  free(kp);
}

/* Patterns of the array collectives besides blk_pattern's (which fold as
 * blk__partners_create_folding does):
 *  SCATTER  SPLIT's first half: swap rounds in halving order, folded
 *           without the unfold (the gather does it);
 *  GATHER   SPLIT's second half: the scatter's inner rounds backwards,
 *           then the unfold;
 *  GATHER_ALL  the same with the fold first too (blk_arrays_all_gather);
 *  SPLIT    SCATTER joined to GATHER (partners_joined.h): the all-reduce
 *           as one reduction;
 *  TREE     the tree all-reduce (blk_pattern's, folded) with its top an
 *           exchange (partners_top.h);
 *  RING     the ring (k is then its rounds);
 *  PIPELINE the pipelined tree (width is then its segments). */
#define PATTERN_SCATTER (-1)
#define PATTERN_GATHER (-2)
#define PATTERN_GATHER_ALL (-3)
#define PATTERN_RING (-4)
#define PATTERN_PIPELINE (-5)
#define PATTERN_SPLIT (-6)
#define PATTERN_TREE (-7)

/* The swap rounds of SPLIT's gather over n blocks: the scatter's (halving
 * order) backwards. */
static int make_gather(blk_partners **out, int n, int k) {
  blk_partners *scatter = NULL;
  int rc = blk_partners_create(&scatter, BLK_SWAP, 1, &n, k, 0);
  if (rc) return rc;
  int R = blk_partners_rounds(scatter), radices[64], axes[64] = {0};
  for (int e = 0; e < R; e++) radices[e] = blk_partners_round_radix(scatter, R - 1 - e);
  blk_partners_destroy(scatter);
  return blk_partners_create_rounds(out, BLK_SWAP, 1, &n, R, axes, radices, 1);
}

/* A pattern of the list above over n blocks, folded where n needs it:
 * where it has a prime factor above width (blk__fold_base_within). */
static int make_pattern(blk_partners **out, int pattern, int n, int k, int contiguous, int width) {
  if (pattern == PATTERN_RING) return blk__partners_create_ring(out, n, k);
  if (pattern == PATTERN_PIPELINE) return blk__partners_create_pipeline(out, n, k, width);
  if (pattern >= 0)
    return blk__partners_create_folding_within(out, (blk_pattern)pattern, n, k, contiguous, width);
  if (pattern == PATTERN_TREE) {
    blk_partners *tree = NULL;
    int rc = blk__partners_create_folding_within(&tree, BLK_ALLREDUCE, n, k, contiguous, width);
    return rc ? rc : blk__partners_create_top(out, tree);
  }
  if (pattern == PATTERN_SPLIT) {
    blk_partners *scatter = NULL, *gather = NULL;
    int rc = make_pattern(&scatter, PATTERN_SCATTER, n, k, contiguous, width);
    if (!rc && (rc = make_pattern(&gather, PATTERN_GATHER, n, k, contiguous, width)))
      blk_partners_destroy(scatter);
    return rc ? rc : blk__partners_create_joined(out, scatter, gather);
  }
  int m = blk__fold_base_within(n, width);
  blk_partners *inner = NULL;
  int rc = pattern == PATTERN_SCATTER ? blk_partners_create(&inner, BLK_SWAP, 1, &m, k, 0)
                                      : make_gather(&inner, m, k);
  if (rc || m == n) {
    *out = inner;
    return rc;
  }
  return blk__partners_create_folded(out, inner, n, pattern != PATTERN_GATHER,
                                     pattern != PATTERN_SCATTER);
}

/* The partners of a pattern, kept by the master: the caller must not
 * destroy them. If they cannot be made on this rank, the others may
 * already be under way, so this rank takes part, failed (*rc is then the
 * operation's agreed code and NULL is returned). */
static kept_partners *kept_of(blk_master *m, int *rc) {
  static const char owner = 0;
  blk__kept *kept = blk__op_kept(&m->op, &owner, kept_partners_free);
  kept_partners *kp = kept->mem;
  if (!kp && !(kp = kept->mem = blk__calloc(1, sizeof *kp)))
    *rc =
        blk__reduce_abort(m, blk__fail(BLK_ENOMEM, "arrays: no memory to keep partners"), "arrays");
  return kp;
}

static blk_partners *partners(blk_master *m, int pattern, int n, int k, int contiguous, int width,
                              int *rc) {
  kept_partners *kp = kept_of(m, rc);
  if (!kp) return NULL;
  int slot = 0;
  for (int i = 0; i < KEPT_PARTNERS; i++) {
    if (kp->e[i].p && kp->e[i].pattern == pattern && kp->e[i].n == n && kp->e[i].k == k &&
        kp->e[i].contiguous == contiguous && kp->e[i].width == width) {
      kp->e[i].used = ++kp->clock;
      *rc = BLK_OK;
      return kp->e[i].p;
    }
    if (kp->e[i].used < kp->e[slot].used) slot = i;
  }
  blk_partners *p = NULL;
  *rc = make_pattern(&p, pattern, n, k, contiguous, width);
  if (*rc) {
    *rc = blk__reduce_abort(m, *rc, "arrays");
    return NULL;
  }
  blk_partners_destroy(kp->e[slot].p);
  kp->e[slot].p = p;
  kp->e[slot].pattern = pattern;
  kp->e[slot].n = n;
  kp->e[slot].k = k;
  kp->e[slot].contiguous = contiguous;
  kp->e[slot].width = width;
  kp->e[slot].used = ++kp->clock;
  return p;
}

/* SPLIT's rounds over a count that may be folded: the scatter pattern j->p
 * has a fold round first and, if `unfolds` (reduce-scatter), an unfold
 * round last; the gather's first round is the inner one (goff 0). The
 * inner rounds' radices and steps go into d, which must outlive the job,
 * for share. */
static void fold_job(job *j, int width, int unfolds, digits *d) {
  j->fold = j->nblocks - blk__fold_base_within(j->nblocks, width);
  j->off = j->fold ? 1 : 0;
  j->inner = blk_partners_rounds(j->p) - j->off - (j->fold && unfolds ? 1 : 0);
  j->goff = 0;
  j->radix = j->step = NULL;
  if (!d || j->inner > MAX_DIGITS) return; /* (d NULL: the job never asks for a share) */
  for (int i = 0; i < j->inner; i++) {
    d->radix[i] = blk_partners_round_radix(j->p, j->off + i);
    d->step[i] = blk_partners_round_step(j->p, j->off + i);
  }
  j->radix = d->radix;
  j->step = d->step;
}

/* The cost model for choices made per call: the tuning file's fitted
 * constants if the master has them (blk-tune), else blk's defaults, with
 * one thread: every rank must choose alike, and the threads are a rank's
 * own setting. */
static blk_cost_model cost_model(const blk_master *m) {
  blk_cost_model cm = BLK_COST_MODEL_INIT;
  double c[BLK__TUNING_CONSTANTS];
  if (m->tuning && blk__tuning_cost_model(m->tuning, c))
    cm = (blk_cost_model){BLK_COST_MODEL_VERSION, c[0], c[1], c[2], c[3], c[4], 1};
  return cm;
}

/* A print of where a's blocks live: FNV-1a over the ranks of 64 gids
 * spread over them (all of them up to 64). Two assigners alike there
 * cost alike in the model's eyes. */
static uint64_t assigner_print(const blk_assigner *a) {
  int n = blk_assigner_nblocks(a), samples = n < 64 ? n : 64;
  uint64_t h = UINT64_C(0xcbf29ce484222325) ^ (uint64_t)blk_assigner_nranks(a);
  for (int i = 0; i < samples; i++) {
    h ^= (uint64_t)blk_assigner_rank(a, (int)((long long)i * n / samples));
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

/* The fold's width for `pattern` (make_pattern's) over a's blocks with
 * messages of `bytes` (split as blk_partners_predict's split_swap): the
 * regular blk__fold_width(k), or k where the cost model predicts that
 * narrower fold faster. Each group member of a round of w costs a block
 * a message: folding 1009 blocks to 1008 = 2^4 3^2 7 keeps rounds of 3
 * and 7, while to 512 = 2^9 costs two fold rounds but sends each array
 * once a round, which pays for large arrays and not for small ones
 * (docs/performance.md, 16 and 16.1). For the swap patterns only: a tree (merge,
 * broadcast, TREE all-reduce) moves (n - 1) arrays whatever its radix, so
 * a narrower fold only adds rounds (measured: up to 2x slower at 2 ranks).
 * A count whose two folds agree (every count whose factors are at most k)
 * is not predicted. The same on every rank:
 * a pure function of the arguments and the model, which every rank reads
 * alike. Both candidates are kept partners, made once. Returns the width,
 * or -1 with *rc the operation's agreed code (no memory). */
static int fold_width(blk_master *m, const blk_assigner *a, int pattern, int k, int contiguous,
                      size_t bytes, int split, int *rc) {
  int n = blk_assigner_nblocks(a), wide = blk__fold_width(k);
  *rc = BLK_OK;
  if (blk__fold_base_within(n, k) == blk__fold_base_within(n, wide)) return wide;
  kept_partners *kp = kept_of(m, rc);
  if (!kp) return -1;
  fold_key key = {.pattern = pattern,
                  .n = n,
                  .k = k,
                  .contiguous = contiguous,
                  .split = split,
                  .nranks = blk_assigner_nranks(a),
                  .bytes = bytes,
                  .print = assigner_print(a)};
  int slot = 0;
  for (int i = 0; i < KEPT_PARTNERS; i++) {
    if (kp->w[i].used && same_key(&kp->w[i].key, &key)) {
      kp->w[i].used = ++kp->clock;
      return kp->w[i].width;
    }
    if (kp->w[i].used < kp->w[slot].used) slot = i;
  }
  blk_cost_model cm = cost_model(m);
  blk_partners *pw = partners(m, pattern, n, k, contiguous, wide, rc);
  blk_partners *pn = pw ? partners(m, pattern, n, k, contiguous, k, rc) : NULL;
  if (!pn) return -1;
  double tw = blk_partners_predict(pw, a, bytes, &cm, split);
  double tn = blk_partners_predict(pn, a, bytes, &cm, split);
  if (tw < 0 || tn < 0) {
    *rc = blk__reduce_abort(m, blk__fail(BLK_ENOMEM, "arrays: no memory to predict the fold"),
                            "arrays");
    return -1;
  }
  int width = tn < tw ? k : wide;
  kp->w[slot].key = key;
  kp->w[slot].width = width;
  kp->w[slot].used = ++kp->clock;
  return width;
}

/* Runs one pattern with one of the round functions above. */
static int run(blk_master *m, const blk_assigner *a, const blk_arrays *spec, blk_pattern pattern,
               int contiguous, blk_reduce_fn fn, int copy) {
  size_t elem = 0;
  int rc = check_call(m, a, spec, &elem);
  if (rc) return rc;
  int n = blk_assigner_nblocks(a), width = blk__fold_width(spec->k);
  if (pattern == BLK_SWAP) /* reduce-scatter; the trees keep the regular fold */
    width = fold_width(m, a, BLK_SWAP, spec->k, contiguous, spec->count * elem, 1, &rc);
  if (width < 0) return rc;
  blk_partners *p = partners(m, (int)pattern, n, spec->k, contiguous, width, &rc);
  if (!p) return rc;
  job j = new_job(spec, p, n, elem, refs_allowed(m));
  j.copy = copy;
  j.place_from = copy ? 0 : NO_PLACE;
  digits d;
  if (pattern == BLK_SWAP) fold_job(&j, width, 1, &d);
  return reduce(m, a, p, fn, &j);
}

/* The tree all-reduce needs to know, per round, whether it is merging or
 * broadcasting: the merge half is rounds 0..half of the all-reduce
 * partners. With the top exchange (partners_top.h) the top group's members
 * send each other their sums in round top - 1 and combine them in round
 * top: merging below it, broadcasting above. */
typedef struct tree_job {
  job j;
  int half;              /* rounds <= half merge */
  int top;               /* the round the top group combines in; -1: the root's */
  const blk_assigner *a; /* (for the top exchange's sends) */
  int me;                /* this rank */
} tree_job;

/* Whether the tree all-reduce p runs with its top an exchange: where its
 * top group is two blocks on two ranks. Then the two messages across ranks
 * that the root's turn sends one after the other go at once, and the
 * round's latency is saved. Two blocks on one rank would gain no latency
 * and pay a copy (the exchange's, see below); more than two members would
 * send w (w - 1) arrays instead of 2 (w - 1). The same answer on every
 * rank: it depends on the pattern and the assigner only. */
static int top_across_ranks(const blk_partners *p, const blk_assigner *a) {
  int T = blk_partners_rounds(p), top[3];
  return T >= 2 && blk_partners_in(p, T / 2, 0, top, 3) == 2 &&
         blk_assigner_rank(a, top[0]) != blk_assigner_rank(a, top[1]);
}

/* A block that sent its array up gets it overwritten on the way down, in
 * the same operation, so the merge half's references need care. To a
 * parent on this rank: the parent reads it in its next round, and the
 * array is written only in the broadcast round the parent starts after
 * that. To a parent on another rank: the driver holds the block (its
 * broadcast round, and the down message landing in the array) until MPI
 * is done sending it (blk__driver.hold_for_refs). The top exchange writes
 * the array in the round after it sends, as BUTTERFLY does: a member on
 * this rank gets a copy. */
static int tree_allreduce_round(void *block, blk_proxy *p, void *user) {
  tree_job *t = (tree_job *)user; /* (blk__reduce_run passes its first member) */
  job j = t->j;
  int r = blk_proxy_round(p);
  j.copy = r > t->half; /* broadcasting: copy, do not sum */
  if (t->top < 0 || r < t->top - 1 || r > t->top) return tree_round(block, p, &j);
  int gid = blk_proxy_gid(p);
  unsigned char *a = array_of(&j, block, gid);
  size_t bytes = j.spec->count * j.elem;
  if (r == t->top - 1) { /* the children's sums in, then the sum to the top group */
    tree_receive(&j, p, gid, a, bytes);
    return send_before_write(&j, t->a, t->me, p, gid, a, bytes);
  }
  /* the group's sums combined: the root's result, sent down this subtree */
  int rc = combine_group(&j, p, gid, a, bytes);
  return rc ? rc : tree_send(&j, p, gid, a, bytes);
}

int blk_arrays_reduce(blk_master *m, const blk_assigner *a, const blk_arrays *spec) {
  return run(m, a, spec, BLK_MERGE, 1, tree_round, 0);
}

int blk_arrays_broadcast(blk_master *m, const blk_assigner *a, const blk_arrays *spec) {
  return run(m, a, spec, BLK_BROADCAST, 1, tree_round, 1);
}

int blk_arrays_scan(blk_master *m, const blk_assigner *a, const blk_arrays *spec,
                    blk_scan_kind kind) {
  if (kind != BLK_SCAN_INCLUSIVE && kind != BLK_SCAN_EXCLUSIVE)
    return blk__fail(BLK_EINVAL, "arrays: scan: unknown kind %d", (int)kind);
  size_t elem = 0;
  int rc = check_call(m, a, spec, &elem);
  if (rc) return rc;
  int n = blk_assigner_nblocks(a);
  /* (A block sends its whole array to each member of its group.) */
  int width = fold_width(m, a, BLK_SWAP, spec->k, 1, spec->count * elem, 0, &rc);
  if (width < 0) return rc;
  blk_partners *p = partners(m, BLK_SWAP, n, spec->k, 1, width, &rc);
  if (!p) return rc;
  scan_job s = {new_job(spec, p, n, elem, 0), kind == BLK_SCAN_INCLUSIVE};
  fold_job(&s.j, width, 1, NULL); /* (the scan finds its positions itself) */
  return reduce(m, a, p, scan_round, &s.j);
}

int blk_arrays_all_gather(blk_master *m, const blk_assigner *a, const blk_arrays *spec) {
  size_t elem = 0;
  int rc = check_call(m, a, spec, &elem);
  if (rc) return rc;
  /* SPLIT's second half alone: a block starts with its piece, the share
   * the reduce-scatter would have left it. */
  int n = blk_assigner_nblocks(a);
  int width = fold_width(m, a, PATTERN_SCATTER, spec->k, 0, spec->count * elem, 1, &rc);
  if (width < 0) return rc;
  blk_partners *p = partners(m, PATTERN_SCATTER, n, spec->k, 0, width, &rc);
  if (!p) return rc;
  blk_partners *back = partners(m, PATTERN_GATHER_ALL, n, spec->k, 0, width, &rc);
  if (!back) return rc;
  job j = new_job(spec, p, n, elem, refs_allowed(m));
  digits d;
  fold_job(&j, width, 0, &d);
  j.goff = j.off; /* the gather folds first too */
  return gather(m, a, back, &j);
}

int blk_arrays_reduce_scatter(blk_master *m, const blk_assigner *a, const blk_arrays *spec) {
  return run(m, a, spec, BLK_SWAP, 0, scatter_round, 0);
}

static const char *const alg_names[] = {"TREE", "SPLIT",          "BUTTERFLY",
                                        "RING", "SEGMENTED_RING", "PIPELINED_TREE"};
static const blk_arrays_algorithm alg_list[] = {
    BLK_ARRAYS_TREE, BLK_ARRAYS_SPLIT,          BLK_ARRAYS_BUTTERFLY,
    BLK_ARRAYS_RING, BLK_ARRAYS_SEGMENTED_RING, BLK_ARRAYS_PIPELINED_TREE};

/* A ring's 2 (n-1) rounds cost a prediction each; past this many blocks
 * the model leaves it out (it pays 2 (n-1) latencies across ranks). */
#define MODEL_RING_MAX_BLOCKS 64

/* The cost model's time for pattern `pattern` (make_pattern's; TREE's
 * with the top exchange only where the all-reduce runs it) with messages
 * of `bytes` into *t (seconds). */
static int model_time(const blk_assigner *a, int pattern, int k, int contiguous, size_t bytes,
                      int split, const blk_cost_model *cm, double *t) {
  blk_partners *p = NULL;
  int rc = make_pattern(&p, pattern == PATTERN_TREE ? BLK_ALLREDUCE : pattern,
                        blk_assigner_nblocks(a), k, contiguous, blk__fold_width(k));
  if (!rc && pattern == PATTERN_TREE && top_across_ranks(p, a)) {
    blk_partners *tree = p; /* (as the TREE all-reduce runs it) */
    rc = blk__partners_create_top(&p, tree);
  }
  if (rc) return rc;
  *t = blk_partners_predict(p, a, bytes, cm, split);
  blk_partners_destroy(p);
  return *t < 0 ? BLK_ENOMEM : BLK_OK;
}

/* The algorithm the tuning file's cost model (blk-tune's fitted constants)
 * predicts fastest, from the patterns each one runs: TREE the all-reduce
 * pattern with whole arrays; SPLIT the reduce-scatter (pieces shrinking
 * k-fold a round) twice, for its gather mirrors it; BUTTERFLY swap rounds
 * with whole arrays; RING 2 (n-1) rounds of count / n. SEGMENTED_RING
 * moves what RING does in more rounds, so the model never prefers it. Ties
 * to the earlier. A pure function of the same inputs on every rank; only
 * an allocation can fail (BLK_ENOMEM). */
static int modelled_best(const blk_assigner *a, const blk_arrays *spec, const double *c,
                         blk_arrays_algorithm *alg) {
  /* (One thread: every rank must choose alike, and threads are a rank's own.) */
  blk_cost_model cm = {BLK_COST_MODEL_VERSION, c[0], c[1], c[2], c[3], c[4], 1};
  int n = blk_assigner_nblocks(a), k = spec->k;
  size_t bytes = spec->count * type_size(spec->type);
  double t[4] = {0, 0, 0, 0};
  int ring = n > 1 && n <= MODEL_RING_MAX_BLOCKS;
  int rc = model_time(a, PATTERN_TREE, k, 1, bytes, 0, &cm, &t[0]);
  if (!rc) rc = model_time(a, PATTERN_SCATTER, k, 0, bytes, 1, &cm, &t[1]);
  if (!rc) rc = model_time(a, BLK_SWAP, k, 1, bytes, 0, &cm, &t[2]);
  if (!rc && ring)
    rc = model_time(a, PATTERN_RING, 2 * (n - 1), 0, bytes / (size_t)n, 0, &cm, &t[3]);
  if (rc) return rc;
  t[1] *= 2;
  int best = 0;
  for (int i = 1; i < (ring ? 4 : 3); i++)
    if (t[i] < t[best]) best = i;
  *alg = alg_list[best];
  return BLK_OK;
}

/* AUTO's choice (blk_arrays_all_reduce_algorithm), with the tuning file's
 * cost model if use_model; BLK_ENOMEM only when the model could not be
 * evaluated on this rank. */
static int choose_algorithm(const blk_master *m, const blk_assigner *a, const blk_arrays *spec,
                            int use_model, blk_arrays_algorithm *alg) {
  *alg = spec->algorithm;
  if (spec->algorithm != BLK_ARRAYS_AUTO) return BLK_OK;
  int small = spec->count * type_size(spec->type) < BLK_ARRAYS_SPLIT_BYTES;
  int nranks = blk_assigner_nranks(a);
  /* Measured (master.h, tuning): the fastest blk-tune found for the job,
   * the same on every rank (they hold the same table); for a rank count
   * it did not measure, the fastest by its fitted cost model. In core
   * only: on one rank, out of core, the rule below (passes over storage)
   * comes first; the check looks at the budget only there, where one rank
   * picks. */
  if (m && m->tuning && !(nranks == 1 && blk__budget_may_swap(&m->budget))) {
    int i = blk__tuning_best(m->tuning, nranks, blk_assigner_nblocks(a), spec->k,
                             (double)(spec->count * type_size(spec->type)), alg_names, 6);
    if (i >= 0) {
      *alg = alg_list[i];
      return BLK_OK;
    }
    double c[BLK__TUNING_CONSTANTS];
    if (use_model && blk__tuning_cost_model(m->tuning, c)) return modelled_best(a, spec, c, alg);
  }
  /* Several blocks per rank: the trees keep all but log_k(ranks) rounds on
   * the rank, where their messages are references, while SPLIT's halving
   * order sends its largest pieces across ranks and BUTTERFLY copies whole
   * arrays every round; measured at 2 ranks x 8 blocks, TREE won at every
   * size. On several ranks, from BLK_ARRAYS_PIPELINE_BYTES, the pipelined
   * tree takes 0.4-0.9 of TREE's time (docs/performance.md 13.6), in core:
   * out of core it loads a block for every few segments, so not where any
   * rank has a budget (which every rank knows alike, m->any_budget).
   * On one rank nothing crosses, and SPLIT moves the fewest bytes; but
   * out of core the passes over storage cost far more than the bytes,
   * and TREE makes two where SPLIT makes about three (docs/out-of-core.md). Only
   * one rank looks at its budget here, so every rank still picks alike. */
  if (blk_assigner_nblocks(a) > nranks) {
    int ooc = m && blk__budget_may_swap(&m->budget);
    int pipelined = nranks > 1 && !(m && m->any_budget) &&
                    spec->count * type_size(spec->type) >= BLK_ARRAYS_PIPELINE_BYTES;
    *alg = pipelined                    ? BLK_ARRAYS_PIPELINED_TREE
           : nranks > 1 || small || ooc ? BLK_ARRAYS_TREE
                                        : BLK_ARRAYS_SPLIT;
  } else
    *alg = small ? BLK_ARRAYS_BUTTERFLY : BLK_ARRAYS_SPLIT;
  return BLK_OK;
}

blk_arrays_algorithm blk_arrays_all_reduce_algorithm(const blk_master *m, const blk_assigner *a,
                                                     const blk_arrays *spec) {
  blk_arrays_algorithm alg;
  /* (No memory for the cost model: the rules.) */
  if (choose_algorithm(m, a, spec, 1, &alg)) choose_algorithm(m, a, spec, 0, &alg);
  return alg;
}

static int ring_all_reduce(blk_master *m, const blk_assigner *a, const blk_arrays *spec,
                           size_t elem) {
  int n = blk_assigner_nblocks(a), rc = BLK_OK;
  if ((size_t)n - 1 > (size_t)RING_MAX_ROUNDS / 2)
    return blk__fail(BLK_EINVAL, "arrays: a ring over %d blocks takes more than %d rounds", n,
                     RING_MAX_ROUNDS);
  int S = ring_segments(spec, elem, n, blk_assigner_nranks(a));
  if (!S)
    return blk__fail(BLK_EINVAL,
                     "arrays: segments of %zu bytes over %zu elements and %d blocks take more than "
                     "%d rounds",
                     spec->segment, spec->count, n, RING_MAX_ROUNDS);
  blk_partners *p = partners(m, PATTERN_RING, n, 2 * (n - 1) * S, 0, 0, &rc);
  if (!p) return rc;
  static const blk__driver driver = {"arrays", NULL, 1, place_piece, 0, 0, 0, 0};
  ring_job rj = {new_job(spec, p, n, elem, refs_allowed(m)), S};
  return blk__reduce_run(m, a, p, ring_round, &rj.j, &driver);
}

/* PIPELINED_TREE (blk/arrays.h, partners_pipeline.h): segment s of the
 * array goes up the tree, each block adding its children's s into its
 * own, and comes down copied over it. A segment sent up is next written
 * when it comes back down, after the parent has read it: a reference to a
 * parent on this rank, a copy across ranks. (References held until MPI is
 * done with them, blk__driver.hold_for_refs, as TREE sends its array up,
 * made the pipeline wait a round trip in every round: measured no faster
 * at 64 KiB to 16 MiB, docs/performance.md.) Down, a block only reads what
 * it sends. */
typedef struct pipe_job {
  job j; /* first: blk__reduce_run passes it */
  blk__pipeline t;
  const blk_assigner *a;
  int me; /* this rank */
} pipe_job;

static void pipe_span(const pipe_job *pj, int seg, size_t *from, size_t *to) {
  *from = blk_arrays_piece_begin(pj->j.spec->count, pj->t.segments, seg);
  *to = blk_arrays_piece_begin(pj->j.spec->count, pj->t.segments, seg + 1);
}

static int pipe_round(void *block, blk_proxy *p, void *user) {
  const pipe_job *pj = user;
  const job *j = &pj->j;
  int gid = blk_proxy_gid(p), r = blk_proxy_round(p), up = blk__pipeline_parent(&pj->t, gid);
  unsigned char *a = array_of(j, block, gid);
  size_t from, to;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    int src = blk_proxy_in_gid(p, i);
    pipe_span(pj, blk__pipeline_segment(&pj->t, r - 1, src, gid), &from, &to);
    size_t bytes = (to - from) * j->elem;
    check_size(p, i, bytes);
    const unsigned char *in = blk_buffer_read_view(blk_proxy_incoming(p, i), bytes);
    if (src != up)
      combine(j, a + from * j->elem, in, to - from);
    else if (bytes && in != a + from * j->elem) /* (received in place: place_segment) */
      blk__copy(a + from * j->elem, in, bytes);
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    int dst = blk_proxy_out_gid(p, i);
    pipe_span(pj, blk__pipeline_segment(&pj->t, r, gid, dst), &from, &to);
    const unsigned char *seg = a + from * j->elem;
    size_t bytes = (to - from) * j->elem;
    if (j->by_ref && (dst != up || blk_assigner_rank(pj->a, dst) == pj->me))
      blk__proxy_enqueue_ref(p, i, seg, bytes);
    else {
      int rc = blk_proxy_enqueue(p, i, seg, bytes);
      if (rc) return rc;
    }
  }
  return BLK_OK;
}

/* A segment coming down from a parent on another rank is received where
 * pipe_round would copy it: nothing reads or writes that part of the array
 * between its trip up (a copy across ranks) and its trip down. */
static void *place_segment(void *block, int gid, int src, int round, size_t bytes, void *user) {
  const pipe_job *pj = user;
  int s = src == blk__pipeline_parent(&pj->t, gid)
              ? blk__pipeline_segment(&pj->t, round - 1, src, gid)
              : -1;
  if (s < 0) return NULL;
  size_t from, to;
  pipe_span(pj, s, &from, &to);
  if (bytes != (to - from) * pj->j.elem) return NULL;
  return array_of(&pj->j, block, gid) + from * pj->j.elem;
}

/* With MPI's eager step known (the tuning file's eager-step line): the
 * largest segment whose message still goes at once, header and all, and
 * within what comm sends inline; 0 if unknown. A segment that needs MPI's
 * handshake costs a round of about 10 us here, one that does not 1-2 us,
 * so below the step eight segments pay where two do not. */
static size_t eager_segment(const blk_master *m) {
  size_t lo = 0, hi = 0;
  if (!m->tuning || !blk__tuning_eager_step(m->tuning, &lo, &hi)) return 0;
  if (lo <= sizeof(blk__msg)) return 0;
  size_t seg = lo - sizeof(blk__msg);
  return seg < BLK__COMM_INLINE_BYTES ? seg : BLK__COMM_INLINE_BYTES;
}

/* The segments of the pipelined tree: enough that none is over the segment
 * size (one for one block, which sends nothing); 0 when they would pass
 * RING_MAX_ROUNDS. The default segment is also at most half the array
 * down to BLK_ARRAYS_PIPELINE_MIN_BYTES: with one segment the pipeline is
 * TREE's two messages in series. An array of at most
 * BLK_ARRAYS_PIPELINE_EAGER_SEGMENTS eager segments goes in those where the
 * tree's rounds across ranks are what it waits for: on several ranks, each
 * with at most BLK_ARRAYS_PIPELINE_EAGER_BLOCKS blocks (counted alike on
 * every rank: the blocks over the ranks, rounded up). */
static int pipe_segments(const blk_master *m, const blk_assigner *a, const blk_arrays *spec,
                         size_t elem, int n) {
  if (n < 2) return 1;
  size_t half = spec->count * elem / 2, seg = BLK_ARRAYS_PIPELINE_SEGMENT_BYTES;
  if (half < seg) seg = half > BLK_ARRAYS_PIPELINE_MIN_BYTES ? half : BLK_ARRAYS_PIPELINE_MIN_BYTES;
  int ranks = blk_assigner_nranks(a);
  size_t eager = ranks > 1 && (n + ranks - 1) / ranks <= BLK_ARRAYS_PIPELINE_EAGER_BLOCKS
                     ? eager_segment(m)
                     : 0;
  if (eager >= elem && spec->count * elem <= BLK_ARRAYS_PIPELINE_EAGER_SEGMENTS * eager)
    seg = eager;
  if (spec->version >= 2 && spec->segment) seg = spec->segment;
  size_t per = seg / elem ? seg / elem : 1; /* elements a segment */
  size_t S = spec->count / per + (spec->count % per != 0);
  if (S < 1) S = 1;
  return S > (size_t)RING_MAX_ROUNDS ? 0 : (int)S;
}

/* TREE (the regular fold: see fold_width), its top one exchange where
 * top_across_ranks says it pays. */
static int tree_all_reduce(blk_master *m, const blk_assigner *a, const blk_arrays *spec,
                           size_t elem) {
  int n = blk_assigner_nblocks(a), rc = BLK_OK;
  blk_partners *p = partners(m, BLK_ALLREDUCE, n, spec->k, 1, blk__fold_width(spec->k), &rc);
  if (p && top_across_ranks(p, a))
    p = partners(m, PATTERN_TREE, n, spec->k, 1, blk__fold_width(spec->k), &rc);
  if (!p) return rc;
  int rounds = blk_partners_rounds(p), top = rounds % 2 ? (rounds + 1) / 2 : -1;
  int half = top < 0 ? rounds / 2 : top - 1;
  static const blk__driver driver = {"arrays", NULL, 1, place_array, 0, 1, 0, 1};
  tree_job t = {new_job(spec, p, n, elem, refs_allowed(m)), half, top, a, blk_master_rank(m)};
  t.j.place_from = (top < 0 ? half : top) + 1;
  return blk__reduce_run(m, a, p, tree_allreduce_round, &t.j, &driver);
}

/* With one segment there is nothing to pipeline: the array goes up the tree
 * and back down whole, which is what TREE does, and TREE's top is one
 * exchange where it crosses ranks (1 KiB at 2 ranks x 1 block: 1.09-1.14
 * of MPI's time against the pipeline's 1.18-1.55, docs/performance.md
 * 13.21). */
static int pipelined_tree_all_reduce(blk_master *m, const blk_assigner *a, const blk_arrays *spec,
                                     size_t elem) {
  static const blk__driver driver = {"arrays", NULL, 1, place_segment, 0, 0, 0, 0};
  int n = blk_assigner_nblocks(a), S = pipe_segments(m, a, spec, elem, n), rc = BLK_OK;
  if (!S)
    return blk__fail(BLK_EINVAL,
                     "arrays: segments of %zu bytes over %zu elements take more than %d rounds",
                     spec->segment, spec->count, RING_MAX_ROUNDS);
  if (S == 1 && n > 1) return tree_all_reduce(m, a, spec, elem);
  pipe_job pj = {new_job(spec, NULL, n, elem, refs_allowed(m)), {0}, a, blk_master_rank(m)};
  if ((rc = blk__pipeline_init(&pj.t, n, spec->k, S))) return rc; /* (alike on every rank) */
  blk_partners *p = partners(m, PATTERN_PIPELINE, n, spec->k, 0, S, &rc);
  if (!p) return rc;
  pj.j.p = p;
  return blk__reduce_run(m, a, p, pipe_round, &pj.j, &driver);
}

int blk_arrays_all_reduce(blk_master *m, const blk_assigner *a, const blk_arrays *spec) {
  size_t elem = 0;
  int rc = check_call(m, a, spec, &elem);
  if (rc) return rc;
  blk_arrays_algorithm alg;
  /* (A choice that failed here takes part in what the others run, so they
   * learn of it.) */
  if ((rc = choose_algorithm(m, a, spec, 1, &alg))) return blk__reduce_abort(m, rc, "arrays");
  int n = blk_assigner_nblocks(a);
  if (alg == BLK_ARRAYS_RING || alg == BLK_ARRAYS_SEGMENTED_RING)
    return ring_all_reduce(m, a, spec, elem);
  if (alg == BLK_ARRAYS_PIPELINED_TREE) return pipelined_tree_all_reduce(m, a, spec, elem);
  size_t bytes = spec->count * elem;
  if (alg == BLK_ARRAYS_BUTTERFLY) {
    int width = fold_width(m, a, BLK_SWAP, spec->k, 1, bytes, 0, &rc);
    if (width < 0) return rc;
    blk_partners *p = partners(m, BLK_SWAP, n, spec->k, 1, width, &rc);
    if (!p) return rc;
    static const blk__driver driver = {"arrays", NULL, 1, NULL, 0, 1, 0, 0};
    butterfly_job bj = {new_job(spec, p, n, elem, refs_allowed(m)), a, blk_master_rank(m)};
    return blk__reduce_run(m, a, p, butterfly_round, &bj.j, &driver);
  }
  if (alg == BLK_ARRAYS_TREE) return tree_all_reduce(m, a, spec, elem);
  /* Reduce-scatter in halving order, then the same groups backwards, as
   * one reduction: one agreement closes both halves. The gather's rounds
   * that receive write where the scatter sent from by reference, so the
   * driver holds a block there until such a send to another rank is
   * complete (hold_for_refs); the scatter writes only the share it keeps. */
  int width = fold_width(m, a, PATTERN_SCATTER, spec->k, 0, bytes, 1, &rc);
  if (width < 0) return rc;
  blk_partners *both = partners(m, PATTERN_SPLIT, n, spec->k, 0, width, &rc);
  if (!both) return rc;
  job j = new_job(spec, blk__partners_joined_first(both), n, elem, refs_allowed(m));
  j.table = &m->table;
  digits d;
  fold_job(&j, width, 0, &d);
  j.goff = blk_partners_rounds(j.p);
  /* A gather share from another rank may come while its block still runs
   * an earlier round: in core, placed ahead where it goes (it would
   * otherwise be copied there from blk's storage). */
  int nl = blk__table_count(&m->table);
  unsigned char *few[32], **arrays = NULL;
  if (!blk__budget_may_swap(&m->budget) && nl > 0)
    arrays = nl <= 32 ? few : blk__malloc((size_t)nl * sizeof *arrays);
  for (int i = 0; arrays && i < nl; i++) {
    blk__block *b = blk__table_at(&m->table, i);
    arrays[i] = array_of(&j, b->data, b->gid);
  }
  j.arrays = arrays;
  const blk__driver driver = {"arrays", NULL, 1, place_share, arrays != NULL, 1, j.goff, 1};
  rc = blk__reduce_run(m, a, both, split_round, &j, &driver);
  if (arrays != few) free(arrays);
  return rc;
}
