/* test_codec: shuffle + zstd encoding. Round trips of every awkward size and
 * shape of data at several levels, raw storage of what does not compress,
 * the format word, planes compressed or kept raw one by one, and corrupt
 * input (a flipped byte, truncation, a wrong size, bad format bits, plane
 * words that lie) reported as BLK_ECORRUPT, never a crash. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "blk/blk.h"
#include "check.h"
#include "storage/checksum.h"
#include "storage/codec.h"

static uint64_t rng_state = 0xD1B54A32D192ED03ull;

static uint64_t rand64(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void fill_random(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rand64() >> 40);
}

/* A smooth 2D field, the kind of data blocks hold. */
static void fill_smooth_f32(float *v, size_t count) {
  for (size_t i = 0; i < count; i++) {
    double x = (double)(i % 256) / 40.0, y = (double)(i / 256) / 40.0;
    v[i] = (float)(sin(x) * cos(y) + 0.25 * x);
  }
}

static void fill_smooth_f64(double *v, size_t count) {
  for (size_t i = 0; i < count; i++) {
    double x = (double)(i % 256) / 40.0, y = (double)(i / 256) / 40.0;
    v[i] = sin(x) * cos(y) + 0.25 * x;
  }
}

static void fill_random_f32(float *v, size_t count) {
  for (size_t i = 0; i < count; i++) v[i] = (float)((double)(rand64() >> 11) / 9007199254740992.0);
}

/* The format a compressed encoding of n bytes shuffled by es has. */
static uint32_t compressed_format(size_t n, size_t es) {
  size_t e = es >= 2 && n / es >= 2 ? es : 0;
  int planes = e && e <= BLK__CODEC_PLANES_MAX && n / e >= BLK__CODEC_PLANE_MIN;
  return (planes ? BLK__CODEC_PLANES : BLK__CODEC_ZSTD) | (uint32_t)e << BLK__CODEC_ELEM_SHIFT;
}

/* Encodes raw[0, n) after a prefix already in the buffer, checks the format
 * word and the size, decodes with `dec` (and the encoder), and compares.
 * Returns the encoded size. */
static size_t round_trip(blk__codec *enc_codec, blk__codec *dec, const void *raw, size_t n,
                         size_t es, uint32_t *format_out) {
  blk_buffer out = BLK_BUFFER_INIT;
  CHECK_OK(blk_buffer_write(&out, "prefix", 6));
  uint32_t format = 0xFFFFFFFFu;
  CHECK_OK(blk__codec_encode(enc_codec, &out, raw, n, es, &format));
  CHECK(memcmp(out.data, "prefix", 6) == 0);
  size_t enc_size = out.size - 6;
  CHECK_MSG(enc_size <= n, "n=%zu es=%zu: encoding of %zu bytes", n, es, enc_size);

  uint32_t method = BLK__CODEC_FORMAT_METHOD(format);
  size_t fes = BLK__CODEC_FORMAT_ELEM(format);
  CHECK_EQ_INT(format & ~(BLK__CODEC_METHOD_MASK | BLK__CODEC_ELEM_MASK), 0);
  if (method == BLK__CODEC_RAW) {
    CHECK_EQ_INT(fes, 0);
    CHECK_EQ_INT(enc_size, n);
    if (n) CHECK(memcmp(out.data + 6, raw, n) == 0);
  } else {
    CHECK_EQ_INT(format, compressed_format(n, es));
    CHECK(enc_size < n);
  }
  if (blk__codec_level(enc_codec) == BLK__CODEC_STORE) CHECK_EQ_INT(method, BLK__CODEC_RAW);

  uint8_t *back = malloc(n + 1);
  CHECK(back);
  blk__codec *decs[2] = {dec, enc_codec};
  for (int d = 0; d < 2; d++) {
    memset(back, 0xEE, n + 1);
    CHECK_OK(blk__codec_decode(decs[d], n ? back : NULL, n, out.data + 6, enc_size, format));
    if (n)
      CHECK_MSG(memcmp(back, raw, n) == 0, "n=%zu es=%zu format 0x%x: decoded bytes differ", n, es,
                format);
    CHECK_EQ_INT(back[n], 0xEE);
  }
  free(back);
  blk_buffer_free(&out);
  if (format_out) *format_out = format;
  return enc_size;
}

