/*
 * storage.h: where swapped-out blocks and queues go.
 *
 * A storage object keeps records: each one is a byte string (a block saved by
 * the user's callback, or a queue) compressed with the codec, checksummed,
 * and written either to one spill file of this process or, with no spill
 * directory, kept compressed in memory. The master holds a blk__record per
 * saved item, a plain value that says where the bytes are; it gives it back
 * to read the item (blk__storage_get) and to free its space
 * (blk__storage_release). Space freed in the file is reused by later puts,
 * so the file does not grow without bound over many rounds of evict/load.
 *
 * The spill file has no name in any directory from the moment create
 * returns (O_TMPFILE where supported, else created and unlinked at once), so
 * it disappears with the process however the process ends, SIGKILL included:
 * nothing is left to clean up.
 *
 * Failure loses nothing: a put that fails changes nothing (the caller keeps
 * its block in memory), and a get never hands back bytes that did not pass
 * both checksums and the decoder.
 *
 * Compression pays for itself or is not done: a record whose zstd encoding
 * is not at least 1.1 times smaller than its raw bytes is stored raw, and a
 * gid (and kind) whose last attempt did not pay is stored raw untried, but
 * for every 8th record, which tries again. With level BLK__STORAGE_AUTO the
 * storage also chooses between zstd level 1 and raw from what it measures:
 * its codec's speed, the ratio of each kind of record, and the spill
 * file's write and read speed (docs/compression.md); so does any level for
 * a kind of short-lived records (blk__storage_transient).
 *
 * Threads: put, get, release and stats_get may be called by several threads
 * at once on one storage (the driver and a background I/O thread). Each
 * call takes a codec and a buffer of its own from the storage's spares
 * (made on first need and kept, so the steady state allocates nothing), and
 * encodes, decodes, reads and writes without any lock; one mutex guards
 * only the space of the file (or the list of records in memory), the
 * spares, what the storage learns about compression, and the statistics.
 * One record must not be released while a get of it runs, nor used after
 * its release; create and destroy have no other call running. No MPI: the
 * caller passes its rank.
 *
 * Sizes and offsets are 64-bit throughout; a record may exceed 4 GiB.
 */
#ifndef BLK_STORAGE_H
#define BLK_STORAGE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "blk/buffer.h"

typedef struct blk__storage blk__storage;

/* The level that chooses per record between zstd level 1 (after the
 * caller's shuffle) and raw from measured figures: with a spill file, it
 * compresses when encoding, decoding and moving the smaller record costs
 * less time than moving the raw one (a record is written once and read
 * once), and probes the other choice now and then; in memory, whenever the
 * ratio pays. No zstd level takes this value; it equals the public
 * BLK_COMPRESSION_AUTO. */
#define BLK__STORAGE_AUTO (INT_MIN + 1)

/* Where one saved item lives; a value the master keeps. Filled by a
 * successful blk__storage_put, cleared by blk__storage_release. */
typedef struct blk__record {
  int64_t offset;  /* in the file, or -1 when kept in memory */
  uint64_t stored; /* bytes on disk / in memory, header included */
  uint64_t raw;    /* bytes before compression */
  void *mem;       /* in-memory mode: the stored bytes (owned by the storage) */
  int gid;
  int summed;       /* sum holds the raw bytes' checksum (blk__storage_put_over) */
  uint64_t sum;     /* (blk__checksum of the raw bytes, SEED_DATA) */
  unsigned changed; /* put_over calls in a row that found other bytes (its own included) */
} blk__record;

typedef struct blk__storage_stats {
  /* Successful puts and gets only; a failed call counts nothing. */
  uint64_t records_written, records_read, bytes_raw_written, bytes_stored_written, bytes_raw_read,
      bytes_stored_read;
  /* blk__storage_put_over calls that wrote nothing: the record held those bytes already. */
  uint64_t records_unchanged;
  /* Time spent in each step (CLOCK_MONOTONIC), of successful and failed calls. */
  double seconds_compress, seconds_decompress, seconds_write, seconds_read;
  /* How successful puts stored their records: as a zstd frame, or raw. Of
   * the raw ones: those stored raw because compression did not pay (zstd was
   * tried and did not shrink them 1.1 times, or was skipped because the last
   * try for that gid and kind did not), with their raw bytes; and those that
   * level auto (or the rule for a transient kind) stored raw because it
   * measured raw to be faster (a device faster than the codec). The rest of
   * the raw ones had compression off or were empty. */
  uint64_t records_compressed, records_raw, records_raw_poor_ratio, bytes_raw_poor_ratio,
      records_raw_fast_device;
  /* The file's size (its logical end: every live record and free extent lies
   * below it), the largest it has been, and the bytes inside it that are free
   * for reuse. In memory mode: the bytes of live records held in memory, the
   * peak of that, and 0. */
  uint64_t file_bytes, file_bytes_peak, free_bytes;
} blk__storage_stats;

