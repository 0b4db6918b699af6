/*
 * storage.c: records of swapped-out blocks and queues, in one spill file per
 * process or compressed in memory (see storage.h).
 *
 * The spill file never has a name while it holds data, so no way the process
 * ends (destroy, MPI_Abort, a crash, SIGKILL) can leave it behind: the kernel
 * frees an unnamed file when its last descriptor closes. Where the file
 * system supports it (Linux, O_TMPFILE) the file is created without a name;
 * otherwise it is created under a random name with O_EXCL and that name is
 * unlinked at once, before create returns. Only a kill inside that window of
 * two system calls can leave a file, and only on the fallback. blk__storage_path
 * gives a label for messages, never a path to open. The file is reached only
 * through the descriptor, so removing the directory mid-run changes nothing.
 *
 * A record is a 64-byte header followed by the codec's encoding of the raw
 * bytes. The header, in native byte order (the file never outlives the
 * process that wrote it), at these byte offsets:
 *    0  u32  magic 0x534B4C42 ("BLKS" read as little-endian bytes)
 *    4  u16  format version (1)
 *    6  u16  header size (64)
 *    8  i32  gid
 *   12  i32  kind (the caller's label)
 *   16  u32  codec format bits (as blk__codec_encode returned them)
 *   20  u32  reserved, 0
 *   24  u64  raw size (bytes before compression)
 *   32  u64  stored size (header + encoded bytes)
 *   40  u64  blk__checksum of the encoded bytes, seed SEED_DATA
 *   48  u64  the record's own offset in the file (UINT64_MAX in memory), so
 *            a record read from the wrong place is caught
 *   56  u64  blk__checksum of bytes 0..55, seed SEED_HEADER
 * The header checksum is verified first, then every field against the
 * caller's blk__record, then the data checksum, then the decoder's own
 * checks; only then are bytes handed back.
 *
 * Space in the file: every record takes an extent of its stored size rounded
 * up to ALIGN bytes. Free extents are kept in an array sorted by offset.
 * Invariants:
 *   - free extents are disjoint, never adjacent (a release coalesces with
 *     both neighbours) and none reaches `end` (free space at the end of the
 *     file is cut off with ftruncate), so every free extent is followed by a
 *     live extent and nfree <= live extents;
 *   - live counts taken extents: records, puts between taking their extent
 *     and their write's end, and test holes;
 *   - put reserves room for live + 1 free extents before it allocates, so
 *     returning an extent (release, or undoing a failed put) never needs
 *     memory and cannot fail;
 *   - free_bytes is the sum of the free extents; end (file_bytes) is the
 *     logical size of the file, live + free bytes.
 * A put takes the first free extent large enough (first fit), from its
 * start; only when none fits does the file grow at `end`. A failed write
 * hands its extent back the same way a release does (cutting the file back
 * if it had grown), so a failed put changes nothing.
 * A test hole (blk__storage_test_hole) is an extent taken at the end and
 * never written or released; it counts as live.
 * Nothing is fsync'ed: the file is scratch space that dies with the process.
 *
 * Memory mode (no directory): a record is one malloc'd block, a list node
 * followed by the stored bytes (rec->mem points past the node); the list lets
 * destroy free records the caller never released.
 *
 * Cost: put and get are one pass of the codec and one checksum pass over the
 * encoded bytes, plus one pwritev (get: two preads) per GiB. A raw record
 * in a file costs no copy: put writes the header and the caller's bytes with
 * one pwritev, get reads the bytes into the caller's buffer. The allocator
 * scans the free array (first fit, O(nfree)) and a release does a binary
 * search and one memmove of the array (O(nfree)); nfree <= live records.
 *
 * Compression that pays (storage.h): a put decides first, under the lock,
 * how to store (plan_put: raw by level, raw untried for a gid whose last
 * attempt did not pay, auto's choice (at level auto, or for a transient
 * kind at any level), or zstd), encodes without the lock,
 * keeps the frame only when it is RATIO_MIN times smaller than the raw
 * bytes, and tells the storage what it learnt (learn_put: the gid's hint,
 * the codec's speed, the kind's ratio). Every pwrite and pread measures the
 * device (auto uses the seconds per stored byte beyond each call's fixed
 * cost: rate_slope); every decode of a frame measures the decoder; a call
 * during which the thread was preempted measures nothing (unpreempted). The
 * figures are decayed sums, so they follow a change of data or device
 * within tens of records.
 *
 * Locking: one mutex, s->lock, guards the free extents, `live`, the memory
 * mode list, the spare workers, the hints, the kinds, the measured figures
 * and the statistics; each call holds it two or three times for a few
 * hundred instructions at most (the first-fit scan and the release's
 * memmove are O(nfree)), and ftruncate, cutting free space off the end of
 * the file, is the one system call made under it (the cut must not race
 * with a put taking space at the end). Encoding, decoding, checksums,
 * pread and pwrite run with no lock held, each call on a worker (codec and
 * scratch buffer) of its own. An extent is taken (and counted live) before
 * its pwrite, under the lock, so no other put can take it, and a failed
 * write gives it back under the lock; the file's end only moves under the
 * lock and never below a taken extent, so a write in flight is never cut.
 * A second mutex, s->writing, is held around each pwrite (and outside its
 * timing): the local file systems a spill file lives on (ext4, XFS, tmpfs)
 * take the file's inode lock for a buffered write, so two I/O threads never
 * write at once anyway, and the second one spun in the kernel while the
 * first copied its record: 3.4 % of redistribute_a2a's samples out of core
 * (docs/out-of-core.md). Waiting on s->writing sleeps, and leaves the core
 * to the callbacks. Reads take no lock.
 */
#define _GNU_SOURCE /* O_TMPFILE (glibc shows it only with _GNU_SOURCE) */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64

#include "storage/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/copy.h"
#include "base/fail.h"
#include "base/logger.h"
#include "base/thread.h"
#include "base/trace.h"
#include "storage/checksum.h"
#include "storage/codec.h"

#define MAGIC UINT32_C(0x534B4C42)
#define VERSION 1u
#define HEADER_SIZE 64u
#define NO_OFFSET UINT64_MAX
#define SEED_HEADER UINT64_C(0x9E3779B97F4A7C15)
#define SEED_DATA UINT64_C(0xC2B2AE3D27D4EB4F)

/* Extents are multiples of this, so no sliver too small for any record is
 * ever left over. */
#define ALIGN UINT64_C(64)

/* The most one pread/pwrite moves (Linux moves at most 0x7ffff000 anyway). */
#define IO_CHUNK ((size_t)1 << 30)

/* The scratch buffer is freed after a call that grew it beyond this, so one
 * huge record does not pin its size in memory for the rest of the run. */
#define SCRATCH_KEEP ((size_t)64 << 20)

/* Header field offsets. */
enum {
  H_MAGIC = 0,
  H_VERSION = 4,
  H_HSIZE = 6,
  H_GID = 8,
  H_KIND = 12,
  H_FORMAT = 16,
  H_RESERVED = 20,
  H_RAW = 24,
  H_STORED = 32,
  H_DATA_SUM = 40,
  H_OFFSET = 48,
  H_HEADER_SUM = 56
};

typedef struct extent {
  uint64_t off, len;
} extent;

/* Memory mode: what precedes the stored bytes of each record. */
typedef union mem_node {
  struct {
    union mem_node *prev, *next;
  } link;
  max_align_t align;
} mem_node;

/* What one call at a time works with: a codec and the buffer a record is
 * built in (put) or read into (get). A call takes one from the spares and
 * gives it back, so concurrent calls never share one. */
typedef struct worker {
  blk__codec *codec;
  blk_buffer scratch;
  int encoded, decoded; /* the codec has encoded, decoded before */
} worker;

/* Compression pays when the encoding is at least RATIO_MIN times smaller
 * than the raw bytes; otherwise the record is stored raw. */
