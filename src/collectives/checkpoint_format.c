/*
 * checkpoint_format.c: the bytes of a checkpoint file; see
 * checkpoint_format.h and docs/checkpoint.md (which lists every field).
 *
 * Encoding is by explicit little-endian stores at fixed offsets, never a
 * struct written whole, so the layout does not depend on the compiler's
 * padding or the machine's byte order. Decoding checks every field that
 * an offset or a size is later computed from, without overflow, so a file
 * whose checksums pass but whose numbers do not add up is refused before
 * anything is read from it.
 */
#include "collectives/checkpoint_format.h"

#include <string.h>

#include "base/fail.h"
#include "base/le64.h"
#include "storage/checksum.h"

_Static_assert(BLK_MAX_DIM == 8, "format version 1 stores 8 axes per link");

static const unsigned char magic[8] = {'B', 'L', 'K', 'C', 'K', 'P', 'T', '\0'};
static const unsigned char record_magic[4] = {'B', 'L', 'K', 'R'};

static size_t round_bytes; /* 0: the default */

size_t blk__ckpt_round_bytes(void) {
  return round_bytes ? round_bytes : (size_t)64 << 20;
}

void blk__ckpt_set_round_bytes(size_t bytes) {
  round_bytes = bytes;
}

static void store_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t load_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_f64(unsigned char *p, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  blk__store_le64(p, bits);
}

