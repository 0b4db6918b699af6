/*
 * buffer_cache.c: spare message storage; see buffer_cache.h.
 *
 * Invariants: slots[0..n) hold storage with capacity >= BLK__BUFFER_CACHE_MIN,
 * size, pos and error zero; bytes is the sum of their capacities and never
 * exceeds max_bytes. All of it under lock. A linear scan per call is fine:
 * there are at most a few dozen slots and each call saves at least a page
 * fault.
 */
#include "base/buffer_cache.h"
#include "base/alloc.h"
#include "base/copy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/thread.h"
#include "blk/error.h"

struct blk__buffer_cache {
  blk__mutex *lock;
  blk_buffer *slots;
  int n, max_slots;
  size_t bytes, max_bytes;
};

int blk__buffer_cache_create(blk__buffer_cache **out, int slots, size_t max_bytes) {
  *out = NULL;
  blk__buffer_cache *c = blk__calloc(1, sizeof *c);
  if (!c) return BLK_ENOMEM;
  c->max_slots = slots > 0 ? slots : 1;
  c->max_bytes = max_bytes;
  c->slots = blk__calloc((size_t)c->max_slots, sizeof *c->slots);
  if (!c->slots || blk__mutex_create(&c->lock)) {
    free(c->slots);
    free(c);
    return BLK_ENOMEM;
  }
  *out = c;
  return BLK_OK;
}

void blk__buffer_cache_destroy(blk__buffer_cache *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) blk_buffer_free(&c->slots[i]);
  blk__mutex_destroy(c->lock);
  free(c->slots);
  free(c);
}

/* The slot with the least capacity (under lock, n > 0). */
static int smallest(const blk__buffer_cache *c) {
  int s = 0;
  for (int i = 1; i < c->n; i++)
    if (c->slots[i].capacity < c->slots[s].capacity) s = i;
  return s;
}

/* Drops slot i (under lock). */
static void drop(blk__buffer_cache *c, int i) {
  c->bytes -= c->slots[i].capacity;
  blk_buffer_free(&c->slots[i]);
  c->slots[i] = c->slots[--c->n];
}

void blk__buffer_ref(blk_buffer *b, const void *data, size_t size) {
  blk_buffer_init(b);
  b->data = (unsigned char *)(uintptr_t)data; /* read only: never written through */
  b->size = size;
}

int blk__buffer_is_ref(const blk_buffer *b) {
  return b->data && b->capacity == 0;
}

void blk__buffer_release(blk_buffer *b) {
  if (blk__buffer_is_ref(b))
    blk_buffer_init(b);
  else
    blk_buffer_clear(b);
}

void blk__buffer_cache_give(blk__buffer_cache *c, blk_buffer *b) {
  if (!b->data || blk__buffer_is_ref(b)) { /* (nothing to keep: most, on a small operation) */
    blk_buffer_init(b);
    return;
  }
  if (!c || b->capacity < BLK__BUFFER_CACHE_MIN || b->capacity > c->max_bytes) {
    blk_buffer_free(b);
    return;
  }
  blk__mutex_lock(c->lock);
  if (c->n == c->max_slots) {
    int i = smallest(c);
    if (c->slots[i].capacity >= b->capacity) {
      blk__mutex_unlock(c->lock);
      blk_buffer_free(b);
      return;
    }
    drop(c, i);
  }
  /* Room for the bytes: drop the smallest until it fits (b itself fits). */
  while (c->bytes + b->capacity > c->max_bytes) drop(c, smallest(c));
  blk_buffer_clear(b);
  c->slots[c->n++] = *b;
  c->bytes += b->capacity;
  blk__mutex_unlock(c->lock);
  blk_buffer_init(b);
}

int blk__buffer_cache_reserve(blk__buffer_cache *c, blk_buffer *b, size_t size) {
  if (!c || b->error || size > SIZE_MAX - b->size) return blk_buffer_reserve(b, size);
  size_t need = b->size + size;
  if (need <= b->capacity || need < BLK__BUFFER_CACHE_MIN / 2) return blk_buffer_reserve(b, size);
  /* The smallest kept buffer that fits, if it is not far larger than needed
   * (a small queue holding a huge buffer would make the next large message
   * fault in fresh memory after all). */
  blk__mutex_lock(c->lock);
  int best = -1;
  for (int i = 0; i < c->n; i++)
    if (c->slots[i].capacity >= need && c->slots[i].capacity / 4 <= need &&
        (best < 0 || c->slots[i].capacity < c->slots[best].capacity))
      best = i;
  blk_buffer kept = BLK_BUFFER_INIT;
  if (best >= 0) {
    kept = c->slots[best];
    c->bytes -= kept.capacity;
    c->slots[best] = c->slots[--c->n];
  }
  blk__mutex_unlock(c->lock);
  if (best < 0) return blk_buffer_reserve(b, size);
  /* Growing: what was written moves over (a copy costs far less than the
   * page faults of new memory). */
  blk__copy(kept.data, b->data, b->size);
  kept.size = b->size;
  kept.pos = b->pos;
  blk__buffer_cache_give(c, b);
  *b = kept;
  return BLK_OK;
}

int blk__buffer_cache_own(blk__buffer_cache *c, blk_buffer *b) {
  if (!blk__buffer_is_ref(b)) return BLK_OK;
  blk_buffer ref = *b, own = BLK_BUFFER_INIT;
  blk_buffer_init(b);
  int rc = blk__buffer_cache_reserve(c, &own, ref.size);
  if (rc) {
    b->error = rc;
    return rc;
  }
  blk__copy(own.data, ref.data, ref.size);
  own.size = ref.size;
  own.pos = ref.pos;
  *b = own;
  return BLK_OK;
}

size_t blk__buffer_cache_bytes(blk__buffer_cache *c) {
  blk__mutex_lock(c->lock);
  size_t bytes = c->bytes;
  blk__mutex_unlock(c->lock);
  return bytes;
}
