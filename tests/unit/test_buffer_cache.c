/* test_buffer_cache: what is kept, what is taken, and the limits, against a
 * bookkeeping of capacities done here; references to memory blk does not
 * own, and giving one storage of its own; then two threads giving and
 * taking through a pool. */
#include <string.h>

#include "base/buffer_cache.h"
#include "base/fault.h"
#include "base/thread.h"
#include "blk/blk.h"
#include "check.h"

#define CHECK_SIZE(got, want)                                               \
  do {                                                                      \
    size_t got_ = (got), want_ = (want);                                    \
    CHECK_MSG(got_ == want_, "%s is %zu, expected %zu", #got, got_, want_); \
  } while (0)

static blk_buffer sized(size_t capacity) {
  blk_buffer b = BLK_BUFFER_INIT;
  CHECK_OK(blk_buffer_reserve(&b, capacity));
  CHECK_SIZE(b.capacity, capacity); /* powers of two from 64: exact */
  return b;
}

static void keeps_and_takes(void) {
  blk__buffer_cache *c;
  CHECK_OK(blk__buffer_cache_create(&c, 4, (size_t)1 << 20));
  blk_buffer a = sized(8192), b = sized(65536), small = sized(1024);
  unsigned char *a_data = a.data, *b_data = b.data;
  blk__buffer_cache_give(c, &a);
  blk__buffer_cache_give(c, &b);
  blk__buffer_cache_give(c, &small); /* below the minimum: freed */
  CHECK(a.data == NULL && b.data == NULL && small.data == NULL);
  CHECK_SIZE(blk__buffer_cache_bytes(c), 8192 + 65536);

  /* The smallest that fits. */
  blk_buffer t = BLK_BUFFER_INIT;
  CHECK_OK(blk__buffer_cache_reserve(c, &t, 5000));
  CHECK(t.data == a_data && t.capacity == 8192 && t.size == 0 && t.pos == 0);
  CHECK_SIZE(blk__buffer_cache_bytes(c), 65536);

  /* Growing moves the contents and keeps the old storage. */
  memset(blk_buffer_append(&t, 6000), 7, 6000);
  unsigned char byte;
  CHECK_OK(blk_buffer_read(&t, &byte, 1));
  CHECK_OK(blk__buffer_cache_reserve(c, &t, 20000));
  CHECK(t.data == b_data && t.size == 6000 && t.pos == 1 && t.data[5999] == 7);
  CHECK_SIZE(blk__buffer_cache_bytes(c), 8192);

  /* Far larger than needed (over 4x): not taken, new memory instead. */
  blk__buffer_cache_give(c, &t); /* the 64 KiB one is back */
  blk_buffer u = BLK_BUFFER_INIT;
  CHECK_OK(blk__buffer_cache_reserve(c, &u, 16000));
  CHECK(u.data != b_data && u.data != a_data);
  CHECK_SIZE(blk__buffer_cache_bytes(c), 8192 + 65536);
  /* Small requests never take. */
  blk_buffer v = BLK_BUFFER_INIT;
  CHECK_OK(blk__buffer_cache_reserve(c, &v, 100));
  CHECK(v.data != a_data);
  blk_buffer_free(&u);
  blk_buffer_free(&v);

  /* No cache: plain reserve. */
  blk_buffer w = BLK_BUFFER_INIT;
  CHECK_OK(blk__buffer_cache_reserve(NULL, &w, 10000));
  CHECK(w.capacity >= 10000);
  blk__buffer_cache_give(NULL, &w);
  CHECK(w.data == NULL);
  blk__buffer_cache_destroy(c);
}

static void limits(void) {
  /* 3 slots, 64 KiB: a full cache drops its smallest for a larger buffer
   * and refuses a smaller one; the byte limit drops the smallest first. */
  blk__buffer_cache *c;
  CHECK_OK(blk__buffer_cache_create(&c, 3, 65536));
  size_t caps[] = {4096, 8192, 16384};
  for (int i = 0; i < 3; i++) {
    blk_buffer b = sized(caps[i]);
    blk__buffer_cache_give(c, &b);
  }
  CHECK_SIZE(blk__buffer_cache_bytes(c), 4096 + 8192 + 16384);
  blk_buffer smaller = sized(4096);
  blk__buffer_cache_give(c, &smaller); /* refused: not larger than the smallest */
  CHECK_SIZE(blk__buffer_cache_bytes(c), 4096 + 8192 + 16384);
  blk_buffer larger = sized(32768);
  blk__buffer_cache_give(c, &larger); /* takes the 4096's slot */
  CHECK_SIZE(blk__buffer_cache_bytes(c), 8192 + 16384 + 32768);
  blk_buffer more = sized(32768);
  blk__buffer_cache_give(c, &more); /* 8192 out for the slot, 16384 for the bytes */
  CHECK_SIZE(blk__buffer_cache_bytes(c), 32768 + 32768);
  blk_buffer huge = sized(131072);
  blk__buffer_cache_give(c, &huge); /* over the byte limit alone: freed */
  CHECK_SIZE(blk__buffer_cache_bytes(c), 32768 + 32768);
  blk__buffer_cache_destroy(c);
}

typedef struct shared {
  blk__buffer_cache *c;
} shared;

/* Each thread takes storage, fills it, checks it and gives it back. */
typedef struct churner {
  shared *s;
  size_t i;
} churner;

static void churn(void *arg) {
  shared *s = ((churner *)arg)->s;
  size_t i = ((churner *)arg)->i;
  for (int r = 0; r < 200; r++) {
    blk_buffer b = BLK_BUFFER_INIT;
    size_t n = 4096u << ((i + (size_t)r) % 4);
    CHECK_OK(blk__buffer_cache_reserve(s->c, &b, n));
    memset(blk_buffer_append(&b, n), (int)(i & 0xff), n);
    CHECK(b.data[n - 1] == (unsigned char)(i & 0xff));
    blk__buffer_cache_give(s->c, &b);
  }
}

static void threads(void) {
  enum { N = 4 };
  shared s;
  blk__thread *t[N];
  churner c[N];
  CHECK_OK(blk__buffer_cache_create(&s.c, 8, (size_t)1 << 20));
  for (size_t i = 0; i < N; i++) {
    c[i] = (churner){&s, i};
    CHECK_OK(blk__thread_start(&t[i], churn, &c[i]));
  }
  for (size_t i = 0; i < N; i++) blk__thread_join(t[i]);
  CHECK(blk__buffer_cache_bytes(s.c) <= (size_t)1 << 20);
  blk__buffer_cache_destroy(s.c);
}

/* A reference is read like any buffer, and releasing or giving it never
 * frees the memory it refers to (ASan would see that free). */
static void references(void) {
  blk__buffer_cache *c;
  CHECK_OK(blk__buffer_cache_create(&c, 4, (size_t)1 << 20));
  static const char text[] = "owned by the caller";
  blk_buffer r;
  blk__buffer_ref(&r, text, sizeof text);
  CHECK(blk__buffer_is_ref(&r));
  char got[sizeof text];
  CHECK_OK(blk_buffer_read(&r, got, sizeof got));
  CHECK(!strcmp(got, text));
  blk__buffer_release(&r);
  CHECK(r.data == NULL && r.size == 0 && !blk__buffer_is_ref(&r));
  blk__buffer_ref(&r, text, sizeof text);
  blk__buffer_cache_give(c, &r);
  CHECK(r.data == NULL);
  CHECK_SIZE(blk__buffer_cache_bytes(c), 0);
  /* Owned storage is kept by release, for the next write. */
  blk_buffer o = sized(8192);
  unsigned char *kept = o.data;
  CHECK_OK(blk_buffer_write(&o, text, sizeof text));
  blk__buffer_release(&o);
  CHECK(o.data == kept && o.size == 0 && !blk__buffer_is_ref(&o));
  blk_buffer_free(&o);
  blk__buffer_cache_destroy(c);
}

/* own: a reference becomes a copy in storage of its own, read position
 * and all, taken from the cache; owned storage is left as it is; no memory
 * leaves the buffer empty with its sticky error. */
static void owning(void) {
  blk__buffer_cache *c;
  CHECK_OK(blk__buffer_cache_create(&c, 4, (size_t)1 << 20));
  static unsigned char bytes[6000];
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 7);
  blk_buffer spare = sized(8192);
  unsigned char *spare_data = spare.data;
  blk__buffer_cache_give(c, &spare);
  blk_buffer r;
  blk__buffer_ref(&r, bytes, sizeof bytes);
  CHECK(blk_buffer_read_view(&r, 10) == bytes);
  CHECK_OK(blk__buffer_cache_own(c, &r));
  CHECK(!blk__buffer_is_ref(&r) && r.data == spare_data); /* the cache's, not new memory */
  CHECK_SIZE(r.size, sizeof bytes);
  CHECK_SIZE(r.pos, 10);
  CHECK(!memcmp(r.data, bytes, sizeof bytes));
  CHECK_OK(blk_buffer_write(&r, "more", 4)); /* its own: it may grow */
  unsigned char *owned = r.data;
  CHECK_OK(blk__buffer_cache_own(c, &r));
  CHECK(r.data == owned && r.size == sizeof bytes + 4);
  blk_buffer_free(&r);
  blk__buffer_ref(&r, bytes, 0); /* an empty reference */
  CHECK_OK(blk__buffer_cache_own(c, &r));
  CHECK_SIZE(r.size, 0);
  blk_buffer_free(&r);
  blk__buffer_ref(&r, bytes, sizeof bytes);
  blk__fault_arm(BLK__FAULT_ALLOC, 1, 1);
  CHECK_EQ_INT(blk__buffer_cache_own(NULL, &r), BLK_ENOMEM);
  blk__fault_arm(BLK__FAULT_ALLOC, 0, 0);
  CHECK(r.data == NULL && r.size == 0 && blk_buffer_error(&r) == BLK_ENOMEM);
  blk__buffer_cache_destroy(c);
}

int main(void) {
  keeps_and_takes();
  references();
  owning();
  limits();
  threads();
  printf("test_buffer_cache: ok\n");
  return 0;
}
