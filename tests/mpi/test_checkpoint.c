/*
 * test_checkpoint: blk_checkpoint_write and blk_checkpoint_read, with real
 * files, across rank and thread counts, in and out of core, and every way
 * they can fail.
 *
 * Blocks are a pure function of their gid (bytes, length, links), so what
 * a reader finds is checked against that, not against what a writer held.
 *
 * --case roundtrip (the default), at P ranks: 13 blocks written by the
 * first 2 ranks (1 at P = 1), on a communicator of their own, in rounds of
 * a few blocks (blk__ckpt_set_round_bytes), are read back by all P ranks
 * and by rank 0 alone; 7 blocks written by all P in one round, with extra
 * bytes, are read by the first P - 1. So with the 1-4 rank registrations a
 * file written at 2 ranks is read at 1, 2, 3 and 4, one written at 3 at 2
 * and one at 4 at 3. Writers place blocks contiguously, readers
 * round-robin, with the other thread count. Every byte of every block,
 * every link field, the link ranks (from the reader's assigner) and the
 * extra bytes are compared; out of core, the budget must have held.
 *
 * --case failures: reads of a missing file, with a block count that does
 * not match, of a flipped header byte, a bad magic, another format
 * version, the other byte order, a truncated file, a flipped byte in the
 * index, with a NULL path, into a master that has blocks; a read with bytes flipped in one
 * block's saved bytes and another's links (both lost, the rest read), and
 * one whose load callback fails on a block; writes whose save callback
 * fails on the last rank (the old file at the path must survive, and no
 * temporary file), to an unwritable path, with an empty path, with a gid
 * on two ranks (at 1 rank: a gid past the count). Each: every rank
 * returns the same code and detail, which names what it should, and a
 * foreach then runs on every rank's master. (The header's decoding, every
 * bit flip and size included, is unit-tested: test_checkpoint_format.)
 *
 *   test_checkpoint [--case roundtrip|failures] [--write-threads T]
 *                   [--read-threads T] [--mem-blocks M]
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, access, nanosleep */

#include <blk/blk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "collectives/checkpoint_format.h"

typedef struct block {
  int gid;
  size_t n;
  unsigned char *bytes;
} block;

typedef struct options {
  int write_threads, read_threads, mem_blocks;
  int fail_save_gid, fail_load_gid; /* -1: none */
} options;

static options opt = {1, 2, 0, -1, -1};

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

/* Block gid's saved bytes: none for every fifth, else 3000..11999, some
 * above the spill threshold. */
static size_t ref_size(int gid) {
  return gid % 5 == 3 ? 0 : 3000 + (size_t)(mix((uint64_t)gid) % 9000);
}

static unsigned char ref_byte(int gid, size_t i) {
  return (unsigned char)mix(((uint64_t)gid << 32) + i);
}

static int ref_nlinks(int gid) {
  return gid % 4;
}

/* Link j of gid, every field from (gid, j); rank from a (NULL: -1). */
static blk_link ref_link(int gid, int j, int nblocks, const blk_assigner *a) {
  blk_link l;
  memset(&l, 0, sizeof l);
  l.gid = (gid * 7 + j * 3 + 1) % nblocks;
  l.rank = a ? blk_assigner_rank(a, l.gid) : -1;
  l.bounds.dim = 1 + (gid + j) % BLK_MAX_DIM;
  l.cbounds.dim = 1 + (gid * 3 + j) % BLK_MAX_DIM;
  for (int x = 0; x < BLK_MAX_DIM; x++) {
    l.dir[x] = (gid + j + x) % 3 - 1;
    l.wrap[x] = (gid * j + x) % 3 - 1;
    l.bounds.min[x] = (int64_t)(mix((uint64_t)(gid * 64 + j * 8 + x)) >> 1) - INT64_MAX / 2;
    l.bounds.max[x] = l.bounds.min[x] + x + j;
    l.cbounds.min[x] = -1e300 / (1 + gid) + x * 0.125 - j;
    l.cbounds.max[x] = (double)mix((uint64_t)(gid + x)) * 1e-10;
  }
  return l;
}

