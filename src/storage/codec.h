/*
 * codec.h: compression of the bytes blk keeps out of core.
 *
 * A blk__codec turns raw bytes into an encoding and back. Encoding is an
 * optional byte shuffle (shuffle.h) followed by one zstd frame; when that
 * does not make the data smaller, the raw bytes are stored as they are. Each
 * encoding comes with a `format` word (below) that says which of these was
 * done; the caller stores it next to the encoding, together with the raw
 * size, and hands both back to decode. The encoding carries no header of its
 * own and no checksum: out-of-core storage frames and checksums records
 * (checksum.h).
 *
 * A codec holds zstd's compression and decompression contexts and a scratch
 * buffer for the shuffle, all reused from call to call, so the steady state
 * allocates nothing. codec.c is the only file in blk that includes zstd.h.
 *
 * Threads: a codec is not thread-safe. Each thread that encodes or decodes
 * uses its own codec; different codecs may be used at once.
 */
#ifndef BLK_CODEC_H
#define BLK_CODEC_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "blk/buffer.h"

/* The level that compresses nothing: every encoding is stored raw. zstd's
 * own levels run from ZSTD_minCLevel() (negative: faster, larger) to
 * ZSTD_maxCLevel() (22); blk accepts them all except 0, which zstd reads as
 * "its default" (3) and zlib as "no compression": a caller who means either
 * says 3 or BLK__CODEC_STORE. */
#define BLK__CODEC_STORE INT_MIN

/* The recommended defaults (docs/compression.md has the figures they were
 * chosen from): zstd level 1 after a byte shuffle by the element size. When
 * the element type is not known, shuffle by 8: it keeps bytes of equal
 * significance together for 1-, 2-, 4- and 8-byte values alike (on float32
 * it loses 1-2% of ratio against 4), while 4 on float64 loses about a
 * sixth of the ratio at level 1 and all of it at negative levels. */
#define BLK__CODEC_DEFAULT_LEVEL 1
#define BLK__CODEC_DEFAULT_ELEM 8

/* The format word of an encoding (a uint32_t):
 *   bits 0..3   method: BLK__CODEC_RAW (the raw bytes, as they are),
 *               BLK__CODEC_ZSTD (one zstd frame) or BLK__CODEC_PLANES (the
 *               shuffled bytes plane by plane, below);
 *   bits 8..23  the shuffle element size: 0 for no shuffle, otherwise 2 to
 *               BLK__CODEC_ELEM_MAX; only with BLK__CODEC_ZSTD, and always
 *               (2 to BLK__CODEC_PLANES_MAX) with BLK__CODEC_PLANES;
 *   other bits  reserved, 0.
 * Encode only produces RAW with element size 0, ZSTD with element size 0 or
 * 2..BLK__CODEC_ELEM_MAX, and PLANES with 2..BLK__CODEC_PLANES_MAX; decode
 * rejects anything else as corrupt.
 *
 * PLANES: after the shuffle, each of the e byte planes (byte j of every
 * element, n / e bytes) is a zstd frame of its own, or stays raw when a
 * sample of it does not compress. The low mantissa bytes of floats are
 * noise: zstd spent most of its time on them, for a few per cent
 * (docs/compression.md). The encoding is e little-endian u32 words, one
 * per plane (bit 31: a zstd frame, else raw; bits 0..30: its size, the
 * plane's own when raw), then the planes' bytes in order, then the last
 * n % e bytes as they are. A "frame" of one byte is a plane whose every
 * byte is that byte (no zstd frame is that short): the high bytes of small
 * integers, where zstd took a quarter of a millisecond to compress each
 * 800 KB plane to nothing. Encode uses PLANES for element sizes up to
 * BLK__CODEC_PLANES_MAX whose planes hold at least BLK__CODEC_PLANE_MIN
 * bytes (and fewer than 2^31). */
