/* test_buffer: the serialization buffer, its growth and its sticky errors. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blk/blk.h"
#include "blk/buffer.h"
#include "check.h"

static void test_values(void) {
  blk_buffer b = BLK_BUFFER_INIT;
  CHECK(b.data == NULL && b.size == 0 && b.capacity == 0);
  /* An odd first byte puts every value after it at an unaligned offset. */
  CHECK_OK(blk_buffer_write(&b, "x", 1));
  CHECK_OK(blk_buffer_write_i32(&b, INT32_MIN));
  CHECK_OK(blk_buffer_write_u32(&b, UINT32_MAX));
  CHECK_OK(blk_buffer_write_i64(&b, INT64_MIN + 7));
  CHECK_OK(blk_buffer_write_u64(&b, UINT64_MAX - 3));
  CHECK_OK(blk_buffer_write_f32(&b, -1.5e-30f));
  CHECK_OK(blk_buffer_write_f64(&b, DBL_MAX));
  CHECK_OK(blk_buffer_write_size(&b, SIZE_MAX - 1));
  CHECK_EQ_INT(b.size, 1 + 4 + 4 + 8 + 8 + 4 + 8 + 8);
  CHECK_EQ_INT(blk_buffer_remaining(&b), b.size);

  char c = 0;
  int32_t i32 = 0;
  uint32_t u32 = 0;
  int64_t i64 = 0;
  uint64_t u64 = 0;
  float f32 = 0;
  double f64 = 0;
  size_t sz = 0;
  CHECK_OK(blk_buffer_read(&b, &c, 1));
  CHECK_EQ_INT(c, 'x');
  CHECK_OK(blk_buffer_read_i32(&b, &i32));
  CHECK_EQ_INT(i32, INT32_MIN);
  CHECK_OK(blk_buffer_read_u32(&b, &u32));
  CHECK_EQ_INT(u32, UINT32_MAX);
  CHECK_OK(blk_buffer_read_i64(&b, &i64));
  CHECK(i64 == INT64_MIN + 7);
  CHECK_OK(blk_buffer_read_u64(&b, &u64));
  CHECK(u64 == UINT64_MAX - 3);
  CHECK_OK(blk_buffer_read_f32(&b, &f32));
  CHECK(f32 == -1.5e-30f);
  CHECK_OK(blk_buffer_read_f64(&b, &f64));
  CHECK(f64 == DBL_MAX);
  CHECK_OK(blk_buffer_read_size(&b, &sz));
  CHECK(sz == SIZE_MAX - 1);
  CHECK_EQ_INT(blk_buffer_remaining(&b), 0);
  CHECK_EQ_INT(blk_buffer_error(&b), 0);

  /* A NaN keeps its bits. */
  blk_buffer_clear(&b);
  CHECK_OK(blk_buffer_write_f64(&b, NAN));
  CHECK_OK(blk_buffer_read_f64(&b, &f64));
  CHECK(isnan(f64));

  /* Rewind reads the same bytes again. */
  blk_buffer_clear(&b);
  CHECK_OK(blk_buffer_write_i32(&b, 42));
  CHECK_OK(blk_buffer_read_i32(&b, &i32));
  blk_buffer_rewind(&b);
  i32 = 0;
  CHECK_OK(blk_buffer_read_i32(&b, &i32));
  CHECK_EQ_INT(i32, 42);
  blk_buffer_free(&b);
  CHECK(b.data == NULL && b.size == 0 && b.capacity == 0 && b.pos == 0 && b.error == 0);
  blk_buffer_free(&b); /* twice is fine */
  blk_buffer_free(NULL);
}