#define RATIO_MIN 1.1

/* The gids whose last attempt did not pay: a direct-mapped table of HINTS
 * slots keyed by (gid, kind); a colliding gid takes the slot over (the
 * loser merely tries zstd again). Such a gid's records are stored raw
 * without trying, but for every PROBE_EVERY-th, which tries again. */
#define HINTS 256
#define PROBE_EVERY 8

typedef struct hint {
  int gid, kind;
  int poor;    /* the last attempt for (gid, kind) did not pay */
  int skipped; /* records stored raw untried since that attempt */
} hint;

/* Auto: what a kind of record compresses to, and the choice for it. KINDS
 * slots, keyed by kind label (a caller has a handful: block, queue). */
#define KINDS 8
/* Auto probes a kind it stores raw every `interval` records: from
 * PROBE_EVERY (more when the figures are far from the tipping point),
 * doubled by each probe that confirms raw, up to PROBE_MAX. */
#define PROBE_MAX 64
/* Weight the old figures keep at each new sample (decayed sums). */
#define DECAY_RATE 0.9
#define DECAY_RATIO 0.75

/* Samples of (bytes, seconds), as decayed sums: their count, the bytes,
 * the seconds, bytes squared and bytes times seconds. provisional: every
 * sample so far is one auto would not trust (rate_learn). */
typedef struct rate {
  double n, x, y, xx, xy;
  int provisional;
} rate;

typedef struct kind_model {
  int kind, used;
  double raw, enc; /* decayed sums over attempts: raw and encoded bytes */
  int raw_chosen;  /* the figures say raw is faster for this kind */
  int countdown;   /* raw records left before the next probe */
  int interval;    /* what countdown restarts from */
} kind_model;

/* How one put stores its record, decided under the lock before encoding. */
typedef enum plan {
  PLAN_RAW,      /* no compression: level BLK__CODEC_STORE, or nothing to encode */
  PLAN_SKIP,     /* raw untried: this gid's last attempt did not pay */
  PLAN_FAST,     /* raw: auto measured the device faster than the codec */
  PLAN_COMPRESS, /* try zstd */
  PLAN_PROBE     /* try zstd as auto's probe of a kind it stores raw */
} plan;

struct blk__storage {
  int fd;          /* the spill file; -1 in memory mode */
  char *path;      /* the spill file's path; NULL in memory mode */
  int level;       /* as created: a zstd level, BLK__CODEC_STORE or BLK__STORAGE_AUTO */
  int codec_level; /* what the codecs are made with */
  blk__mutex *lock;
  blk__mutex *writing; /* held around a pwrite (see the top) */
  /* Everything below is under lock. */
  worker **spare;          /* workers not in use; room for every worker */
  size_t nspare, nworkers; /* nworkers: made so far, all freed at destroy */
  extent *free;            /* free extents sorted by offset */
  size_t nfree, cap_free;
  uint64_t live;            /* extents taken (records, writes under way, holes) */
  mem_node head;            /* memory mode: circular list of live records */
  blk__storage_stats stats; /* file_bytes is the logical end of the file */
  hint hints[HINTS];
  kind_model kinds[KINDS];
  rate enc, dec;           /* codec: seconds per raw byte (zstd frames only) */
  rate wr, rd;             /* device: seconds per stored byte */
  double test_wr, test_rd; /* >= 0: the device figures a test set */
  int test_preempted;      /* a test says how every timed call ran (blk__storage_test_preempted) */
  /* The kinds judged by time alone (blk__storage_transient). */
  int transient[BLK__STORAGE_TRANSIENT_MAX], ntransient;
};

/* --- small helpers --- */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A point in a timed call: the wall clock and the calling thread's CPU
 * time and context switches, involuntary (preempted) and voluntary
 * (blocked), so far (0 where the system does not count them). */
typedef struct timed {
  double wall, cpu;
  long preempted, blocked;
} timed;

static timed timed_now(void) {
  timed t = {now_s(), 0, 0, 0};
#ifdef RUSAGE_THREAD
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) {
    t.cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    t.preempted = ru.ru_nivcsw;
    t.blocked = ru.ru_nvcsw;
  }
#endif
  return t;
}

/* What a call timed from t0 to t1 cost, in *sec, for auto; returns whether
 * auto may trust it. Not preempted: its wall time, which holds any wait for
 * the device. Preempted but never blocked: its thread's CPU time, since its
 * wall time holds other threads' time too. Preempted and blocked: the wall
 * time, untrusted (it mixes the two; the CPU time misses the wait).
 * With more threads than cores (callbacks, the driver and the I/O threads)
 * preemption is common, and a long call is preempted more often than a
 * short one: learning only from calls that were not preempted kept the
 * 6.4 MB writes of a spill file that took 1.2-2.6 ms and dropped those
 * that took 4.5-44 ms. */
static int timed_cost(const blk__storage *s, const timed *t0, const timed *t1, double *sec) {
  const int preempted = s->test_preempted || t1->preempted != t0->preempted;
  const int blocked = s->test_preempted == 1 || t1->blocked != t0->blocked;
  *sec = t1->wall - t0->wall;
  if (!preempted) return 1;
  if (blocked) return 0;
  *sec = t1->cpu - t0->cpu;
  return 1;
}

/* strerror, but thread-safe. _GNU_SOURCE gives glibc's strerror_r, which
 * returns the text (maybe not in buf); elsewhere it is the XSI one, which
 * returns 0 or an error. _Generic picks the right reading from the type, so
 * no guess about the C library is needed. */
static const char *text_gnu(const char *r, char *buf, size_t n, int e) {
  (void)buf;
  (void)n;
  (void)e;
  return r;
}
static const char *text_xsi(int r, char *buf, size_t n, int e) {
  if (r != 0) snprintf(buf, n, "error %d", e);
  return buf;
}
static const char *errtext(int e, char *buf, size_t n) {
  return _Generic(strerror_r(e, buf, n), char *: text_gnu, default: text_xsi)(strerror_r(e, buf, n),
                                                                               buf, n, e);
}

static uint64_t round_up(uint64_t n) {
  return (n + ALIGN - 1) / ALIGN * ALIGN;
}

static const char *where(const blk__storage *s) {
  return s->fd >= 0 ? s->path : "memory";
}

