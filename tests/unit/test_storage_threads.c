/* test_storage_threads: one storage used by four threads at once. Each
 * thread puts, gets and releases hundreds of records of its own, of sizes
 * from 0 to 96 KiB and of three kinds of content (random bytes, text that
 * compresses, a smooth float field), checks every byte it reads back, and
 * calls stats_get as it goes. Afterwards the statistics must equal the sums
 * of what the threads did, and the space must add up: with a spill file,
 * at fixed level 1 and at auto, and in memory. ThreadSanitizer runs it
 * (label threads2). */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/thread.h"
#include "blk/blk.h"
#include "check.h"
#include "storage/storage.h"

enum { THREADS = 4, SLOTS = 16, STEPS = 300, MAXSZ = 96 * 1024 };

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* n bytes of content `what` (0 random, 1 text, 2 a smooth float field),
 * determined by seed. */
static void fill(unsigned char *p, size_t n, int what, uint64_t seed) {
  uint64_t s = seed * UINT64_C(0x9E3779B97F4A7C15) + 1;
  if (what == 0) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(rng_next(&s) >> 56);
  } else if (what == 1) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)('a' + (i / 7 + seed) % 5);
  } else {
    size_t nf = n / sizeof(float);
    for (size_t i = 0; i < nf; i++) {
      float v = 300.0f + 20.0f * sinf(0.002f * (float)(i + seed));
      memcpy(p + i * sizeof v, &v, sizeof v);
    }
    memset(p + nf * sizeof(float), 0x5a, n - nf * sizeof(float));
  }
}

typedef struct slot {
  blk__record rec;
  size_t n;
  int what, used;
  uint64_t seed;
} slot;

typedef struct job {
  blk__storage *s;
  int id;
  slot slots[SLOTS];
  /* What this thread did, for the totals. */
  uint64_t puts, gets, raw_written, stored_written, raw_read, stored_read;
} job;

static void check_get(job *j, unsigned char *want, blk_buffer *out, const slot *sl) {
  fill(want, sl->n, sl->what, sl->seed);
  CHECK_OK(blk__storage_get(j->s, &sl->rec, out));
  CHECK_EQ_INT(out->size, sl->n);
  if (sl->n) CHECK_MSG(memcmp(out->data, want, sl->n) == 0, "thread %d: bytes differ", j->id);
  j->gets++;
  j->raw_read += sl->rec.raw;
  j->stored_read += sl->rec.stored;
}

static void run(void *arg) {
  job *j = arg;
  unsigned char *buf = malloc(MAXSZ);
  unsigned char *want = malloc(MAXSZ);
  CHECK(buf && want);
  blk_buffer out = BLK_BUFFER_INIT;
  uint64_t rng = 0x1234u + (uint64_t)j->id * 977u;
  for (int step = 0; step < STEPS; step++) {
    slot *sl = &j->slots[rng_next(&rng) % SLOTS];
    if (sl->used) {
      check_get(j, want, &out, sl);
      blk__storage_release(j->s, &sl->rec);
      CHECK_EQ_INT(sl->rec.stored, 0);
      sl->used = 0;
    }
    uint64_t r = rng_next(&rng);
    sl->n = (size_t)(r % 4 == 0 ? r % MAXSZ : r % 4096);
    /* Runs of one kind of content per slot, so the storage's memory of
     * what did not pay gets used and proven wrong. */
    if (r % 5 == 0 || step < SLOTS) sl->what = (int)(r % 3);
    sl->seed = rng_next(&rng);
    fill(buf, sl->n, sl->what, sl->seed);
    int gid = j->id * 1000 + (int)(sl - j->slots);
    size_t elem = (size_t)(r >> 8) % 3 * 4; /* 0, 4 or 8 */
    CHECK_OK(blk__storage_put(j->s, gid, sl->what, buf, sl->n, elem, &sl->rec));
    CHECK_EQ_INT(sl->rec.gid, gid);
    CHECK_EQ_INT(sl->rec.raw, sl->n);
    sl->used = 1;
    j->puts++;
    j->raw_written += sl->rec.raw;
    j->stored_written += sl->rec.stored;
    if (step % 50 == 0) {
      blk__storage_stats st;
      blk__storage_stats_get(j->s, &st);
      CHECK(st.records_written >= j->puts);
    }
  }
  /* Every live record once more. */
  for (int k = 0; k < SLOTS; k++)
    if (j->slots[k].used) check_get(j, want, &out, &j->slots[k]);
  blk_buffer_free(&out);
  free(buf);
  free(want);
}