static void test_create(void) {
  blk__codec *c = (blk__codec *)&c; /* must be reset to NULL on failure */
  CHECK_ERR(blk__codec_create(&c, 0), BLK_EINVAL, "level 0");
  CHECK(c == NULL);
  CHECK_ERR(blk__codec_create(&c, 23), BLK_EINVAL, "..22");
  CHECK_ERR(blk__codec_create(&c, INT_MAX), BLK_EINVAL, "range");
  CHECK_ERR(blk__codec_create(&c, INT_MIN + 1), BLK_EINVAL, "range");
  CHECK_ERR(blk__codec_create(&c, -1000000), BLK_EINVAL, "BLK__CODEC_STORE");
  const int ok_levels[] = {BLK__CODEC_STORE, -131072, -5, -1, 1, 3, 19, 22};
  for (size_t i = 0; i < sizeof ok_levels / sizeof *ok_levels; i++) {
    CHECK_OK(blk__codec_create(&c, ok_levels[i]));
    CHECK(c != NULL);
    CHECK_EQ_INT(blk__codec_level(c), ok_levels[i]);
    blk__codec_destroy(c);
  }
  blk__codec_destroy(NULL);

  const char *v = blk__codec_zstd_version();
  CHECK(v && strchr(v, '.') != NULL);
}

static void test_sizes(blk__codec *c, blk__codec *dec) {
  int store = blk__codec_level(c) == BLK__CODEC_STORE;
  uint8_t *buf = malloc(1 << 16);
  CHECK(buf);
  /* empty: NULL is fine, stored raw, nothing appended */
  uint32_t f = 0;
  CHECK_EQ_INT(round_trip(c, dec, NULL, 0, 0, &f), 0);
  CHECK_EQ_INT(f, BLK__CODEC_RAW);
  CHECK_EQ_INT(round_trip(c, dec, NULL, 0, 4, &f), 0);
  CHECK_EQ_INT(f, BLK__CODEC_RAW);

  /* 1 byte, odd sizes, every shuffle size, compressible and not */
  const size_t es_list[] = {0, 1, 2, 3, 4, 5, 8, 12, 16};
  for (size_t n = 1; n <= 67; n++) {
    for (size_t e = 0; e < sizeof es_list / sizeof *es_list; e++) {
      fill_random(buf, n);
      round_trip(c, dec, buf, n, es_list[e], NULL);
      memset(buf, 'a', n);
      round_trip(c, dec, buf, n, es_list[e], NULL);
    }
  }
  /* 0..3 tail bytes after whole 4-byte elements, 0..7 after 8-byte ones,
   * on compressible data so the shuffled zstd path is taken */
  float *fv = malloc(4096 * sizeof *fv);
  double *dv = malloc(4096 * sizeof *dv);
  CHECK(fv && dv);
  fill_smooth_f32(fv, 4096);
  fill_smooth_f64(dv, 4096);
  for (size_t t = 0; t < 8; t++) {
    size_t n4 = 4000 * 4 + (t % 4), n8 = 2000 * 8 + t;
    size_t e4 = round_trip(c, dec, fv, n4, 4, &f);
    if (!store) CHECK(e4 < n4 && f == (BLK__CODEC_ZSTD | 4u << 8));
    size_t e8 = round_trip(c, dec, dv, n8, 8, &f);
    if (!store) CHECK(e8 < n8 && f == (BLK__CODEC_ZSTD | 8u << 8));
  }
  /* a large odd size with an odd element size */
  for (size_t i = 0; i < (1 << 16); i++) buf[i] = (uint8_t)(i / 3 + (i % 3) * 50);
  round_trip(c, dec, buf, (1 << 16) - 1, 3, NULL);
  free(fv);
  free(dv);
  free(buf);
}

/* Fields of floats and doubles: smooth ones compress, and better shuffled;
 * random bytes do not compress and are stored raw. */