#define BLK__CODEC_RAW 0x0u
#define BLK__CODEC_ZSTD 0x1u
#define BLK__CODEC_PLANES 0x2u
#define BLK__CODEC_PLANES_MAX 16
#define BLK__CODEC_PLANE_MIN ((size_t)64 << 10)
#define BLK__CODEC_METHOD_MASK 0xFu
#define BLK__CODEC_ELEM_SHIFT 8
#define BLK__CODEC_ELEM_MAX 0xFFFFu
#define BLK__CODEC_ELEM_MASK (BLK__CODEC_ELEM_MAX << BLK__CODEC_ELEM_SHIFT)
#define BLK__CODEC_FORMAT_METHOD(f) ((uint32_t)(f)&BLK__CODEC_METHOD_MASK)
#define BLK__CODEC_FORMAT_ELEM(f) (((uint32_t)(f)&BLK__CODEC_ELEM_MASK) >> BLK__CODEC_ELEM_SHIFT)
/* Whether an encoding of this format went through zstd (in whole or part). */
#define BLK__CODEC_FORMAT_COMPRESSED(f)              \
  (BLK__CODEC_FORMAT_METHOD(f) == BLK__CODEC_ZSTD || \
   BLK__CODEC_FORMAT_METHOD(f) == BLK__CODEC_PLANES)

typedef struct blk__codec blk__codec;

/* Creates a codec that compresses at zstd level `level`, or stores raw with
 * BLK__CODEC_STORE. Any codec decodes every format, whatever its level.
 * Returns 0 and sets *out; BLK_EINVAL for level 0 or a level outside
 * ZSTD_minCLevel()..ZSTD_maxCLevel() (the detail names the range);
 * BLK_ENOMEM. On failure *out is NULL. */
int blk__codec_create(blk__codec **out, int level);

/* Frees the codec and its contexts. NULL does nothing. */
void blk__codec_destroy(blk__codec *c);

/* The level given at creation. */
int blk__codec_level(const blk__codec *c);

/* Appends the encoding of raw[0, n) to `out` (after what it holds) and sets
 * *format. With elem_size >= 2 the bytes are shuffled by elements of that
 * size before compression (elem_size 0 or 1: no shuffle; fewer than two
 * whole elements are not worth shuffling and are not), and compressed plane
 * by plane where the planes are large enough (PLANES, above). If the
 * encoding would not be smaller than n, or the codec stores, the raw bytes
 * are appended instead and the format says BLK__CODEC_RAW, so an encoding is
 * never larger than n. `raw` may be NULL when n is 0, and must not point
 * into `out`. Up to ZSTD_compressBound(n) bytes of `out` are reserved while
 * encoding (PLANES: the planes' bounds and their words).
 * Returns 0; BLK_EINVAL for elem_size > BLK__CODEC_ELEM_MAX or n too large
 * for zstd; BLK_ENOMEM (growing `out`, the scratch buffer, or inside zstd);
 * or `out`'s sticky error. On failure `out` keeps its earlier contents (its
 * size is unchanged) and *format is 0. */
int blk__codec_encode(blk__codec *c, blk_buffer *out, const void *raw, size_t n, size_t elem_size,
                      uint32_t *format);

/* Decodes enc[0, enc_size), an encoding made with `format`, into
 * raw[0, raw_size), where raw_size must be the n it was encoded from.
 * Returns 0; BLK_ECORRUPT when anything does not fit: unknown or reserved
 * format bits, a stored encoding whose size is not raw_size, a zstd error
 * (its name is in the detail), a frame that decodes to another size;
 * BLK_EINVAL for a NULL pointer with a non-zero size; BLK_ENOMEM (the
 * scratch buffer for unshuffling). On failure raw[0, raw_size) is zeroed.
 * `raw` and `enc` must not overlap. */
int blk__codec_decode(blk__codec *c, void *raw, size_t raw_size, const void *enc, size_t enc_size,
                      uint32_t format);

/* The version of the zstd library blk runs with, e.g. "1.5.4". */
const char *blk__codec_zstd_version(void);

#endif
