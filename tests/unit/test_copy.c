/* test_copy: blk__copy against a byte-by-byte reference, at every distance
 * of the destination past the source modulo 4 KiB that its chunked path
 * takes (1..63) and at some it leaves to memcpy, for sizes on both sides of
 * its bounds and with every tail length: every byte of [0, n) arrives and
 * nothing outside it is written. */
#include <stdint.h>

#include "base/copy.h"
#include "blk/blk.h"
#include "check.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint8_t rand_byte(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint8_t)(rng_state >> 24);
}

#define PAD 64

/* Copies n bytes from src_at to a destination `ahead` bytes further on
 * modulo 4096 (src_at + ahead into a 4096-aligned buffer) and checks. */
static void check_one(uint8_t *src_buf, uint8_t *dst_buf, size_t n, size_t src_at, size_t ahead) {
  const uint8_t *src = src_buf + src_at;
  size_t dst_at = PAD + (src_at - PAD + ahead) % 4096;
  uint8_t *dst = dst_buf + dst_at;
  CHECK_EQ_INT((int)(((uintptr_t)dst - (uintptr_t)src) & 4095), (int)ahead);
  memset(dst_buf, 0xA5, dst_at + n + PAD);
  blk__copy(dst, src, n);
  for (size_t i = 0; i < n; i++)
    CHECK_MSG(dst[i] == src[i], "n=%zu ahead=%zu: byte %zu is %u, expected %u", n, ahead, i, dst[i],
              src[i]);
  for (size_t i = 0; i < dst_at; i++)
    CHECK_MSG(dst_buf[i] == 0xA5, "n=%zu ahead=%zu: byte %zu before dst written", n, ahead,
              dst_at - i);
  for (size_t i = dst_at + n; i < dst_at + n + PAD; i++)
    CHECK_MSG(dst_buf[i] == 0xA5, "n=%zu ahead=%zu: byte %zu after dst written", n, ahead,
              i - dst_at - n);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  size_t most = BLK__COPY_MOST + 4 * 4096; /* a multiple of 4096, as aligned_alloc wants */
  uint8_t *src_buf = aligned_alloc(4096, most), *dst_buf = aligned_alloc(4096, most);
  CHECK(src_buf && dst_buf);
  for (size_t i = 0; i < most; i++) src_buf[i] = rand_byte();

  const size_t sizes[] = {
      0,         1,          63,     BLK__COPY_LEAST - 1, BLK__COPY_LEAST, BLK__COPY_LEAST + 1,
      4096 + 37, 65536 + 63, 262140, BLK__COPY_MOST - 1,  BLK__COPY_MOST};
  const size_t nsizes = sizeof sizes / sizeof *sizes;
  for (size_t si = 0; si < nsizes; si++) {
    size_t n = sizes[si];
    /* The large sizes at a few distances; the others at all of 0..64 and
     * some beyond. */
    int large = n >= 65536;
    for (size_t ahead = 0; ahead <= 64; ahead += large ? 21 : 1)
      check_one(src_buf, dst_buf, n, PAD + 16, ahead);
    check_one(src_buf, dst_buf, n, PAD + 5, 4000);
    check_one(src_buf, dst_buf, n, PAD + 7, 4095);
  }
  /* Every tail length past the last 64-byte chunk, on the chunked path. */
  for (size_t t = 0; t < 64; t++) check_one(src_buf, dst_buf, 8192 + t, PAD + 16, 4);

  free(src_buf);
  free(dst_buf);
  printf("test_copy: ok\n");
  return 0;
}
