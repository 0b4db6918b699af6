/*
 * blk/buffer.h: a growable byte buffer for serialization.
 *
 * A blk_buffer is a value type with visible fields: put one on the stack or in
 * a struct, initialise it with BLK_BUFFER_INIT or blk_buffer_init(), and
 * release it with blk_buffer_free(). Writes append at the end (size); reads
 * consume from a separate read position (pos), so one buffer can be filled,
 * handed over, and read back. Typed values are stored in native byte order
 * and may sit at any alignment; blk only exchanges buffers between ranks of
 * one job, so no byte swapping is done.
 *
 * Errors are sticky: the first failure (BLK_ENOMEM when memory runs out,
 * BLK_ERANGE when a read runs past the end or a stored count cannot be right)
 * is kept in `error`. From then on every write and read does nothing and
 * returns that same code, and reads fill their destination with zeros, so
 * code that serializes many fields can check once at the end:
 *
 *     blk_buffer b = BLK_BUFFER_INIT;
 *     blk_buffer_write_i32(&b, n);
 *     blk_buffer_write_array(&b, xs, sizeof *xs, n);
 *     if (blk_buffer_error(&b)) ...    // the detail is in blk_last_error()
 *
 * Threads: a buffer is not thread-safe. One thread at a time may use a given
 * buffer; different buffers may be used by different threads at once.
 */
#ifndef BLK_BUFFER_H
#define BLK_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct blk_buffer {
  unsigned char *data; /* owned by the buffer; NULL while nothing was allocated */
  size_t size;         /* bytes written: data[0, size) is valid */
  size_t capacity;     /* bytes allocated at data */
  size_t pos;          /* read position, pos <= size */
  int error;           /* sticky: the first failure (BLK_ENOMEM or BLK_ERANGE); 0 if none */
} blk_buffer;

/* An empty buffer: `blk_buffer b = BLK_BUFFER_INIT;` */
#define BLK_BUFFER_INIT \
  { NULL, 0, 0, 0, 0 }

/*! blk_buffer_init() :
 *  Makes `b` an empty buffer with no memory and no error. Does not free what
 *  `b` held before (use blk_buffer_free() for that). */
void blk_buffer_init(blk_buffer *b);

/*! blk_buffer_free() :
 *  Frees the buffer's memory and leaves `b` empty, as after blk_buffer_init(),
 *  so it can be used again. `b` == NULL does nothing. */
void blk_buffer_free(blk_buffer *b);

/*! blk_buffer_clear() :
 *  Empties the buffer (size, pos and error become 0) but keeps its memory,
 *  so refilling it does not allocate again. This is the only way, besides
 *  blk_buffer_free(), to reset a sticky error. */
void blk_buffer_clear(blk_buffer *b);

/*! blk_buffer_rewind() :
 *  Moves the read position back to the start, to read the contents again.
 *  A sticky error is kept. */
void blk_buffer_rewind(blk_buffer *b);

/*! blk_buffer_swap() :
 *  Exchanges the whole state (memory, positions, error) of `a` and `b`,
 *  without copying bytes. */
void blk_buffer_swap(blk_buffer *a, blk_buffer *b);

/*! blk_buffer_adopt() :
 *  Makes `b` own the `capacity` bytes at `data`, whose first `size` bytes
 *  are its contents (size <= capacity), read from the start. The memory must
 *  come from malloc, calloc or realloc: from now on the buffer grows it with
 *  realloc and frees it with free(), and the caller must not free it. What
 *  `b` held before is not freed. With blk_buffer_detach() a program moves
 *  storage between its own arrays and message buffers without a copy, and
 *  without fresh memory, whose first touch costs a page fault per page. */
void blk_buffer_adopt(blk_buffer *b, void *data, size_t size, size_t capacity);

/*! blk_buffer_detach() :
 *  Hands the buffer's memory to the caller, who frees it with free() (or
 *  passes it to realloc or blk_buffer_adopt()); its contents stay at the
 *  start of it, where they were. `*capacity` (if `capacity` is not NULL)
 *  gets the size of the memory. `b` is left empty, as after
 *  blk_buffer_init().
 *  @return : the memory, or NULL if the buffer owns none (nothing was
 *            allocated, or it only refers to memory blk does not own; then
 *            `b` is left as it was). */
void *blk_buffer_detach(blk_buffer *b, size_t *capacity);

/*! blk_buffer_reserve() :
 *  Makes room so that `extra` more bytes can be written without allocating:
 *  afterwards capacity >= size + extra. Capacity grows geometrically
 *  (doubling), so n small writes cost O(n) in total.
 *  @return : 0, or BLK_ENOMEM if the memory cannot be had or size + extra
 *            overflows size_t (the buffer is left as it was, error set), or
 *            the sticky error. */
int blk_buffer_reserve(blk_buffer *b, size_t extra);

/*! blk_buffer_write() :
 *  Appends the `n` bytes at `src`. `src` may be NULL when `n` is 0; it must not
 *  point into `b`'s own memory (growing may move it).
 *  @return : 0, or BLK_ENOMEM (error set), or the sticky error; on failure
 *            nothing is written. */
int blk_buffer_write(blk_buffer *b, const void *src, size_t n);

/*! blk_buffer_append() :
 *  Grows the contents by `n` bytes and returns a pointer to those new,
 *  uninitialised bytes for the caller to fill, for example to serialize
 *  straight into the buffer. The pointer is valid until the next call that
 *  may grow or free `b`. For `n` == 0 it is a valid, non-NULL pointer that
 *  must not be written through.
 *  @return : the pointer, or NULL if growing fails (BLK_ENOMEM, error set) or
 *            an error was already set. */
