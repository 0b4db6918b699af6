/*
 * shuffle.c: the byte shuffle filter (see shuffle.h).
 *
 * Layout: with m = n / es whole elements of es bytes, shuffled byte plane j
 * (0 <= j < es) is dst[j*m, (j+1)*m) and holds src[i*es + j] for i = 0..m-1;
 * the tail src[m*es, n) follows unchanged. unshuffle reads the same layout
 * back. The loops take each plane's address (blk__shuffle and
 * blk__unshuffle pass base + j*m, blk__shuffle_planes and
 * blk__unshuffle_planes wherever the planes are). One division per call
 * (m); none per byte.
 *
 * Loops: es 4 and 8 work on groups of 8 elements held in 64-bit registers:
 * 4 (or 8) words of elements are transposed into 4 (or 8) words of byte
 * planes with three stages of delta swaps (shift, xor, mask), and each word
 * is stored to (loaded from) its plane. Every load and store is 8 bytes, the
 * element side streams sequentially and the plane side is es sequential
 * streams, which hardware prefetchers follow. This runs at 6-12 GB/s on
 * one core against 2.5-3.5 GB/s for a byte-at-a-time loop (measured
 * here, docs/compression.md). Fewer than 8 remaining elements go byte by
 * byte. Other sizes go plane by plane: one sequential and one strided
 * stream. Loads and stores are little-endian (le64.h) so the word tricks
 * hold on every platform.
 *
 * With SSE2 (every x86-64), es 4 and 8 first go 16 elements at a time in
 * es 16-byte registers: a stage interleaves register i with register
 * i + es/2 byte by byte, the low halves into register 2i and the high ones
 * into 2i + 1. Four stages turn 16 elements into es planes of 16 bytes
 * (register j is plane j); two (es 4) or three (es 8) turn planes back
 * into elements. (Found by trying every sequence of unpack widths on
 * labelled bytes; test_shuffle checks both against the definition.) That
 * runs at 1.4-4.7 times the speed of the 64-bit words on this machine
 * (docs/compression.md).
 *
 * Cost: reads and writes every byte once. Locking: none.
 */
#include "storage/shuffle.h"

#include <stdint.h>
#include <string.h>

#include "base/copy.h"
#include "base/le64.h"

#if defined(__SSE2__)
#include <emmintrin.h>

/* One stage of the transposes (see the top), on 4 or 8 registers. */
#define LO(a, b) _mm_unpacklo_epi8(a, b)
#define HI(a, b) _mm_unpackhi_epi8(a, b)
#define STAGE4(r0, r1, r2, r3)                \
  do {                                        \
    __m128i t0 = LO(r0, r2), t1 = HI(r0, r2); \
    __m128i t2 = LO(r1, r3), t3 = HI(r1, r3); \
    r0 = t0, r1 = t1, r2 = t2, r3 = t3;       \
  } while (0)
#define STAGE8(r0, r1, r2, r3, r4, r5, r6, r7)                                  \
  do {                                                                          \
    __m128i t0 = LO(r0, r4), t1 = HI(r0, r4), t2 = LO(r1, r5), t3 = HI(r1, r5); \
    __m128i t4 = LO(r2, r6), t5 = HI(r2, r6), t6 = LO(r3, r7), t7 = HI(r3, r7); \
    r0 = t0, r1 = t1, r2 = t2, r3 = t3, r4 = t4, r5 = t5, r6 = t6, r7 = t7;     \
  } while (0)

static inline __m128i load16(const unsigned char *p) {
  return _mm_loadu_si128((const __m128i *)(const void *)p);
}

static inline void store16(unsigned char *p, __m128i v) {
  _mm_storeu_si128((__m128i *)(void *)p, v);
}
#endif

/* Exchanges the bit groups of `a` selected by mask << sh with those of `b`
 * selected by mask (a delta swap). An involution. */
#define SWAP(a, b, mask, sh)                              \
  do {                                                    \
    uint64_t t_ = (((a) >> (sh)) ^ (b)) & UINT64_C(mask); \
    (a) ^= t_ << (sh);                                    \
    (b) ^= t_;                                            \
  } while (0)

#define M32 0x00000000FFFFFFFF
#define M16 0x0000FFFF0000FFFF
#define M8 0x00FF00FF00FF00FF

/* Transposes the 8x8 byte matrix whose row i is w_i (byte j of w_i is
 * column j): swap the off-diagonal 4x4 blocks, then 2x2 blocks inside
 * those, then single bytes. A transpose is its own inverse. */