static void test_threads(const char *dir, int level) {
  blk__storage *s = NULL;
  CHECK_OK(blk__storage_create(&s, dir, 0, level));
  static job jobs[THREADS];
  blk__thread *t[THREADS];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < THREADS; i++) {
    jobs[i].s = s;
    jobs[i].id = i;
    CHECK_OK(blk__thread_start(&t[i], run, &jobs[i]));
  }
  for (int i = 0; i < THREADS; i++) blk__thread_join(t[i]);

  uint64_t puts = 0, gets = 0, rw = 0, sw = 0, rr = 0, sr = 0, live = 0, live_bytes = 0;
  for (int i = 0; i < THREADS; i++) {
    puts += jobs[i].puts, gets += jobs[i].gets;
    rw += jobs[i].raw_written, sw += jobs[i].stored_written;
    rr += jobs[i].raw_read, sr += jobs[i].stored_read;
    for (int k = 0; k < SLOTS; k++)
      if (jobs[i].slots[k].used) live++, live_bytes += jobs[i].slots[k].rec.stored;
  }
  blk__storage_stats st;
  blk__storage_stats_get(s, &st);
  /* The counts are the sums of what the threads did. */
  static const char *const names[] = {"records_written",   "records_read",
                                      "bytes_raw_written", "bytes_stored_written",
                                      "bytes_raw_read",    "bytes_stored_read"};
  const uint64_t got[] = {st.records_written,      st.records_read,   st.bytes_raw_written,
                          st.bytes_stored_written, st.bytes_raw_read, st.bytes_stored_read};
  const uint64_t want[] = {puts, gets, rw, sw, rr, sr};
  for (int i = 0; i < 6; i++)
    CHECK_MSG(got[i] == want[i], "%s: %llu, the threads did %llu", names[i],
              (unsigned long long)got[i], (unsigned long long)want[i]);
  CHECK_EQ_INT(st.records_compressed + st.records_raw, puts);
  CHECK(st.records_raw_poor_ratio + st.records_raw_fast_device <= st.records_raw);
  CHECK(st.bytes_raw_poor_ratio <= rw);
  CHECK(st.records_compressed > 0);     /* text and smooth floats compress */
  CHECK(st.records_raw_poor_ratio > 0); /* random bytes do not */
  /* Each record carries a 64-byte header, so space is saved only where the
   * storage compresses what pays: always at level 1 and in memory. Auto with
   * a file may measure the device faster than the codec (under a sanitizer
   * the codec is slow) and store nearly everything raw. */
  if (level != BLK__STORAGE_AUTO || !dir) {
    CHECK(st.bytes_stored_written < st.bytes_raw_written);
  } else {
    CHECK(st.bytes_stored_written <= st.bytes_raw_written + 64 * puts);
  }
  /* Live records and free space make up the file (extents round up to 64
   * bytes); in memory the live records are the whole of it. */
  if (dir) {
    CHECK(st.file_bytes - st.free_bytes >= live_bytes);
    CHECK(st.file_bytes - st.free_bytes < live_bytes + 64 * live);
  } else {
    CHECK_EQ_INT(st.file_bytes, live_bytes);
    CHECK_EQ_INT(st.free_bytes, 0);
  }
  CHECK(st.file_bytes_peak >= st.file_bytes);
  for (int i = 0; i < THREADS; i++)
    for (int k = 0; k < SLOTS; k++) blk__storage_release(s, &jobs[i].slots[k].rec);
  blk__storage_stats_get(s, &st);
  CHECK_EQ_INT(st.file_bytes, 0);
  CHECK_EQ_INT(st.free_bytes, 0);
  printf(
      "%s, level %s: %d threads, %llu puts (%llu compressed, %llu raw: %llu poor ratio, %llu "
      "fast device), %llu gets: ok\n",
      dir ? "file" : "memory", level == BLK__STORAGE_AUTO ? "auto" : "1", THREADS,
      (unsigned long long)puts, (unsigned long long)st.records_compressed,
      (unsigned long long)st.records_raw, (unsigned long long)st.records_raw_poor_ratio,
      (unsigned long long)st.records_raw_fast_device, (unsigned long long)gets);
  blk__storage_destroy(s);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  char tmpl[] = "/tmp/blk-test-storage-threads-XXXXXX";
  char *dir = mkdtemp(tmpl);
  CHECK(dir != NULL);
  test_threads(dir, 1);
  test_threads(dir, BLK__STORAGE_AUTO);
  test_threads(NULL, 1);
  test_threads(NULL, BLK__STORAGE_AUTO);
  CHECK(rmdir(dir) == 0);
  printf("test_storage_threads: ok\n");
  return 0;
}