/* Creates a storage. dir == NULL keeps records compressed in memory.
 * Otherwise creates one spill file for this process inside `dir`, opened
 * O_RDWR | O_CLOEXEC, mode 0600, that has no name: on Linux it is opened
 * with O_TMPFILE; where that is not defined, or the kernel or file system
 * does not support it (open fails with EOPNOTSUPP, EISDIR, EINVAL or
 * ENOENT), it is created exclusively (O_EXCL) as
 * "<dir>/blk-r<rank>-<random>.spill", so concurrent jobs and ranks never
 * clash, and that name is unlinked before create returns. `level` is the zstd
 * level for the codec, BLK__CODEC_STORE (codec.h) to store every record raw,
 * or BLK__STORAGE_AUTO.
 * @return : 0; BLK_EIO naming `dir` and the reason when it does not exist,
 *           is not a directory or the file cannot be created in it (checked
 *           here, not at the first write), or when the fallback's name
 *           cannot be unlinked; BLK_ENOMEM; or the codec's error.
 *           On failure *out is NULL and nothing is left behind (but for the
 *           empty file whose name could not be unlinked, as the error says). */
int blk__storage_create(blk__storage **out, const char *dir, int rank, int level);

/* Closes the spill file, which frees it (it has no name), and frees every
 * record still held in memory (records of this storage are invalid
 * afterwards). NULL does nothing. A failed close is logged as a warning. */
void blk__storage_destroy(blk__storage *s);

/* Encodes raw[0, n) (byte-shuffled for elements of `elem_size` bytes, 0 for
 * none), writes one record (header + encoded bytes) tagged with gid and
 * `kind` (the caller's label: block, queue, ...), and fills *rec. `raw` may
 * be NULL when n == 0. Reuses freed space first (first fit); the file grows
 * only when no free extent is large enough.
 * @return : 0; BLK_EIO (ENOSPC, EFBIG, EIO, ...) with a detail naming the
 *           byte count, the gid, the file and strerror; BLK_ENOMEM; or the
 *           codec's error. On any failure nothing changes: *rec is untouched,
 *           the space goes back to the free list, the statistics count
 *           nothing written. */
int blk__storage_put(blk__storage *s, int gid, int kind, const void *raw, size_t n,
                     size_t elem_size, blk__record *rec);

/* As blk__storage_put, over *rec: the caller's record of an earlier state
 * of the same item (or an empty one). When *rec holds exactly these bytes
 * (the same size and the same checksum of the raw bytes, which the record
 * keeps when put_over wrote it, or put stored it raw), nothing is encoded
 * or written and *unchanged (if not NULL) is set; otherwise *rec is
 * released and the new record, with the checksum, takes its place. The
 * checksum is one pass over the raw bytes (blk__checksum, a few GB/s),
 * which a record stored raw needs anyway. An item whose bytes changed at
 * BLK__STORAGE_OVER_PROBE / 2 put_overs in a row or more is then compared
 * only twice in every BLK__STORAGE_OVER_PROBE puts (the first of the two
 * only gives its record a checksum for the second), so an item a program
 * always changes (a swap's blocks) pays a quarter of that pass when
 * compressed, and one that stops changing is found within that many. A
 * 64-bit checksum that matches different bytes would keep the old ones:
 * with a well-mixed hash that is one chance in 2^64 per call, far below
 * the storage's other risks.
 * @return : as blk__storage_put; on failure *rec has been released (it
 *           held other bytes than these) and is empty. */
int blk__storage_put_over(blk__storage *s, int gid, int kind, const void *raw, size_t n,
                          size_t elem_size, blk__record *rec, int *unchanged);
#define BLK__STORAGE_OVER_PROBE 8

/* Whether records live in memory (spill_in_memory) rather than a file. */
int blk__storage_in_memory(const blk__storage *s);

