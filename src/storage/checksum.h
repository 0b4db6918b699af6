/*
 * checksum.h: a fast 64-bit checksum for blk's stored records.
 *
 * blk__checksum() guards what out-of-core storage writes (a block or a queue,
 * compressed) against corruption between the write and the read: a flipped
 * bit, a torn or truncated write, a record read from the wrong offset. It is
 * not a cryptographic hash and must not be used against an adversary.
 *
 * Guarantees (by construction, see checksum.c, and tested):
 *   - any change confined to one aligned 8-byte word of the input (every
 *     single-bit flip, any change of up to 8 bytes in one word, a swap of two
 *     bytes inside one word) changes the checksum, for every length and seed;
 *   - inputs of different lengths are hashed from different starting states
 *     (the length is mixed in first), so truncation and zero-padding are
 *     caught with probability 1 - 2^-64;
 *   - other changes collide with probability about 2^-64.
 *
 * The value is defined on the little-endian reading of the bytes, so it is
 * the same on every platform. Cost: one pass, two multiplies per 8
 * bytes on four independent lanes; several GB/s on one core (figures in
 * docs/compression.md). On x86-64 processors with AVX-512 (checked when
 * called) the four lanes run in one 256-bit register, where two vector
 * multiplies do a stripe's eight: the same values, computed faster. Pure
 * function: any thread, no state.
 */
#ifndef BLK_CHECKSUM_H
#define BLK_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* The checksum of data[0, n) under `seed` (different seeds give unrelated
 * checksums of the same bytes). `data` may be NULL when n == 0. */
uint64_t blk__checksum(const void *data, size_t n, uint64_t seed);

/* 1 if blk__checksum runs its lanes in one 256-bit register on this
 * processor, else 0. */
int blk__checksum_wide(void);

/* blk__checksum computed one 64-bit lane at a time, whatever the processor:
 * what test_checksum holds the wide lanes to. */
uint64_t blk__checksum_portable(const void *data, size_t n, uint64_t seed);

#endif
