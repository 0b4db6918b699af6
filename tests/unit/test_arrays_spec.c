/* test_arrays_spec: the array collectives refuse a count no block's array can
 * have before anything runs: past SIZE_MAX bytes is BLK_EINVAL, past what
 * this process can hold is BLK_ENOMEM naming the count, the bytes and the
 * limit (before, such a count ran and crashed on the array or aborted on a
 * failed copy). The spec is checked before the master is used, so these
 * calls need no master and no MPI. */
#include <stdint.h>

#include "blk/arrays.h"
#include "blk/blk.h"
#include "check.h"
#include "memory_limit.h"

static double one[1];

static void *array_of(void *block, int gid, void *user) {
  (void)block, (void)gid, (void)user;
  return one;
}

typedef int (*collective)(blk_master *m, const blk_assigner *a, const blk_arrays *spec);

int main(void) {
  blk_log_set_level(BLK_LOG_NONE);
  blk_assigner *a = NULL;
  CHECK_OK(blk_assigner_create_contiguous(&a, 1, 4));
  static const collective all[] = {blk_arrays_all_reduce, blk_arrays_reduce, blk_arrays_broadcast,
                                   blk_arrays_reduce_scatter};
  uint64_t limit = blk__memory_limit_get().bytes;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    blk_arrays spec = BLK_ARRAYS_INIT;
    spec.array = array_of;
    spec.type = BLK_DOUBLE;
    spec.count = SIZE_MAX / 4;
    CHECK_ERR(all[i](NULL, a, &spec), BLK_EINVAL, "elements of 8 bytes overflow");
    spec.count = SIZE_MAX / 8;
    CHECK_ERR(all[i](NULL, a, &spec), BLK_ENOMEM, "arrays: count = 2305843009213693951 elements");
    if (limit < SIZE_MAX / 8) {
      spec.count = (size_t)(limit / 8 + 1);
      char want[160];
      snprintf(want, sizeof want,
               "arrays: count = %zu elements of one block's array: %zu x 8 bytes = %llu bytes, "
               "more than this process can have",
               spec.count, spec.count, (unsigned long long)spec.count * 8);
      CHECK_ERR(all[i](NULL, a, &spec), BLK_ENOMEM, want);
    }
  }
  blk_assigner_destroy(a);
  printf("test_arrays_spec: ok\n");
  return 0;
}