static double load_f64(const unsigned char *p) {
  uint64_t bits = blk__load_le64(p);
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

uint64_t blk__ckpt_checksum(blk__ckpt_part part, int gid, const void *data, size_t n) {
  /* Distinct seeds per part, and per gid for a block's parts. */
  uint64_t seed = 0x626c6b636b707400u ^ ((uint64_t)part << 56) ^ (uint64_t)(uint32_t)gid;
  return blk__checksum(data, n, seed);
}

void blk__ckpt_header_encode(unsigned char *out, const blk__ckpt_header *h) {
  memset(out, 0, BLK__CKPT_HEADER_BYTES);
  memcpy(out, magic, sizeof magic);
  store_le32(out + 8, h->version);
  store_le32(out + 12, BLK__CKPT_HEADER_BYTES);
  uint32_t bom = BLK__CKPT_BOM; /* in this machine's order, on purpose */
  memcpy(out + 16, &bom, sizeof bom);
  store_le32(out + 20, h->writer_ranks);
  blk__store_le64(out + 24, h->nblocks);
  blk__store_le64(out + 32, h->extra_offset);
  blk__store_le64(out + 40, h->extra_bytes);
  blk__store_le64(out + 48, h->extra_checksum);
  blk__store_le64(out + 56, h->index_offset);
  blk__store_le64(out + 64, h->index_bytes);
  blk__store_le64(out + 72, h->index_checksum);
  blk__store_le64(out + 80, h->data_offset);
  blk__store_le64(out + 88, h->file_bytes);
  /* 96-119 reserved, zero */
  size_t body = BLK__CKPT_HEADER_BYTES - 8;
  blk__store_le64(out + body, blk__ckpt_checksum(BLK__CKPT_PART_HEADER, -1, out, body));
}

int blk__ckpt_header_size(size_t *bytes, const unsigned char *prefix, const char *label) {
  *bytes = 0;
  if (memcmp(prefix, magic, sizeof magic) != 0)
    return blk__fail(
        BLK_ECORRUPT,
        "%s is not a blk checkpoint: it starts with %02x %02x %02x %02x, not \"BLKCKPT\"", label,
        prefix[0], prefix[1], prefix[2], prefix[3]);
  uint32_t n = load_le32(prefix + 12);
  if (n < BLK__CKPT_PREFIX_BYTES + 8 || n > BLK__CKPT_HEADER_MAX)
    return blk__fail(BLK_ECORRUPT, "%s: the header says it is %u bytes long", label, n);
  *bytes = n;
  return BLK_OK;
}

/* a + b <= limit, without overflow. */
static int fits(uint64_t a, uint64_t b, uint64_t limit) {
  return a <= limit && b <= limit - a;
}

int blk__ckpt_header_decode(blk__ckpt_header *h, const unsigned char *in, size_t n,
                            uint64_t file_bytes, const char *label) {
  memset(h, 0, sizeof *h);
  uint64_t sum = blk__load_le64(in + n - 8);
  if (sum != blk__ckpt_checksum(BLK__CKPT_PART_HEADER, -1, in, n - 8))
    return blk__fail(BLK_ECORRUPT, "%s: the header fails its checksum", label);
  h->version = load_le32(in + 8);
  if (h->version != BLK__CKPT_VERSION)
    return blk__fail(BLK_EINVAL, "%s has format version %u; this blk reads version %u", label,
                     h->version, BLK__CKPT_VERSION);
  if (n != BLK__CKPT_HEADER_BYTES)
    return blk__fail(BLK_ECORRUPT, "%s: a version %u header of %zu bytes, not %d", label,
                     h->version, n, BLK__CKPT_HEADER_BYTES);
  uint32_t bom;
  memcpy(&bom, in + 16, sizeof bom);
  if (bom == __builtin_bswap32(BLK__CKPT_BOM)) {
    uint32_t probe = 1;
    unsigned char first;
    memcpy(&first, &probe, 1);
    return blk__fail(BLK_EINVAL,
                     "%s was written on a %s-endian machine and this one is %s-endian: the "
                     "blocks' saved bytes are in the writer's byte order, which blk cannot convert",
                     label, first ? "big" : "little", first ? "little" : "big");
  }
  if (bom != BLK__CKPT_BOM)
    return blk__fail(BLK_ECORRUPT, "%s: the byte-order mark is %08x", label, bom);
  h->writer_ranks = load_le32(in + 20);
  h->nblocks = blk__load_le64(in + 24);
  h->extra_offset = blk__load_le64(in + 32);
  h->extra_bytes = blk__load_le64(in + 40);
  h->extra_checksum = blk__load_le64(in + 48);
  h->index_offset = blk__load_le64(in + 56);
  h->index_bytes = blk__load_le64(in + 64);
  h->index_checksum = blk__load_le64(in + 72);
  h->data_offset = blk__load_le64(in + 80);
  h->file_bytes = blk__load_le64(in + 88);
  if (file_bytes != h->file_bytes)
    return blk__fail(BLK_ECORRUPT, "%s is %llu bytes, but its header says %llu%s", label,
                     (unsigned long long)file_bytes, (unsigned long long)h->file_bytes,
                     file_bytes < h->file_bytes ? " (truncated)" : "");
  if (h->nblocks > (uint64_t)INT32_MAX || h->index_bytes != h->nblocks * BLK__CKPT_ENTRY_BYTES ||
      h->extra_offset != BLK__CKPT_HEADER_BYTES ||
      !fits(h->extra_offset, h->extra_bytes, h->index_offset) ||
      h->data_offset != h->extra_offset + h->extra_bytes || h->data_offset > h->index_offset ||
      !fits(h->index_offset, h->index_bytes, h->file_bytes) ||
      h->index_offset + h->index_bytes != h->file_bytes)
    return blk__fail(
        BLK_ECORRUPT,
        "%s: the header's numbers do not add up (%llu blocks, extra %llu+%llu, data at "
        "%llu, index %llu+%llu, %llu bytes)",
        label, (unsigned long long)h->nblocks, (unsigned long long)h->extra_offset,
        (unsigned long long)h->extra_bytes, (unsigned long long)h->data_offset,
        (unsigned long long)h->index_offset, (unsigned long long)h->index_bytes,
        (unsigned long long)h->file_bytes);
  return BLK_OK;
}

void blk__ckpt_entry_encode(unsigned char *out, const blk__ckpt_entry *e) {
  store_le32(out, (uint32_t)e->gid);
  store_le32(out + 4, (uint32_t)e->nlinks);
  blk__store_le64(out + 8, e->offset);
  blk__store_le64(out + 16, e->bytes);
  blk__store_le64(out + 24, e->checksum);
}

void blk__ckpt_entry_decode(blk__ckpt_entry *e, const unsigned char *in) {
  /* gid and nlinks are read as unsigned: a value past INT32_MAX comes out
   * negative, which the callers refuse. */
  e->gid = (int)(int32_t)load_le32(in);
  e->nlinks = (int)(int32_t)load_le32(in + 4);
  e->offset = blk__load_le64(in + 8);
  e->bytes = blk__load_le64(in + 16);
  e->checksum = blk__load_le64(in + 24);
}

static void encode_link(unsigned char *p, const blk_link *l) {
  memset(p, 0, BLK__CKPT_LINK_BYTES);
  store_le32(p, (uint32_t)l->gid);
  store_le32(p + 4, (uint32_t)l->bounds.dim);
  store_le32(p + 8, (uint32_t)l->cbounds.dim);
  for (int a = 0; a < BLK_MAX_DIM; a++) {
    store_le32(p + 16 + 4 * a, (uint32_t)l->dir[a]);
    store_le32(p + 48 + 4 * a, (uint32_t)l->wrap[a]);
    blk__store_le64(p + 80 + 8 * a, (uint64_t)l->bounds.min[a]);
    blk__store_le64(p + 144 + 8 * a, (uint64_t)l->bounds.max[a]);
    store_f64(p + 208 + 8 * a, l->cbounds.min[a]);
    store_f64(p + 272 + 8 * a, l->cbounds.max[a]);
  }
}

static void decode_link(blk_link *l, const unsigned char *p) {
  memset(l, 0, sizeof *l);
  l->gid = (int)(int32_t)load_le32(p);
  l->rank = -1;
  l->bounds.dim = (int)(int32_t)load_le32(p + 4);
  l->cbounds.dim = (int)(int32_t)load_le32(p + 8);
  for (int a = 0; a < BLK_MAX_DIM; a++) {
    l->dir[a] = (int)(int32_t)load_le32(p + 16 + 4 * a);
    l->wrap[a] = (int)(int32_t)load_le32(p + 48 + 4 * a);
    l->bounds.min[a] = (int64_t)blk__load_le64(p + 80 + 8 * a);
    l->bounds.max[a] = (int64_t)blk__load_le64(p + 144 + 8 * a);
    l->cbounds.min[a] = load_f64(p + 208 + 8 * a);
    l->cbounds.max[a] = load_f64(p + 272 + 8 * a);
  }
}

void blk__ckpt_meta_encode(unsigned char *out, int gid, const blk_link *links, int nlinks,
                           uint64_t data_bytes, uint64_t data_checksum) {
  memcpy(out, record_magic, sizeof record_magic);
  store_le32(out + 4, (uint32_t)gid);
  store_le32(out + 8, (uint32_t)nlinks);
  store_le32(out + 12, BLK__CKPT_LINK_BYTES);
  blk__store_le64(out + 16, data_bytes);
  blk__store_le64(out + 24, data_checksum);
  for (int i = 0; i < nlinks; i++)
    encode_link(out + BLK__CKPT_META_BYTES + (size_t)i * BLK__CKPT_LINK_BYTES, &links[i]);
}

int blk__ckpt_meta_decode(const unsigned char *in, int gid, int nlinks, uint64_t record_bytes,
                          blk_link *links, uint64_t *data_checksum, const char *label) {
  size_t meta = blk__ckpt_meta_bytes(nlinks);
  uint64_t data = blk__load_le64(in + 16);
  if (memcmp(in, record_magic, sizeof record_magic) != 0 || load_le32(in + 4) != (uint32_t)gid ||
      load_le32(in + 8) != (uint32_t)nlinks || load_le32(in + 12) != BLK__CKPT_LINK_BYTES ||
      record_bytes < meta || data != record_bytes - meta)
    return blk__fail(BLK_ECORRUPT,
                     "%s: the record of gid %d does not match the index (it says gid %u, %u links, "
                     "%llu bytes of data; the index %d links, %llu bytes in all)",
                     label, gid, load_le32(in + 4), load_le32(in + 8), (unsigned long long)data,
                     nlinks, (unsigned long long)record_bytes);
  *data_checksum = blk__load_le64(in + 24);
  for (int i = 0; i < nlinks; i++)
    decode_link(&links[i], in + BLK__CKPT_META_BYTES + (size_t)i * BLK__CKPT_LINK_BYTES);
  return BLK_OK;
}
