/*
 * buffer.c: the serialization buffer (see include/blk/buffer.h).
 *
 * Invariants: pos <= size <= capacity; data == NULL exactly when capacity == 0.
 * Growth doubles the capacity (starting at MIN_CAPACITY), so n appends of any
 * sizes copy O(n) bytes in total; every size computation is checked for
 * overflow before it is used.
 *
 * Errors are sticky (redis's rio does the same): the first failure is stored
 * in b->error through blk__fail, which also records the detail for
 * blk_last_error(). Every entry point that writes or reads checks b->error
 * first and, if set, does nothing but return it (reads zero-fill their
 * destination). A failed read leaves pos where it was, so the offset in the
 * detail message is where the bad data starts.
 *
 * Locking: none; a buffer belongs to one thread at a time.
 */
#include "blk/buffer.h"
#include "base/alloc.h"
#include "base/copy.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"

#define MIN_CAPACITY ((size_t)64)

/* Records the first error of `b` and evaluates to its code. */
#define SET_ERROR(b, code, ...) ((b)->error = blk__fail((code), __VA_ARGS__))

/* What zero-length appends and views point at when the buffer has no memory:
 * callers get a non-NULL pointer to nothing. */
static unsigned char empty_target[1];

void blk_buffer_init(blk_buffer *b) {
  b->data = NULL;
  b->size = 0;
  b->capacity = 0;
  b->pos = 0;
  b->error = 0;
}

void blk_buffer_free(blk_buffer *b) {
  if (!b) return;
  if (b->data) free(b->data); /* (most freed on a small operation's path hold nothing) */
  blk_buffer_init(b);
}

void blk_buffer_clear(blk_buffer *b) {
  b->size = 0;
  b->pos = 0;
  b->error = 0;
}

void blk_buffer_rewind(blk_buffer *b) {
  b->pos = 0;
}

void blk_buffer_swap(blk_buffer *a, blk_buffer *b) {
  blk_buffer t = *a;
  *a = *b;
  *b = t;
}

void blk_buffer_adopt(blk_buffer *b, void *data, size_t size, size_t capacity) {
  blk_buffer_init(b);
  b->data = data;
  b->capacity = data ? capacity : 0;
  b->size = data && size <= capacity ? size : 0;
}

void *blk_buffer_detach(blk_buffer *b, size_t *capacity) {
  if (!b->data || b->capacity == 0) return NULL; /* nothing, or a reference */
  void *data = b->data;
  if (capacity) *capacity = b->capacity;
  blk_buffer_init(b);
  return data;
}

size_t blk_buffer_remaining(const blk_buffer *b) {
  return b->size - b->pos;
}

int blk_buffer_error(const blk_buffer *b) {
  return b->error;
}

int blk_buffer_reserve(blk_buffer *b, size_t extra) {
  if (b->error) return b->error;
  if (extra > SIZE_MAX - b->size)
    return SET_ERROR(b, BLK_ENOMEM, "buffer: reserving %zu bytes after %zu overflows size_t", extra,
                     b->size);
  size_t need = b->size + extra;
  if (need <= b->capacity) return 0;
  size_t cap = b->capacity < MIN_CAPACITY ? MIN_CAPACITY : b->capacity;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  unsigned char *data = blk__realloc(b->data, cap);
  if (!data)
    return SET_ERROR(b, BLK_ENOMEM, "buffer: cannot grow from %zu to %zu bytes", b->capacity, cap);
  b->data = data;
  b->capacity = cap;
  return 0;
}

int blk_buffer_write(blk_buffer *b, const void *src, size_t n) {
  int rc = blk_buffer_reserve(b, n);
  if (rc != 0) return rc;
  blk__copy(b->data + b->size, src, n);
  b->size += n;
  return 0;
}

void *blk_buffer_append(blk_buffer *b, size_t n) {
  if (blk_buffer_reserve(b, n) != 0) return NULL;
  if (!b->data) return empty_target; /* n == 0 on a buffer with no memory */
  void *p = b->data + b->size;
  b->size += n;
  return p;
}

int blk_buffer_read(blk_buffer *b, void *dst, size_t n) {
  int rc = b->error;
  if (rc == 0 && n > blk_buffer_remaining(b))
    rc = SET_ERROR(b, BLK_ERANGE,
                   "buffer: read of %zu bytes at offset %zu but only %zu remain (size %zu)", n,
                   b->pos, blk_buffer_remaining(b), b->size);
  if (rc != 0) {
    if (n > 0) memset(dst, 0, n);
    return rc;
  }
  blk__copy(dst, b->data + b->pos, n);
  b->pos += n;
  return 0;
}

const void *blk_buffer_read_view(blk_buffer *b, size_t n) {
  if (b->error) return NULL;
  if (n > blk_buffer_remaining(b)) {
    SET_ERROR(b, BLK_ERANGE,
              "buffer: view of %zu bytes at offset %zu but only %zu remain (size %zu)", n, b->pos,
              blk_buffer_remaining(b), b->size);
    return NULL;
  }
  if (!b->data) return empty_target; /* n == 0 on a buffer with no memory */
  const void *p = b->data + b->pos;
  b->pos += n;
  return p;
}

/* The typed values. A read converts the wire value back to the C type and
 * checks that nothing was lost by converting it once more and comparing the
 * bits: this only ever fails for a uint64_t that does not fit a 32-bit size_t,
 * and compiles to nothing where the two types are the same. Comparing bits
 * rather than values keeps NaNs intact. */
