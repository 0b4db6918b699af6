/*
 * flat_block.h: the master's callbacks for a test whose block is one plain
 * struct, `block`, with an `int gid` and no pointers: create zeroes it and
 * sets gid, save writes its bytes, load reads them back and checks that the
 * gid is the one blk loads. Include after the typedef of block; the
 * functions are static (create, destroy, save, load).
 */
#ifndef BLK_TESTS_FLAT_BLOCK_H
#define BLK_TESTS_FLAT_BLOCK_H

#include <blk/blk.h>
#include <stdlib.h>

#include "check.h"

static int create(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b);
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  *out = b;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  return blk_buffer_write(out, data, sizeof(block));
}

static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  int rc = blk_buffer_read(in, data, sizeof(block));
  CHECK_EQ_INT(((block *)data)->gid, gid);
  return rc;
}

#endif
