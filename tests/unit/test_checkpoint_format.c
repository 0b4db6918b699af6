/* test_checkpoint_format: the bytes of a checkpoint file
 * (collectives/checkpoint_format.h), without MPI. The header's fields sit
 * where docs/checkpoint.md says, little-endian; it decodes to what was
 * encoded; every bit flip of it is caught; a bad magic, a header size out
 * of range, another version, the other byte order, a garbled byte-order
 * mark, a file shorter or longer than the header says and numbers that do
 * not add up are each refused with their own code and words. Index entries
 * and records' meta (with links holding extreme values) survive the round
 * trip, and a meta that contradicts its index entry is refused. The
 * checksums depend on the part and the gid. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/le64.h"
#include "blk/blk.h"
#include "check.h"
#include "collectives/checkpoint_format.h"

static blk__ckpt_header sample(void) {
  blk__ckpt_header h = {.version = BLK__CKPT_VERSION,
                        .writer_ranks = 3,
                        .nblocks = 13,
                        .extra_offset = BLK__CKPT_HEADER_BYTES,
                        .extra_bytes = 40,
                        .extra_checksum = 0x1111222233334444u,
                        .index_offset = 5000,
                        .index_bytes = 13 * BLK__CKPT_ENTRY_BYTES,
                        .index_checksum = 0x5555666677778888u,
                        .data_offset = BLK__CKPT_HEADER_BYTES + 40,
                        .file_bytes = 5000 + 13 * BLK__CKPT_ENTRY_BYTES};
  return h;
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Makes the header's checksum right again after a change. */
static void reseal(unsigned char *head) {
  blk__store_le64(head + BLK__CKPT_HEADER_BYTES - 8,
                  blk__ckpt_checksum(BLK__CKPT_PART_HEADER, -1, head, BLK__CKPT_HEADER_BYTES - 8));
}

/* Sets a field (32 bits in this machine's order: the byte-order mark is
 * one) and reseals. */
static void set32(unsigned char *head, size_t at, uint32_t v) {
  memcpy(head + at, &v, sizeof v);
  reseal(head);
}

static void set_le32(unsigned char *head, size_t at, uint32_t v) {
  for (int i = 0; i < 4; i++) head[at + (size_t)i] = (unsigned char)(v >> (8 * i));
  reseal(head);
}

static void set64(unsigned char *head, size_t at, uint64_t v) {
  blk__store_le64(head + at, v);
  reseal(head);
}

static void test_layout(void) {
  blk__ckpt_header h = sample();
  unsigned char head[BLK__CKPT_HEADER_BYTES];
  blk__ckpt_header_encode(head, &h);
  CHECK(!memcmp(head, "BLKCKPT", 8));
  CHECK_EQ_INT(le32(head + 8), 1);
  CHECK_EQ_INT(le32(head + 12), BLK__CKPT_HEADER_BYTES);
  uint32_t bom;
  memcpy(&bom, head + 16, 4);
  CHECK_EQ_INT(bom, BLK__CKPT_BOM);
  CHECK_EQ_INT(le32(head + 20), 3);
  const uint64_t want[9] = {13,      BLK__CKPT_HEADER_BYTES, 40,  0x1111222233334444u, 5000,
                            13 * 32, 0x5555666677778888u,    168, 5000 + 13 * 32};
  for (int i = 0; i < 9; i++)
    CHECK_MSG(blk__load_le64(head + 24 + 8 * i) == want[i], "field at %d", 24 + 8 * i);
  for (int i = 96; i < 120; i++) CHECK_EQ_INT(head[i], 0);
  size_t n = 0;
  CHECK_OK(blk__ckpt_header_size(&n, head, "f"));
  CHECK_EQ_INT(n, BLK__CKPT_HEADER_BYTES);
  blk__ckpt_header got;
  CHECK_OK(blk__ckpt_header_decode(&got, head, n, h.file_bytes, "f"));
  CHECK(!memcmp(&got, &h, sizeof h));
}