#define TRANSPOSE8(w0, w1, w2, w3, w4, w5, w6, w7) \
  do {                                             \
    SWAP(w0, w4, M32, 32);                         \
    SWAP(w1, w5, M32, 32);                         \
    SWAP(w2, w6, M32, 32);                         \
    SWAP(w3, w7, M32, 32);                         \
    SWAP(w0, w2, M16, 16);                         \
    SWAP(w1, w3, M16, 16);                         \
    SWAP(w4, w6, M16, 16);                         \
    SWAP(w5, w7, M16, 16);                         \
    SWAP(w0, w1, M8, 8);                           \
    SWAP(w2, w3, M8, 8);                           \
    SWAP(w4, w5, M8, 8);                           \
    SWAP(w6, w7, M8, 8);                           \
  } while (0)

/* 8 elements of 4 bytes in words a = (e0, e1), b = (e2, e3), c = (e4, e5),
 * d = (e6, e7) become byte planes 0, 1, 2, 3 in a, c, b, d: the same three
 * stages on an 8x4 matrix. The inverse runs the stages backwards. */
#define TRANSPOSE4(a, b, c, d) \
  do {                         \
    SWAP(a, c, M32, 32);       \
    SWAP(b, d, M32, 32);       \
    SWAP(a, b, M16, 16);       \
    SWAP(c, d, M16, 16);       \
    SWAP(a, c, M8, 8);         \
    SWAP(b, d, M8, 8);         \
  } while (0)

#define UNTRANSPOSE4(a, b, c, d) \
  do {                           \
    SWAP(a, c, M8, 8);           \
    SWAP(b, d, M8, 8);           \
    SWAP(a, b, M16, 16);         \
    SWAP(c, d, M16, 16);         \
    SWAP(a, c, M32, 32);         \
    SWAP(b, d, M32, 32);         \
  } while (0)

static void shuffle4(unsigned char *const *planes, const unsigned char *restrict src, size_t m) {
  unsigned char *p0 = planes[0], *p1 = planes[1], *p2 = planes[2], *p3 = planes[3];
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= m; i += 16) {
    const unsigned char *e = src + 4 * i;
    __m128i r0 = load16(e), r1 = load16(e + 16), r2 = load16(e + 32), r3 = load16(e + 48);
    for (int k = 0; k < 4; k++) STAGE4(r0, r1, r2, r3);
    store16(p0 + i, r0);
    store16(p1 + i, r1);
    store16(p2 + i, r2);
    store16(p3 + i, r3);
  }
#endif
  for (; i + 8 <= m; i += 8) {
    const unsigned char *s = src + 4 * i;
    uint64_t a = blk__load_le64(s), b = blk__load_le64(s + 8);
    uint64_t c = blk__load_le64(s + 16), d = blk__load_le64(s + 24);
    TRANSPOSE4(a, b, c, d);
    blk__store_le64(p0 + i, a);
    blk__store_le64(p1 + i, c);
    blk__store_le64(p2 + i, b);
    blk__store_le64(p3 + i, d);
  }
  for (; i < m; i++) {
    const unsigned char *e = src + 4 * i;
    p0[i] = e[0], p1[i] = e[1], p2[i] = e[2], p3[i] = e[3];
  }
}

static void unshuffle4(unsigned char *restrict dst, const unsigned char *const *planes, size_t m) {
  const unsigned char *p0 = planes[0], *p1 = planes[1], *p2 = planes[2], *p3 = planes[3];
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= m; i += 16) {
    __m128i r0 = load16(p0 + i), r1 = load16(p1 + i), r2 = load16(p2 + i), r3 = load16(p3 + i);
    STAGE4(r0, r1, r2, r3);
    STAGE4(r0, r1, r2, r3);
    unsigned char *e = dst + 4 * i;
    store16(e, r0);
    store16(e + 16, r1);
    store16(e + 32, r2);
    store16(e + 48, r3);
  }
#endif
  for (; i + 8 <= m; i += 8) {
    uint64_t a = blk__load_le64(p0 + i), c = blk__load_le64(p1 + i);
    uint64_t b = blk__load_le64(p2 + i), d = blk__load_le64(p3 + i);
    UNTRANSPOSE4(a, b, c, d);
    unsigned char *o = dst + 4 * i;
    blk__store_le64(o, a);
    blk__store_le64(o + 8, b);
    blk__store_le64(o + 16, c);
    blk__store_le64(o + 24, d);
  }
  for (; i < m; i++) {
    unsigned char *o = dst + 4 * i;
    o[0] = p0[i], o[1] = p1[i], o[2] = p2[i], o[3] = p3[i];
  }
}