/* Every field of a link read back, bit for bit, against the reference. */
static void check_link(const blk_link *got, int gid, int j, int nblocks, const blk_assigner *a) {
  blk_link want = ref_link(gid, j, nblocks, a);
  int same = got->gid == want.gid && got->rank == want.rank && got->bounds.dim == want.bounds.dim &&
             got->cbounds.dim == want.cbounds.dim;
  for (int x = 0; x < BLK_MAX_DIM; x++)
    same = same && got->dir[x] == want.dir[x] && got->wrap[x] == want.wrap[x] &&
           got->bounds.min[x] == want.bounds.min[x] && got->bounds.max[x] == want.bounds.max[x] &&
           !memcmp(&got->cbounds.min[x], &want.cbounds.min[x], sizeof(double)) &&
           !memcmp(&got->cbounds.max[x], &want.cbounds.max[x], sizeof(double));
  CHECK_MSG(same, "gid %d: link %d differs (gid %d rank %d, expected gid %d rank %d)", gid, j,
            got->gid, got->rank, want.gid, want.rank);
}

static int create(void **out, int gid, void *user) {
  (void)user;
  block *b = calloc(1, sizeof *b);
  if (!b) return BLK_ENOMEM;
  b->gid = gid;
  *out = b;
  return 0;
}

/* The reference block, as a writer makes it. */
static block *make_ref(int gid) {
  block *b = calloc(1, sizeof *b);
  CHECK(b);
  b->gid = gid;
  b->n = ref_size(gid);
  b->bytes = b->n ? malloc(b->n) : NULL;
  CHECK(!b->n || b->bytes);
  for (size_t i = 0; i < b->n; i++) b->bytes[i] = ref_byte(gid, i);
  return b;
}

static void destroy(void *data, int gid, void *user) {
  (void)gid;
  (void)user;
  block *b = data;
  free(b->bytes);
  free(b);
}

static int save(blk_buffer *out, const void *data, int gid, void *user) {
  (void)user;
  const block *b = data;
  CHECK_EQ_INT(b->gid, gid);
  if (gid == opt.fail_save_gid) return -7;
  return blk_buffer_write(out, b->bytes, b->n);
}

/* Takes the saved bytes without a copy, as load may. */
static int load(void *data, blk_buffer *in, int gid, void *user) {
  (void)user;
  block *b = data;
  if (gid == opt.fail_load_gid) return -9;
  b->n = blk_buffer_remaining(in);
  b->bytes = b->n ? blk_buffer_detach(in, NULL) : NULL;
  CHECK(!b->n || b->bytes);
  return 0;
}

/* Every byte of the block, against the reference. */
static int check_block(void *data, blk_proxy *p, void *user) {
  const block *b = data;
  int *count = user;
  (void)count;
  CHECK_EQ_INT(b->gid, blk_proxy_gid(p));
  CHECK_MSG(b->n == ref_size(b->gid), "gid %d: %zu bytes, expected %zu", b->gid, b->n,
            ref_size(b->gid));
  for (size_t i = 0; i < b->n; i++)
    CHECK_MSG(b->bytes[i] == ref_byte(b->gid, i), "gid %d: byte %zu is %u, expected %u", b->gid, i,
              b->bytes[i], ref_byte(b->gid, i));
  return 0;
}

static int nothing(void *data, blk_proxy *p, void *user) {
  (void)data;
  (void)p;
  (void)user;
  return 0;
}

static blk_master *make_master(MPI_Comm comm, int threads) {
  blk_master_config mc = check_master_config(threads, opt.mem_blocks, create, destroy, save, load);
  blk_master *m = NULL;
  CHECK_OK(blk_master_create(&m, comm, &mc));
  return m;
}