static void test_refusals(void) {
  blk__ckpt_header h = sample();
  unsigned char head[BLK__CKPT_HEADER_BYTES], bad[BLK__CKPT_HEADER_BYTES];
  blk__ckpt_header_encode(head, &h);
  blk__ckpt_header got;
  size_t n = 0;
  /* Every bit flip: the checksum, or (in the magic) not a checkpoint. */
  for (size_t bit = 0; bit < 8 * sizeof head; bit++) {
    memcpy(bad, head, sizeof bad);
    bad[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    if (bit < 64) {
      CHECK_EQ_INT(blk__ckpt_header_size(&n, bad, "f"), BLK_ECORRUPT);
      CHECK(strstr(blk_last_error(), "f is not a blk checkpoint"));
    } else {
      CHECK_EQ_INT(blk__ckpt_header_decode(&got, bad, sizeof bad, h.file_bytes, "f"), BLK_ECORRUPT);
    }
  }
  CHECK_ERR(blk__ckpt_header_decode(&got, bad, sizeof bad, h.file_bytes, "f"), BLK_ECORRUPT,
            "f: the header fails its checksum");
  /* Header sizes out of range. */
  memcpy(bad, head, sizeof bad);
  set_le32(bad, 12, 23);
  CHECK_ERR(blk__ckpt_header_size(&n, bad, "f"), BLK_ECORRUPT, "f: the header says it is 23");
  set_le32(bad, 12, BLK__CKPT_HEADER_MAX + 1);
  CHECK_ERR(blk__ckpt_header_size(&n, bad, "f"), BLK_ECORRUPT, "bytes long");
  /* Whole, but not for this blk: another version, the other byte order. */
  memcpy(bad, head, sizeof bad);
  set_le32(bad, 8, 2);
  CHECK_ERR(blk__ckpt_header_decode(&got, bad, sizeof bad, h.file_bytes, "f"), BLK_EINVAL,
            "f has format version 2; this blk reads version 1");
  memcpy(bad, head, sizeof bad);
  set32(bad, 16, __builtin_bswap32(BLK__CKPT_BOM));
  CHECK_ERR(blk__ckpt_header_decode(&got, bad, sizeof bad, h.file_bytes, "f"), BLK_EINVAL,
            "which blk cannot convert");
  set32(bad, 16, 0x01020305u);
  CHECK_ERR(blk__ckpt_header_decode(&got, bad, sizeof bad, h.file_bytes, "f"), BLK_ECORRUPT,
            "the byte-order mark is 01020305");
  /* The file's size. */
  CHECK_ERR(blk__ckpt_header_decode(&got, head, sizeof head, h.file_bytes - 1, "f"), BLK_ECORRUPT,
            "(truncated)");
  CHECK_ERR(blk__ckpt_header_decode(&got, head, sizeof head, h.file_bytes + 1, "f"), BLK_ECORRUPT,
            "f is 5417 bytes, but its header says 5416");
  /* Numbers that do not add up, each with a right checksum. */
  const size_t fields[6] = {24, 32, 40, 56, 64, 80};
  for (int i = 0; i < 6; i++) {
    memcpy(bad, head, sizeof bad);
    set64(bad, fields[i], blk__load_le64(head + fields[i]) + 1);
    CHECK_ERR(blk__ckpt_header_decode(&got, bad, sizeof bad, h.file_bytes, "f"), BLK_ECORRUPT,
              "do not add up");
  }
  memcpy(bad, head, sizeof bad);
  set64(bad, 40, UINT64_MAX - 100); /* an extra size that wraps */
  CHECK_ERR(blk__ckpt_header_decode(&got, bad, sizeof bad, h.file_bytes, "f"), BLK_ECORRUPT,
            "do not add up");
}

static void test_entries(void) {
  blk__ckpt_entry e = {INT32_MAX, 26, UINT64_MAX - 1, 1ull << 40, 0xfedcba9876543210u}, got;
  unsigned char b[BLK__CKPT_ENTRY_BYTES];
  blk__ckpt_entry_encode(b, &e);
  CHECK_EQ_INT(le32(b), INT32_MAX);
  CHECK_EQ_INT(le32(b + 4), 26);
  CHECK(blk__load_le64(b + 8) == UINT64_MAX - 1);
  blk__ckpt_entry_decode(&got, b);
  CHECK(!memcmp(&got, &e, sizeof e));
}

static blk_link odd_link(int i) {
  blk_link l;
  memset(&l, 0, sizeof l);
  l.gid = 1000 + i;
  l.rank = 7;
  l.bounds.dim = BLK_MAX_DIM;
  l.cbounds.dim = 3;
  for (int a = 0; a < BLK_MAX_DIM; a++) {
    l.dir[a] = a % 3 - 1;
    l.wrap[a] = -(a % 2);
    l.bounds.min[a] = INT64_MIN + a;
    l.bounds.max[a] = INT64_MAX - a;
    l.cbounds.min[a] = a == 0 ? -0.0 : a == 1 ? -INFINITY : 1e-310 * a;
    l.cbounds.max[a] = a == 0 ? INFINITY : 1.0 / 3.0 * i;
  }
  return l;
}

static void test_meta(void) {
  blk_link links[3] = {odd_link(0), odd_link(1), odd_link(2)}, got[3];
  size_t mb = blk__ckpt_meta_bytes(3);
  CHECK_EQ_INT(mb, 32 + 3 * 336);
  unsigned char meta[32 + 3 * 336];
  blk__ckpt_meta_encode(meta, 42, links, 3, 77, 0xabcdefu);
  CHECK(!memcmp(meta, "BLKR", 4));
  uint64_t sum = 0;
  CHECK_OK(blk__ckpt_meta_decode(meta, 42, 3, mb + 77, got, &sum, "f"));
  CHECK(sum == 0xabcdefu);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(got[i].rank, -1); /* ranks are the reader's */
    got[i].rank = links[i].rank;
    CHECK_EQ_INT(got[i].gid, links[i].gid);
    CHECK_EQ_INT(got[i].bounds.dim, links[i].bounds.dim);
    CHECK_EQ_INT(got[i].cbounds.dim, links[i].cbounds.dim);
    for (int a = 0; a < BLK_MAX_DIM; a++) {
      CHECK(got[i].dir[a] == links[i].dir[a] && got[i].wrap[a] == links[i].wrap[a]);
      CHECK(got[i].bounds.min[a] == links[i].bounds.min[a]);
      CHECK(got[i].bounds.max[a] == links[i].bounds.max[a]);
      CHECK(!memcmp(&got[i].cbounds.min[a], &links[i].cbounds.min[a], sizeof(double)));
      CHECK(!memcmp(&got[i].cbounds.max[a], &links[i].cbounds.max[a], sizeof(double)));
    }
  }
  /* What contradicts the index. */
  CHECK_ERR(blk__ckpt_meta_decode(meta, 41, 3, mb + 77, got, &sum, "f"), BLK_ECORRUPT,
            "f: the record of gid 41 does not match the index (it says gid 42");
  CHECK_ERR(blk__ckpt_meta_decode(meta, 42, 2, mb + 77, got, &sum, "f"), BLK_ECORRUPT, "3 links");
  CHECK_ERR(blk__ckpt_meta_decode(meta, 42, 3, mb + 78, got, &sum, "f"), BLK_ECORRUPT,
            "77 bytes of data");
  CHECK_ERR(blk__ckpt_meta_decode(meta, 42, 3, mb - 1, got, &sum, "f"), BLK_ECORRUPT, "f:");
  meta[1] = 'X';
  CHECK_ERR(blk__ckpt_meta_decode(meta, 42, 3, mb + 77, got, &sum, "f"), BLK_ECORRUPT, "f:");
}

static void test_checksums(void) {
  const char bytes[] = "the same bytes";
  uint64_t a = blk__ckpt_checksum(BLK__CKPT_PART_DATA, 3, bytes, sizeof bytes);
  CHECK(a == blk__ckpt_checksum(BLK__CKPT_PART_DATA, 3, bytes, sizeof bytes));
  CHECK(a != blk__ckpt_checksum(BLK__CKPT_PART_DATA, 4, bytes, sizeof bytes));
  CHECK(a != blk__ckpt_checksum(BLK__CKPT_PART_META, 3, bytes, sizeof bytes));
  CHECK(blk__ckpt_checksum(BLK__CKPT_PART_EXTRA, -1, bytes, sizeof bytes) !=
        blk__ckpt_checksum(BLK__CKPT_PART_INDEX, -1, bytes, sizeof bytes));
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_layout();
  test_refusals();
  test_entries();
  test_meta();
  test_checksums();
  CHECK_EQ_INT(blk__ckpt_round_bytes(), 64 << 20);
  blk__ckpt_set_round_bytes(100);
  CHECK_EQ_INT(blk__ckpt_round_bytes(), 100);
  printf("test_checkpoint_format: ok\n");
  return 0;
}