static void put_u16(unsigned char *p, uint16_t v) {
  memcpy(p, &v, sizeof v);
}
static void put_u32(unsigned char *p, uint32_t v) {
  memcpy(p, &v, sizeof v);
}
static void put_u64(unsigned char *p, uint64_t v) {
  memcpy(p, &v, sizeof v);
}
static uint16_t get_u16(const unsigned char *p) {
  uint16_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static uint64_t mix64(uint64_t x) {
  x += UINT64_C(0x9E3779B97F4A7C15);
  x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
  return x ^ (x >> 31);
}

/* --- the spill file --- */

/* Nonzero: create takes the fallback even where O_TMPFILE works (tests). */
static atomic_int no_tmpfile;

#ifdef O_TMPFILE
/* Whether open(O_TMPFILE) failing with e means "not supported here" (so the
 * fallback should try) rather than a real failure to report: EOPNOTSUPP from
 * a file system without it, EISDIR from a kernel older than 3.11 (it sees
 * only O_DIRECTORY | O_RDWR), EINVAL and ENOENT as open(2) lists them for
 * missing support. ENOENT also means the directory vanished after the stat;
 * then the fallback fails the same way and reports it. */
static int tmpfile_unsupported(int e) {
#if defined(ENOTSUP) && ENOTSUP != EOPNOTSUPP
  if (e == ENOTSUP) return 1;
#endif
  return e == EOPNOTSUPP || e == EISDIR || e == EINVAL || e == ENOENT;
}
#endif

/* Writes "<dir>/blk-r<rank>-<12 hex digits of r>.spill" into p[0, cap). */
static void spill_name(char *p, size_t cap, const char *dir, size_t dlen, int rank, uint64_t r) {
  snprintf(p, cap, "%.*s/blk-r%d-%012" PRIx64 ".spill", (int)dlen, dir, rank,
           r & UINT64_C(0xFFFFFFFFFFFF));
}

/* Creates the spill file in dir, unnamed (see the top of this file). Its
 * label is "<dir>/blk-r<rank>-<12 hex digits>.spill (unlinked)" either way.
 * The hex digits mix the pid, both clocks, an address and a counter, so two
 * processes (of one job or of concurrent jobs) on one node draw different
 * names for the fallback and O_EXCL settles the rest; they also tell the
 * storages of one rank apart in messages. */
static int open_spill(blk__storage *s, const char *dir, int rank) {
  static atomic_uint counter; /* storages may be created on several threads at once */
  static const char suffix[] = " (unlinked)";
  char ebuf[128];
  int rc = 0, e = 0;
  struct stat st;
  if (stat(dir, &st) != 0) {
    e = errno;
    rc = blk__fail(BLK_EIO, "storage: spill directory %s: %s", dir, errtext(e, ebuf, sizeof ebuf));
    goto done;
  }
  if (!S_ISDIR(st.st_mode)) {
    rc = blk__fail(BLK_EIO, "storage: spill directory %s: %s", dir,
                   errtext(ENOTDIR, ebuf, sizeof ebuf));
    goto done;
  }
  size_t dlen = strlen(dir);
  while (dlen > 1 && dir[dlen - 1] == '/') dlen--;
  if (dlen > 65536) {
    rc = blk__fail(BLK_EIO, "storage: spill directory %.200s...: %s", dir,
                   errtext(ENAMETOOLONG, ebuf, sizeof ebuf));
    goto done;
  }
  size_t cap = dlen + 64;
  s->path = blk__malloc(cap);
  if (!s->path) {
    rc = blk__fail(BLK_ENOMEM, "storage: no memory for a path in %s", dir);
    goto done;
  }
  struct timespec rt, mt;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mt);
  uint64_t r = mix64((uint64_t)getpid() ^ ((uint64_t)(uintptr_t)s << 16));
  r = mix64(r ^ (uint64_t)rt.tv_sec * UINT64_C(1000000007) ^ (uint64_t)rt.tv_nsec);
  r = mix64(r ^ (uint64_t)mt.tv_nsec ^ ((uint64_t)atomic_fetch_add(&counter, 1u) << 40));
  const char *how = "O_TMPFILE";
  int tried_tmpfile = 0;
#ifdef O_TMPFILE
  if (!atomic_load(&no_tmpfile)) {
    tried_tmpfile = 1;
    do {
      s->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    } while (s->fd < 0 && errno == EINTR);
    if (s->fd < 0) {
      e = errno;
      if (!tmpfile_unsupported(e)) {
        rc = blk__fail(BLK_EIO, "storage: creating an unnamed spill file in directory %s: %s", dir,
                       errtext(e, ebuf, sizeof ebuf));
        goto done;
      }
    }
  }
#endif
  if (s->fd < 0) {
    how = tried_tmpfile ? "a name unlinked at once (O_TMPFILE is not supported there)"
                        : "a name unlinked at once";
    for (int attempt = 0; attempt < 64; attempt++) {
      r = mix64(r + (uint64_t)attempt);
      spill_name(s->path, cap, dir, dlen, rank, r);
      s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (s->fd >= 0) break;
      e = errno;
      if (e != EEXIST && e != EINTR) break;
    }
    if (s->fd < 0) {
      rc = blk__fail(BLK_EIO, "storage: creating spill file %s in directory %s: %s", s->path, dir,
                     errtext(e, ebuf, sizeof ebuf));
      goto done;
    }
    /* The name is ours (O_EXCL, random, an instant old), so it is removed
     * without checking it is still our file. If it cannot go, the file would
     * outlive the process: refuse it rather than run with it (the empty
     * file stays; nothing here can remove it either). */
    if (unlink(s->path) != 0) {
      e = errno;
      rc = blk__fail(BLK_EIO,
                     "storage: removing the name of spill file %s in directory %s: %s (the empty "
                     "file is left there)",
                     s->path, dir, errtext(e, ebuf, sizeof ebuf));
      close(s->fd);
      s->fd = -1;
      goto done;
    }
  } else {
    spill_name(s->path, cap, dir, dlen, rank, r);
  }
  /* The label now says there is no such entry. */
  memcpy(s->path + strlen(s->path), suffix, sizeof suffix);
  BLK__LOG(BLK_LOG_DEBUG, "storage: spill file %s, created with %s", s->path, how);
done:
  if (rc) {
    free(s->path);
    s->path = NULL;
  }
  return rc;
}

/* Writes head[0, hn) and then body[0, bn) at `off`, as one record, in
 * pieces, through EINTR and short writes. Two pieces, so that a raw record
 * goes to the file from the caller's bytes, not from a copy of them behind
 * its header. Returns 0 or the errno of the failure. */
