/*
 * le64.h: unaligned little-endian loads and stores of 64-bit words.
 *
 * Byte k of memory is bits 8k..8k+7 of the value on every platform, at any
 * alignment: the checksum is defined on this reading (so it is the same
 * everywhere) and the shuffle's word transposes rely on it. memcpy of 8
 * bytes compiles to one load or store, plus a byte swap on a big-endian
 * machine. Pure; any thread.
 */
#ifndef BLK_LE64_H
#define BLK_LE64_H

#include <stdint.h>
#include <string.h>

static inline uint64_t blk__load_le64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

static inline void blk__store_le64(unsigned char *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  memcpy(p, &v, sizeof v);
}

#endif