static void shuffle8(unsigned char *const *planes, const unsigned char *restrict src, size_t m) {
  unsigned char *p0 = planes[0], *p1 = planes[1], *p2 = planes[2], *p3 = planes[3];
  unsigned char *p4 = planes[4], *p5 = planes[5], *p6 = planes[6], *p7 = planes[7];
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= m; i += 16) {
    const unsigned char *e = src + 8 * i;
    __m128i r0 = load16(e), r1 = load16(e + 16), r2 = load16(e + 32), r3 = load16(e + 48);
    __m128i r4 = load16(e + 64), r5 = load16(e + 80), r6 = load16(e + 96), r7 = load16(e + 112);
    for (int k = 0; k < 4; k++) STAGE8(r0, r1, r2, r3, r4, r5, r6, r7);
    store16(p0 + i, r0);
    store16(p1 + i, r1);
    store16(p2 + i, r2);
    store16(p3 + i, r3);
    store16(p4 + i, r4);
    store16(p5 + i, r5);
    store16(p6 + i, r6);
    store16(p7 + i, r7);
  }
#endif
  for (; i + 8 <= m; i += 8) {
    const unsigned char *s = src + 8 * i;
    uint64_t w0 = blk__load_le64(s), w1 = blk__load_le64(s + 8);
    uint64_t w2 = blk__load_le64(s + 16), w3 = blk__load_le64(s + 24);
    uint64_t w4 = blk__load_le64(s + 32), w5 = blk__load_le64(s + 40);
    uint64_t w6 = blk__load_le64(s + 48), w7 = blk__load_le64(s + 56);
    TRANSPOSE8(w0, w1, w2, w3, w4, w5, w6, w7);
    blk__store_le64(p0 + i, w0);
    blk__store_le64(p1 + i, w1);
    blk__store_le64(p2 + i, w2);
    blk__store_le64(p3 + i, w3);
    blk__store_le64(p4 + i, w4);
    blk__store_le64(p5 + i, w5);
    blk__store_le64(p6 + i, w6);
    blk__store_le64(p7 + i, w7);
  }
  for (; i < m; i++) {
    const unsigned char *e = src + 8 * i;
    p0[i] = e[0], p1[i] = e[1], p2[i] = e[2], p3[i] = e[3];
    p4[i] = e[4], p5[i] = e[5], p6[i] = e[6], p7[i] = e[7];
  }
}

static void unshuffle8(unsigned char *restrict dst, const unsigned char *const *planes, size_t m) {
  const unsigned char *p0 = planes[0], *p1 = planes[1], *p2 = planes[2], *p3 = planes[3];
  const unsigned char *p4 = planes[4], *p5 = planes[5], *p6 = planes[6], *p7 = planes[7];
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= m; i += 16) {
    __m128i r0 = load16(p0 + i), r1 = load16(p1 + i), r2 = load16(p2 + i), r3 = load16(p3 + i);
    __m128i r4 = load16(p4 + i), r5 = load16(p5 + i), r6 = load16(p6 + i), r7 = load16(p7 + i);
    for (int k = 0; k < 3; k++) STAGE8(r0, r1, r2, r3, r4, r5, r6, r7);
    unsigned char *e = dst + 8 * i;
    store16(e, r0);
    store16(e + 16, r1);
    store16(e + 32, r2);
    store16(e + 48, r3);
    store16(e + 64, r4);
    store16(e + 80, r5);
    store16(e + 96, r6);
    store16(e + 112, r7);
  }