static void test_fields(blk__codec *c, blk__codec *dec) {
  int store = blk__codec_level(c) == BLK__CODEC_STORE;
  const size_t count = 1 << 16;
  float *f = malloc(count * sizeof *f);
  double *d = malloc(count * sizeof *d);
  uint8_t *noise = malloc(count * 4);
  CHECK(f && d && noise);
  uint32_t fmt = 0;

  fill_smooth_f32(f, count);
  size_t plain = round_trip(c, dec, f, count * 4, 0, NULL);
  size_t shuffled = round_trip(c, dec, f, count * 4, 4, &fmt);
  if (!store) {
    CHECK_EQ_INT(fmt, compressed_format(count * 4, 4));
    CHECK_MSG(shuffled < plain, "smooth float32: %zu bytes shuffled, %zu not", shuffled, plain);
  }

  fill_smooth_f64(d, count);
  plain = round_trip(c, dec, d, count * 8, 0, NULL);
  shuffled = round_trip(c, dec, d, count * 8, 8, &fmt);
  if (!store) {
    CHECK_EQ_INT(fmt, compressed_format(count * 8, 8));
    CHECK_MSG(shuffled < plain, "smooth float64: %zu bytes shuffled, %zu not", shuffled, plain);
  }

  /* random floats in [0, 1): the exponent bytes still compress */
  fill_random_f32(f, count);
  round_trip(c, dec, f, count * 4, 4, NULL);
  round_trip(c, dec, f, count * 4, 0, NULL);
  for (size_t i = 0; i < count; i++) d[i] = (double)(rand64() >> 11) * 1e-3;
  round_trip(c, dec, d, count * 8, 8, NULL);

  /* incompressible: stored raw, exactly n bytes */
  fill_random(noise, count * 4);
  for (size_t es = 0; es <= 8; es += 4) {
    CHECK_EQ_INT(round_trip(c, dec, noise, count * 4, es, &fmt), count * 4);
    CHECK_EQ_INT(fmt, BLK__CODEC_RAW);
  }
  /* zeros compress to almost nothing */
  memset(noise, 0, count * 4);
  size_t z = round_trip(c, dec, noise, count * 4, 4, NULL);
  if (!store) CHECK_MSG(z < 1024, "64 Ki zero floats encode to %zu bytes", z);
  free(f);
  free(d);
  free(noise);
}

/* Encoding appends: several encodings in one buffer, then decoding each. */
static void test_append(blk__codec *c) {
  blk_buffer out = BLK_BUFFER_INIT;
  float f[1000];
  uint8_t noise[333];
  fill_smooth_f32(f, 1000);
  fill_random(noise, sizeof noise);
  size_t off[4], len[4];
  uint32_t fmt[4];
  const void *src[4] = {f, noise, f, NULL};
  size_t n[4] = {sizeof f, sizeof noise, sizeof f - 3, 0};
  size_t es[4] = {4, 0, 4, 8};
  for (int i = 0; i < 4; i++) {
    off[i] = out.size;
    CHECK_OK(blk__codec_encode(c, &out, src[i], n[i], es[i], &fmt[i]));
    len[i] = out.size - off[i];
  }
  uint8_t back[sizeof f];
  for (int i = 0; i < 4; i++) {
    CHECK_OK(blk__codec_decode(c, back, n[i], out.data + off[i], len[i], fmt[i]));
    if (n[i]) CHECK(memcmp(back, src[i], n[i]) == 0);
  }
  blk_buffer_free(&out);
}

static void test_encode_errors(blk__codec *c) {
  blk_buffer out = BLK_BUFFER_INIT;
  uint8_t data[64] = {0};
  uint32_t fmt = 77;
  CHECK_ERR(blk__codec_encode(c, &out, data, sizeof data, (size_t)BLK__CODEC_ELEM_MAX + 1, &fmt),
            BLK_EINVAL, "65536");
  CHECK_EQ_INT(fmt, 0);
  CHECK_EQ_INT(out.size, 0);
  CHECK_ERR(blk__codec_encode(c, &out, NULL, 5, 0, &fmt), BLK_EINVAL, "NULL");
  CHECK_EQ_INT(out.size, 0);
  /* the largest element size is fine */
  CHECK_OK(blk__codec_encode(c, &out, data, sizeof data, BLK__CODEC_ELEM_MAX, &fmt));
  blk_buffer_clear(&out);
  /* a buffer with a sticky error: encode does nothing and returns it */
  uint8_t one;
  CHECK_ERR(blk_buffer_read(&out, &one, 1), BLK_ERANGE, "");
  CHECK_EQ_INT(blk__codec_encode(c, &out, data, sizeof data, 4, &fmt), BLK_ERANGE);
  CHECK_EQ_INT(out.size, 0);
  CHECK_EQ_INT(fmt, 0);
  blk_buffer_free(&out);
}