/* Adds the assigner's blocks of this rank, with their reference links. */
static void add_blocks(blk_master *m, const blk_assigner *a, int rank) {
  int nblocks = blk_assigner_nblocks(a), n = blk_assigner_local_count(a, rank);
  int *gids = malloc((size_t)(n > 0 ? n : 1) * sizeof *gids);
  CHECK(gids);
  blk_assigner_local_gids(a, rank, gids, n);
  for (int i = 0; i < n; i++) {
    blk_link links[4];
    int nl = ref_nlinks(gids[i]);
    for (int j = 0; j < nl; j++) links[j] = ref_link(gids[i], j, nblocks, a);
    CHECK_OK(blk_master_add(m, gids[i], make_ref(gids[i]), links, nl));
  }
  free(gids);
}

static void ref_extra(unsigned char *x, size_t n, int nblocks) {
  for (size_t i = 0; i < n; i++) x[i] = (unsigned char)((size_t)nblocks * 31 + i * 7);
}

/* A collective's outcome on comm: every rank returned rc with the same
 * detail, which contains want (NULL: anything). */
static void agreed_on(MPI_Comm comm, int rc, const char *want) {
  int size = 1, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  int *codes = malloc((size_t)size * sizeof *codes);
  char *details = malloc((size_t)size * 512), mine[512];
  CHECK(codes && details);
  snprintf(mine, sizeof mine, "%s", rc ? blk_last_error() : "");
  MPI_Allgather(&rc, 1, MPI_INT, codes, 1, MPI_INT, comm);
  MPI_Allgather(mine, 512, MPI_CHAR, details, 512, MPI_CHAR, comm);
  for (int r = 0; r < size; r++) {
    CHECK_MSG(codes[r] == rc, "rank %d returned %d (%s), rank %d %d", rank, rc, mine, r, codes[r]);
    CHECK_MSG(!strcmp(details + 512 * r, mine), "\"%s\" here, \"%s\" on rank %d", mine,
              details + 512 * r, r);
  }
  CHECK_MSG(!want || strstr(mine, want), "the detail \"%s\" does not say \"%s\"", mine, want);
  free(details);
  free(codes);
}

/* A barrier of MPI_COMM_WORLD that sleeps while it waits: ranks that sit
 * out a write or read must not take the cores from those that work (the
 * tests run up to 4 ranks on 2 cores). */
static void idle_barrier(void) {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    struct timespec nap = {0, 1000000};
    nanosleep(&nap, NULL);
  }
}

/* Reads path into a fresh master on comm with a round-robin assigner and
 * checks everything against the reference. */
static void read_and_check(MPI_Comm comm, const char *path, int nblocks, size_t extra_bytes) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  blk_master *m = make_master(comm, opt.read_threads);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_round_robin(&a, size, nblocks));
  blk_buffer extra = BLK_BUFFER_INIT;
  blk_buffer_write(&extra, "junk", 4); /* emptied by the read */
  int rc = blk_checkpoint_read(m, path, a, &extra);
  agreed_on(comm, rc, NULL);
  CHECK_OK(rc);
  unsigned char want[64];
  ref_extra(want, extra_bytes, nblocks);
  CHECK_EQ_INT(extra.size, extra_bytes);
  CHECK(extra.pos == 0 && (!extra_bytes || !memcmp(extra.data, want, extra_bytes)));
  blk_buffer_free(&extra);
  /* The blocks the reader's assigner gives this rank, in its order. */
  int n = blk_assigner_local_count(a, rank), gids[64];
  CHECK(n <= 64);
  blk_assigner_local_gids(a, rank, gids, n);
  CHECK_EQ_INT(blk_master_local_count(m), n);
  for (int lid = 0; lid < n; lid++) {
    CHECK_EQ_INT(blk_master_gid(m, lid), gids[lid]);
    int nl = -1;
    const blk_link *got = blk_master_links(m, lid, &nl);
    CHECK_EQ_INT(nl, ref_nlinks(gids[lid]));
    for (int j = 0; j < nl; j++) check_link(&got[j], gids[lid], j, nblocks, a);
  }
  CHECK_OK(blk_master_foreach(m, check_block, NULL));
  if (opt.mem_blocks) check_budget(m, opt.mem_blocks);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
}