#endif
  for (; i + 8 <= m; i += 8) {
    uint64_t w0 = blk__load_le64(p0 + i), w1 = blk__load_le64(p1 + i);
    uint64_t w2 = blk__load_le64(p2 + i), w3 = blk__load_le64(p3 + i);
    uint64_t w4 = blk__load_le64(p4 + i), w5 = blk__load_le64(p5 + i);
    uint64_t w6 = blk__load_le64(p6 + i), w7 = blk__load_le64(p7 + i);
    TRANSPOSE8(w0, w1, w2, w3, w4, w5, w6, w7);
    unsigned char *d = dst + 8 * i;
    blk__store_le64(d, w0);
    blk__store_le64(d + 8, w1);
    blk__store_le64(d + 16, w2);
    blk__store_le64(d + 24, w3);
    blk__store_le64(d + 32, w4);
    blk__store_le64(d + 40, w5);
    blk__store_le64(d + 48, w6);
    blk__store_le64(d + 56, w7);
  }
  for (; i < m; i++) {
    unsigned char *d = dst + 8 * i;
    d[0] = p0[i], d[1] = p1[i], d[2] = p2[i], d[3] = p3[i];
    d[4] = p4[i], d[5] = p5[i], d[6] = p6[i], d[7] = p7[i];
  }
}

static void shuffle_any(unsigned char *const *planes, const unsigned char *restrict src, size_t m,
                        size_t es) {
  for (size_t j = 0; j < es; j++) {
    unsigned char *d = planes[j];
    const unsigned char *s = src + j;
    for (size_t i = 0; i < m; i++) d[i] = s[i * es];
  }
}

/* m elements at src into plane j of es at planes[j], m bytes each. */
static void shuffle_planes(unsigned char *const *planes, const unsigned char *src, size_t m,
                           size_t es) {
  if (es == 4)
    shuffle4(planes, src, m);
  else if (es == 8)
    shuffle8(planes, src, m);
  else
    shuffle_any(planes, src, m, es);
}

static void unshuffle_any(unsigned char *restrict dst, const unsigned char *const *planes, size_t m,
                          size_t es) {
  for (size_t j = 0; j < es; j++) {
    const unsigned char *s = planes[j];
    unsigned char *d = dst + j;
    for (size_t i = 0; i < m; i++) d[i * es] = s[i];
  }
}

/* Plane j of es at planes[j], m bytes each, into m elements at dst. */
static void unshuffle_planes(unsigned char *dst, const unsigned char *const *planes, size_t m,
                             size_t es) {
  if (es == 4)
    unshuffle4(dst, planes, m);
  else if (es == 8)
    unshuffle8(dst, planes, m);
  else
    unshuffle_any(dst, planes, m, es);
}

void blk__shuffle(void *dst, const void *src, size_t n, size_t elem_size) {
  if (n == 0) return;
  size_t es = elem_size ? elem_size : 1;
  size_t m = n / es;
  if (es == 1 || m < 2) {
    blk__copy(dst, src, n);
    return;
  }
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (es <= BLK__SHUFFLE_PLANES_MAX) {
    unsigned char *planes[BLK__SHUFFLE_PLANES_MAX];
    for (size_t j = 0; j < es; j++) planes[j] = d + j * m;
    shuffle_planes(planes, s, m, es);
  } else {
    for (size_t j = 0; j < es; j++) {
      unsigned char *p = d + j * m;
      for (size_t i = 0; i < m; i++) p[i] = s[i * es + j];
    }
  }
  memcpy(d + m * es, s + m * es, n - m * es);
}

void blk__shuffle_planes(unsigned char *const *planes, void *tail, const void *src, size_t n,
                         size_t elem_size) {
  size_t m = n / elem_size;
  shuffle_planes(planes, src, m, elem_size);
  memcpy(tail, (const unsigned char *)src + m * elem_size, n - m * elem_size);
}

void blk__unshuffle(void *dst, const void *src, size_t n, size_t elem_size) {
  if (n == 0) return;
  size_t es = elem_size ? elem_size : 1;
  size_t m = n / es;
  if (es == 1 || m < 2) {
    blk__copy(dst, src, n);
    return;
  }
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (es <= BLK__SHUFFLE_PLANES_MAX) {
    const unsigned char *planes[BLK__SHUFFLE_PLANES_MAX];
    for (size_t j = 0; j < es; j++) planes[j] = s + j * m;
    unshuffle_planes(d, planes, m, es);
  } else {
    for (size_t j = 0; j < es; j++) {
      const unsigned char *p = s + j * m;
      for (size_t i = 0; i < m; i++) d[i * es + j] = p[i];
    }
  }
  memcpy(d + m * es, s + m * es, n - m * es);
}

void blk__unshuffle_planes(void *dst, const unsigned char *const *planes, const void *tail,
                           size_t n, size_t elem_size) {
  size_t m = n / elem_size;
  unshuffle_planes(dst, planes, m, elem_size);
  memcpy((unsigned char *)dst + m * elem_size, tail, n - m * elem_size);
}
