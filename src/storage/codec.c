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
 * Cost: encode is one shuffle pass (if any) plus zstd at the chosen level;
 * decode is zstd plus one unshuffle pass. Memory: the two zstd contexts
 * (a few MiB at low levels once used), scratch up to the largest shuffled
 * block, and transiently ZSTD_compressBound(n) bytes in `out`.
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
  const void *src = raw;
  if (es) {
    rc = scratch_reserve(c, n);
    if (rc) goto fail;
    blk__shuffle(c->scratch, raw, n, es);
    src = c->scratch;
  }
  size_t bound = ZSTD_compressBound(n);
  if (ZSTD_isError(bound) || bound < n) {
    rc = blk__fail(BLK_EINVAL, "codec: %zu bytes is more than zstd can compress in one frame", n);
    goto fail;
  }
  rc = blk_buffer_reserve(out, bound);
  if (rc) goto fail;
  unsigned char *dst = out->data + out->size;
  size_t csize = ZSTD_compressCCtx(c->cctx, dst, bound, src, n, c->level);
  if (ZSTD_isError(csize)) {
    int code = ZSTD_getErrorCode(csize) == ZSTD_error_memory_allocation ? BLK_ENOMEM : BLK_EINVAL;
    rc = blk__fail(code, "codec: zstd compression of %zu bytes at level %d: %s", n, c->level,
                   ZSTD_getErrorName(csize));
    goto fail;
  }
  if (csize >= n) {
    blk__copy(dst, raw, n); /* fits: bound >= n */
    out->size += n;
    *format = BLK__CODEC_RAW;
  } else {
    out->size += csize;
    *format = BLK__CODEC_ZSTD | (uint32_t)es << BLK__CODEC_ELEM_SHIFT;
  }
  return 0;
fail:
  *format = 0;
  return rc;
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
  unsigned long long declared = ZSTD_getFrameContentSize(enc, enc_size);
  if (declared != ZSTD_CONTENTSIZE_ERROR && declared != ZSTD_CONTENTSIZE_UNKNOWN &&
      declared != (unsigned long long)raw_size) {
    rc = blk__fail(BLK_ECORRUPT, "codec: zstd frame of %zu bytes holds %llu bytes, expected %zu",
                   enc_size, declared, raw_size);
    goto fail;
  }
  unsigned char none;
  void *dst = raw_size ? raw : &none;
  if (es && raw_size) {
    rc = scratch_reserve(c, raw_size);
    if (rc) goto fail;
    dst = c->scratch;
  }
  size_t got = ZSTD_decompressDCtx(c->dctx, dst, raw_size, enc, enc_size);
  if (ZSTD_isError(got)) {
    rc = blk__fail(BLK_ECORRUPT, "codec: zstd frame of %zu bytes, expected to hold %zu: %s",
                   enc_size, raw_size, ZSTD_getErrorName(got));
    goto fail;
  }
  if (got != raw_size) {
    rc =
        blk__fail(BLK_ECORRUPT, "codec: zstd frame of %zu bytes decoded to %zu bytes, expected %zu",
                  enc_size, got, raw_size);
    goto fail;
  }
  if (es && raw_size) blk__unshuffle(raw, c->scratch, raw_size, es);
  return 0;
fail:
  if (raw_size) memset(raw, 0, raw_size);
  return rc;
}