static int write_all(int fd, const unsigned char *head, size_t hn, const unsigned char *body,
                     size_t bn, uint64_t off) {
  const size_t n = hn + bn;
  size_t done = 0;
  while (done < n) {
    struct iovec v[2];
    int nv = 0;
    size_t room = IO_CHUNK;
    if (done < hn) {
      v[nv].iov_base = (void *)(uintptr_t)(head + done); /* iovec is not const */
      v[nv].iov_len = hn - done < room ? hn - done : room;
      room -= v[nv++].iov_len;
    }
    size_t at = done < hn ? 0 : done - hn;
    if (room > 0 && at < bn) {
      v[nv].iov_base = (void *)(uintptr_t)(body + at);
      v[nv].iov_len = bn - at < room ? bn - at : room;
      nv++;
    }
    ssize_t w = pwritev(fd, v, nv, (off_t)(off + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO; /* no progress and no reason: do not spin */
    done += (size_t)w;
  }
  return 0;
}

/* Reads up to n bytes at `off` into p; *got says how many came before the end
 * of the file. Returns 0 (check *got) or the errno of the failure. */
static int read_all(int fd, unsigned char *p, size_t n, uint64_t off, size_t *got) {
  size_t done = 0;
  while (done < n) {
    size_t chunk = n - done < IO_CHUNK ? n - done : IO_CHUNK;
    ssize_t r = pread(fd, p + done, chunk, (off_t)(off + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      *got = done;
      return errno;
    }
    if (r == 0) break;
    done += (size_t)r;
  }
  *got = done;
  return 0;
}

/* --- free extents --- */

static void set_end(blk__storage *s, uint64_t end) {
  s->stats.file_bytes = end;
  if (end > s->stats.file_bytes_peak) s->stats.file_bytes_peak = end;
}

/* Room for `need` free extents. */
static int reserve_free(blk__storage *s, size_t need) {
  if (need <= s->cap_free) return 0;
  size_t cap = s->cap_free < 16 ? 16 : s->cap_free;
  while (cap < need) cap *= 2;
  extent *a = blk__realloc(s->free, cap * sizeof *a);
  if (!a) return BLK_ENOMEM;
  s->free = a;
  s->cap_free = cap;
  return 0;
}

/* Takes `len` bytes (a multiple of ALIGN): the first free extent that holds
 * them, or the end of the file. Returns 0, or EFBIG when the file would pass
 * what an off_t can address. */
static int take_extent(blk__storage *s, uint64_t len, uint64_t *off) {
  for (size_t i = 0; i < s->nfree; i++) {
    extent *e = &s->free[i];
    if (e->len < len) continue;
    *off = e->off;
    e->off += len;
    e->len -= len;
    s->stats.free_bytes -= len;
    if (e->len == 0) {
      memmove(e, e + 1, (s->nfree - i - 1) * sizeof *e);
      s->nfree--;
    }
    return 0;
  }
  uint64_t end = s->stats.file_bytes;
  if (len > (uint64_t)INT64_MAX - end) return EFBIG;
  *off = end;
  set_end(s, end + len);
  return 0;
}

/* Returns [off, off + len) to the free extents, coalescing it with its
 * neighbours, and cuts free space at the end off the file. Space that is not
 * live (already free, or outside the file) is the caller's bug. */
static void give_extent(blk__storage *s, uint64_t off, uint64_t len) {
  uint64_t end = s->stats.file_bytes;
  if (len == 0 || off % ALIGN != 0 || off > end || len > end - off)
    blk__panic("storage: releasing [%" PRIu64 ", +%" PRIu64 ") of %s, which ends at %" PRIu64
               ": not a record of this storage",
               off, len, s->path, end);
  /* i: the first free extent after off. */
  size_t lo = 0, hi = s->nfree;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->free[mid].off <= off) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  size_t i = lo;
  extent *prev = i > 0 ? &s->free[i - 1] : NULL;
  extent *next = i < s->nfree ? &s->free[i] : NULL;
  if ((prev && prev->off + prev->len > off) || (next && off + len > next->off))
    blk__panic("storage: releasing [%" PRIu64 ", +%" PRIu64 ") of %s twice: it overlaps free space",
               off, len, s->path);
  int join_prev = prev && prev->off + prev->len == off;
  int join_next = next && off + len == next->off;
  if (join_prev && join_next) {
    prev->len += len + next->len;
    memmove(next, next + 1, (s->nfree - i - 1) * sizeof *next);
    s->nfree--;
  } else if (join_prev) {
    prev->len += len;
  } else if (join_next) {
    next->off = off;
    next->len += len;
  } else {
    /* put reserved room for this (see the invariants above). */
    if (reserve_free(s, s->nfree + 1) != 0) {
      BLK__LOG(BLK_LOG_WARN, "storage: no memory to track %" PRIu64 " free bytes of %s", len,
               s->path);
      return;
    }
    memmove(&s->free[i + 1], &s->free[i], (s->nfree - i) * sizeof *s->free);
    s->free[i] = (extent){off, len};
    s->nfree++;
  }
  s->stats.free_bytes += len;

  extent *last = &s->free[s->nfree - 1];
  if (last->off + last->len == end) {
    s->stats.free_bytes -= last->len;
    s->stats.file_bytes = last->off;
    s->nfree--;
    /* Best effort: if the file cannot shrink, the bytes past the logical end
     * are simply overwritten when it grows again. */
    if (ftruncate(s->fd, (off_t)s->stats.file_bytes) != 0) {
      char ebuf[128];
      BLK__LOG(BLK_LOG_DEBUG, "storage: cutting %s to %" PRIu64 " bytes: %s", s->path,
               s->stats.file_bytes, errtext(errno, ebuf, sizeof ebuf));
    }
  }
}

/* --- workers --- */

static void worker_free(worker *w) {
  if (!w) return;
  blk__codec_destroy(w->codec);
  blk_buffer_free(&w->scratch);
  free(w);
}

/* Makes a worker and room for it among the spares (so giving it back never
 * needs memory). Takes the lock. */
static int worker_new(blk__storage *s, worker **out) {
  int rc = 0;
  *out = NULL;
  worker *w = blk__calloc(1, sizeof *w);
  if (!w) return blk__fail(BLK_ENOMEM, "storage: no memory for a codec");
  blk_buffer_init(&w->scratch);
  rc = blk__codec_create(&w->codec, s->codec_level);
  if (rc) goto fail;
  blk__mutex_lock(s->lock);
  worker **a = blk__realloc(s->spare, (s->nworkers + 1) * sizeof *a);
  if (a) {
    s->spare = a;
    s->nworkers++;
  }
  blk__mutex_unlock(s->lock);
  if (!a) {
    rc = blk__fail(BLK_ENOMEM, "storage: no memory for a codec");
    goto fail;
  }
  *out = w;
  return 0;
fail:
  worker_free(w);
  return rc;
}

/* A spare worker, or a new one when every worker is in use. Takes the
 * lock. */
static int worker_take(blk__storage *s, worker **out) {
  blk__mutex_lock(s->lock);
  worker *w = s->nspare ? s->spare[--s->nspare] : NULL;
  blk__mutex_unlock(s->lock);
  if (w) {
    *out = w;
    return 0;
  }
  return worker_new(s, out);
}

/* Gives w back; with the lock held. A buffer grown past SCRATCH_KEEP was
 * freed by the caller before locking. */
static void worker_give(blk__storage *s, worker *w) {
  s->spare[s->nspare++] = w;
}

/* Frees the scratch of a worker that grew too large; without the lock. */
static void worker_trim(worker *w) {
  if (w->scratch.capacity > SCRATCH_KEEP) blk_buffer_free(&w->scratch);
}

/* --- when compression pays --- */

static void rate_add(rate *r, double sec, double bytes) {
  r->n = r->n * DECAY_RATE + 1;
  r->x = r->x * DECAY_RATE + bytes;
  r->y = r->y * DECAY_RATE + sec;
  r->xx = r->xx * DECAY_RATE + bytes * bytes;
  r->xy = r->xy * DECAY_RATE + bytes * sec;
}

/* Learns a sample; `trusted` says whether its time was the call's own
 * (timed_cost) and, for the codec, not its first use (which pays for
 * contexts and scratch memory: 17 ms for a first 6.4 MB encode that then
 * took 2.6). Until a figure has a trusted sample it takes untrusted ones
 * (such a figure is better than none, which decides blindly) and is
 * provisional; its first trusted sample replaces them. */
static void rate_learn(rate *r, double sec, double bytes, int trusted) {
  if (!trusted) {
    if (r->n > 0 && !r->provisional) return;
    r->provisional = 1;
  } else if (r->provisional) {
    *r = (rate){0};
  }
  rate_add(r, sec, bytes);
}

/* Seconds per byte, or -1 before any sample. */
static double rate_get(const rate *r) {
  return r->x > 0 ? r->y / r->x : -1.0;
}

/* Samples whose mean size is below this measure a call's fixed cost, not
 * the device's speed per byte. */
#define RATE_MIN_BYTES ((double)(64 << 10))

/* The device's seconds per byte beyond its fixed cost per call: the slope
 * of the least-squares line through the samples, within [0, rate_get].
 * A call's fixed cost (a system call, a few microseconds) is paid as much
 * by a raw record as by a compressed one, so only the slope weighs in the
 * choice; seconds over bytes would charge it to the bytes and make a small
 * (compressed) record's device look slow. Samples too alike in size to
 * tell the two apart give seconds over bytes if they are large, and -1
 * (not measured) if they are small: the headers of empty records alone,
 * read at a few microseconds for 64 bytes, made the page cache look like
 * a device of 3-16 MB/s, and auto compressed a whole fill pass for it.
 * -1 before any sample. */
static double rate_slope(const rate *r) {
  double avg = rate_get(r);
  if (avg < 0) return avg;
  double mx = r->x / r->n, my = r->y / r->n;
  double var = r->xx / r->n - mx * mx;
  if (var <= 0.01 * mx * mx) return mx >= RATE_MIN_BYTES ? avg : -1.0;
  double b = (r->xy / r->n - mx * my) / var;
  return b < 0 ? 0 : b < avg ? b : avg;
}

static hint *hint_of(blk__storage *s, int gid, int kind) {
  uint64_t k = (uint64_t)(uint32_t)gid | (uint64_t)(uint32_t)kind << 32;
  return &s->hints[mix64(k) % HINTS];
}

static kind_model *kind_of(blk__storage *s, int kind) {
  kind_model *k = &s->kinds[(unsigned)kind % KINDS];
  if (!k->used || k->kind != kind) *k = (kind_model){.kind = kind, .used = 1};
  return k;
}

/* Auto, with a spill file: what compressing a record of kind k costs over
 * what it saves, by the figures (>= 1: raw is faster). A record is written
 * once and read once, so compressing costs encode + decode (per raw byte)
 * and saves (1 - stored/raw) of the device's write + read time. Until the
 * codec and the ratio have been measured it returns 0 (so the put
 * compresses, which measures them); then, until the device has been, -1
 * (so the put stores raw, which measures it: frames that compress well are
 * too small to, and a fill pass of empty blocks was compressed whole for
 * want of a figure, at 0.9 ms a block to encode and 1.2 ms to decode
 * against 1 ms and 0.4 ms to write and read raw). A decode speed not
 * measured yet is taken as half the encode time (zstd level 1 decodes 2-4
 * times faster than it encodes, docs/compression.md), a read speed not
 * measured yet as the write speed. An encode figure that is provisional
 * (rate_learn) counts as not measured: a first encode costs several times
 * the next, and the raw records chosen on it would measure nothing but
 * the device. */
static double cost_over_saving(const blk__storage *s, const kind_model *k) {
  double e = rate_get(&s->enc), d = rate_get(&s->dec);
  double w = s->test_wr >= 0 ? s->test_wr : rate_slope(&s->wr);
  double r = s->test_rd >= 0 ? s->test_rd : rate_slope(&s->rd);
  if (k->raw <= 0 || e < 0 || s->enc.provisional) return 0;
  if (w < 0) return -1;
  if (d < 0) d = e / 2;
  if (r < 0) r = w;
  double saving = (1.0 - k->enc / k->raw) * (w + r);
  if (saving <= 0) return HUGE_VAL;
  return (e + d) / saving;
}

/* The records between auto's probes of a kind it stores raw: PROBE_EVERY
 * times how far the figures are from the tipping point (costs 5 times
 * what it saves: 40), at least `floor`, at most PROBE_MAX. Figures that
 * are far off would have to change manyfold before a probe could find
 * anything, so such probes come rarely. */
static int probe_interval(double ratio, int floor) {
  double n = (double)PROBE_EVERY * ratio;
  int i = n >= PROBE_MAX ? PROBE_MAX : (int)n;
  if (i < floor) i = floor;
  return i < PROBE_MAX ? i : PROBE_MAX;
}

/* Whether auto's figures choose between zstd and raw for records of kind:
 * at level auto, or for a transient kind (blk__storage_transient), with a
 * spill file. */
static int judged_by_time(const blk__storage *s, int kind) {
  if (s->fd < 0) return 0;
  if (s->level == BLK__STORAGE_AUTO) return 1;
  for (int i = 0; i < s->ntransient; i++)
    if (s->transient[i] == kind) return 1;
  return 0;
}

/* How a put of n bytes of (gid, kind) stores its record; with the lock held.
 * Counts a skip in the gid's hint and a raw record in auto's countdown. */
static plan plan_put(blk__storage *s, int gid, int kind, size_t n) {
  if (s->level == BLK__CODEC_STORE || n == 0) return PLAN_RAW;
  hint *h = hint_of(s, gid, kind);
  if (h->poor && h->gid == gid && h->kind == kind) {
    if (++h->skipped < PROBE_EVERY) return PLAN_SKIP;
    h->skipped = 0; /* the probe: try again */
  }
  if (!judged_by_time(s, kind)) return PLAN_COMPRESS;
  kind_model *k = kind_of(s, kind);
  double ratio = cost_over_saving(s, k);
  if (ratio < 0) return PLAN_FAST; /* (to measure the device) */
  if (ratio < 1) {
    k->raw_chosen = 0;
    return PLAN_COMPRESS;
  }
  if (!k->raw_chosen) {
    k->raw_chosen = 1;
    k->interval = k->countdown = probe_interval(ratio, PROBE_EVERY);
  }
  if (--k->countdown > 0) return PLAN_FAST;
  return PLAN_PROBE;
}

/* What an attempt at compressing n bytes of (gid, kind) taught, with the
 * lock held: it cost `sec` seconds (`trusted`: rate_learn), gave `enc`
 * bytes, and `pays` says whether it is kept. */
static void learn_put(blk__storage *s, int gid, int kind, plan p, size_t n, size_t enc, double sec,
                      int trusted, int pays) {
  rate_learn(&s->enc, sec, (double)n, trusted);
  hint *h = hint_of(s, gid, kind);
  if (!pays) {
    *h = (hint){.gid = gid, .kind = kind, .poor = 1, .skipped = 0};
  } else if (h->gid == gid && h->kind == kind) {
    h->poor = 0;
  }
  if (!judged_by_time(s, kind)) return;
  kind_model *k = kind_of(s, kind);
  k->raw = k->raw * DECAY_RATIO + (double)n;
  k->enc = k->enc * DECAY_RATIO + (double)enc;
  if (p != PLAN_PROBE) return;
  double ratio = cost_over_saving(s, k);
  if (ratio >= 1) {
    /* Confirmed: probe less often. */
    k->interval = k->countdown = probe_interval(ratio, 2 * k->interval);
  } else {
    k->raw_chosen = 0;
  }
}

/* Counts a successful put; with the lock held. */
static void count_put(blk__storage *s, plan p, int compressed, size_t n, uint64_t stored) {
  blk__storage_stats *st = &s->stats;
  st->records_written++;
  st->bytes_raw_written += (uint64_t)n;
  st->bytes_stored_written += stored;
  if (compressed) {
    st->records_compressed++;
    return;
  }
  st->records_raw++;
  if (p == PLAN_FAST) {
    st->records_raw_fast_device++;
  } else if (p != PLAN_RAW) { /* skipped, or tried and did not pay */
    st->records_raw_poor_ratio++;
    st->bytes_raw_poor_ratio += (uint64_t)n;
  }
}

/* --- create and destroy --- */

int blk__storage_create(blk__storage **out, const char *dir, int rank, int level) {
  int rc = 0;
  *out = NULL;
  blk__storage *s = blk__calloc(1, sizeof *s);
  if (!s) {
    rc = blk__fail(BLK_ENOMEM, "storage: no memory for a storage object");
    goto done;
  }
  s->fd = -1;
  s->head.link.prev = s->head.link.next = &s->head;
  s->level = level;
  s->codec_level = level == BLK__STORAGE_AUTO ? BLK__CODEC_DEFAULT_LEVEL : level;
  s->test_wr = s->test_rd = -1.0;
  rc = blk__mutex_create(&s->lock);
  if (!rc) rc = blk__mutex_create(&s->writing);
  if (rc) goto done;
  /* The first worker now: it checks the level, and the first put needs it. */
  worker *w = NULL;
  rc = worker_new(s, &w);
  if (rc) goto done;
  worker_give(s, w);
  if (dir) rc = open_spill(s, dir, rank);
done:
  if (rc) {
    blk__storage_destroy(s);
    s = NULL;
  }
  *out = s;
  return rc;
}

void blk__storage_destroy(blk__storage *s) {
  if (!s) return;
  if (s->fd >= 0) {
    char ebuf[128];
    /* The file has no name: closing its last descriptor frees it. */
    if (close(s->fd) != 0 && errno != EINTR)
      BLK__LOG(BLK_LOG_WARN, "storage: closing spill file %s: %s", s->path,
               errtext(errno, ebuf, sizeof ebuf));
  }
  for (mem_node *n = s->head.link.next; n && n != &s->head;) {
    mem_node *next = n->link.next;
    free(n);
    n = next;
  }
  for (size_t i = 0; i < s->nspare; i++) worker_free(s->spare[i]);
  free(s->spare);
  free(s->free);
  free(s->path);
  blk__mutex_destroy(s->lock);
  blk__mutex_destroy(s->writing);
  free(s);
}

/* --- put --- */

/* Fills the header at h for the encoded bytes that follow it. */
static void write_header(unsigned char *h, int gid, int kind, uint32_t format, uint64_t raw,
                         uint64_t stored, uint64_t data_sum, uint64_t offset) {
  memset(h, 0, HEADER_SIZE);
  put_u32(h + H_MAGIC, MAGIC);
  put_u16(h + H_VERSION, (uint16_t)VERSION);
  put_u16(h + H_HSIZE, (uint16_t)HEADER_SIZE);
  put_u32(h + H_GID, (uint32_t)gid);
  put_u32(h + H_KIND, (uint32_t)kind);
  put_u32(h + H_FORMAT, format);
  put_u32(h + H_RESERVED, 0);
  put_u64(h + H_RAW, raw);
  put_u64(h + H_STORED, stored);
  put_u64(h + H_DATA_SUM, data_sum);
  put_u64(h + H_OFFSET, offset);
  put_u64(h + H_HEADER_SUM, blk__checksum(h, H_HEADER_SUM, SEED_HEADER));
}

/* A record stored or loaded, as a span of the trace (trace.h). */
static void traced(blk__trace *t, const char *name, blk__trace_kind kind, int64_t started,
                   const blk__record *rec, double sec_codec, double sec_io) {
  blk__trace_record(t, &(blk__trace_span){name, started, blk__now_ns(), kind, rec->gid, -1,
                                          (int64_t)rec->raw, (int64_t)rec->stored,
                                          (int64_t)(sec_codec * 1e9), (int64_t)(sec_io * 1e9)});
}

/* blk__storage_put; raw_sum, when not NULL, is the checksum of the raw
 * bytes (put_over computed it), which a record stored raw takes as its data
 * checksum instead of a second pass. */
static int put_record(blk__storage *s, int gid, int kind, const void *raw, size_t n,
                      size_t elem_size, blk__record *rec, const uint64_t *raw_sum) {
  int rc = 0, e = 0;
  char ebuf[128];
  const int memory = s->fd < 0;
  /* Memory mode builds the whole allocation, node first, in the scratch
   * buffer and then takes its memory (malloc'd by buffer.c). */
  const size_t prefix = memory ? sizeof(mem_node) : 0;
  uint64_t off = NO_OFFSET, len = 0;
  worker *w = NULL;
  blk__trace *trace = blk__trace_here();
  const int64_t started = trace ? blk__now_ns() : 0;
  double sec_codec = 0, sec_io = 0; /* for the trace */

  rc = worker_take(s, &w);
  if (rc) goto done;
  blk_buffer *b = &w->scratch;
  blk_buffer_clear(b);
  if (!blk_buffer_append(b, prefix + HEADER_SIZE)) {
    rc = blk__fail(BLK_ENOMEM, "storage: no memory to write gid %d (%zu bytes)", gid, n);
    goto done;
  }
  blk__mutex_lock(s->lock);
  const plan p = plan_put(s, gid, kind, n);
  blk__mutex_unlock(s->lock);

  /* Encode (no lock held), then keep the frame only if it pays. */
  uint32_t format = BLK__CODEC_RAW;
  if (p == PLAN_COMPRESS || p == PLAN_PROBE) {
    const timed t0 = timed_now();
    rc = blk__codec_encode(w->codec, b, raw, n, elem_size, &format);
    const timed t1 = timed_now();
    double cost;
    const int trusted = timed_cost(s, &t0, &t1, &cost) && w->encoded;
    w->encoded = 1;
    const double sec = t1.wall - t0.wall;
    sec_codec = sec;
    if (rc) {
      char detail[256];
      snprintf(detail, sizeof detail, "%s", blk_last_error());
      rc = blk__fail(rc, "storage: encoding %zu bytes of gid %d: %s", n, gid, detail);
      blk__mutex_lock(s->lock);
      s->stats.seconds_compress += sec;
      blk__mutex_unlock(s->lock);
      goto done;
    }
    const size_t enc = b->size - prefix - HEADER_SIZE;
    const int pays = BLK__CODEC_FORMAT_COMPRESSED(format) && (double)enc * RATIO_MIN <= (double)n;
    if (!pays) {
      /* Stored raw: a file takes the caller's bytes as they are (below);
       * memory needs them behind the header. The codec reserved
       * ZSTD_compressBound(n) >= n bytes past the header, so they fit over
       * the frame without growing b. */
      b->size = prefix + HEADER_SIZE;
      if (memory && n > 0) {
        blk__copy(b->data + b->size, raw, n);
        b->size += n;
      }
      format = BLK__CODEC_RAW;
    }
    blk__mutex_lock(s->lock);
    s->stats.seconds_compress += sec;
    learn_put(s, gid, kind, p, n, enc, cost, trusted, pays);
    blk__mutex_unlock(s->lock);
  } else if (memory && n > 0) {
    rc = blk_buffer_write(b, raw, n);
    if (rc) {
      rc = blk__fail(BLK_ENOMEM, "storage: no memory to write gid %d (%zu bytes)", gid, n);
      goto done;
    }
  }
  const int compressed = BLK__CODEC_FORMAT_COMPRESSED(format);
  unsigned char *bytes = b->data + prefix;
  /* What follows the header: the frame or, in memory, the copy in b; raw
   * bytes bound for a file are written from where the caller has them. */
  const int in_b = memory || compressed;
  const unsigned char *encoded = in_b ? bytes + HEADER_SIZE : raw;
  const size_t enc_n = in_b ? b->size - prefix - HEADER_SIZE : n;
  const uint64_t stored = (uint64_t)HEADER_SIZE + enc_n;
  /* (Stored raw, the encoded bytes are the raw ones.) */
  const uint64_t data_sum =
      raw_sum && !compressed ? *raw_sum : blk__checksum(encoded, enc_n, SEED_DATA);

  if (memory) {
    write_header(bytes, gid, kind, format, (uint64_t)n, stored, data_sum, NO_OFFSET);
    mem_node *node = (mem_node *)(void *)b->data;
    mem_node *fit = realloc(node, b->size); /* give back the slack */
    if (fit) node = fit;
    blk_buffer_init(b); /* the memory is the record's now */
    bytes = (unsigned char *)(node + 1);
    blk__mutex_lock(s->lock);
    node->link.prev = s->head.link.prev;
    node->link.next = &s->head;
    s->head.link.prev->link.next = node;
    s->head.link.prev = node;
    set_end(s, s->stats.file_bytes + stored);
    s->live++;
    count_put(s, p, compressed, n, stored);
    worker_give(s, w);
    blk__mutex_unlock(s->lock);
    w = NULL;
  } else {
    len = round_up(stored);
    blk__mutex_lock(s->lock);
    /* Room for live + 1 free extents before taking one (the invariants). */
    int nomem = reserve_free(s, (size_t)s->live + 1) != 0;
    if (!nomem) e = take_extent(s, len, &off);
    if (!nomem && !e) s->live++;
    blk__mutex_unlock(s->lock);
    if (nomem) {
      rc = blk__fail(BLK_ENOMEM, "storage: no memory to track the free space of %s", s->path);
      goto done;
    }
    if (e) {
      rc = blk__fail(BLK_EIO, "storage: writing %" PRIu64 " bytes for gid %d to %s: %s", stored,
                     gid, s->path, errtext(e, ebuf, sizeof ebuf));
      goto done;
    }
    write_header(bytes, gid, kind, format, (uint64_t)n, stored, data_sum, off);
    blk__mutex_lock(s->writing);
    const timed t0 = timed_now();
    e = write_all(s->fd, bytes, HEADER_SIZE, encoded, enc_n, off);
    const timed t1 = timed_now();
    blk__mutex_unlock(s->writing);
    double cost;
    const int trusted = timed_cost(s, &t0, &t1, &cost);
    const double sec = t1.wall - t0.wall;
    sec_io = sec;
    worker_trim(w);
    blk__mutex_lock(s->lock);
    s->stats.seconds_write += sec;
    if (e) {
      give_extent(s, off, len);
      s->live--;
    } else {
      rate_learn(&s->wr, cost, (double)stored, trusted);
      count_put(s, p, compressed, n, stored);
    }
    worker_give(s, w);
    blk__mutex_unlock(s->lock);
    w = NULL;
    if (e) {
      rc = blk__fail(BLK_EIO,
                     "storage: writing %" PRIu64 " bytes for gid %d to %s (offset %" PRIu64 "): %s",
                     stored, gid, s->path, off, errtext(e, ebuf, sizeof ebuf));
      goto done;
    }
  }
  rec->offset = memory ? -1 : (int64_t)off;
  rec->stored = stored;
  rec->raw = (uint64_t)n;
  rec->mem = memory ? (void *)bytes : NULL;
  rec->gid = gid;
  /* (Stored raw, the data checksum is the raw bytes' own.) */
  rec->summed = raw_sum != NULL || !compressed;
  rec->sum = raw_sum ? *raw_sum : data_sum;
  rec->changed = 0;
done:
  if (w) {
    worker_trim(w);
    blk__mutex_lock(s->lock);
    worker_give(s, w);
    blk__mutex_unlock(s->lock);
  }
  if (trace && !rc) traced(trace, "store", BLK__TRACE_STORE, started, rec, sec_codec, sec_io);
  return rc;
}

int blk__storage_put(blk__storage *s, int gid, int kind, const void *raw, size_t n,
                     size_t elem_size, blk__record *rec) {
  return put_record(s, gid, kind, raw, n, elem_size, rec, NULL);
}

int blk__storage_put_over(blk__storage *s, int gid, int kind, const void *raw, size_t n,
                          size_t elem_size, blk__record *rec, int *unchanged) {
  if (unchanged) *unchanged = 0;
  /* After BLK__STORAGE_OVER_PROBE / 2 changes in a row, the sum only in two
   * puts of each BLK__STORAGE_OVER_PROBE (storage.h); a record stored raw
   * gets one from its data checksum anyway. */
  const unsigned changed = rec->stored ? rec->changed : 0;
  const int summing =
      changed < BLK__STORAGE_OVER_PROBE / 2 || changed % BLK__STORAGE_OVER_PROBE < 2;
  const uint64_t sum = summing ? blk__checksum(raw, n, SEED_DATA) : 0;
  if (summing && rec->stored && rec->summed && rec->raw == (uint64_t)n && rec->sum == sum) {
    blk__mutex_lock(s->lock);
    s->stats.records_unchanged++;
    blk__mutex_unlock(s->lock);
    rec->changed = 0;
    if (unchanged) *unchanged = 1;
    return BLK_OK;
  }
  blk__storage_release(s, rec); /* (first: its space may take the new one) */
  memset(rec, 0, sizeof *rec);
  int rc = put_record(s, gid, kind, raw, n, elem_size, rec, summing ? &sum : NULL);
  if (!rc) rec->changed = changed + 1;
  return rc;
}

int blk__storage_in_memory(const blk__storage *s) {
  return s->fd < 0;
}

/* --- get --- */

int blk__storage_get(blk__storage *s, const blk__record *rec, blk_buffer *out) {
  int rc = 0, e = 0;
  char ebuf[128];
  const int memory = s->fd < 0;
  const int gid = rec->gid;
  const long long roff = (long long)rec->offset;
  const char *file = where(s);
  unsigned char hbuf[HEADER_SIZE];
  const unsigned char *h = hbuf, *enc = NULL;
  size_t got = 0;
  double sec_head = 0, sec_read = 0, sec_decode = 0;    /* wall times, for the stats */
  double cost_head = 0, cost_read = 0, cost_decode = 0; /* for auto (timed_cost) */
  int trust_head = 0, trust_read = 0, trust_decode = 0;
  uint32_t format = 0;
  worker *w = NULL;
  blk__trace *trace = blk__trace_here();
  const int64_t started = trace ? blk__now_ns() : 0;

  blk_buffer_clear(out);
  /* The record named by gid and place: "in <file> at offset <o>" or "in memory". */
  char place[64];
  if (memory) {
    place[0] = '\0';
  } else {
    snprintf(place, sizeof place, " at offset %lld", roff);
  }
#define CORRUPT(...)                                                                               \
  do {                                                                                             \
    char why_[256];                                                                                \
    snprintf(why_, sizeof why_, __VA_ARGS__);                                                      \
    rc = blk__fail(BLK_ECORRUPT, "storage: record of gid %d in %s%s: %s", gid, file, place, why_); \
    goto done;                                                                                     \
  } while (0)

  if (rec->stored < HEADER_SIZE)
    CORRUPT("its stored size %" PRIu64 " is smaller than a header", rec->stored);
  if (rec->stored - HEADER_SIZE > SIZE_MAX || rec->raw > SIZE_MAX)
    CORRUPT("its sizes (%" PRIu64 " stored, %" PRIu64 " raw) do not fit in memory", rec->stored,
            rec->raw);
  const size_t enc_size = (size_t)(rec->stored - HEADER_SIZE);
  const uint64_t want_off = memory ? NO_OFFSET : (uint64_t)rec->offset;

  rc = worker_take(s, &w);
  if (rc) goto done;
  if (memory) {
    if (rec->offset != -1 || !rec->mem) CORRUPT("not a record kept in memory");
    h = rec->mem;
  } else {
    if (rec->offset < 0) CORRUPT("not a record in a file");
    const timed t0 = timed_now();
    e = read_all(s->fd, hbuf, HEADER_SIZE, want_off, &got);
    const timed t1 = timed_now();
    trust_head = timed_cost(s, &t0, &t1, &cost_head);
    sec_head = t1.wall - t0.wall;
    if (e) {
      rc = blk__fail(BLK_EIO, "storage: reading the header of gid %d from %s (offset %lld): %s",
                     gid, file, roff, errtext(e, ebuf, sizeof ebuf));
      goto done;
    }
    if (got < HEADER_SIZE)
      CORRUPT("the file ends at byte %" PRIu64 ", inside the header (truncated)", want_off + got);
  }

  uint64_t hsum = blk__checksum(h, H_HEADER_SUM, SEED_HEADER);
  if (hsum != get_u64(h + H_HEADER_SUM))
    CORRUPT("header checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")",
            get_u64(h + H_HEADER_SUM), hsum);
  if (get_u32(h + H_MAGIC) != MAGIC)
    CORRUPT("bad magic %08" PRIx32 " (expected %08" PRIx32 ")", get_u32(h + H_MAGIC), MAGIC);
  if (get_u16(h + H_VERSION) != VERSION || get_u16(h + H_HSIZE) != HEADER_SIZE)
    CORRUPT("format version %u with a %u-byte header (expected %u, %u)",
            (unsigned)get_u16(h + H_VERSION), (unsigned)get_u16(h + H_HSIZE), VERSION, HEADER_SIZE);
  if ((int)get_u32(h + H_GID) != gid) CORRUPT("the header is gid %d's", (int)get_u32(h + H_GID));
  if (get_u64(h + H_OFFSET) != want_off)
    CORRUPT("the header was written for offset %" PRIu64, get_u64(h + H_OFFSET));
  if (get_u64(h + H_STORED) != rec->stored || get_u64(h + H_RAW) != rec->raw)
    CORRUPT("the header says %" PRIu64 " stored / %" PRIu64 " raw bytes, the record %" PRIu64
            " / %" PRIu64,
            get_u64(h + H_STORED), get_u64(h + H_RAW), rec->stored, rec->raw);

  format = get_u32(h + H_FORMAT);
  /* A raw record in a file is read straight into `out`: its bytes are the
   * result once the checksum agrees, and decoding would only copy them. */
  const int direct = !memory && format == BLK__CODEC_RAW && enc_size == rec->raw && enc_size > 0;
  if (memory) {
    enc = h + HEADER_SIZE;
  } else {
    blk_buffer *into = direct ? out : &w->scratch;
    blk_buffer_clear(into);
    unsigned char *p = blk_buffer_append(into, enc_size);
    if (!p) {
      rc = blk__fail(BLK_ENOMEM, "storage: no memory to read %zu bytes of gid %d from %s", enc_size,
                     gid, file);
      goto done;
    }
    const timed t0 = timed_now();
    e = read_all(s->fd, p, enc_size, want_off + HEADER_SIZE, &got);
    const timed t1 = timed_now();
    trust_read = timed_cost(s, &t0, &t1, &cost_read);
    sec_read = t1.wall - t0.wall;
    if (e) {
      rc = blk__fail(BLK_EIO, "storage: reading %zu bytes of gid %d from %s (offset %lld): %s",
                     enc_size, gid, file, roff, errtext(e, ebuf, sizeof ebuf));
      goto done;
    }
    if (got < enc_size)
      CORRUPT("the file ends at byte %" PRIu64 ", inside the data (truncated)",
              want_off + HEADER_SIZE + got);
    enc = p;
  }
  uint64_t dsum = blk__checksum(enc, enc_size, SEED_DATA);
  if (dsum != get_u64(h + H_DATA_SUM))
    CORRUPT("data checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")",
            get_u64(h + H_DATA_SUM), dsum);

  const size_t raw = (size_t)rec->raw;
  if (direct) {
    /* The bytes are in `out` already. */
  } else if (raw == 0) {
    if (enc_size != 0) CORRUPT("%zu encoded bytes for an empty record", enc_size);
  } else {
    void *dst = blk_buffer_append(out, raw);
    if (!dst) {
      rc = blk__fail(BLK_ENOMEM, "storage: no memory to decode %zu bytes of gid %d", raw, gid);
      goto done;
    }
    const timed t0 = timed_now();
    rc = blk__codec_decode(w->codec, dst, raw, enc, enc_size, format);
    const timed t1 = timed_now();
    trust_decode = timed_cost(s, &t0, &t1, &cost_decode) && w->decoded;
    w->decoded = 1;
    sec_decode = t1.wall - t0.wall;
    if (rc == BLK_ECORRUPT) {
      char detail[200];
      snprintf(detail, sizeof detail, "%s", blk_last_error());
      CORRUPT("the decoder rejects it: %s", detail);
    }
    if (rc) goto done;
  }
#undef CORRUPT
done:
  if (rc) blk_buffer_clear(out);
  if (w) worker_trim(w);
  blk__mutex_lock(s->lock);
  s->stats.seconds_read += sec_head + sec_read;
  s->stats.seconds_decompress += sec_decode;
  if (!rc) {
    s->stats.records_read++;
    s->stats.bytes_raw_read += rec->raw;
    s->stats.bytes_stored_read += rec->stored;
    if (!memory) {
      /* Two samples, the header and the rest, so the fit sees two sizes
       * (an empty record's rest was not read: no sample). */
      rate_learn(&s->rd, cost_head, (double)HEADER_SIZE, trust_head);
      if (rec->stored > HEADER_SIZE)
        rate_learn(&s->rd, cost_read, (double)(rec->stored - HEADER_SIZE), trust_read);
    }
    if (BLK__CODEC_FORMAT_COMPRESSED(format) && rec->raw > 0)
      rate_learn(&s->dec, cost_decode, (double)rec->raw, trust_decode);
  }
  if (w) worker_give(s, w);
  blk__mutex_unlock(s->lock);
  if (trace && !rc)
    traced(trace, "load", BLK__TRACE_LOAD, started, rec, sec_decode, sec_head + sec_read);
  return rc;
}

