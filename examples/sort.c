/*
 * sort: a parallel sample sort of 64-bit keys with blk_all_to_all.
 *
 * Each block makes --keys pseudo-random keys (skewed on purpose: mostly small
 * values, and a few values that repeat often, so the bucket boundaries must
 * come from the data, not from the key range) and sorts them locally. Then:
 *
 *  1. samples: every block sends SAMPLES evenly spaced keys of its sorted
 *     run to every block (an all-gather through blk_all_to_all); every block
 *     sorts the same samples and picks the same nblocks - 1 splitters;
 *  2. keys: block b's bucket is [splitter b-1, splitter b); since a block's
 *     keys are sorted, each bucket is one contiguous run, sent to gid b with
 *     one enqueue; each block sorts what it received;
 *  3. check: every block sends a summary of its keys (count, min, max, sum,
 *     xor of hashes) to gid 0, which checks the global order (block g's max
 *     <= block g+1's min) and that count, sum and xor of hashes equal those
 *     of the input, computed serially on every rank from the seed (so no key
 *     was lost or duplicated). Every block also checks that its keys are
 *     sorted and inside its bucket; one exchange of posted values then gives
 *     every rank the verdict.
 *
 * Out-of-core (--mem-blocks N), a block's record is its keys, then its
 * splitters and error count. The keys' memory holds room for the rest, so
 * evict hands it over whole instead of copying the keys, and load takes
 * the read record's memory as the keys.
 *
 *   mpiexec -n 4 ./sort [--blocks 12] [--k 4] [--halving] [--threads 2]
 *                       [--keys 2000] [--seed 1]
 *                       [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * Prints one line with PASS, or FAIL and exit status 1 (and, out-of-core, a
 * line of rank 0's storage figures).
 */
#include <blk/blk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

#define SAMPLES 32 /* per block */

/* Key i of block gid. */
static uint64_t make_key(uint64_t seed, int gid, uint64_t i) {
  uint64_t r = ex_random(seed, (uint64_t)gid, i);
  if ((r & 15) == 0) return (r >> 60) * 1000003u; /* 16 values, each 1/256 of the keys */
  return r >> ((r >> 4) & 31);                    /* any size, small ones more likely */
}

static int compare_keys(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The first index in keys[0..n) whose key is >= v. */
static size_t lower_bound(const uint64_t *keys, size_t n, uint64_t v) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* What each block tells gid 0 about its keys, and what the input had. */
typedef struct summary {
  uint64_t count, min, max;
  uint64_t sum;      /* wrapping */
  uint64_t xor_hash; /* xor of ex_mix64(key) */
} summary;

static void summarise(summary *s, const uint64_t *keys, size_t n) {
  s->count += n;
  for (size_t i = 0; i < n; i++) {
    if (keys[i] < s->min) s->min = keys[i];
    if (keys[i] > s->max) s->max = keys[i];
    s->sum += keys[i];
    s->xor_hash ^= ex_mix64(keys[i]);
  }
}

#define SUMMARY_INIT \
  { 0, UINT64_MAX, 0, 0, 0 }

typedef struct sort_block {
  uint64_t *keys;
  size_t n;
  size_t cap;          /* bytes at keys: room for n keys and the record's tail */
  uint64_t *splitters; /* nblocks - 1, the same on every block */
  int64_t errors;      /* found by the checks */
} sort_block;

typedef struct run {
  int nblocks;
  uint64_t seed, keys; /* keys per block */
  summary input;       /* serial: of every block's input keys */
} run;

/* A record's bytes after the keys: nblocks - 1 splitters and the error
 * count. */
static size_t tail_bytes(const run *r) {
  return (size_t)r->nblocks * sizeof(uint64_t);
}

/* Memory for n keys with room for the record's tail after them; NULL if
 * there is none. */
static uint64_t *alloc_keys(const run *r, size_t n, size_t *cap) {
  *cap = n * sizeof(uint64_t) + tail_bytes(r);
  return malloc(*cap);
}

static int create_block(void **out, int gid, void *user) {
  (void)gid;
  const run *r = user;
  sort_block *b = calloc(1, sizeof *b);
  if (b) b->splitters = calloc((size_t)r->nblocks, sizeof *b->splitters);
  *out = b;
  return b && b->splitters ? 0 : BLK_ENOMEM;
}

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  sort_block *b = block;
  if (!b) return;
  free(b->keys);
  free(b->splitters);
  free(b);
}

/* Out-of-core: the keys, then the splitters (zero before step 1 chose
 * them) and the error count; the keys' count is what the size leaves. */
static int write_tail(blk_buffer *out, const run *r, const sort_block *b) {
  blk_buffer_write(out, b->splitters, ((size_t)r->nblocks - 1) * sizeof *b->splitters);
  return blk_buffer_write_i64(out, b->errors);
}

static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  const run *r = user;
  const sort_block *b = block;
  if (b->n > 0) blk_buffer_write(out, b->keys, b->n * sizeof *b->keys);
  return write_tail(out, r, b);
}