/* Expects decode to fail with `code` and a detail containing `text`, and raw
 * to be zeroed. */
static void expect_bad(blk__codec *c, size_t raw_size, const void *enc, size_t enc_size,
                       uint32_t format, int code, const char *text) {
  uint8_t *raw = malloc(raw_size + 1);
  CHECK(raw);
  memset(raw, 0xCC, raw_size + 1);
  CHECK_ERR(blk__codec_decode(c, raw, raw_size, enc, enc_size, format), code, text);
  for (size_t i = 0; i < raw_size; i++) CHECK_MSG(raw[i] == 0, "byte %zu not zeroed", i);
  CHECK_EQ_INT(raw[raw_size], 0xCC);
  free(raw);
}

static void test_corrupt(blk__codec *c) {
  const size_t count = 4096, n = count * sizeof(float);
  float *f = malloc(n);
  float *back = malloc(n);
  CHECK(f && back);
  fill_smooth_f32(f, count);
  blk_buffer out = BLK_BUFFER_INIT;
  uint32_t fmt = 0;
  CHECK_OK(blk__codec_encode(c, &out, f, n, 4, &fmt));
  CHECK_EQ_INT(fmt, BLK__CODEC_ZSTD | 4u << 8);
  uint8_t *enc = out.data;
  size_t es = out.size;

  /* wrong raw size, either way */
  expect_bad(c, n - 1, enc, es, fmt, BLK_ECORRUPT, "expected 16383");
  expect_bad(c, n + 1, enc, es, fmt, BLK_ECORRUPT, "expected 16385");
  expect_bad(c, 0, enc, es, fmt, BLK_ECORRUPT, "expected 0");

  /* truncated, to every length: always caught, by zstd (its error name in
   * the detail) or by the size checks */
  for (size_t t = 0; t < es; t++) expect_bad(c, n, enc, t, fmt, BLK_ECORRUPT, "codec: zstd");
  expect_bad(c, n, enc, 3, fmt, BLK_ECORRUPT, "Src size is incorrect");
  /* trailing garbage */
  uint8_t *longer = malloc(es + 8);
  CHECK(longer);
  memcpy(longer, enc, es);
  memset(longer + es, 0x42, 8);
  expect_bad(c, n, longer, es + 8, fmt, BLK_ECORRUPT, "codec: zstd");
  free(longer);

  /* bad format bits */
  expect_bad(c, n, enc, es, fmt | 0x10u, BLK_ECORRUPT, "reserved bits 0x00000010");
  expect_bad(c, n, enc, es, fmt | 0x80000000u, BLK_ECORRUPT, "reserved bits 0x80000000");
  expect_bad(c, n, enc, es, (fmt & ~BLK__CODEC_METHOD_MASK) | 3u, BLK_ECORRUPT, "unknown method 3");
  expect_bad(c, n, enc, es, 0xFu, BLK_ECORRUPT, "unknown method 15");
  expect_bad(c, n, enc, es, BLK__CODEC_ZSTD | 1u << 8, BLK_ECORRUPT, "element size 1");
  expect_bad(c, n, enc, es, BLK__CODEC_RAW | 4u << 8, BLK_ECORRUPT, "raw encoding with shuffle");
  /* a zstd frame read as raw, and raw bytes read as a zstd frame */
  expect_bad(c, n, enc, es, BLK__CODEC_RAW, BLK_ECORRUPT, "expected 16384");
  expect_bad(c, n, f, n, BLK__CODEC_ZSTD, BLK_ECORRUPT, "Unknown frame descriptor");
  /* a wrong element size decodes to the right size but the wrong bytes:
   * nothing in the encoding can tell; the record checksum of storage does */
  CHECK_OK(blk__codec_decode(c, back, n, enc, es, BLK__CODEC_ZSTD | 8u << 8));
  CHECK(memcmp(back, f, n) != 0);

  /* A flipped magic byte is always an error. */
  uint8_t *bad = malloc(es);
  CHECK(bad);
  memcpy(bad, enc, es);
  bad[0] ^= 0x01;
  expect_bad(c, n, bad, es, fmt, BLK_ECORRUPT, "Unknown frame descriptor");

  /* Flip each byte of the frame in turn (every bit pattern 0xFF): decoding
   * never crashes or writes outside raw (the sanitizer builds check), and
   * either fails with BLK_ECORRUPT and zeroed output or succeeds. zstd
   * frames carry no checksum here, so a flip inside literals can decode to
   * other bytes; storage checksums every encoding with blk__checksum, which
   * catches every one of these flips, as the last check shows. */
  uint64_t good_sum = blk__checksum(enc, es, 0);
  size_t caught = 0;
  for (size_t i = 0; i < es; i++) {
    memcpy(bad, enc, es);
    bad[i] ^= 0xFF;
    memset(back, 0xCC, n);
    int rc = blk__codec_decode(c, back, n, bad, es, fmt);
    CHECK_MSG(rc == 0 || rc == BLK_ECORRUPT, "flip at %zu: rc %d", i, rc);
    if (rc == BLK_ECORRUPT) {
      caught++;
      for (size_t k = 0; k < count; k++) CHECK(back[k] == 0.0f);
    }
    CHECK_MSG(blk__checksum(bad, es, 0) != good_sum, "flip at %zu passes the checksum", i);
  }
  CHECK(caught > 0);
  printf("test_codec: zstd itself caught %zu of %zu single-byte flips; the checksum all\n", caught,
         es);

  /* NULL pointers with sizes */
  CHECK_ERR(blk__codec_decode(c, NULL, 4, enc, es, fmt), BLK_EINVAL, "NULL raw");
  CHECK_ERR(blk__codec_decode(c, back, 4, NULL, 4, BLK__CODEC_RAW), BLK_EINVAL, "NULL enc");
  /* empty is fine stored raw; an empty "zstd frame" is not a frame */
  CHECK_OK(blk__codec_decode(c, NULL, 0, NULL, 0, BLK__CODEC_RAW));
  CHECK_ERR(blk__codec_decode(c, NULL, 0, NULL, 0, BLK__CODEC_ZSTD), BLK_ECORRUPT, "0 bytes");

  /* the codec still works after all that */
  CHECK_OK(blk__codec_decode(c, back, n, enc, es, fmt));
  CHECK(memcmp(back, f, n) == 0);
  free(bad);
  free(f);
  free(back);
  blk_buffer_free(&out);
}