static void test_arrays(void) {
  blk_buffer b;
  blk_buffer_init(&b);
  double xs[5] = {1, -2, 3.25, 1e300, -0.0};
  int32_t ks[3] = {7, -8, 9};
  CHECK_OK(blk_buffer_write_array(&b, xs, sizeof *xs, 5));
  CHECK_OK(blk_buffer_write_array(&b, ks, sizeof *ks, 3));
  CHECK_OK(blk_buffer_write_array(&b, NULL, sizeof *ks, 0));
  CHECK_OK(blk_buffer_write_array(&b, ks, sizeof *ks, 3));
  CHECK_OK(blk_buffer_write_array(&b, xs, sizeof *xs, 2));
  CHECK_EQ_INT(b.size, (8 + 40) + (8 + 12) + 8 + (8 + 12) + (8 + 16));

  double ys[8];
  size_t n = 99;
  CHECK_OK(blk_buffer_read_array(&b, ys, sizeof *ys, 8, &n));
  CHECK_EQ_INT(n, 5);
  CHECK(memcmp(xs, ys, sizeof xs) == 0);

  void *mem = NULL;
  CHECK_OK(blk_buffer_read_array_alloc(&b, &mem, sizeof(int32_t), &n));
  CHECK_EQ_INT(n, 3);
  const int32_t *ka = mem;
  CHECK(ka != NULL && ka[0] == 7 && ka[1] == -8 && ka[2] == 9);
  free(mem);

  /* An empty array: alloc gives NULL and 0. */
  mem = &n;
  CHECK_OK(blk_buffer_read_array_alloc(&b, &mem, sizeof(int32_t), &n));
  CHECK_EQ_INT(n, 0);
  CHECK(mem == NULL);

  const unsigned char *v = blk_buffer_read_array_view(&b, sizeof(int32_t), &n);
  CHECK(v != NULL);
  CHECK_EQ_INT(n, 3);
  int32_t k1;
  memcpy(&k1, v + sizeof k1, sizeof k1);
  CHECK_EQ_INT(k1, -8);

  /* Exactly max_count elements fit. */
  CHECK_OK(blk_buffer_read_array(&b, ys, sizeof *ys, 2, &n));
  CHECK_EQ_INT(n, 2);
  CHECK(ys[0] == 1 && ys[1] == -2);
  CHECK_EQ_INT(blk_buffer_remaining(&b), 0);
  blk_buffer_free(&b);

  /* An empty view of a fresh array is non-NULL. */
  CHECK_OK(blk_buffer_write_array(&b, NULL, 4, 0));
  n = 5;
  CHECK(blk_buffer_read_array_view(&b, 4, &n) != NULL);
  CHECK_EQ_INT(n, 0);
  blk_buffer_free(&b);
}

static void test_growth(void) {
  blk_buffer b = BLK_BUFFER_INIT;
  const size_t total = 1000000;
  size_t grows = 0, cap = 0;
  for (size_t i = 0; i < total; i++) {
    unsigned char byte = (unsigned char)(i * 31u);
    if (i % 2 == 0) {
      CHECK_OK(blk_buffer_write(&b, &byte, 1));
    } else {
      unsigned char *p = blk_buffer_append(&b, 1);
      CHECK(p != NULL);
      *p = byte;
    }
    if (b.capacity != cap) {
      grows++;
      cap = b.capacity;
    }
    CHECK_MSG(b.capacity <= 2 * b.size + 64, "capacity %zu for size %zu", b.capacity, b.size);
  }
  CHECK_EQ_INT(b.size, total);
  CHECK_MSG(grows <= 20, "%zu reallocations for %zu one-byte appends", grows, total);
  for (size_t i = 0; i < total; i++) CHECK(b.data[i] == (unsigned char)(i * 31u));

  /* reserve makes room without writing; a zero-length append writes nothing. */
  blk_buffer_clear(&b);
  CHECK_EQ_INT(b.capacity, cap);
  CHECK_OK(blk_buffer_reserve(&b, cap + 1));
  CHECK(b.capacity >= cap + 1);
  CHECK_EQ_INT(b.size, 0);
  CHECK(blk_buffer_append(&b, 0) != NULL);
  CHECK_EQ_INT(b.size, 0);
  blk_buffer_free(&b);
  CHECK(blk_buffer_append(&b, 0) != NULL);
  CHECK(blk_buffer_read_view(&b, 0) != NULL);

  /* Overflowing size + extra is refused and sticks. */
  CHECK_OK(blk_buffer_write(&b, "ab", 2));
  CHECK_ERR(blk_buffer_reserve(&b, SIZE_MAX - 1), BLK_ENOMEM, "overflows");
  CHECK_EQ_INT(blk_buffer_error(&b), BLK_ENOMEM);
  CHECK_EQ_INT(b.size, 2);
  CHECK_EQ_INT(blk_buffer_write(&b, "c", 1), BLK_ENOMEM);
  CHECK(blk_buffer_append(&b, 1) == NULL);
  CHECK_ERR(blk_buffer_write_array(&b, "x", 1, 1), BLK_ENOMEM, "overflows");
  blk_buffer_clear(&b);
  CHECK_ERR(blk_buffer_write_array(&b, "x", SIZE_MAX / 2, 3), BLK_ENOMEM, "overflows size_t");
  CHECK_EQ_INT(b.size, 0);
  blk_buffer_free(&b);
}

