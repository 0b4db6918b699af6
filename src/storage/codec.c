/*
 * codec.c: shuffle + zstd encoding of out-of-core data (see codec.h). The
 * only file in blk that includes zstd.h.
 *
 * Encode: (1) with a shuffle, raw is shuffled into the codec's scratch
 * buffer; (2) ZSTD_compressBound(n) bytes are reserved at the end of `out`
 * and ZSTD_compressCCtx writes the frame straight there (no copy); (3) if
 * the frame is not smaller than n, the raw bytes overwrite it in place (the
 * bound is never below n, so they fit) and the format says RAW. `out`'s
 * size moves only on success.
 *
 * Planes (codec.h): the middle SAMPLE elements are shuffled alone first and
 * each of their planes compressed, into `out` where the frames will go; a
 * plane whose sample is not PLANE_RATIO times smaller is stored raw, the
 * rest compressed whole (and stored raw after all when that did not pay).
 * A plane whose sample is one byte over and over is not compressed: if the
 * whole plane is that byte too (one memcmp), its encoding is that byte.
 * Then the whole shuffle writes the raw planes that lead the encoding
 * straight into `out` and the others into scratch. A sample costs a
 * thirty-second of a 1 MiB plane's compression, against the whole
 * compression a plane of noise would cost.
 *
 * Decode: the format is checked first (reserved bits, method, element size),
 * then sizes: a RAW encoding must be exactly raw_size bytes; a zstd frame
 * that declares its content size must declare raw_size. The frame is then
 * decompressed into exactly raw_size bytes (into raw, or into scratch when
 * it must be unshuffled afterwards) and the decoded size must be raw_size.
 * zstd checks its input as it goes, so a damaged frame is an error, never a
 * write past raw_size; what escapes zstd's checks (a damaged literal decodes
 * to other bytes of the right size) is for the record checksum to catch.
 *
 * Invariants: scratch holds scratch_cap bytes (NULL when 0) and only ever
 * grows, to the largest shuffled size seen; its contents carry nothing from
 * one call to the next. cctx and dctx exist for the codec's whole life.
 *
 * Cost: encode is one shuffle pass (if any) plus zstd at the chosen level
 * (planes: on the planes that compress, plus the samples; a constant plane
 * costs a read); decode is zstd plus one unshuffle pass (planes: zstd on
 * the frames, a memset for a constant plane; the unshuffle reads raw planes
 * where they are). Memory: the two zstd contexts (a few MiB at
 * low levels once used), scratch up to the largest shuffled block, and
 * transiently ZSTD_compressBound(n) bytes in `out`.
 * Locking: none; one codec per thread.
 */
#include "storage/codec.h"
#include "base/alloc.h"
#include "base/copy.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/fail.h"
#include "storage/shuffle.h"

struct blk__codec {
  int level; /* a zstd level, or BLK__CODEC_STORE */
  ZSTD_CCtx *cctx;
  ZSTD_DCtx *dctx;
  unsigned char *scratch; /* shuffle / unshuffle staging */
  size_t scratch_cap;
};

/* Makes scratch at least n bytes; its old contents are not kept. */
static int scratch_reserve(blk__codec *c, size_t n) {
  if (n <= c->scratch_cap) return 0;
  unsigned char *p = blk__malloc(n);
  if (!p) return blk__fail(BLK_ENOMEM, "codec: scratch buffer of %zu bytes", n);
  free(c->scratch);
  c->scratch = p;
  c->scratch_cap = n;
  return 0;
}

int blk__codec_create(blk__codec **out, int level) {
  int rc = 0;
  blk__codec *c = NULL;
  *out = NULL;
  if (level == 0) {
    rc = blk__fail(BLK_EINVAL,
                   "codec: level 0 is ambiguous (zstd's default 3, or no compression): say 3, or "
                   "BLK__CODEC_STORE to store raw");
    goto fail;
  }
  if (level != BLK__CODEC_STORE && (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())) {
    rc = blk__fail(BLK_EINVAL,
                   "codec: level %d is outside zstd's range %d..%d (or BLK__CODEC_STORE to "
                   "store raw)",
                   level, ZSTD_minCLevel(), ZSTD_maxCLevel());
    goto fail;
  }
  c = blk__calloc(1, sizeof *c);
  if (!c) {
    rc = blk__fail(BLK_ENOMEM, "codec: %zu bytes for the codec", sizeof *c);
    goto fail;
  }
  c->level = level;
  c->cctx = ZSTD_createCCtx();
  c->dctx = ZSTD_createDCtx();
  if (!c->cctx || !c->dctx) {
    rc = blk__fail(BLK_ENOMEM, "codec: zstd %s context", c->cctx ? "decompression" : "compression");
    goto fail;
  }
  *out = c;
  return 0;
fail:
  blk__codec_destroy(c);
  return rc;
}

