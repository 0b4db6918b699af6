/* test_error: the error table and per-thread detail. */
#include "blk/blk.h"
#include "check.h"
#include "base/fail.h"

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  CHECK_STR(blk_strerror(BLK_OK), "success");
  CHECK_STR(blk_strerror(BLK_EINVAL), "invalid argument");
  CHECK_STR(blk_strerror(12345), "unknown error");
  CHECK_STR(blk_last_error(), "");
  CHECK_EQ_INT(blk__fail(BLK_EIO, "path %s: %s", "/x", "gone"), BLK_EIO);
  CHECK_STR(blk_last_error(), "path /x: gone");
  blk__clear_error();
  CHECK_STR(blk_last_error(), "");
  blk_log_level l = BLK_LOG_WARN;
  CHECK_OK(blk_log_parse_level(&l, "debug"));
  CHECK_EQ_INT(l, BLK_LOG_DEBUG);
  CHECK_OK(blk_log_parse_level(&l, "1"));
  CHECK_EQ_INT(l, BLK_LOG_ERROR);
  CHECK_EQ_INT(blk_log_parse_level(&l, "loud"), BLK_EINVAL);
  CHECK_EQ_INT(l, BLK_LOG_ERROR);
  CHECK_EQ_INT(blk_version(), BLK_VERSION_NUMBER);
  CHECK_STR(blk_version_string(), "0.1.0");
  printf("test_error: ok\n");
  return 0;
}