/* The first `writers` ranks write nblocks blocks to path. */
static void write_file(const char *path, int nblocks, int writers, size_t extra_bytes) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, rank < writers ? 0 : MPI_UNDEFINED, rank, &comm);
  if (comm != MPI_COMM_NULL) {
    blk_master *m = make_master(comm, opt.write_threads);
    blk_assigner *a;
    CHECK_OK(blk_assigner_create_contiguous(&a, writers, nblocks));
    add_blocks(m, a, rank);
    unsigned char extra[64];
    ref_extra(extra, extra_bytes, nblocks);
    int rc = blk_checkpoint_write(m, path, extra_bytes ? extra : NULL, extra_bytes);
    agreed_on(comm, rc, NULL);
    CHECK_OK(rc);
    if (opt.mem_blocks) check_budget(m, opt.mem_blocks);
    CHECK_OK(blk_master_foreach(m, check_block, NULL)); /* untouched */
    blk_master_destroy(m);
    blk_assigner_destroy(a);
    MPI_Comm_free(&comm);
    if (rank == 0) CHECK_MSG(access(path, F_OK) == 0, "%s is not there", path);
  }
  idle_barrier();
}

/* The first `readers` ranks read path and check it. */
static void read_file(const char *path, int nblocks, int readers, size_t extra_bytes) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, rank < readers ? 0 : MPI_UNDEFINED, rank, &comm);
  if (comm != MPI_COMM_NULL) {
    read_and_check(comm, path, nblocks, extra_bytes);
    MPI_Comm_free(&comm);
  }
  idle_barrier();
}

/* A directory of this run's own (rank 0 makes it), so that runs at once
 * do not share files. */
static void make_dir(char *dir, size_t n) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, n, "%s/blk-ckpt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK_MSG(mkdtemp(dir), "mkdtemp %s", dir);
  }
  MPI_Bcast(dir, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
}

static void remove_dir(const char *dir) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  idle_barrier();
  if (rank != 0) return;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK_EQ_INT(system(cmd), 0);
}

/* 13 blocks written by 2 ranks (1 at P = 1) in rounds of a few blocks,
 * read at P and at 1; 7 blocks written by all P in one round, with extra
 * bytes, read at P - 1 (1 at P = 1). */
static void roundtrip(const char *dir) {
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char path[600];
  snprintf(path, sizeof path, "%s/b13.ckpt", dir);
  blk__ckpt_set_round_bytes(5000);
  write_file(path, 13, size < 2 ? size : 2, 0);
  blk__ckpt_set_round_bytes(0);
  read_file(path, 13, size, 0);
  if (size > 1) read_file(path, 13, 1, 0);
  snprintf(path, sizeof path, "%s/b7.ckpt", dir);
  write_file(path, 7, size, 41);
  read_file(path, 7, size > 1 ? size - 1 : 1, 41);
}

/* ---- failures ------------------------------------------------------------ */

#define NB 13

/* Rank 0 copies src to dst, changed by edit (may be NULL). */
typedef void (*edit_fn)(unsigned char *bytes, size_t *n, void *arg);

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  CHECK_MSG(f, "open %s", path);
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long len = ftell(f);
  CHECK(len >= 0 && fseek(f, 0, SEEK_SET) == 0);
  unsigned char *bytes = malloc((size_t)len + 16);
  CHECK(bytes);
  CHECK_EQ_INT(fread(bytes, 1, (size_t)len, f), len);
  fclose(f);
  *n = (size_t)len;
  return bytes;
}

static void spit(const char *path, const unsigned char *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK_MSG(f, "create %s", path);
  CHECK_EQ_INT(fwrite(bytes, 1, n, f), n);
  CHECK(fclose(f) == 0);
}

static void copy_edited(const char *src, const char *dst, edit_fn edit, void *arg) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    size_t n;
    unsigned char *bytes = slurp(src, &n);
    if (edit) edit(bytes, &n, arg);
    spit(dst, bytes, n);
    free(bytes);
  }
  idle_barrier();
}

static void flip_at(unsigned char *bytes, size_t *n, void *arg) {
  size_t at = *(const size_t *)arg;
  CHECK(at < *n);
  bytes[at] ^= 0x10;
}

