/* test_checksum: blk__checksum is deterministic and alignment-free, its
 * 256-bit lanes (AVX-512) give the portable lanes' values, the seed
 * matters, every single-bit flip of a 4 KiB buffer and of every short
 * buffer changes it, byte swaps and truncations change it, zero runs of
 * different lengths differ, and its output bits are well mixed. Speed is
 * measured in bench/codec_bench.c, not here. */
#include <stdint.h>

#include "blk/blk.h"
#include "check.h"
#include "storage/checksum.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rand64(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void fill_random(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rand64() >> 32);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* All n values distinct (sorts them). */
static void check_distinct(uint64_t *v, size_t n, const char *what) {
  qsort(v, n, sizeof *v, cmp_u64);
  for (size_t i = 1; i < n; i++)
    CHECK_MSG(v[i] != v[i - 1], "%s: two of %zu checksums are both %016llx", what, n,
              (unsigned long long)v[i]);
}

static int popcount64(uint64_t x) {
  int c = 0;
  for (; x; x &= x - 1) c++;
  return c;
}

#define N4K 4096

static void test_deterministic(void) {
  uint8_t buf[N4K + 16];
  fill_random(buf, sizeof buf);
  for (size_t n = 0; n <= 200; n++) {
    uint64_t a = blk__checksum(buf, n, 7);
    CHECK(a == blk__checksum(buf, n, 7));
    /* the same bytes at every alignment give the same value */
    for (size_t off = 1; off < 8; off++) {
      uint8_t copy[256];
      memcpy(copy + off, buf, n);
      CHECK_MSG(blk__checksum(copy + off, n, 7) == a, "n=%zu offset %zu", n, off);
    }
  }
  CHECK(blk__checksum(NULL, 0, 0) == blk__checksum(buf, 0, 0));

  /* Pinned values: the function is part of the stored format; a change must
   * be deliberate. Computed by this implementation, little-endian reading. */
  const char *text = "blk: block-parallel data analysis, out of core";
  uint64_t pin_empty = blk__checksum("", 0, 0);
  uint64_t pin_text = blk__checksum(text, strlen(text), 0);
  uint64_t pin_seeded = blk__checksum(text, strlen(text), 42);
  CHECK_MSG(pin_empty == 0x9bba56d4d9c6a4c6ull, "empty: %016llx", (unsigned long long)pin_empty);
  CHECK_MSG(pin_text == 0x44e5489d9e646682ull, "text: %016llx", (unsigned long long)pin_text);
  CHECK_MSG(pin_seeded == 0xd9f0f08939f52d58ull, "seeded: %016llx", (unsigned long long)pin_seeded);
  CHECK(blk__checksum_portable(text, strlen(text), 42) == pin_seeded);
}

static void test_seed(void) {
  uint8_t buf[N4K];
  fill_random(buf, sizeof buf);
  const size_t lens[] = {0, 1, 7, 8, 31, 32, 33, 100, N4K};
  const uint64_t seeds[] = {0, 1, 2, 3, 0x8000000000000000ull, ~0ull, 0x123456789ull};
  for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
    uint64_t v[sizeof seeds / sizeof *seeds];
    for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++)
      v[s] = blk__checksum(buf, lens[l], seeds[s]);
    check_distinct(v, sizeof v / sizeof *v, "seeds");
  }
}

/* Flipping any one bit of n random bytes changes the checksum, and all the
 * flipped checksums differ from each other. */
static void check_bit_flips(size_t n, uint64_t seed) {
  uint8_t *buf = malloc(n + 1);
  uint64_t *sums = malloc((8 * n + 1) * sizeof *sums);
  CHECK(buf && sums);
  fill_random(buf, n + 1);
  uint64_t base = blk__checksum(buf, n, seed);
  size_t k = 0;
  sums[k++] = base;
  for (size_t i = 0; i < n; i++) {
    for (unsigned b = 0; b < 8; b++) {
      buf[i] ^= (uint8_t)(1u << b);
      uint64_t h = blk__checksum(buf, n, seed);
      buf[i] ^= (uint8_t)(1u << b);
      CHECK_MSG(h != base, "n=%zu: flipping bit %u of byte %zu does not change the checksum", n, b,
                i);
      sums[k++] = h;
    }
  }
  check_distinct(sums, k, "bit flips");
  free(buf);
  free(sums);
}

static void test_bit_flips(void) {
  check_bit_flips(N4K, 0);
  check_bit_flips(N4K, 12345);
  for (size_t n = 0; n <= 100; n++) check_bit_flips(n, n);
}