/* ... and when the block goes out (destroy follows): the keys' memory
 * itself, the tail written into the room it holds after them, so nothing
 * after the hand-over can fail. A block whose keys have no such room is
 * saved by copy. */
static int evict_block(blk_buffer *out, void *block, int gid, void *user) {
  const run *r = user;
  sort_block *b = block;
  const size_t bytes = b->n * sizeof *b->keys;
  if (!b->keys || b->cap < bytes + tail_bytes(r)) return save_block(out, b, gid, user);
  blk_buffer_adopt(out, b->keys, bytes, b->cap);
  b->keys = NULL;
  b->n = b->cap = 0;
  return write_tail(out, r, b); /* (into the room: no allocation) */
}

/* Takes the record's memory as the keys when it can (the tail read first:
 * nothing fails after the take), else copies them. */
static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  const run *r = user;
  sort_block *b = block; /* fresh from create_block: no keys yet */
  const size_t saved = blk_buffer_remaining(in), tail = tail_bytes(r);
  if (saved < tail || (saved - tail) % sizeof *b->keys) return BLK_ECORRUPT;
  const size_t n = (saved - tail) / sizeof *b->keys, splitters = tail - sizeof b->errors;
  const unsigned char *at = in->data + in->pos + n * sizeof *b->keys;
  memcpy(b->splitters, at, splitters);
  memcpy(&b->errors, at + splitters, sizeof b->errors);
  if (n == 0) return 0; /* no keys: none kept (make_keys and receive_keys make them) */
  if (in->pos == 0 && (b->keys = blk_buffer_detach(in, &b->cap)) != NULL) {
    b->n = n;
    return 0;
  }
  if (!(b->keys = alloc_keys(r, n, &b->cap))) return BLK_ENOMEM;
  b->n = n;
  return blk_buffer_read(in, b->keys, n * sizeof *b->keys);
}

/* foreach: make this block's keys and sort them. */
static int make_keys(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  sort_block *b = block;
  free(b->keys); /* (NULL in this program; freed so that a second call would not leak) */
  b->keys = alloc_keys(r, (size_t)r->keys, &b->cap);
  if (!b->keys) return BLK_ENOMEM;
  for (uint64_t i = 0; i < r->keys; i++) b->keys[i] = make_key(r->seed, blk_proxy_gid(p), i);
  b->n = r->keys;
  qsort(b->keys, b->n, sizeof *b->keys, compare_keys);
  return 0;
}

/* 1. all_to_all send: evenly spaced samples of the sorted keys, to every gid. */
static int send_samples(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  sort_block *b = block;
  size_t s = b->n < SAMPLES ? b->n : SAMPLES;
  uint64_t samples[SAMPLES];
  for (size_t j = 0; j < s; j++) samples[j] = b->keys[(2 * j + 1) * b->n / (2 * s)];
  for (int g = 0; g < r->nblocks && s > 0; g++) {
    int rc = blk_proxy_enqueue_gid(p, g, samples, s * sizeof *samples);
    if (rc) return rc;
  }
  return 0;
}

/* 1. all_to_all receive: every block gets the same samples, so every block
 * picks the same splitters: the samples at ranks i * total / nblocks. */
static int choose_splitters(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  sort_block *b = block;
  size_t total = 0;
  for (int i = 0; i < blk_proxy_in_count(p); i++)
    total += blk_proxy_incoming_remaining(p, i) / sizeof(uint64_t);
  uint64_t *all = malloc((total ? total : 1) * sizeof *all);
  if (!all) return BLK_ENOMEM;
  size_t n = 0;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t count = blk_proxy_incoming_remaining(p, i) / sizeof(uint64_t);
    blk_proxy_dequeue(p, i, all + n, count * sizeof *all);
    n += count;
  }
  qsort(all, total, sizeof *all, compare_keys);
  for (int i = 1; i < r->nblocks; i++)
    b->splitters[i - 1] = total ? all[(size_t)i * total / (size_t)r->nblocks] : 0;
  free(all);
  return 0;
}

/* 2. all_to_all send: bucket g is one run of the sorted keys. */
static int send_keys(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  sort_block *b = block;
  size_t start = 0;
  for (int g = 0; g < r->nblocks; g++) {
    size_t end = g + 1 < r->nblocks ? lower_bound(b->keys, b->n, b->splitters[g]) : b->n;
    if (end < start) end = start; /* only if splitters were out of order */
    if (end > start) {
      int rc = blk_proxy_enqueue_gid(p, g, b->keys + start, (end - start) * sizeof *b->keys);
      if (rc) return rc;
    }
    start = end;
  }
  b->n = 0;
  return 0;
}

/* 2. all_to_all receive: this block's bucket, from every block that had some. */
static int receive_keys(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  sort_block *b = block;
  size_t total = 0;
  for (int i = 0; i < blk_proxy_in_count(p); i++)
    total += blk_proxy_incoming_remaining(p, i) / sizeof(uint64_t);
  free(b->keys);
  b->keys = alloc_keys(r, total, &b->cap);
  if (!b->keys) return BLK_ENOMEM;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    size_t count = blk_proxy_incoming_remaining(p, i) / sizeof(uint64_t);
    blk_proxy_dequeue(p, i, b->keys + b->n, count * sizeof *b->keys);
    b->n += count;
  }
  qsort(b->keys, b->n, sizeof *b->keys, compare_keys);
  return 0;
}