/* Keeps the first *arg bytes (or all but one, for 0). */
static void cut(unsigned char *bytes, size_t *n, void *arg) {
  (void)bytes;
  size_t keep = *(const size_t *)arg;
  *n = keep ? keep : *n - 1;
}

/* Changes a header field and makes the checksum right again: a header that
 * is whole but says something else. */
static void reheader(unsigned char *bytes, size_t *n, void *arg) {
  (void)n;
  const unsigned *what = arg; /* {offset, new 32-bit value} */
  uint32_t v = what[1];
  memcpy(bytes + what[0], &v, sizeof v);
  uint64_t sum = blk__ckpt_checksum(BLK__CKPT_PART_HEADER, -1, bytes, BLK__CKPT_HEADER_BYTES - 8);
  for (int i = 0; i < 8; i++)
    bytes[BLK__CKPT_HEADER_BYTES - 8 + i] = (unsigned char)(sum >> (8 * i));
}

/* Where gid's record starts, and its saved bytes (from the index). */
static void record_of(const unsigned char *bytes, size_t n, int gid, size_t *meta, size_t *data) {
  blk__ckpt_header h;
  CHECK_OK(blk__ckpt_header_decode(&h, bytes, BLK__CKPT_HEADER_BYTES, n, "test"));
  blk__ckpt_entry e;
  blk__ckpt_entry_decode(&e, bytes + h.index_offset + (size_t)gid * BLK__CKPT_ENTRY_BYTES);
  CHECK_EQ_INT(e.gid, gid);
  *meta = (size_t)e.offset;
  *data = (size_t)e.offset + blk__ckpt_meta_bytes(e.nlinks);
}

/* A read of path into m with a, which must fail with code and a detail
 * saying want, before any block was added; then a foreach on m. */
static void head_fails(blk_master *m, const char *path, const blk_assigner *a, int code,
                       const char *want) {
  int had = blk_master_local_count(m);
  blk_buffer extra = BLK_BUFFER_INIT;
  int rc = blk_checkpoint_read(m, path, a, &extra);
  CHECK_MSG(rc == code, "reading %s returned %d (%s: %s), expected %d (%s)", path, rc,
            blk_strerror(rc), blk_last_error(), code, blk_strerror(code));
  check_agreed(rc, want);
  CHECK_EQ_INT(extra.size, 0);
  blk_buffer_free(&extra);
  CHECK_EQ_INT(blk_master_local_count(m), had);
  CHECK_OK(blk_master_foreach(m, nothing, NULL));
}

/* A read of path by every rank into a fresh master, which must fail with
 * code and a detail saying want, with every block but the ones in lost[]
 * (nlost of them) read whole; then a foreach checks them. */
static void blocks_fail(const char *path, const int *lost, int nlost, int code, const char *want) {
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blk_master *m = make_master(MPI_COMM_WORLD, opt.read_threads);
  blk_assigner *a;
  CHECK_OK(blk_assigner_create_round_robin(&a, size, NB));
  int rc = blk_checkpoint_read(m, path, a, NULL);
  CHECK_MSG(rc == code, "reading %s returned %d (%s: %s), expected %d (%s)", path, rc,
            blk_strerror(rc), blk_last_error(), code, blk_strerror(code));
  check_agreed(rc, want);
  int want_count = blk_assigner_local_count(a, rank);
  for (int i = 0; i < nlost; i++) want_count -= blk_assigner_rank(a, lost[i]) == rank;
  CHECK_EQ_INT(blk_master_local_count(m), want_count);
  for (int i = 0; i < nlost; i++) CHECK_EQ_INT(blk_master_lid(m, lost[i]), -1);
  CHECK_OK(blk_master_foreach(m, check_block, NULL)); /* the blocks that were read are whole */
  blk_master_destroy(m);
  blk_assigner_destroy(a);
}

/* A write of every rank's blocks to path that must fail with code and
 * want; then a foreach. */
