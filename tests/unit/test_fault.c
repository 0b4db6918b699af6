/*
 * test_fault: fault injection (fault.h): the armed calls fail, exactly
 * those, counted from the arming; BLK_FAULT is read as documented and a
 * value it cannot read is refused with a clear message.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "blk/blk.h"
#include "check.h"
#include "base/fault.h"

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  /* Unarmed: nothing fails and nothing is counted. */
  for (int i = 0; i < 10; i++) CHECK(!blk__fault_check(BLK__FAULT_ALLOC));
  CHECK_EQ_INT(blk__fault_calls(BLK__FAULT_ALLOC), 0);
  /* Calls 3 and 4 from now fail. */
  blk__fault_arm(BLK__FAULT_ALLOC, 3, 2);
  int failed[8];
  for (int i = 0; i < 8; i++) {
    void *p = blk__malloc(16);
    failed[i] = p == NULL;
    free(p);
  }
  for (int i = 0; i < 8; i++) CHECK_EQ_INT(failed[i], i == 2 || i == 3);
  CHECK_EQ_INT(blk__fault_calls(BLK__FAULT_ALLOC), 8);
  CHECK_EQ_INT(blk__fault_fired(BLK__FAULT_ALLOC), 2);
  /* Other kinds are not touched; disarming stops it. */
  CHECK(!blk__fault_check(BLK__FAULT_ISEND));
  blk__fault_arm(BLK__FAULT_ALLOC, 0, 0);
  void *p = blk__calloc(4, 4);
  CHECK(p);
  free(p);
  blk__fault_arm(BLK__FAULT_ALLOC, 1, 1);
  CHECK(blk__realloc(NULL, 8) == NULL);
  blk__fault_arm(BLK__FAULT_ALLOC, 0, 0);

  /* The environment. */
  CHECK_OK(blk__fault_from_env(0)); /* unset: nothing */
  setenv("BLK_FAULT", "isend:2:3@1", 1);
  CHECK_OK(blk__fault_from_env(0)); /* another rank's */
  CHECK(!blk__fault_check(BLK__FAULT_ISEND) && !blk__fault_check(BLK__FAULT_ISEND));
  CHECK_OK(blk__fault_from_env(1));
  int fails = 0;
  for (int i = 0; i < 6; i++) fails += blk__fault_check(BLK__FAULT_ISEND) << i;
  CHECK_EQ_INT(fails, 2 + 4 + 8); /* calls 2, 3 and 4 */
  setenv("BLK_FAULT", "irecv:1", 1);
  CHECK_OK(blk__fault_from_env(5));
  CHECK(blk__fault_check(BLK__FAULT_IRECV) && !blk__fault_check(BLK__FAULT_IRECV));
  const char *bad[] = {"alloc", "alloc:", "alloc:0", "alloc:3:0", "malloc:3", "alloc:3@", "alloc:3x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("BLK_FAULT", bad[i], 1);
    CHECK_ERR(blk__fault_from_env(0), BLK_EINVAL, "BLK_FAULT=");
  }
  printf("test_fault: ok\n");
  return 0;
}