static void test_byte_swaps(void) {
  uint8_t buf[N4K];
  fill_random(buf, sizeof buf);
  uint64_t base = blk__checksum(buf, sizeof buf, 0);
  /* every adjacent pair, and many random pairs, of unequal bytes */
  for (size_t i = 0; i + 1 < sizeof buf; i++) {
    if (buf[i] == buf[i + 1]) continue;
    uint8_t t = buf[i];
    buf[i] = buf[i + 1];
    buf[i + 1] = t;
    CHECK_MSG(blk__checksum(buf, sizeof buf, 0) != base, "swap of bytes %zu and %zu", i, i + 1);
    buf[i + 1] = buf[i];
    buf[i] = t;
  }
  for (int r = 0; r < 20000; r++) {
    size_t i = (size_t)(rand64() % sizeof buf), j = (size_t)(rand64() % sizeof buf);
    if (buf[i] == buf[j]) continue;
    uint8_t t = buf[i];
    buf[i] = buf[j];
    buf[j] = t;
    CHECK_MSG(blk__checksum(buf, sizeof buf, 0) != base, "swap of bytes %zu and %zu", i, j);
    buf[j] = buf[i];
    buf[i] = t;
  }
  /* swapping two 32-byte stripes, or two words in one stripe */
  uint8_t copy[N4K];
  memcpy(copy, buf, sizeof buf);
  memcpy(copy, buf + 32, 32);
  memcpy(copy + 32, buf, 32);
  CHECK(blk__checksum(copy, sizeof copy, 0) != base);
  memcpy(copy, buf, sizeof buf);
  memcpy(copy, buf + 8, 8);
  memcpy(copy + 8, buf, 8);
  CHECK(blk__checksum(copy, sizeof copy, 0) != base);
}

/* Every prefix of a random buffer, and every run of zeros, 0..4096 bytes,
 * has its own checksum: truncation and zero padding are caught. */
static void test_lengths(void) {
  static uint8_t buf[N4K], zeros[N4K];
  static uint64_t v[N4K + 1];
  fill_random(buf, sizeof buf);
  for (size_t n = 0; n <= N4K; n++) v[n] = blk__checksum(buf, n, 0);
  check_distinct(v, N4K + 1, "prefixes");
  for (size_t n = 0; n <= N4K; n++) v[n] = blk__checksum(zeros, n, 0);
  check_distinct(v, N4K + 1, "zero runs");
  for (size_t n = 0; n <= N4K; n++) v[n] = blk__checksum(zeros, n, 99);
  check_distinct(v, N4K + 1, "zero runs, seed 99");
}

/* Avalanche: one flipped input bit flips about half the output bits, and
 * each output bit flips about half the time (0.45..0.55, 8 standard
 * deviations of the sampling here, so it never fails by chance). A weak mixer (a missing final
 * round, a short tail path) fails this. */
static void test_avalanche(void) {
  const size_t lens[] = {1, 4, 8, 13, 32, 64, 200};
  for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
    size_t n = lens[l];
    uint8_t buf[200];
    long total = 0, trials = 0;
    long per_bit[64] = {0};
    for (int r = 0; r < 200; r++) {
      fill_random(buf, n);
      uint64_t base = blk__checksum(buf, n, 0);
      for (size_t bit = 0; bit < 8 * n; bit += 1 + n / 8) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        uint64_t d = base ^ blk__checksum(buf, n, 0);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        total += popcount64(d);
        for (int o = 0; o < 64; o++) per_bit[o] += (long)((d >> o) & 1u);
        trials++;
      }
    }
    double mean = (double)total / (double)trials;
    CHECK_MSG(mean > 31.0 && mean < 33.0, "n=%zu: a bit flip changes %.2f output bits on average",
              n, mean);
    /* One byte has only 256 values: too few pairs to measure per-bit rates. */
    if (n < 4) continue;
    for (int o = 0; o < 64; o++) {
      double p = (double)per_bit[o] / (double)trials;
      CHECK_MSG(p > 0.45 && p < 0.55, "n=%zu: output bit %d flips with probability %.3f", n, o, p);
    }
  }
}

/* The lanes in one 256-bit register (where the processor has AVX-512) give
 * the one-lane-at-a-time values: every length to 600 bytes (0..18 stripes
 * and every tail), longer odd lengths, at several seeds and alignments. */
static void test_wide_equals_portable(void) {
  enum { BIG = (1 << 20) + 45 };
  uint8_t *buf = malloc(BIG + 8);
  CHECK(buf != NULL);
  fill_random(buf, BIG + 8);
  const uint64_t seeds[] = {0, 1, 42, 0x8000000000000000ull, ~0ull};
  for (size_t si = 0; si < sizeof seeds / sizeof seeds[0]; si++) {
    for (size_t n = 0; n <= 600; n++)
      for (size_t off = 0; off < 8; off += 3) {
        uint64_t a = blk__checksum(buf + off, n, seeds[si]);
        uint64_t b = blk__checksum_portable(buf + off, n, seeds[si]);
        CHECK_MSG(a == b, "n=%zu offset %zu seed %llx: %016llx, portable %016llx", n, off,
                  (unsigned long long)seeds[si], (unsigned long long)a, (unsigned long long)b);
      }
    const size_t longer[] = {4095, 4096, 4097, 65567, BIG};
    for (size_t i = 0; i < sizeof longer / sizeof longer[0]; i++)
      CHECK(blk__checksum(buf + 5, longer[i], seeds[si]) ==
            blk__checksum_portable(buf + 5, longer[i], seeds[si]));
  }
  free(buf);
  printf("test_checksum: %s lanes checked against the portable ones\n",
         blk__checksum_wide() ? "256-bit (AVX-512)" : "no wide lanes on this processor; the");
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_wide_equals_portable();
  test_deterministic();
  test_seed();
  test_bit_flips();
  test_byte_swaps();
  test_lengths();
  test_avalanche();
  printf("test_checksum: ok\n");
  return 0;
}