static void write_fails(blk_master *m, const char *path, int code, const char *want) {
  int rc = blk_checkpoint_write(m, path, "x", 1);
  CHECK_MSG(rc == code, "writing %s returned %d (%s: %s), expected %d (%s)", path, rc,
            blk_strerror(rc), blk_last_error(), code, blk_strerror(code));
  check_agreed(rc, want);
  CHECK_OK(blk_master_foreach(m, nothing, NULL));
}

/* Rank 0 flips a byte of src at the offset where(bytes, n) says, into dst. */
static void copy_flipped(const char *src, const char *dst,
                         size_t (*where)(const unsigned char *, size_t)) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t at = 0;
  if (rank == 0) {
    size_t n;
    unsigned char *bytes = slurp(src, &n);
    at = where(bytes, n);
    free(bytes);
  }
  copy_edited(src, dst, rank == 0 ? flip_at : NULL, &at);
}

/* gid 9's saved bytes, and gid 6's link 0 (its bounds' dim). */
static size_t in_data_9(const unsigned char *bytes, size_t n) {
  size_t meta, data;
  record_of(bytes, n, 9, &meta, &data);
  return data + 100;
}
static size_t in_links_6(const unsigned char *bytes, size_t n) {
  size_t meta, data;
  record_of(bytes, n, 6, &meta, &data);
  return meta + BLK__CKPT_META_BYTES + 5;
}
static size_t in_index(const unsigned char *bytes, size_t n) {
  (void)bytes;
  return n - 3; /* the last entry's checksum */
}