void *blk_buffer_append(blk_buffer *b, size_t n);

/*! blk_buffer_read() :
 *  Copies the next `n` bytes to `dst` and advances the read position.
 *  @return : 0, or BLK_ERANGE if fewer than `n` bytes remain: then `dst` is
 *            filled with zeros, the position does not move and the error is
 *            set (the detail names the offset and the byte counts). With a
 *            sticky error set it returns that error and zero-fills `dst`. */
int blk_buffer_read(blk_buffer *b, void *dst, size_t n);

/*! blk_buffer_read_view() :
 *  Returns a pointer to the next `n` bytes inside the buffer, without
 *  copying, and advances the read position. The bytes stay owned by `b`; the
 *  pointer is valid until `b` is written to, cleared or freed, and may be
 *  unaligned (memcpy out of it). For `n` == 0 it is non-NULL.
 *  @return : the pointer, or NULL if fewer than `n` bytes remain (BLK_ERANGE,
 *            error set, position unchanged) or an error was already set. */
const void *blk_buffer_read_view(blk_buffer *b, size_t n);

/*! blk_buffer_remaining() :
 *  @return : how many bytes are left to read (size - pos). */
size_t blk_buffer_remaining(const blk_buffer *b);

/*! blk_buffer_error() :
 *  @return : the sticky error: 0, BLK_ENOMEM or BLK_ERANGE. */
int blk_buffer_error(const blk_buffer *b);

/* The typed values: X(name, C type, type on the wire). Each row gives
 *     int blk_buffer_write_<name>(blk_buffer *b, <C type> v);
 *     int blk_buffer_read_<name>(blk_buffer *b, <C type> *v);
 * that is blk_buffer_write_i32 / blk_buffer_read_i32, _u32, _i64, _u64, _f32,
 * _f64 and _size. A value takes sizeof(wire type) bytes in native byte order;
 * size_t always travels as a uint64_t, so it takes 8 bytes on every platform.
 * Writes return 0, BLK_ENOMEM or the sticky error, as blk_buffer_write().
 * Reads return 0, BLK_ERANGE or the sticky error, as blk_buffer_read(), and
 * store 0 in *v on failure; blk_buffer_read_size() also fails with
 * BLK_ERANGE when the stored value does not fit in size_t. */
#define BLK_BUFFER_VALUE_TYPES(X) \
  X(i32, int32_t, int32_t)        \
  X(u32, uint32_t, uint32_t)      \
  X(i64, int64_t, int64_t)        \
  X(u64, uint64_t, uint64_t)      \
  X(f32, float, float)            \
  X(f64, double, double)          \
  X(size, size_t, uint64_t)

#define BLK_BUFFER_DECLARE_(name, type, wire)         \
  int blk_buffer_write_##name(blk_buffer *b, type v); \
  int blk_buffer_read_##name(blk_buffer *b, type *v);
BLK_BUFFER_VALUE_TYPES(BLK_BUFFER_DECLARE_)
#undef BLK_BUFFER_DECLARE_

/* Arrays are stored with their element count: a uint64_t count, then
 * count * elem_size bytes. elem_size may be 0 (only the count is stored). */

/*! blk_buffer_write_array() :
 *  Appends `count` and then the `count` * `elem_size` bytes at `data`
 *  (`data` may be NULL when that product is 0). Either all of it is written
 *  or nothing.
 *  @return : 0, or BLK_ENOMEM (no memory, or the byte count overflows
 *            size_t; error set), or the sticky error. */
int blk_buffer_write_array(blk_buffer *b, const void *data, size_t elem_size, size_t count);

/*! blk_buffer_read_array() :
 *  Reads an array written by blk_buffer_write_array() into `dst`, which has
 *  room for `max_count` elements of `elem_size` bytes, and sets *count to the
 *  number of elements read.
 *  @return : 0, or BLK_ERANGE if the stored count is larger than `max_count`
 *            or the data is shorter than the count says, or the sticky error.
 *            On failure *count is 0, `dst` (max_count elements) is zero-filled,
 *            the read position does not move, and the error is set. */
int blk_buffer_read_array(blk_buffer *b, void *dst, size_t elem_size, size_t max_count,
                          size_t *count);

/*! blk_buffer_read_array_alloc() :
 *  Reads an array into fresh memory: *dst receives a malloc'd copy that the
 *  caller frees with free(), and *count its element count. An empty array
 *  gives *dst == NULL and *count == 0. A stored count that cannot be right
 *  (its byte size overflows, or exceeds what remains in the buffer) is
 *  reported before anything is allocated, so corrupt input never causes a
 *  huge allocation.
 *  @return : 0, or BLK_ERANGE (bad count or short data), BLK_ENOMEM (malloc
 *            failed), or the sticky error. On failure *dst is NULL, *count is
 *            0, the read position does not move, and the error is set. */
int blk_buffer_read_array_alloc(blk_buffer *b, void **dst, size_t elem_size, size_t *count);

/*! blk_buffer_read_array_view() :
 *  Reads an array without copying: returns a pointer to its elements inside
 *  the buffer (owned by `b`, valid until `b` is written to, cleared or freed,
 *  possibly unaligned) and sets *count. An empty array gives a non-NULL
 *  pointer and *count == 0.
 *  @return : the pointer, or NULL with *count == 0 on failure (BLK_ERANGE for
 *            a bad count or short data, error set and position unchanged; or
 *            an error already set). */
const void *blk_buffer_read_array_view(blk_buffer *b, size_t elem_size, size_t *count);

#ifdef __cplusplus
}
#endif
#endif