/* Marks the records of `kind` as short-lived: a message written out for a
 * block that is out, read back within the same operation. Only time counts
 * for such a record, not the space it takes, so at every zstd level it is
 * compressed only where compressing saves time by auto's figures (below),
 * with this storage's level; a kind that compresses 1.1 times at level 1
 * on the page cache costs the codec several times the write and read it
 * saves. Nothing changes in memory mode (memory is what runs out there) or
 * at BLK__CODEC_STORE. Call before the first put of that kind, from one
 * thread; at most BLK__STORAGE_TRANSIENT_MAX kinds (more is a caller's bug
 * and stops the program). */
#define BLK__STORAGE_TRANSIENT_MAX 4
void blk__storage_transient(blk__storage *s, int kind);

/* Reads, verifies and decodes the record into `out`: out is cleared, then
 * holds exactly rec->raw bytes (its read position at 0).
 * @return : 0; BLK_ECORRUPT naming the gid, the file and the offset for a
 *           header or data checksum mismatch, a bad magic or version, a
 *           header that disagrees with *rec (gid, sizes, offset), a file that
 *           ends before the record does, or data the decoder rejects;
 *           BLK_EIO for a failed read (the path and strerror); BLK_ENOMEM.
 *           On failure `out` is left empty: no garbage is ever returned. */
int blk__storage_get(blk__storage *s, const blk__record *rec, blk_buffer *out);

/* Gives the record's space back for reuse (coalescing it with adjacent free
 * space; free space at the end of the file is cut off), and clears *rec so
 * releasing it again does nothing. Releasing space that is already free, or
 * lies outside the file, is a caller's bug and stops the program. */
void blk__storage_release(blk__storage *s, blk__record *rec);

/* Copies the statistics so far into *out. Any thread. */
void blk__storage_stats_get(const blk__storage *s, blk__storage_stats *out);

/* A label for the spill file in messages, "" in memory mode; valid until
 * destroy. It reads "<dir>/blk-r<rank>-<12 hex digits>.spill (unlinked)":
 * the directory as given (without trailing slashes), the rank, a random part
 * that tells the storages of one rank apart, and a suffix saying no such
 * entry exists. It is not a path to open: with O_TMPFILE the file never had
 * that name, and the fallback removed it at create. (To reach the file from
 * outside, /proc/<pid>/fd of Linux lists it as a link to "<dir>/... (deleted)".)
 * Every error about the file names this label. */
const char *blk__storage_path(const blk__storage *s);

/* For tests only: nonzero makes later creates take the fallback (create by
 * name with O_EXCL, then unlink) even where O_TMPFILE works, so that path is
 * tested on Linux too; 0 restores the default. Any thread. */
void blk__storage_test_fallback(int on);

/* For tests only: the spill file's descriptor (-1 in memory mode), the one
 * way to reach a file that has no name ("/proc/self/fd/<fd>" opens it). */
int blk__storage_fd(const blk__storage *s);

/* For tests only: moves the end of the spill file `bytes` further (rounded
 * up to the 64-byte extent size) without writing anything, leaving a hole
 * that is never reused or released; later records land past it and the file
 * is sparse. This is how offsets past 4 GiB are tested without writing
 * gigabytes.
 * @return : 0; BLK_EINVAL in memory mode; BLK_EIO (EFBIG) when the end would
 *           pass the largest offset a file can have. */
int blk__storage_test_hole(blk__storage *s, uint64_t bytes);

/* For tests only: fixes the device figures auto decides with, in seconds
 * per stored byte written and read (0: a device that costs nothing; 1: a
 * very slow one), instead of measuring them; a negative value measures
 * again. So tests of auto's choice do not depend on the machine's speed. */
void blk__storage_test_device(blk__storage *s, double write_spb, double read_spb);

/* For tests only: how every timed call counts as having run. 0: as it did.
 * 1: preempted (another thread ran on its core meanwhile) and blocked, so
 * auto learns from its time only while the figure has no trusted sample.
 * 2: preempted without blocking, so auto learns the thread's CPU time. */
void blk__storage_test_preempted(blk__storage *s, int how);

/* For tests only: the device figures auto decides with now, as measured
 * (seconds per stored byte beyond each call's fixed cost; -1: not measured
 * yet). Returns 1 if both have a trusted sample, else 0 (a figure from
 * untrusted calls only is provisional: the first trusted sample replaces
 * it). */
int blk__storage_test_figures(blk__storage *s, double *write_spb, double *read_spb);

#endif