static void test_read_past_end(void) {
  blk_buffer b = BLK_BUFFER_INIT;
  CHECK_OK(blk_buffer_write_u32(&b, 5));
  CHECK_OK(blk_buffer_write_u64(&b, 6));
  CHECK_OK(blk_buffer_write_u32(&b, 7)); /* 16 bytes */
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  CHECK_OK(blk_buffer_read_u32(&b, &u32));
  CHECK_OK(blk_buffer_read_u64(&b, &u64));
  CHECK_EQ_INT(u64, 6);

  u64 = 12345;
  CHECK_ERR(blk_buffer_read_u64(&b, &u64), BLK_ERANGE,
            "read of 8 bytes at offset 12 but only 4 remain");
  CHECK_EQ_INT(u64, 0);
  CHECK_EQ_INT(b.pos, 12);
  CHECK_EQ_INT(blk_buffer_error(&b), BLK_ERANGE);

  /* Sticky: 4 bytes are there, but the read still fails and zero-fills. */
  u32 = 99;
  CHECK_EQ_INT(blk_buffer_read_u32(&b, &u32), BLK_ERANGE);
  CHECK_EQ_INT(u32, 0);
  CHECK_EQ_INT(b.pos, 12);
  unsigned char raw[3] = {1, 2, 3};
  CHECK_EQ_INT(blk_buffer_read(&b, raw, 3), BLK_ERANGE);
  CHECK(raw[0] == 0 && raw[1] == 0 && raw[2] == 0);
  CHECK(blk_buffer_read_view(&b, 1) == NULL);
  CHECK_EQ_INT(blk_buffer_write_i32(&b, 1), BLK_ERANGE);
  CHECK_EQ_INT(b.size, 16);
  CHECK(blk_buffer_append(&b, 4) == NULL);
  CHECK_EQ_INT(blk_buffer_reserve(&b, 1), BLK_ERANGE);
  size_t n = 7;
  void *p = &n;
  CHECK_EQ_INT(blk_buffer_read_array_alloc(&b, &p, 1, &n), BLK_ERANGE);
  CHECK(p == NULL && n == 0);
  CHECK_EQ_INT(blk_buffer_error(&b), BLK_ERANGE);

  /* rewind keeps the error; clear resets it. */
  blk_buffer_rewind(&b);
  CHECK_EQ_INT(blk_buffer_read_u32(&b, &u32), BLK_ERANGE);
  blk_buffer_clear(&b);
  CHECK_EQ_INT(blk_buffer_error(&b), 0);
  CHECK_OK(blk_buffer_write_i32(&b, -3));
  int32_t i32 = 0;
  CHECK_OK(blk_buffer_read_i32(&b, &i32));
  CHECK_EQ_INT(i32, -3);

  /* read_view past the end. */
  CHECK_OK(blk_buffer_write(&b, "hello", 5));
  const char *v = blk_buffer_read_view(&b, 2);
  CHECK(v != NULL && v[0] == 'h' && v[1] == 'e');
  v = blk_buffer_read_view(&b, 3);
  CHECK(v != NULL && memcmp(v, "llo", 3) == 0);
  CHECK(blk_buffer_read_view(&b, 1) == NULL);
  CHECK_EQ_INT(blk_buffer_error(&b), BLK_ERANGE);
  CHECK(strstr(blk_last_error(), "view of 1 bytes at offset 9 but only 0 remain") != NULL);
  blk_buffer_free(&b);
}

