/*
 * checksum.c: blk__checksum (see checksum.h), a 64-bit checksum of blk's own
 * design built from multiply-rotate steps that are each a bijection.
 *
 * Shape:
 *   1. The bulk, in 32-byte stripes: four independent 64-bit lanes, lane i
 *      taking word i of every stripe through
 *          lane(a, v) = rotl(a + v * M_IN, 29) * M_LANE.
 *      Four lanes keep four multiply chains in flight, which is what makes it
 *      run at memory speed rather than at multiply latency.
 *   2. The state h starts from the seed and absorbs the length n, then the
 *      four lanes, then the tail (remaining 8-byte words, then the last 1..7
 *      bytes packed into one word), each through
 *          absorb(h, v) = rotl(h ^ rotl(v * M_V, 31) * M_V2, 27) * M_H + C_H.
 *   3. A final avalanche (xor-shift / multiply, three rounds) spreads every
 *      input bit over all 64 output bits.
 *
 * Why a one-word change is always caught: with M_IN, M_LANE, M_V, M_V2 and
 * M_H odd, multiplying by them is a bijection mod 2^64, as are adding,
 * xoring a fixed value and rotating. So lane() is a bijection in `v` for a
 * fixed `a` and in `a` for a fixed `v`; absorb() likewise in `v` and in `h`;
 * the avalanche is a bijection. A change confined to one 8-byte word
 * therefore changes the lane (or h) it enters, every later state, and the
 * result. The length is absorbed before any data, so inputs of different
 * lengths never share a starting state, and the tail packing (fixed for a
 * fixed length) is injective.
 *
 * Constants: the first 64 bits of the fractional parts of the square roots
 * of the primes 2..19 (nothing hidden in them); all are odd.
 *
 * Invariants: words are read with le64.h (any alignment, little-endian
 * order), so the value does not depend on the platform.
 * Cost: one pass over the data, two multiplies per 8 bytes in the bulk.
 * One at a time, the lanes wait on the processor's one 64-bit multiplier
 * (10.5 GB/s here); with AVX-512 the four lanes are the four elements of a
 * 256-bit register and run together (18.5 GB/s; docs/compression.md).
 * Locking: none; a pure function.
 */
#include "storage/checksum.h"

#include "base/le64.h"

#define SQRT2 UINT64_C(0x6A09E667F3BCC909)
#define SQRT3 UINT64_C(0xBB67AE8584CAA73B)
#define SQRT5 UINT64_C(0x3C6EF372FE94F82B)
#define SQRT7 UINT64_C(0xA54FF53A5F1D36F1)
#define SQRT11 UINT64_C(0x510E527FADE682D1)
#define SQRT13 UINT64_C(0x9B05688C2B3E6C1F)
#define SQRT17 UINT64_C(0x1F83D9ABFB41BD6B)
#define SQRT19 UINT64_C(0x5BE0CD19137E2179)

#define M_IN SQRT3
#define M_LANE SQRT13
#define M_V SQRT7
#define M_V2 SQRT11
#define M_H SQRT5
#define C_H SQRT19

static inline uint64_t rotl(uint64_t x, unsigned r) {
  return (x << r) | (x >> (64u - r));
}

static inline uint64_t lane(uint64_t a, uint64_t v) {
  return rotl(a + v * M_IN, 29) * M_LANE;
}

static inline uint64_t absorb(uint64_t h, uint64_t v) {
  return rotl(h ^ (rotl(v * M_V, 31) * M_V2), 27) * M_H + C_H;
}

static inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 31;
  h *= SQRT3;
  h ^= h >> 29;
  h *= SQRT13;
  h ^= h >> 32;
  return h;
}

/* The bulk: lanes a[0..3] take the 32-byte stripes of p[0, *rem) while at
 * least 32 bytes remain; p and *rem move past them. */
static const unsigned char *stripes(const unsigned char *p, size_t *rem, uint64_t a[4]) {
  uint64_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
  size_t r = *rem;
  for (; r >= 32; p += 32, r -= 32) {
    a0 = lane(a0, blk__load_le64(p));
    a1 = lane(a1, blk__load_le64(p + 8));
    a2 = lane(a2, blk__load_le64(p + 16));
    a3 = lane(a3, blk__load_le64(p + 24));
  }
  a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
  *rem = r;
  return p;
}

/* x86-64 with GCC or Clang: the 256-bit lanes are built, for processors
 * that have AVX-512 (checked when called). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WIDE 1
#else
#define WIDE 0
#endif

#if WIDE
#include <immintrin.h>

/* The same four lanes in one 256-bit register: the same steps on each
 * 64-bit element (AVX-512 brings the 64-bit multiply and rotate at that
 * width), so the same values, with two vector multiplies a 32-byte stripe
 * where the lanes one at a time take eight. x86-64 is little-endian, as the
 * lanes' words are defined. */
__attribute__((target("avx512f,avx512dq,avx512vl"))) static const unsigned char *stripes_wide(
    const unsigned char *p, size_t *rem, uint64_t a[4]) {
  const __m256i m_in = _mm256_set1_epi64x((long long)M_IN);
  const __m256i m_lane = _mm256_set1_epi64x((long long)M_LANE);
  __m256i acc = _mm256_loadu_si256((const __m256i *)(const void *)a);
  size_t r = *rem;
  for (; r >= 32; p += 32, r -= 32) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
    acc = _mm256_add_epi64(acc, _mm256_mullo_epi64(v, m_in));
    acc = _mm256_mullo_epi64(_mm256_rol_epi64(acc, 29), m_lane);
  }
  _mm256_storeu_si256((__m256i *)(void *)a, acc);
  *rem = r;
  return p;
}

int blk__checksum_wide(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}
#else
int blk__checksum_wide(void) {
  return 0;
}
#endif

static uint64_t checksum(const void *data, size_t n, uint64_t seed, int wide) {
  const unsigned char *p = data;
  size_t rem = n;
  uint64_t h = absorb(seed + SQRT2, (uint64_t)n);

  if (rem >= 32) {
    uint64_t a[4] = {seed ^ SQRT17, seed ^ SQRT19, seed ^ SQRT7, seed ^ SQRT11};
#if WIDE
    p = wide ? stripes_wide(p, &rem, a) : stripes(p, &rem, a);
#else
    (void)wide;
    p = stripes(p, &rem, a);
#endif
    h = absorb(h, a[0]);
    h = absorb(h, a[1]);
    h = absorb(h, a[2]);
    h = absorb(h, a[3]);
  }
  for (; rem >= 8; p += 8, rem -= 8) h = absorb(h, blk__load_le64(p));
  if (rem > 0) {
    uint64_t v = 0;
    for (size_t i = 0; i < rem; i++) v |= (uint64_t)p[i] << (8u * i);
    h = absorb(h, v);
  }
  return avalanche(h);
}

uint64_t blk__checksum(const void *data, size_t n, uint64_t seed) {
  return checksum(data, n, seed, n >= 32 && blk__checksum_wide());
}

uint64_t blk__checksum_portable(const void *data, size_t n, uint64_t seed) {
  return checksum(data, n, seed, 0);
}