/* Elements whose byte 0 is noise and whose other bytes follow the index
 * slowly: plane 0 does not compress, the others do. */
static void fill_planes(uint8_t *p, size_t count, size_t es) {
  for (size_t i = 0; i < count; i++) {
    p[i * es] = (uint8_t)(rand64() >> 40);
    for (size_t j = 1; j < es; j++) p[i * es + j] = (uint8_t)((i >> (6 + j)) + j);
  }
}

/* Planes: each compressed or kept raw on its own, the words saying which,
 * any tail, and the element sizes and plane sizes that use them. */
static void test_planes(blk__codec *c, blk__codec *dec) {
  const size_t count = (size_t)1 << 17; /* elements: planes of 128 KiB */
  uint8_t *p = malloc(count * 16 + 16);
  CHECK(p);
  for (size_t es = 2; es <= 16; es += 2) {
    fill_planes(p, count, es);
    for (size_t t = 0; t < es; t++) p[count * es + t] = (uint8_t)(t * 29 + 3); /* a tail */
    for (size_t tail = 0; tail < es; tail += es - 1) {
      size_t n = count * es + tail;
      blk_buffer out = BLK_BUFFER_INIT;
      uint32_t fmt = 0;
      CHECK_OK(blk__codec_encode(c, &out, p, n, es, &fmt));
      CHECK_EQ_INT(fmt, BLK__CODEC_PLANES | (uint32_t)es << 8);
      /* plane 0 raw, the others zstd frames; the sizes add up */
      size_t sum = 4 * es + tail;
      for (size_t j = 0; j < es; j++) {
        const uint8_t *w = out.data + 4 * j;
        uint32_t word =
            (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
        CHECK_MSG(j == 0 ? word == count
                         : (word >> 31) == 1 && (word & 0x7FFFFFFFu) * 1.1 <= (double)count,
                  "es %zu plane %zu: word 0x%08x", es, j, word);
        sum += word & 0x7FFFFFFFu;
      }
      CHECK_EQ_INT(out.size, sum);
      round_trip(c, dec, p, n, es, NULL);
      blk_buffer_free(&out);
    }
  }
  /* Planes below the minimum, or more than PLANES_MAX of them: one frame. */
  uint32_t fmt = 0;
  fill_planes(p, count, 16);
  round_trip(c, dec, p, 4 * (BLK__CODEC_PLANE_MIN - 1), 4, &fmt);
  CHECK_EQ_INT(fmt, BLK__CODEC_ZSTD | 4u << 8);
  round_trip(c, dec, p, 17 * BLK__CODEC_PLANE_MIN, 17, &fmt);
  CHECK_EQ_INT(fmt, BLK__CODEC_ZSTD | 17u << 8);
  /* Every plane noise: stored raw, and it cost only the samples. */
  fill_random(p, count * 4);
  CHECK_EQ_INT(round_trip(c, dec, p, count * 4, 4, &fmt), count * 4);
  CHECK_EQ_INT(fmt, BLK__CODEC_RAW);
  free(p);
}

/* Planes kept raw and planes compressed in any order: 'N' noise (raw by its
 * sample), 'C' compressible (a frame), 'S' noise but for the 32 KiB in the
 * middle that the sample reads (the sample pays, the frame does not: raw
 * after trying). The encoder shuffles the raw planes that lead straight
 * into the encoding and copies the others from scratch; every layout must
 * say what each plane is, add up, and decode to the input. */
static void test_planes_layouts(blk__codec *c, blk__codec *dec) {
  const size_t count = (size_t)1 << 19, sample = 32768, mid = (count - sample) / 2;
  const char *layouts[] = {"NNCC", "CNCN",     "NCNS",     "SNNC",     "CCCN",     "NNNC",
                           "SCCS", "NNNNNNCC", "CNNNNNNN", "NSCNSCNN", "NNCNNCNN", "NNCSNC"};
  uint8_t *p = malloc(count * 8 + 8);
  CHECK(p);
  for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++) {
    const char *kind = layouts[l];
    const size_t es = strlen(kind), tail = l % 3 == 0 ? 0 : es - 1, n = count * es + tail;
    for (size_t i = 0; i < count; i++)
      for (size_t j = 0; j < es; j++) {
        uint8_t noise = (uint8_t)(rand64() >> 40);
        int quiet = kind[j] == 'C' || (kind[j] == 'S' && i >= mid && i < mid + sample);
        p[i * es + j] = quiet ? (uint8_t)((i >> 9) + j) : noise;
      }
    for (size_t t = 0; t < tail; t++) p[count * es + t] = (uint8_t)(t * 37 + 1);
    blk_buffer out = BLK_BUFFER_INIT;
    uint32_t fmt = 0;
    CHECK_OK(blk__codec_encode(c, &out, p, n, es, &fmt));
    CHECK_MSG(fmt == (BLK__CODEC_PLANES | (uint32_t)es << 8), "layout %s: format 0x%08x", kind,
              fmt);
    size_t sum = 4 * es + tail;
    for (size_t j = 0; j < es; j++) {
      const uint8_t *w = out.data + 4 * j;
      uint32_t word =
          (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
      CHECK_MSG(kind[j] == 'C' ? (word >> 31) == 1 && (word & 0x7FFFFFFFu) * 1.1 <= (double)count
                               : word == count,
                "layout %s plane %zu: word 0x%08x", kind, j, word);
      sum += word & 0x7FFFFFFFu;
    }
    CHECK_EQ_INT(out.size, sum);
    /* The raw planes hold the plane's bytes, where the words put them. */
    const uint8_t *at = out.data + 4 * es;
    for (size_t j = 0; j < es; j++) {
      const uint8_t *w = out.data + 4 * j;
      uint32_t word =
          (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
      if (!(word >> 31))
        for (size_t i = 0; i < count; i += 1 + i / 1000)
          CHECK_MSG(at[i] == p[i * es + j], "layout %s raw plane %zu byte %zu", kind, j, i);
      at += word & 0x7FFFFFFFu;
    }
    CHECK(memcmp(at, p + count * es, tail) == 0);
    round_trip(c, dec, p, n, es, NULL);
    blk_buffer_free(&out);
  }
  free(p);
}

/* Constant planes: a plane whose every byte is one value is that byte in
 * the encoding (its word PLANE_ZSTD | 1); one that is constant only in the
 * middle, where the sample reads, or everywhere but one byte at either end,
 * is a frame or raw like any other. Every case decodes to its input. */
static void test_planes_constant(blk__codec *c, blk__codec *dec) {
  const size_t count = (size_t)1 << 17, es = 8, sample = 32768, mid = (count - sample) / 2;
  uint8_t *p = malloc(count * es + es);
  CHECK(p);
  /* counts below 2^16 with byte 5 always 0xAB: planes 2..7 constant */
  for (size_t i = 0; i < count; i++) {
    uint64_t v = (rand64() % 7 == 0 ? rand64() % 60000 : 0) | (uint64_t)0xAB << 40;
    for (size_t j = 0; j < es; j++) p[i * es + j] = (uint8_t)(v >> (8 * j));
  }
  for (size_t tail = 0; tail < es; tail += es - 1) {
    const size_t n = count * es + tail;
    for (size_t t = 0; t < tail; t++) p[count * es + t] = (uint8_t)(t + 1);
    blk_buffer out = BLK_BUFFER_INIT;
    uint32_t fmt = 0;
    CHECK_OK(blk__codec_encode(c, &out, p, n, es, &fmt));
    CHECK_EQ_INT(fmt, BLK__CODEC_PLANES | (uint32_t)es << 8);
    const uint8_t *at = out.data + 4 * es;
    for (size_t j = 0; j < es; j++) {
      const uint8_t *w = out.data + 4 * j;
      uint32_t word =
          (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
      if (j >= 2) {
        CHECK_MSG(word == 0x80000001u, "plane %zu: word 0x%08x", j, word);
        CHECK_EQ_INT(at[0], j == 5 ? 0xAB : 0);
      } else {
        CHECK_MSG(word != 0x80000001u, "plane %zu varies but is called constant", j);
      }
      at += word & 0x7FFFFFFFu;
    }
    CHECK_EQ_INT(out.size, (size_t)(at - out.data) + tail);
    round_trip(c, dec, p, n, es, NULL);
    blk_buffer_free(&out);
  }
  /* constant where the sample reads, or but for the first or last byte */
  const size_t odd[] = {0, mid - 1, mid + sample, count - 1};
  for (size_t o = 0; o < sizeof odd / sizeof *odd; o++) {
    for (size_t i = 0; i < count; i++) p[i * es + 6] = 0;
    if (o == 1 || o == 2) /* noise outside the sample */
      for (size_t i = 0; i < count; i++)
        if (i < mid || i >= mid + sample) p[i * es + 6] = (uint8_t)(rand64() >> 40);
    p[odd[o] * es + 6] = 0x5A;
    blk_buffer out = BLK_BUFFER_INIT;
    uint32_t fmt = 0;
    CHECK_OK(blk__codec_encode(c, &out, p, count * es, es, &fmt));
    if (fmt == (BLK__CODEC_PLANES | (uint32_t)es << 8)) {
      const uint8_t *w = out.data + 4 * 6;
      uint32_t word =
          (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
      CHECK_MSG(word != 0x80000001u, "plane 6 with a byte at %zu called constant", odd[o]);
    }
    round_trip(c, dec, p, count * es, es, NULL);
    blk_buffer_free(&out);
  }
  /* a constant plane whose byte is missing from the end */
  for (size_t i = 0; i < count; i++) p[i * es + 7] = 0;
  blk_buffer out = BLK_BUFFER_INIT;
  uint32_t fmt = 0;
  CHECK_OK(blk__codec_encode(c, &out, p, count * es, es, &fmt));
  CHECK_EQ_INT(out.data[4 * 7 + 3], 0x80);
  CHECK_EQ_INT(out.data[4 * 7], 1);
  expect_bad(c, count * es, out.data, out.size - 1, fmt, BLK_ECORRUPT, "claims 1 bytes");
  blk_buffer_free(&out);
  free(p);
}

/* A PLANES encoding that lies: every lie is BLK_ECORRUPT with the raw bytes
 * zeroed, never a read or write out of bounds. */
static void test_planes_corrupt(blk__codec *c) {
  const size_t es = 4, count = (size_t)1 << 16, n = count * es + 3;
  uint8_t *p = malloc(n), *bad = NULL, *back = malloc(n);
  CHECK(p && back);
  fill_planes(p, count, es);
  p[n - 3] = 5, p[n - 2] = 6, p[n - 1] = 7; /* the tail */
  blk_buffer out = BLK_BUFFER_INIT;
  uint32_t fmt = 0;
  CHECK_OK(blk__codec_encode(c, &out, p, n, es, &fmt));
  CHECK_EQ_INT(fmt, BLK__CODEC_PLANES | 4u << 8);
  const size_t len = out.size;
  bad = malloc(len + 8);
  CHECK(bad);
  /* sizes and element sizes that do not fit */
  expect_bad(c, n - 4, out.data, len, fmt, BLK_ECORRUPT, "");
  expect_bad(c, n + 1, out.data, len, fmt, BLK_ECORRUPT, "");
  expect_bad(c, 3, out.data, len, fmt, BLK_ECORRUPT, "bytes of planes");
  expect_bad(c, n, out.data, 15, fmt, BLK_ECORRUPT, "bytes of planes");
  expect_bad(c, n, out.data, len, BLK__CODEC_PLANES | 1u << 8, BLK_ECORRUPT, "element size 1");
  expect_bad(c, n, out.data, len, BLK__CODEC_PLANES, BLK_ECORRUPT, "element size 0");
  expect_bad(c, n, out.data, len, BLK__CODEC_PLANES | 17u << 8, BLK_ECORRUPT, "element size 17");
  /* truncated anywhere, or longer */
  for (size_t t = 16; t < len; t += 1 + t / 64)
    expect_bad(c, n, out.data, t, fmt, BLK_ECORRUPT, "");
  memcpy(bad, out.data, len);
  memset(bad + len, 0x42, 8);
  expect_bad(c, n, bad, len + 8, fmt, BLK_ECORRUPT, "after the planes");
  /* plane words that lie: too large, a raw plane of the wrong size, an
   * empty frame, a frame read as raw */
  const uint32_t lies[] = {0x7FFFFFFFu, 100u, 0x80000000u, 0x0u};
  const char *says[] = {"claims", "raw plane 1", "0 bytes", "raw plane 1"};
  for (int l = 0; l < 4; l++) {
    memcpy(bad, out.data, len);
    for (int i = 0; i < 4; i++) bad[4 + i] = (uint8_t)(lies[l] >> (8 * i));
    expect_bad(c, n, bad, len, fmt, BLK_ECORRUPT, says[l]);
  }
  /* every byte flipped in turn: an error with zeroed output, or a decode */
  for (size_t i = 0; i < len; i += 1 + i / 256) {
    memcpy(bad, out.data, len);
    bad[i] ^= 0xFF;
    memset(back, 0xCC, n);
    int rc = blk__codec_decode(c, back, n, bad, len, fmt);
    CHECK_MSG(rc == 0 || rc == BLK_ECORRUPT, "flip at %zu: rc %d", i, rc);
    if (rc)
      for (size_t k = 0; k < n; k++) CHECK(back[k] == 0);
  }
  /* and the codec still decodes the good one */
  CHECK_OK(blk__codec_decode(c, back, n, out.data, len, fmt));
  CHECK(memcmp(back, p, n) == 0);
  blk_buffer_free(&out);
  free(bad);
  free(back);
  free(p);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_create();

  blk__codec *dec = NULL;
  CHECK_OK(blk__codec_create(&dec, BLK__CODEC_STORE)); /* any codec decodes anything */
  const int levels[] = {1, 3, -1, -5, -50, 9, BLK__CODEC_STORE};
  for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
    blk__codec *c = NULL;
    CHECK_OK(blk__codec_create(&c, levels[i]));
    test_sizes(c, dec);
    test_fields(c, dec);
    test_append(c);
    test_encode_errors(c);
    if (levels[i] != BLK__CODEC_STORE) test_planes(c, dec);
    blk__codec_destroy(c);
  }

  blk__codec *c = NULL;
  CHECK_OK(blk__codec_create(&c, BLK__CODEC_DEFAULT_LEVEL));
  test_corrupt(c);
  test_planes_layouts(c, dec);
  test_planes_constant(c, dec);
  test_planes_corrupt(c);
  blk__codec_destroy(c);
  blk__codec_destroy(dec);
  printf("test_codec: ok\n");
  return 0;
}