static void test_bad_arrays(void) {
  blk_buffer b = BLK_BUFFER_INIT;
  int32_t ks[4] = {1, 2, 3, 4};
  CHECK_OK(blk_buffer_write_array(&b, ks, sizeof *ks, 4));

  /* More elements than room: error, zero-filled destination, pos unchanged. */
  int32_t out[3] = {9, 9, 9};
  size_t n = 5;
  CHECK_ERR(blk_buffer_read_array(&b, out, sizeof *out, 3, &n), BLK_ERANGE,
            "array at offset 0 has 4 elements but room for only 3");
  CHECK_EQ_INT(n, 0);
  CHECK(out[0] == 0 && out[1] == 0 && out[2] == 0);
  CHECK_EQ_INT(b.pos, 0);
  blk_buffer_clear(&b);

  /* A corrupted count: 2^62 elements of 4 bytes overflows; of 1 byte is more
   * than remains. Neither allocates (ASan would see a huge malloc fail). */
  uint64_t huge = UINT64_C(1) << 62;
  CHECK_OK(blk_buffer_write_u64(&b, huge));
  CHECK_OK(blk_buffer_write(&b, "abcdefgh", 8));
  void *p = &n;
  n = 5;
  CHECK_ERR(blk_buffer_read_array_alloc(&b, &p, 4, &n), BLK_ERANGE, "at offset 0");
  CHECK(p == NULL && n == 0);
  CHECK(strstr(blk_last_error(), "4611686018427387904 elements") != NULL);
  CHECK_EQ_INT(b.pos, 0);
  blk_buffer_clear(&b);
  CHECK_OK(blk_buffer_write_u64(&b, huge));
  CHECK_OK(blk_buffer_write(&b, "abcdefgh", 8));
  CHECK_ERR(blk_buffer_read_array_alloc(&b, &p, 1, &n), BLK_ERANGE,
            "array at offset 0 has 4611686018427387904 elements of 1 bytes but only 8 bytes "
            "follow");
  CHECK(p == NULL);
  blk_buffer_clear(&b);

  /* Same through the view, after some valid data so the offset is not 0. */
  CHECK_OK(blk_buffer_write_i32(&b, 1));
  CHECK_OK(blk_buffer_write_u64(&b, 3));
  CHECK_OK(blk_buffer_write(&b, "ab", 2));
  int32_t first;
  CHECK_OK(blk_buffer_read_i32(&b, &first));
  n = 5;
  CHECK(blk_buffer_read_array_view(&b, 1, &n) == NULL);
  CHECK_EQ_INT(n, 0);
  CHECK(strstr(blk_last_error(), "array at offset 4 has 3 elements of 1 bytes but only 2") != NULL);
  CHECK_EQ_INT(b.pos, 4);
  blk_buffer_clear(&b);

  /* A count cut short. */
  CHECK_OK(blk_buffer_write(&b, "abc", 3));
  CHECK_ERR(blk_buffer_read_array(&b, out, sizeof *out, 3, &n), BLK_ERANGE,
            "array count at offset 0 needs 8 bytes but only 3 remain");
  blk_buffer_free(&b);
}

static void test_swap(void) {
  blk_buffer a = BLK_BUFFER_INIT, b = BLK_BUFFER_INIT;
  CHECK_OK(blk_buffer_write_i32(&a, 11));
  CHECK_OK(blk_buffer_write_i64(&b, 22));
  CHECK_OK(blk_buffer_write_i64(&b, 33));
  int64_t x = 0;
  CHECK_OK(blk_buffer_read_i64(&b, &x));
  unsigned char *bdata = b.data;
  blk_buffer_swap(&a, &b);
  CHECK(a.data == bdata);
  CHECK_EQ_INT(a.size, 16);
  CHECK_EQ_INT(a.pos, 8);
  CHECK_EQ_INT(b.size, 4);
  CHECK_OK(blk_buffer_read_i64(&a, &x));
  CHECK_EQ_INT(x, 33);
  int32_t y = 0;
  CHECK_OK(blk_buffer_read_i32(&b, &y));
  CHECK_EQ_INT(y, 11);
  blk_buffer_free(&a);
  blk_buffer_free(&b);
}

/* adopt and detach move memory in and out without a copy. */
static void test_adopt_detach(void) {
  blk_buffer b = BLK_BUFFER_INIT;
  size_t cap = 0;
  CHECK(blk_buffer_detach(&b, &cap) == NULL && cap == 0); /* owns nothing */
  unsigned char *mem = malloc(64);
  CHECK(mem != NULL);
  memcpy(mem, "abcd", 4);
  blk_buffer_adopt(&b, mem, 4, 64);
  CHECK(b.data == mem && b.size == 4 && b.capacity == 64 && b.pos == 0 && !b.error);
  char got[4];
  CHECK(blk_buffer_read(&b, got, 4) == 0 && memcmp(got, "abcd", 4) == 0);
  CHECK(blk_buffer_write(&b, "ef", 2) == 0 && b.data == mem);     /* fits: no realloc */
  CHECK(blk_buffer_reserve(&b, 1000) == 0 && b.capacity >= 1006); /* grows with realloc */
  unsigned char *out = blk_buffer_detach(&b, &cap);
  CHECK(out != NULL && cap >= 1006 && memcmp(out, "abcdef", 6) == 0);
  CHECK(b.data == NULL && b.size == 0 && b.capacity == 0);
  blk_buffer_adopt(&b, out, 6, cap);
  blk_buffer_free(&b); /* frees what it adopted */
  CHECK(b.data == NULL);
}

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  test_values();
  test_arrays();
  test_growth();
  test_read_past_end();
  test_bad_arrays();
  test_swap();
  test_adopt_detach();
  printf("test_buffer: ok\n");
  return 0;
}