void blk__codec_destroy(blk__codec *c) {
  if (!c) return;
  ZSTD_freeCCtx(c->cctx);
  ZSTD_freeDCtx(c->dctx);
  free(c->scratch);
  free(c);
}

int blk__codec_level(const blk__codec *c) {
  return c->level;
}

const char *blk__codec_zstd_version(void) {
  return ZSTD_versionString();
}

/* Planes: a sample of this many bytes from the middle of a plane decides
 * whether it is compressed, which it is when the sample is PLANE_RATIO
 * times smaller (the storage's rule for a whole record). */
#define SAMPLE ((size_t)32 << 10)
#define PLANE_RATIO 1.1
_Static_assert(BLK__CODEC_PLANE_MIN > SAMPLE, "a plane is larger than its sample");
_Static_assert(BLK__CODEC_PLANES_MAX <= BLK__SHUFFLE_PLANES_MAX, "the unshuffle takes every plane");
#define PLANE_ZSTD 0x80000000u           /* a plane word's flag: a zstd frame */
#define PLANE_CONSTANT (PLANE_ZSTD | 1u) /* ... of one byte: every byte of the plane */

static void store_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t load_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Whether every byte of p[0, n) is p[0] (n >= 1). */
static int constant(const unsigned char *p, size_t n) {
  return memcmp(p, p + 1, n - 1) == 0;
}

/* Whether the shuffled bytes of n go plane by plane at element size es. */
static int by_planes(size_t n, size_t es) {
  return es >= 2 && es <= BLK__CODEC_PLANES_MAX && n / es >= BLK__CODEC_PLANE_MIN &&
         n / es < PLANE_ZSTD;
}

/* zstd's frame of src[0, n) at dst (room for bound bytes), or an error. */
static int compress(blk__codec *c, unsigned char *dst, size_t bound, const unsigned char *src,
                    size_t n, size_t *csize) {
  *csize = ZSTD_compressCCtx(c->cctx, dst, bound, src, n, c->level);
  if (!ZSTD_isError(*csize)) return 0;
  int code = ZSTD_getErrorCode(*csize) == ZSTD_error_memory_allocation ? BLK_ENOMEM : BLK_EINVAL;
  return blk__fail(code, "codec: zstd compression of %zu bytes at level %d: %s", n, c->level,
                   ZSTD_getErrorName(*csize));
}

/* Writes the planes of src[0, n) shuffled by es at dst (room for their
 * words and bounds) and returns their size in *size. The samples come
 * first, from the middle elements shuffled alone; then the shuffle puts the
 * planes that lead the encoding raw (a float's low mantissa bytes, mostly)
 * straight where they belong, and the others in scratch for zstd. (Copying
 * a raw plane from scratch cost as much again as shuffling it.) */
static int encode_planes(blk__codec *c, unsigned char *dst, const unsigned char *src, size_t n,
                         size_t es, size_t *size) {
  const size_t plane = n / es, tail = n % es, bound = ZSTD_compressBound(plane);
  const size_t s = plane < SAMPLE ? plane : SAMPLE;
  int rc = scratch_reserve(c, n);
  if (rc) return rc;
  unsigned char *at = dst + 4 * es;
  blk__shuffle(c->scratch, src + (plane - s) / 2 * es, s * es, es);
  int sample_pays[BLK__CODEC_PLANES_MAX], sample_constant[BLK__CODEC_PLANES_MAX];
  size_t lead = 0; /* planes before the first whose sample pays */
  for (size_t j = 0; j < es; j++) {
    size_t csize = 0;
    sample_constant[j] = constant(c->scratch + j * s, s);
    if (!sample_constant[j] && (rc = compress(c, at, bound, c->scratch + j * s, s, &csize)))
      return rc;
    sample_pays[j] = sample_constant[j] || (double)csize * PLANE_RATIO <= (double)s;
    if (lead == j && !sample_pays[j]) lead++;
  }
  unsigned char *to[BLK__CODEC_PLANES_MAX];
  for (size_t j = 0; j < es; j++) to[j] = j < lead ? at + j * plane : c->scratch + j * plane;
  blk__shuffle_planes(to, c->scratch + es * plane, src, n, es);
  for (size_t j = 0; j < es; j++) {
    uint32_t word = (uint32_t)plane;
    if (j >= lead) {
      const unsigned char *from = c->scratch + j * plane;
      size_t csize = 0;
      if (sample_constant[j] && constant(from, plane)) {
        word = PLANE_CONSTANT;
        *at = from[0];
      } else if (sample_pays[j]) {
        rc = compress(c, at, bound, from, plane, &csize);
        if (rc) return rc;
        if ((double)csize * PLANE_RATIO <= (double)plane) word = (uint32_t)csize | PLANE_ZSTD;
      }
      if (!(word & PLANE_ZSTD)) blk__copy(at, from, plane);
    }
    store_le32(dst + 4 * j, word);
    at += word & ~PLANE_ZSTD;
  }
  blk__copy(at, c->scratch + es * plane, tail);
  *size = (size_t)(at + tail - dst);
  return 0;
}