/* --- release and the rest --- */

void blk__storage_release(blk__storage *s, blk__record *rec) {
  if (!rec || rec->stored == 0) return;
  if (s->fd < 0) {
    if (rec->offset != -1 || !rec->mem ||
        get_u32((const unsigned char *)rec->mem + H_MAGIC) != MAGIC)
      blk__panic("storage: releasing gid %d's record, which is not a record in memory", rec->gid);
    mem_node *node = (mem_node *)rec->mem - 1;
    blk__mutex_lock(s->lock);
    node->link.prev->link.next = node->link.next;
    node->link.next->link.prev = node->link.prev;
    s->stats.file_bytes -= rec->stored;
    s->live--;
    blk__mutex_unlock(s->lock);
    free(node);
  } else {
    if (rec->offset < 0)
      blk__panic("storage: releasing gid %d's record, which is not in %s", rec->gid, s->path);
    blk__mutex_lock(s->lock);
    give_extent(s, (uint64_t)rec->offset, round_up(rec->stored));
    s->live--;
    blk__mutex_unlock(s->lock);
  }
  rec->offset = -1;
  rec->stored = 0;
  rec->raw = 0;
  rec->mem = NULL;
}

void blk__storage_stats_get(const blk__storage *s, blk__storage_stats *out) {
  blk__mutex_lock(s->lock);
  *out = s->stats;
  blk__mutex_unlock(s->lock);
}

