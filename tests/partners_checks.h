/*
 * partners_checks.h: checks that hold for every reduction pattern, shared
 * by the tests of the patterns built from others (joined, top).
 */
#ifndef BLK_TEST_PARTNERS_CHECKS_H
#define BLK_TEST_PARTNERS_CHECKS_H

#include <stdlib.h>

#include "blk/partners.h"
#include "check.h"

/* Every message sent in round r is listed, once, by its receiver among its
 * in-partners of round r + 1. */
static inline void check_listed_by_receivers(const blk_partners *p, int n) {
  int max = blk_partners_max_group(p) > 0 ? blk_partners_max_group(p) : 1;
  int *out = malloc((size_t)max * sizeof *out), *in = malloc((size_t)max * sizeof *in);
  CHECK(out != NULL && in != NULL);
  for (int r = 0; r < blk_partners_rounds(p); r++)
    for (int g = 0; g < n; g++) {
      int no = blk_partners_out(p, r, g, out, max);
      for (int i = 0; i < no; i++) {
        int ni = blk_partners_in(p, r + 1, out[i], in, max), seen = 0;
        for (int j = 0; j < ni; j++) seen += in[j] == g;
        CHECK_MSG(seen == 1, "round %d: gid %d sends to %d, listed %d times", r, g, out[i], seen);
      }
    }
  free(out);
  free(in);
}

#endif
