/*
 * buffer_cache.h: spare message storage kept for the next message.
 *
 * blk's queues and message payloads are blk_buffers that live for one round
 * or one operation. Given back to malloc, large ones go back to the kernel
 * (glibc unmaps chunks above its mmap threshold and trims the heap top), and
 * the next message touches fresh pages: a page fault per 4 KiB, which on a
 * virtual machine costs tens of times a memcpy of the page. That dominated
 * every pattern from 64 KiB up (docs/performance.md has the figures). So storage that a
 * message or queue is done with goes here, and the next one of a similar
 * size takes it.
 *
 * Only buffers of at least BLK__BUFFER_CACHE_MIN bytes are kept (smaller ones
 * stay in malloc's bins, which are cheap), at most `slots` of them and
 * `max_bytes` in all; a full cache drops its smallest buffer for a larger
 * one. take picks the smallest kept buffer that fits, so a 1 MiB message does
 * not take a 64 MiB buffer while a 64 MiB one waits. Memory a cache holds is
 * the price of a job's largest round, held until the master is destroyed.
 *
 * Threads: every function may be called from any thread (a mutex guards the
 * slots; callbacks on pool threads take storage for their out queues).
 */
#ifndef BLK_BUFFER_CACHE_H
#define BLK_BUFFER_CACHE_H

#include <stddef.h>

#include "blk/buffer.h"

#define BLK__BUFFER_CACHE_MIN ((size_t)4096)

typedef struct blk__buffer_cache blk__buffer_cache;

/* A reference: a buffer whose data is memory it does not own (capacity 0),
 * so a message can be sent from a block's array without copying it. The
 * owner keeps the memory valid and unchanged until the message is done
 * with. blk__buffer_release empties a buffer, dropping a reference or
 * keeping owned storage (blk_buffer_clear would keep the reference and a
 * later write would realloc memory blk does not own); give drops one. */
void blk__buffer_ref(blk_buffer *b, const void *data, size_t size);
int blk__buffer_is_ref(const blk_buffer *b);
void blk__buffer_release(blk_buffer *b);

/* A cache of up to slots buffers and max_bytes. BLK_ENOMEM. */
int blk__buffer_cache_create(blk__buffer_cache **out, int slots, size_t max_bytes);
/* Frees every kept buffer. NULL does nothing. */
void blk__buffer_cache_destroy(blk__buffer_cache *c);

/* Keeps b's storage for a later take, or frees it; b is left empty (as after
 * blk_buffer_init). c == NULL frees it. A reference is only dropped. */
void blk__buffer_cache_give(blk__buffer_cache *c, blk_buffer *b);

/* Makes sure b can take `size` more bytes without growing, as
 * blk_buffer_reserve does, but when b must grow to 2 KiB or more it takes the
 * smallest kept buffer that fits (and is at most 4 times the need) instead
 * of new memory, moving b's contents over and keeping b's old storage.
 * c == NULL is blk_buffer_reserve. Returns 0 or BLK_ENOMEM (b's sticky error
 * set), or b's sticky error. */
int blk__buffer_cache_reserve(blk__buffer_cache *c, blk_buffer *b, size_t size);

/* Gives b, if it is a reference, storage of its own holding the same bytes
 * and read position (taken from c as reserve does), so it may be written to
 * or kept. Does nothing to a buffer that owns its storage. Returns 0, or
 * BLK_ENOMEM with b left empty and its sticky error set. */
int blk__buffer_cache_own(blk__buffer_cache *c, blk_buffer *b);

/* Bytes kept now (for tests and stats). */
size_t blk__buffer_cache_bytes(blk__buffer_cache *c);

#endif