int blk__storage_fd(const blk__storage *s) {
  return s->fd;
}

const char *blk__storage_path(const blk__storage *s) {
  return s->path ? s->path : "";
}

void blk__storage_test_fallback(int on) {
  atomic_store(&no_tmpfile, on != 0);
}

int blk__storage_test_hole(blk__storage *s, uint64_t bytes) {
  char ebuf[128];
  int rc = 0;
  if (s->fd < 0) return blk__fail(BLK_EINVAL, "storage: a hole needs a spill file");
  blk__mutex_lock(s->lock);
  /* Taken at the end even if free space would hold it, and counted as live
   * so that nfree <= live still holds. */
  const uint64_t end = s->stats.file_bytes;
  if (reserve_free(s, (size_t)s->live + 1) != 0) {
    rc = blk__fail(BLK_ENOMEM, "storage: no memory to track the free space of %s", s->path);
  } else if (bytes > (uint64_t)INT64_MAX - ALIGN || round_up(bytes) > (uint64_t)INT64_MAX - end) {
    rc = blk__fail(BLK_EIO, "storage: a hole of %" PRIu64 " bytes in %s: %s", bytes, s->path,
                   errtext(EFBIG, ebuf, sizeof ebuf));
  } else {
    set_end(s, end + round_up(bytes));
    s->live++;
  }
  blk__mutex_unlock(s->lock);
  return rc;
}

