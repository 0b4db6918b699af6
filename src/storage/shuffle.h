/*
 * shuffle.h: the byte shuffle filter that runs before compression.
 *
 * Arrays of numbers compress badly byte by byte: the exponent and high
 * mantissa bytes of neighbouring floats are alike, the low bytes are noise,
 * and interleaved they hide each other's regularity. blk__shuffle() regroups
 * the bytes of n / elem_size elements of elem_size bytes each so that byte j
 * of every element comes together: all byte 0s in element order, then all
 * byte 1s, and so on. The last n % elem_size bytes (a partial element) are
 * copied unchanged to the end. blk__unshuffle() is the exact inverse. With
 * elem_size 1 (or fewer than two whole elements) both are a plain copy.
 *
 * dst and src must not overlap. n may be 0 (then neither pointer is read or
 * written and both may be NULL). elem_size 0 is treated as 1.
 * Cost: one read and one write of every byte; elem_size 4 and 8 have
 * dedicated loops, other sizes walk one byte plane at a time.
 * Pure functions: any thread.
 */
#ifndef BLK_SHUFFLE_H
#define BLK_SHUFFLE_H

#include <stddef.h>

void blk__shuffle(void *dst, const void *src, size_t n, size_t elem_size);
void blk__unshuffle(void *dst, const void *src, size_t n, size_t elem_size);

/* The same with planes that need not lie together: plane j (n / elem_size
 * bytes) at planes[j], the last n % elem_size bytes at tail; elem_size
 * 2..BLK__SHUFFLE_PLANES_MAX. So an encoder shuffles a plane it keeps raw
 * straight to its place in the encoding, and a decoder unshuffles it from
 * there, neither copying it next to the planes zstd works on. None of them
 * may overlap src (shuffle) or dst (unshuffle). */
#define BLK__SHUFFLE_PLANES_MAX 16
void blk__shuffle_planes(unsigned char *const *planes, void *tail, const void *src, size_t n,
                         size_t elem_size);
void blk__unshuffle_planes(void *dst, const unsigned char *const *planes, const void *tail,
                           size_t n, size_t elem_size);

#endif