/* 3. all_to_all send: local checks, and this block's summary to gid 0. */
static int send_summary(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  sort_block *b = block;
  int g = blk_proxy_gid(p);
  for (size_t i = 0; i < b->n; i++) {
    uint64_t key = b->keys[i];
    if ((i > 0 && key < b->keys[i - 1]) || (g > 0 && key < b->splitters[g - 1]) ||
        (g + 1 < r->nblocks && key >= b->splitters[g]))
      b->errors++;
  }
  summary s = SUMMARY_INIT;
  summarise(&s, b->keys, b->n);
  return blk_proxy_enqueue_gid(p, 0, &s, sizeof s);
}

/* 3. all_to_all receive (only gid 0 gets anything): the global checks,
 * walking the blocks in gid order. */
static int check_summaries(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  sort_block *b = block;
  if (blk_proxy_gid(p) != 0) return 0;
  if (blk_proxy_in_count(p) != r->nblocks) b->errors++; /* every block sends one */
  summary all = SUMMARY_INIT;
  uint64_t last_max = 0;
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    summary s;
    if (blk_proxy_in_gid(p, i) != i) b->errors++; /* sources arrive by gid */
    blk_proxy_dequeue(p, i, &s, sizeof s);
    if (s.count > 0 && s.min < last_max) b->errors++; /* out of order with an earlier block */
    if (s.count > 0) last_max = s.max;
    all.count += s.count;
    all.sum += s.sum;
    all.xor_hash ^= s.xor_hash;
  }
  if (all.count != r->input.count || all.sum != r->input.sum || all.xor_hash != r->input.xor_hash)
    b->errors++;
  return 0;
}

/* foreach: post the errors and the bucket sizes; one exchange combines them. */
static int post_results(void *block, blk_proxy *p, void *user) {
  (void)user;
  sort_block *b = block;
  int rc = blk_proxy_all_reduce_i64(p, b->errors, BLK_OP_SUM);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, (int64_t)b->n, BLK_OP_SUM);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, (int64_t)b->n, BLK_OP_MAX);
  return rc;
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 12, .k = 4, .contiguous = 1, .threads = 2, .seed = 1};
  long long keys = 2000;
  ex_int_option extra[] = {{"--keys", &keys, 0, "keys made by each block"}};
  if (!ex_start(&argc, &argv, &o, "a sample sort of 64-bit keys with all_to_all", extra, 1))
    return o.status;
  int size = ex_size();

  run r = {o.blocks, o.seed, (uint64_t)keys, SUMMARY_INIT};
  /* The serial reference: the input's count, sum and xor of hashes. */
  for (int g = 0; g < o.blocks; g++)
    for (uint64_t i = 0; i < r.keys; i++) {
      uint64_t key = make_key(o.seed, g, i);
      summarise(&r.input, &key, 1);
    }

  /* No geometry here: blocks are just gids, placed by an assigner. */
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  EX_CHECK(ex_choose_k(&o, BLK_SWAP, a, (size_t)keys * sizeof(uint64_t), 1));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = create_block; /* out-of-core, blk makes the blocks it loads into */
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.evict = evict_block;
  mc.user = &r;
  mc.shuffle = sizeof(uint64_t); /* the records are arrays of keys */
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(ex_add_blocks(m, a, create_block, &r));

  EX_CHECK(blk_master_foreach(m, make_keys, &r));
  double t0 = MPI_Wtime();
  EX_CHECK(blk_all_to_all(m, a, o.k, o.contiguous, send_samples, choose_splitters, &r));
  EX_CHECK(blk_all_to_all(m, a, o.k, o.contiguous, send_keys, receive_keys, &r));
  double elapsed = MPI_Wtime() - t0;
  EX_CHECK(blk_all_to_all(m, a, o.k, o.contiguous, send_summary, check_summaries, &r));
  EX_CHECK(blk_master_foreach(m, post_results, &r));
  EX_CHECK(blk_master_exchange(m));
  int64_t errors = blk_master_result_i64(m, 0), count = blk_master_result_i64(m, 1);
  int64_t largest = blk_master_result_i64(m, 2);

  int ok = ex_ooc_agree(m, &o.ooc, errors == 0 && count == (int64_t)r.input.count);
  double average = (double)r.input.count / o.blocks;
  ex_summary(m, &o.ooc, ok, "sort",
             "%llu keys (%lld per block), %d blocks on %d ranks x %d threads, %s, all_to_all k=%d "
             "%s: %lld keys in buckets, largest %.2f x average; %lld errors in order, count and "
             "checksums vs serial, %.3f s",
             (unsigned long long)r.input.count, keys, o.blocks, size, o.threads,
             ex_ooc_mode(&o.ooc).s, o.k, ex_order(&o), (long long)count,
             average > 0 ? (double)largest / average : 0.0, (long long)errors, elapsed);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  return ex_finish(ok);
}
