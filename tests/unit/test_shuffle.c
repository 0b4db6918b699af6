/* test_shuffle: the byte shuffle filter against a naive reference, for every
 * element size 0..17 and sizes with every tail length, at odd alignments;
 * and the unshuffle from planes that lie apart (blk__unshuffle_planes). */
#include <stdint.h>

#include "blk/blk.h"
#include "check.h"
#include "storage/shuffle.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint8_t rand_byte(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint8_t)(rng_state >> 24);
}

/* The definition, written as plainly as possible. */
static void ref_shuffle(uint8_t *dst, const uint8_t *src, size_t n, size_t es) {
  if (es == 0) es = 1;
  size_t m = n / es;
  size_t k = 0;
  for (size_t j = 0; j < es; j++)
    for (size_t i = 0; i < m; i++) dst[k++] = src[i * es + j];
  for (size_t t = m * es; t < n; t++) dst[k++] = src[t];
}

static void ref_unshuffle(uint8_t *dst, const uint8_t *src, size_t n, size_t es) {
  if (es == 0) es = 1;
  size_t m = n / es;
  size_t k = 0;
  for (size_t j = 0; j < es; j++)
    for (size_t i = 0; i < m; i++) dst[i * es + j] = src[k++];
  for (size_t t = m * es; t < n; t++) dst[t] = src[k++];
}

/* Shuffles n bytes with element size es from and to odd offsets, compares
 * with the reference both ways, and checks nothing outside [0, n) moved. */
static void check_one(size_t n, size_t es) {
  const size_t pad = 8;
  uint8_t *src = malloc(n + 2 * pad), *dst = malloc(n + 2 * pad), *ref = malloc(n + 1),
          *back = malloc(n + 2 * pad);
  CHECK(src && dst && ref && back);
  for (size_t i = 0; i < n + 2 * pad; i++) src[i] = rand_byte();
  memset(dst, 0xA5, n + 2 * pad);
  memset(back, 0x5A, n + 2 * pad);
  const uint8_t *in = src + 1; /* odd alignments on both sides */
  uint8_t *out = dst + 3;

  blk__shuffle(out, in, n, es);
  ref_shuffle(ref, in, n, es);
  for (size_t i = 0; i < n; i++)
    CHECK_MSG(out[i] == ref[i], "shuffle n=%zu es=%zu: byte %zu is %u, expected %u", n, es, i,
              out[i], ref[i]);
  for (size_t i = 0; i < 3; i++) CHECK_EQ_INT(dst[i], 0xA5);
  for (size_t i = n + 3; i < n + 2 * pad; i++) CHECK_EQ_INT(dst[i], 0xA5);

  uint8_t *inv = back + 5;
  blk__unshuffle(inv, out, n, es);
  for (size_t i = 0; i < n; i++)
    CHECK_MSG(inv[i] == in[i], "unshuffle n=%zu es=%zu: byte %zu is %u, expected %u", n, es, i,
              inv[i], in[i]);
  for (size_t i = 0; i < 5; i++) CHECK_EQ_INT(back[i], 0x5A);
  for (size_t i = n + 5; i < n + 2 * pad; i++) CHECK_EQ_INT(back[i], 0x5A);

  /* unshuffle alone against its reference, on arbitrary input */
  ref_unshuffle(ref, in, n, es);
  blk__unshuffle(inv, in, n, es);
  for (size_t i = 0; i < n; i++)
    CHECK_MSG(inv[i] == ref[i], "unshuffle (ref) n=%zu es=%zu: byte %zu", n, es, i);

  free(src);
  free(dst);
  free(ref);
  free(back);
}

/* blk__unshuffle_planes: the planes of a shuffled array each in a buffer of
 * its own (at odd offsets) and the tail in another; the result must be the
 * array, with nothing written outside it. */
static void check_planes(size_t n, size_t es) {
  const size_t m = n / es, tail = n % es, pad = 8;
  uint8_t *in = malloc(n + 1), *shuffled = malloc(n + 1), *out = malloc(n + 2 * pad);
  uint8_t *bufs[BLK__SHUFFLE_PLANES_MAX + 1];
  const unsigned char *planes[BLK__SHUFFLE_PLANES_MAX];
  CHECK(in && shuffled && out);
  for (size_t i = 0; i < n; i++) in[i] = rand_byte();
  ref_shuffle(shuffled, in, n, es);
  for (size_t j = 0; j <= es; j++) {
    size_t bytes = j < es ? m : tail;
    CHECK((bufs[j] = malloc(bytes + 2 + j % 3)) != NULL);
    memcpy(bufs[j] + 1 + j % 3, shuffled + j * m, bytes);
    if (j < es) planes[j] = bufs[j] + 1 + j % 3;
  }
  memset(out, 0x3C, n + 2 * pad);
  blk__unshuffle_planes(out + 1, planes, bufs[es] + 1 + es % 3, n, es);
  for (size_t i = 0; i < n; i++)
    CHECK_MSG(out[1 + i] == in[i], "unshuffle_planes n=%zu es=%zu: byte %zu is %u, expected %u", n,
              es, i, out[1 + i], in[i]);
  CHECK_EQ_INT(out[0], 0x3C);
  for (size_t i = n + 1; i < n + 2 * pad; i++) CHECK_EQ_INT(out[i], 0x3C);
  for (size_t j = 0; j <= es; j++) free(bufs[j]);
  free(in);
  free(shuffled);
  free(out);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);

  /* n = 0: nothing is touched, NULL is fine. */
  blk__shuffle(NULL, NULL, 0, 4);
  blk__unshuffle(NULL, NULL, 0, 8);

  /* Every small size with every element size: covers every tail length,
   * fewer than two elements, and the 8-element groups of the fast paths with
   * every remainder (SSE2: groups of 16, then 8). */
  for (size_t es = 0; es <= 17; es++)
    for (size_t n = 0; n <= 300; n++) check_one(n, es);
  for (size_t es = 2; es <= BLK__SHUFFLE_PLANES_MAX; es++)
    for (size_t n = 0; n <= 300; n++) check_planes(n, es);

  /* Larger sizes with the fast paths and tails 0..7. */
  for (size_t t = 0; t < 8; t++) {
    check_one(4 * 4099 + t, 4);
    check_one(8 * 4099 + t, 8);
    check_one(8 * 4096 + t, 8);
    check_one(3 * 5001 + t, 3);
    check_one(16 * 1001 + t, 16);
  }
  for (size_t t = 0; t < 8; t++) {
    check_planes(4 * 4099 + t, 4);
    check_planes(8 * 4099 + t, 8);
    check_planes(16 * 1001 + t, 16);
    check_planes(6 * 1001 + t, 6);
  }
  check_one(1u << 20, 4);
  check_one((1u << 20) + 5, 8);
  check_one(100003, 24);

  /* A known small case, spelled out: 3 elements of 4 bytes and a 2-byte tail. */
  const uint8_t in[14] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23, 98, 99};
  const uint8_t want[14] = {0, 10, 20, 1, 11, 21, 2, 12, 22, 3, 13, 23, 98, 99};
  uint8_t got[14], back[14];
  blk__shuffle(got, in, sizeof in, 4);
  CHECK(memcmp(got, want, sizeof want) == 0);
  blk__unshuffle(back, got, sizeof got, 4);
  CHECK(memcmp(back, in, sizeof in) == 0);

  printf("test_shuffle: ok\n");
  return 0;
}