int blk__codec_encode(blk__codec *c, blk_buffer *out, const void *raw, size_t n, size_t elem_size,
                      uint32_t *format) {
  int rc = 0;
  *format = 0;
  if (out->error) return out->error;
  if (n > 0 && !raw) {
    rc = blk__fail(BLK_EINVAL, "codec: encode of %zu bytes from NULL", n);
    goto fail;
  }
  if (elem_size > BLK__CODEC_ELEM_MAX) {
    rc = blk__fail(BLK_EINVAL, "codec: shuffle element size %zu is above the maximum %u", elem_size,
                   BLK__CODEC_ELEM_MAX);
    goto fail;
  }
  if (c->level == BLK__CODEC_STORE || n == 0) {
    rc = blk_buffer_write(out, raw, n);
    if (rc) goto fail;
    *format = BLK__CODEC_RAW;
    return 0;
  }

  size_t es = elem_size >= 2 && n / elem_size >= 2 ? elem_size : 0;
  const int planes = by_planes(n, es);
  const void *src = raw;
  if (es && !planes) { /* (encode_planes shuffles its own way) */
    rc = scratch_reserve(c, n);
    if (rc) goto fail;
    blk__shuffle(c->scratch, raw, n, es);
    src = c->scratch;
  }
  size_t bound = ZSTD_compressBound(planes ? n / es : n);
  if (ZSTD_isError(bound) || bound < n / (planes ? es : 1)) {
    rc = blk__fail(BLK_EINVAL, "codec: %zu bytes is more than zstd can compress in one frame", n);
    goto fail;
  }
  /* (Planes: es words, es frames of at most bound bytes, the tail: never
   * less than n.) */
  rc = blk_buffer_reserve(out, planes ? 4 * es + es * bound + n % es : bound);
  if (rc) goto fail;
  unsigned char *dst = out->data + out->size;
  size_t csize = 0;
  rc = planes ? encode_planes(c, dst, src, n, es, &csize) : compress(c, dst, bound, src, n, &csize);
  if (rc) goto fail;
  if (csize >= n) {
    blk__copy(dst, raw, n); /* fits: what was reserved is at least n */
    out->size += n;
    *format = BLK__CODEC_RAW;
  } else {
    out->size += csize;
    const uint32_t method = planes ? BLK__CODEC_PLANES : BLK__CODEC_ZSTD;
    *format = method | (uint32_t)es << BLK__CODEC_ELEM_SHIFT;
  }
  return 0;
fail:
  *format = 0;
  return rc;
}

/* One zstd frame enc[0, enc_size) into exactly dst[0, n). */
static int decompress(blk__codec *c, unsigned char *dst, size_t n, const unsigned char *enc,
                      size_t enc_size) {
  unsigned long long declared = ZSTD_getFrameContentSize(enc, enc_size);
  if (declared != ZSTD_CONTENTSIZE_ERROR && declared != ZSTD_CONTENTSIZE_UNKNOWN &&
      declared != (unsigned long long)n)
    return blk__fail(BLK_ECORRUPT, "codec: zstd frame of %zu bytes holds %llu bytes, expected %zu",
                     enc_size, declared, n);
  size_t got = ZSTD_decompressDCtx(c->dctx, dst, n, enc, enc_size);
  if (ZSTD_isError(got))
    return blk__fail(BLK_ECORRUPT, "codec: zstd frame of %zu bytes, expected to hold %zu: %s",
                     enc_size, n, ZSTD_getErrorName(got));
  if (got != n)
    return blk__fail(BLK_ECORRUPT,
                     "codec: zstd frame of %zu bytes decoded to %zu bytes, expected %zu", enc_size,
                     got, n);
  return 0;
}

/* A PLANES encoding (codec.h) into raw[0, raw_size); every size is checked
 * against what is left before it is read. Frames are decompressed into
 * scratch; raw planes and the tail are unshuffled from where they lie in
 * enc (a raw plane copied to scratch first cost a copy of it per decode). */