static void failures(const char *dir) {
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  blk_log_set_level(BLK_LOG_NONE);
  char good[600], bad[600], missing[600], want[800];
  snprintf(good, sizeof good, "%s/good.ckpt", dir);
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
  snprintf(missing, sizeof missing, "%s/missing.ckpt", dir);
  write_file(good, NB, size, 5);

  /* What is found before any block is read: one master for all. */
  blk_master *m = make_master(MPI_COMM_WORLD, opt.read_threads);
  blk_assigner *a, *a14;
  CHECK_OK(blk_assigner_create_round_robin(&a, size, NB));
  CHECK_OK(blk_assigner_create_round_robin(&a14, size, NB + 1));
  snprintf(want, sizeof want, "cannot open %s", missing);
  head_fails(m, missing, a, BLK_EIO, want);
  head_fails(m, good, a14, BLK_EINVAL, "holds 13 blocks, but the assigner has 14");
  size_t at = 30; /* in the block count */
  copy_edited(good, bad, flip_at, &at);
  head_fails(m, bad, a, BLK_ECORRUPT, "the header fails its checksum");
  at = 1; /* in the magic */
  copy_edited(good, bad, flip_at, &at);
  head_fails(m, bad, a, BLK_ECORRUPT, "is not a blk checkpoint");
  unsigned version[2] = {8, 2};
  copy_edited(good, bad, reheader, version);
  head_fails(m, bad, a, BLK_EINVAL, "has format version 2; this blk reads version 1");
  unsigned order[2] = {16, __builtin_bswap32(BLK__CKPT_BOM)};
  copy_edited(good, bad, reheader, order);
  head_fails(m, bad, a, BLK_EINVAL, "was written on a big-endian machine");
  size_t keep = 0; /* all but the last byte */
  copy_edited(good, bad, cut, &keep);
  head_fails(m, bad, a, BLK_ECORRUPT, "(truncated)");
  copy_flipped(good, bad, in_index);
  head_fails(m, bad, a, BLK_ECORRUPT, "the index fails its checksum");
  head_fails(m, NULL, a, BLK_EINVAL, "the path is NULL");
  CHECK_EQ_INT(blk_checkpoint_write(m, "", NULL, 0), BLK_EINVAL);
  check_agreed(BLK_EINVAL, "the path is empty");
  blk_master_destroy(m);

  /* A master that holds a block already (on the last rank). */
  m = make_master(MPI_COMM_WORLD, 1);
  if (rank == size - 1) CHECK_OK(blk_master_add(m, 0, make_ref(0), NULL, 0));
  head_fails(m, good, a, BLK_EINVAL, "read into a master without blocks");
  blk_master_destroy(m);

  /* Bytes flipped in gid 9's saved bytes and in gid 6's links: both are
   * lost, everything else is read, and the lowest failing rank (its
   * lowest gid) is named. */
  copy_flipped(good, bad, in_data_9);
  copy_flipped(bad, bad, in_links_6);
  int r6 = blk_assigner_rank(a, 6), r9 = blk_assigner_rank(a, 9), lost[2] = {6, 9};
  if (r9 < r6)
    snprintf(want, sizeof want, "rank %d, gid 9: %s: the saved bytes of gid 9 (", r9, bad);
  else
    snprintf(want, sizeof want, "rank %d, gid 6: %s: the record of gid 6 (offset", r6, bad);
  blocks_fail(bad, lost, 2, BLK_ECORRUPT, want);
  /* A load that fails on one block. */
  opt.fail_load_gid = 11;
  snprintf(want, sizeof want, "rank %d, gid 11: the load callback returned -9",
           blk_assigner_rank(a, 11));
  int lost11 = 11;
  blocks_fail(good, &lost11, 1, BLK_ECALLBACK, want);
  opt.fail_load_gid = -1;

  /* Writes that fail: the old file survives whole, and no .tmp is left. */
  size_t before_n = 0, after_n = 0;
  unsigned char *before = rank == 0 ? slurp(good, &before_n) : NULL;
  blk_assigner *c;
  CHECK_OK(blk_assigner_create_contiguous(&c, size, NB));
  m = make_master(MPI_COMM_WORLD, opt.write_threads);
  add_blocks(m, c, rank);
  opt.fail_save_gid = NB - 1; /* on the last rank */
  snprintf(want, sizeof want, "rank %d, gid %d: the save callback returned -7", size - 1, NB - 1);
  write_fails(m, good, BLK_ECALLBACK, want);
  opt.fail_save_gid = -1;
  write_fails(m, "/nonexistent-blk-dir/x.ckpt", BLK_EIO,
              "cannot create /nonexistent-blk-dir/x.ckpt.tmp");
  /* A gid on two ranks; at one rank, a gid past the count (14 of 14). */
  int extra_gid = size > 1 ? 0 : NB + 1;
  if (rank == size - 1) CHECK_OK(blk_master_add(m, extra_gid, make_ref(extra_gid), NULL, 0));
  if (size > 1)
    write_fails(m, good, BLK_EINVAL, "gid 0 is on ranks 0 and");
  else
    write_fails(m, good, BLK_EINVAL, "gid 14, but the ranks hold 14 blocks");
  blk_master_destroy(m);
  blk_assigner_destroy(c);
  if (rank == 0) {
    unsigned char *after = slurp(good, &after_n);
    CHECK_MSG(after_n == before_n && !memcmp(before, after, before_n), "a failed write changed %s",
              good);
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", good);
    CHECK_MSG(access(tmp, F_OK) != 0, "a failed write left %s", tmp);
    free(after);
    free(before);
  }
  read_file(good, NB, size, 5); /* still the good checkpoint */
  blk_assigner_destroy(a);
  blk_assigner_destroy(a14);
  blk_log_set_level(BLK_LOG_WARN);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  const char *which = "roundtrip";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--case") && i + 1 < argc)
      which = argv[++i];
    else if (!strcmp(argv[i], "--write-threads") && i + 1 < argc)
      opt.write_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--read-threads") && i + 1 < argc)
      opt.read_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-blocks") && i + 1 < argc)
      opt.mem_blocks = atoi(argv[++i]);
    else
      CHECK_MSG(0, "unknown option %s", argv[i]);
  }
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char dir[512];
  make_dir(dir, sizeof dir);
  if (!strcmp(which, "roundtrip"))
    roundtrip(dir);
  else if (!strcmp(which, "failures"))
    failures(dir);
  else
    CHECK_MSG(0, "unknown case %s", which);
  remove_dir(dir);
  if (rank == 0)
    printf("test_checkpoint %s: ok (%d ranks, write %d threads, read %d, %d blocks in memory)\n",
           which, size, opt.write_threads, opt.read_threads, opt.mem_blocks);
  MPI_Finalize();
  return 0;
}
