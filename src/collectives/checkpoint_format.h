/*
 * checkpoint_format.h: the bytes of a checkpoint file (docs/checkpoint.md),
 * and how a collective write lays the ranks' records out in it.
 *
 * A checkpoint file is a header, the caller's extra blob, the blocks'
 * records one after the other (in no particular order: as the writing
 * ranks staged them), and an index by gid. Every field blk writes is
 * fixed-width little-endian (le64.h); the blocks' saved bytes are what the
 * user's save callback wrote, in the writer's byte order, which the
 * header's byte-order mark records (a reader of the other order refuses
 * the file: blk cannot know how to swap the user's bytes).
 *
 *   header (128 bytes)  magic, version, sizes, offsets, checksums
 *   extra               the caller's blob
 *   records             per block: meta (32 bytes + 336 per link), data
 *   index               per gid 0..nblocks-1: 32 bytes (offset, size,
 *                       nlinks, checksum of the record's meta)
 *
 * Checksums (storage/checksum.h) are seeded by what they cover, and a
 * record's by its gid as well, so bytes read from the wrong place, or a
 * record that belongs to another gid, fail their check.
 *
 * Pure functions: no MPI, no state (but the round size, a setting for
 * tests), any thread.
 */
#ifndef BLK_CHECKPOINT_FORMAT_H
#define BLK_CHECKPOINT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "blk/link.h"

#define BLK__CKPT_VERSION 1u
#define BLK__CKPT_HEADER_BYTES 128
#define BLK__CKPT_ENTRY_BYTES 32
#define BLK__CKPT_META_BYTES 32  /* a record's fixed part, before its links */
#define BLK__CKPT_LINK_BYTES 336 /* one link: 16 + 2 x 8 x 4 + 4 x 8 x 8 */
/* The first 16 bytes (magic, version, header size) keep their place in
 * every version, and the header's checksum is its last 8 bytes. */
#define BLK__CKPT_PREFIX_BYTES 16
#define BLK__CKPT_HEADER_MAX 4096
/* The byte-order mark: this value, stored in the writer's own order. */
#define BLK__CKPT_BOM 0x01020304u

/* What a checksum covers (its seed). */
typedef enum blk__ckpt_part {
  BLK__CKPT_PART_HEADER = 1,
  BLK__CKPT_PART_EXTRA,
  BLK__CKPT_PART_INDEX,
  BLK__CKPT_PART_META, /* a record's meta and links; with its gid */
  BLK__CKPT_PART_DATA  /* a record's saved bytes; with its gid */
} blk__ckpt_part;

typedef struct blk__ckpt_header {
  uint32_t version;
  uint32_t writer_ranks; /* for messages only: the reader's count may differ */
  uint64_t nblocks;
  uint64_t extra_offset, extra_bytes, extra_checksum;
  uint64_t index_offset, index_bytes, index_checksum;
  uint64_t data_offset; /* the first record */
  uint64_t file_bytes;  /* the whole file */
} blk__ckpt_header;

/* One block in the index: where its record is, how long (meta, links and
 * data), how many links it has, and the checksum of its meta and links
 * (the meta holds the data's checksum). */
typedef struct blk__ckpt_entry {
  int gid;
  int nlinks;
  uint64_t offset, bytes, checksum;
} blk__ckpt_entry;

/* The checksum of n bytes at data as part `part` (of block gid; -1 for
 * the parts that belong to no block). */
uint64_t blk__ckpt_checksum(blk__ckpt_part part, int gid, const void *data, size_t n);

/* Writes h as BLK__CKPT_HEADER_BYTES bytes, with this machine's byte-order
 * mark and the checksum. */
void blk__ckpt_header_encode(unsigned char *out, const blk__ckpt_header *h);

/* The header's size as its first BLK__CKPT_PREFIX_BYTES say, after checking
 * the magic: 0 and *bytes, or BLK_ECORRUPT ("not a blk checkpoint", or a
 * size outside BLK__CKPT_PREFIX_BYTES + 8 .. BLK__CKPT_HEADER_MAX). label
 * names the file in the detail. */
int blk__ckpt_header_size(size_t *bytes, const unsigned char *prefix, const char *label);

/* Reads a header of n bytes (as blk__ckpt_header_size said) into *h and
 * checks it: BLK_ECORRUPT (the checksum, or fields that contradict each
 * other or a file of file_bytes), BLK_EINVAL (a version this blk does not
 * read, or a file written on a machine of the other byte order), each with
 * a detail naming label. file_bytes is the file's real size. */
int blk__ckpt_header_decode(blk__ckpt_header *h, const unsigned char *in, size_t n,
                            uint64_t file_bytes, const char *label);

void blk__ckpt_entry_encode(unsigned char *out, const blk__ckpt_entry *e);
void blk__ckpt_entry_decode(blk__ckpt_entry *e, const unsigned char *in);

/* The bytes of a record's meta with nlinks links. */
static inline size_t blk__ckpt_meta_bytes(int nlinks) {
  return BLK__CKPT_META_BYTES + (size_t)nlinks * BLK__CKPT_LINK_BYTES;
}

/* Writes the meta of gid's record: blk__ckpt_meta_bytes(nlinks) bytes.
 * Links keep everything but their rank (the reader takes ranks from its
 * own assigner). */
void blk__ckpt_meta_encode(unsigned char *out, int gid, const blk_link *links, int nlinks,
                           uint64_t data_bytes, uint64_t data_checksum);

/* Reads the meta of a record that the index says is gid's, with nlinks
 * links (links has room for them; their ranks are set to -1), after its
 * checksum was checked: BLK_ECORRUPT when it contradicts the index (magic,
 * gid, link count or size, a data size other than record_bytes minus the
 * meta), naming label and gid. */
int blk__ckpt_meta_decode(const unsigned char *in, int gid, int nlinks, uint64_t record_bytes,
                          blk_link *links, uint64_t *data_checksum, const char *label);

/* A round of the collective write: every rank stages records of about
 * blk__ckpt_round_bytes() bytes (at least one block's), then all write
 * them with collective calls of at most BLK__CKPT_CHUNK bytes each. */
#define BLK__CKPT_CHUNK ((uint64_t)1 << 30)
size_t blk__ckpt_round_bytes(void);
/* For tests: the round size (0: the default, 64 MiB). Set between calls. */
void blk__ckpt_set_round_bytes(size_t bytes);

#endif