static int decode_planes(blk__codec *c, void *raw, size_t raw_size, const unsigned char *enc,
                         size_t enc_size, uint32_t format) {
  const size_t es = BLK__CODEC_FORMAT_ELEM(format);
  if (es < 2 || es > BLK__CODEC_PLANES_MAX)
    return blk__fail(BLK_ECORRUPT, "codec: format 0x%08x: planes of element size %zu", format, es);
  const size_t plane = raw_size / es, tail = raw_size % es;
  if (plane == 0 || plane >= PLANE_ZSTD || enc_size < 4 * es)
    return blk__fail(BLK_ECORRUPT, "codec: %zu bytes of planes for %zu bytes of element size %zu",
                     enc_size, raw_size, es);
  const unsigned char *planes[BLK__CODEC_PLANES_MAX];
  const unsigned char *at = enc + 4 * es;
  size_t left = enc_size - 4 * es;
  for (size_t j = 0; j < es; j++) {
    uint32_t word = load_le32(enc + 4 * j);
    size_t size = word & ~PLANE_ZSTD;
    if (size > left)
      return blk__fail(BLK_ECORRUPT, "codec: plane %zu claims %zu bytes, %zu are left", j, size,
                       left);
    if (word & PLANE_ZSTD) {
      if (size == 0)
        return blk__fail(BLK_ECORRUPT, "codec: plane %zu is a zstd frame of 0 bytes", j);
      int rc = scratch_reserve(c, es * plane);
      if (rc) return rc;
      unsigned char *to = c->scratch + j * plane;
      if (word == PLANE_CONSTANT)
        memset(to, at[0], plane);
      else if ((rc = decompress(c, to, plane, at, size)))
        return rc;
      planes[j] = to;
    } else if (size != plane) {
      return blk__fail(BLK_ECORRUPT, "codec: raw plane %zu of %zu bytes, expected %zu", j, size,
                       plane);
    } else {
      planes[j] = at;
    }
    at += size;
    left -= size;
  }
  if (left != tail)
    return blk__fail(BLK_ECORRUPT, "codec: %zu bytes after the planes, expected %zu", left, tail);
  blk__unshuffle_planes(raw, planes, at, raw_size, es);
  return 0;
}

int blk__codec_decode(blk__codec *c, void *raw, size_t raw_size, const void *enc, size_t enc_size,
                      uint32_t format) {
  int rc = 0;
  if ((raw_size > 0 && !raw) || (enc_size > 0 && !enc)) {
    /* Nothing to zero: raw may be the NULL one. */
    return blk__fail(BLK_EINVAL,
                     "codec: decode with %s raw (raw_size %zu) and %s enc (enc_size %zu)",
                     raw ? "a" : "a NULL", raw_size, enc ? "an" : "a NULL", enc_size);
  }
  uint32_t method = BLK__CODEC_FORMAT_METHOD(format);
  size_t es = BLK__CODEC_FORMAT_ELEM(format);
  uint32_t reserved = format & ~(BLK__CODEC_METHOD_MASK | BLK__CODEC_ELEM_MASK);
  if (reserved) {
    rc = blk__fail(BLK_ECORRUPT, "codec: format 0x%08x has reserved bits 0x%08x set", format,
                   reserved);
    goto fail;
  }

  if (method == BLK__CODEC_RAW) {
    if (es != 0) {
      rc = blk__fail(BLK_ECORRUPT,
                     "codec: format 0x%08x: a raw encoding with shuffle element size %zu", format,
                     es);
      goto fail;
    }
    if (enc_size != raw_size) {
      rc = blk__fail(BLK_ECORRUPT, "codec: raw encoding of %zu bytes, expected %zu", enc_size,
                     raw_size);
      goto fail;
    }
    blk__copy(raw, enc, raw_size);
    return 0;
  }
  if (method == BLK__CODEC_PLANES) {
    rc = decode_planes(c, raw, raw_size, enc, enc_size, format);
    if (rc) goto fail;
    return 0;
  }
  if (method != BLK__CODEC_ZSTD) {
    rc = blk__fail(BLK_ECORRUPT, "codec: format 0x%08x: unknown method %u", format, method);
    goto fail;
  }
  if (es == 1) {
    rc = blk__fail(BLK_ECORRUPT, "codec: format 0x%08x: shuffle element size 1", format);
    goto fail;
  }

  if (enc_size == 0) { /* a frame is never empty; zstd would decode "nothing" */
    rc = blk__fail(BLK_ECORRUPT, "codec: zstd frame of 0 bytes, expected to hold %zu", raw_size);
    goto fail;
  }
  unsigned char none;
  unsigned char *dst = raw_size ? raw : &none;
  if (es && raw_size) {
    rc = scratch_reserve(c, raw_size);
    if (rc) goto fail;
    dst = c->scratch;
  }
  rc = decompress(c, dst, raw_size, enc, enc_size);
  if (rc) goto fail;
  if (es && raw_size) blk__unshuffle(raw, c->scratch, raw_size, es);
  return 0;
fail:
  if (raw_size) memset(raw, 0, raw_size);
  return rc;
}
