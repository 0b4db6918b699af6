/*
 * copy.h: memcpy for blk's bulk data, without its 4 KiB aliasing stall.
 *
 * glibc's memcpy moves mid-sized blocks (from 2 KiB up to a machine-set
 * size, 1 MiB here) with `rep movsb`. On this machine's AMD EPYC that runs
 * 10-20x slower when the destination lies 1 to 15 bytes past the source
 * modulo 4 KiB: a 256 KiB copy takes 100-220 us instead of 5-10
 * (docs/performance.md 21). Such offsets are not rare in blk: a piece or
 * segment of a float array starts wherever its elements put it, so a
 * pipelined all-reduce of 2097151 floats copied every segment into its
 * message that way and took 2.4x the time of one of 2097152. blk__copy
 * takes those copies 64 bytes at a time (plain vector moves: about half
 * memcpy's best speed, 10x its stalled one) and leaves all others to
 * memcpy.
 */
#ifndef BLK_COPY_H
#define BLK_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The stall needs rep movsb, which glibc does not use below LEAST. Here it
 * stops using it from 1 MiB (its threshold follows the cache sizes), where
 * the chunked copy is 2x slower than memcpy; MOST leaves room for machines
 * whose threshold lies higher, at that price on 1.5% of such copies (the
 * offsets in the window). */
#define BLK__COPY_LEAST ((size_t)2048)
#define BLK__COPY_MOST ((size_t)4 << 20)

/* memcpy(dst, src, n) for regions that do not overlap; in 64-byte chunks
 * when dst lies 1 to 63 bytes past src modulo 4 KiB (1-15: the stall; 16-63:
 * memcpy measured 1.1-1.8x slower than the chunks at 256 KiB). */
static inline void blk__copy(void *dst, const void *src, size_t n) {
  size_t ahead = ((uintptr_t)dst - (uintptr_t)src) & 4095;
  if (n < BLK__COPY_LEAST || n >= BLK__COPY_MOST || ahead == 0 || ahead >= 64) {
    if (n) memcpy(dst, src, n);
    return;
  }
  unsigned char *d = dst;
  const unsigned char *s = src;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) memcpy(d + i, s + i, 64);
  memcpy(d + i, s + i, n - i);
}

#endif