#define DEFINE_VALUE(name, type, wire)                                                             \
  int blk_buffer_write_##name(blk_buffer *b, type v) {                                             \
    wire w = (wire)v;                                                                              \
    return blk_buffer_write(b, &w, sizeof w);                                                      \
  }                                                                                                \
  int blk_buffer_read_##name(blk_buffer *b, type *v) {                                             \
    size_t at = b->pos;                                                                            \
    wire w;                                                                                        \
    int rc = blk_buffer_read(b, &w, sizeof w);                                                     \
    type t = (type)w;                                                                              \
    wire back = (wire)t;                                                                           \
    if (rc == 0 && memcmp(&back, &w, sizeof w) != 0) {                                             \
      b->pos = at;                                                                                 \
      rc = SET_ERROR(b, BLK_ERANGE, "buffer: " #name " at offset %zu does not fit in " #type, at); \
      t = 0;                                                                                       \
    }                                                                                              \
    *v = t;                                                                                        \
    return rc;                                                                                     \
  }
BLK_BUFFER_VALUE_TYPES(DEFINE_VALUE)
#undef DEFINE_VALUE

int blk_buffer_write_array(blk_buffer *b, const void *data, size_t elem_size, size_t count) {
  if (b->error) return b->error;
  if (elem_size > 0 && count > SIZE_MAX / elem_size)
    return SET_ERROR(b, BLK_ENOMEM, "buffer: array of %zu elements of %zu bytes overflows size_t",
                     count, elem_size);
  size_t bytes = elem_size * count;
  if (bytes > SIZE_MAX - sizeof(uint64_t))
    return SET_ERROR(b, BLK_ENOMEM, "buffer: array of %zu bytes overflows size_t", bytes);
  /* Reserving first makes the two writes below all-or-nothing. */
  int rc = blk_buffer_reserve(b, sizeof(uint64_t) + bytes);
  if (rc != 0) return rc;
  uint64_t n = (uint64_t)count;
  memcpy(b->data + b->size, &n, sizeof n);
  blk__copy(b->data + b->size + sizeof n, data, bytes);
  b->size += sizeof n + bytes;
  return 0;
}

/* Reads an array's count and checks it: at most max_count elements, a byte
 * size that fits size_t, and all those bytes present. On success pos is at
 * the first element. On failure pos is unchanged and the error is set. */
static int read_array_header(blk_buffer *b, size_t elem_size, size_t max_count, size_t *count,
                             size_t *bytes) {
  *count = 0;
  *bytes = 0;
  if (b->error) return b->error;
  size_t at = b->pos;
  uint64_t stored;
  if (blk_buffer_remaining(b) < sizeof stored)
    return SET_ERROR(b, BLK_ERANGE,
                     "buffer: array count at offset %zu needs %zu bytes but only %zu remain", at,
                     sizeof stored, blk_buffer_remaining(b));
  memcpy(&stored, b->data + at, sizeof stored);
  size_t left = blk_buffer_remaining(b) - sizeof stored;
  if (stored > (uint64_t)max_count) {
    if (max_count == SIZE_MAX)
      return SET_ERROR(b, BLK_ERANGE,
                       "buffer: array at offset %zu has %" PRIu64
                       " elements, more than size_t holds",
                       at, stored);
    return SET_ERROR(b, BLK_ERANGE,
                     "buffer: array at offset %zu has %" PRIu64 " elements but room for only %zu",
                     at, stored, max_count);
  }
  size_t n = (size_t)stored;
  if (elem_size > 0 && n > SIZE_MAX / elem_size)
    return SET_ERROR(b, BLK_ERANGE,
                     "buffer: array at offset %zu has %zu elements of %zu bytes, which overflows "
                     "size_t",
                     at, n, elem_size);
  if (n * elem_size > left)
    return SET_ERROR(b, BLK_ERANGE,
                     "buffer: array at offset %zu has %zu elements of %zu bytes but only %zu "
                     "bytes follow",
                     at, n, elem_size, left);
  b->pos += sizeof stored;
  *count = n;
  *bytes = n * elem_size;
  return 0;
}

int blk_buffer_read_array(blk_buffer *b, void *dst, size_t elem_size, size_t max_count,
                          size_t *count) {
  size_t bytes;
  int rc = read_array_header(b, elem_size, max_count, count, &bytes);
  if (rc != 0) {
    /* Zero the caller's whole array, unless its claimed size is impossible. */
    if (elem_size > 0 && max_count > 0 && max_count <= SIZE_MAX / elem_size)
      memset(dst, 0, max_count * elem_size);
    return rc;
  }
  blk__copy(dst, b->data + b->pos, bytes);
  b->pos += bytes;
  return 0;
}

int blk_buffer_read_array_alloc(blk_buffer *b, void **dst, size_t elem_size, size_t *count) {
  *dst = NULL;
  size_t at = b->pos, bytes;
  int rc = read_array_header(b, elem_size, SIZE_MAX, count, &bytes);
  if (rc != 0) return rc;
  if (bytes == 0) return 0;
  void *p = blk__malloc(bytes);
  if (!p) {
    b->pos = at;
    *count = 0;
    return SET_ERROR(b, BLK_ENOMEM, "buffer: cannot allocate %zu bytes for the array at offset %zu",
                     bytes, at);
  }
  blk__copy(p, b->data + b->pos, bytes);
  b->pos += bytes;
  *dst = p;
  return 0;
}

const void *blk_buffer_read_array_view(blk_buffer *b, size_t elem_size, size_t *count) {
  size_t bytes;
  if (read_array_header(b, elem_size, SIZE_MAX, count, &bytes) != 0) return NULL;
  const void *p = b->data + b->pos; /* data is not NULL: the count was read from it */
  b->pos += bytes;
  return p;
}