void blk__storage_transient(blk__storage *s, int kind) {
  blk__mutex_lock(s->lock);
  int known = 0;
  for (int i = 0; i < s->ntransient; i++) known |= s->transient[i] == kind;
  if (!known && s->ntransient == BLK__STORAGE_TRANSIENT_MAX)
    blk__panic("storage: more than %d transient kinds", BLK__STORAGE_TRANSIENT_MAX);
  if (!known) s->transient[s->ntransient++] = kind;
  blk__mutex_unlock(s->lock);
}

int blk__storage_test_figures(blk__storage *s, double *write_spb, double *read_spb) {
  blk__mutex_lock(s->lock);
  *write_spb = rate_slope(&s->wr);
  *read_spb = rate_slope(&s->rd);
  int trusted = s->wr.n > 0 && !s->wr.provisional && s->rd.n > 0 && !s->rd.provisional;
  blk__mutex_unlock(s->lock);
  return trusted;
}

void blk__storage_test_preempted(blk__storage *s, int how) {
  blk__mutex_lock(s->lock);
  s->test_preempted = how;
  blk__mutex_unlock(s->lock);
}

void blk__storage_test_device(blk__storage *s, double write_spb, double read_spb) {
  blk__mutex_lock(s->lock);
  s->test_wr = write_spb;
  s->test_rd = read_spb;
  blk__mutex_unlock(s->lock);
}
