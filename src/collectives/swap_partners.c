/*
 * swap_partners.c: the folded swap partners kept between calls; see
 * swap_partners.h.
 */
#include "collectives/swap_partners.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "patterns/partners_folded.h"

typedef struct kept_swap {
  blk_partners *p; /* NULL: none yet */
  int n, k, contiguous;
} kept_swap;

static void kept_free(void *mem) {
  kept_swap *ks = mem;
  blk_partners_destroy(ks->p);
  free(ks);
}

int blk__swap_partners_kept(blk_master *m, const void *owner, int n, int k, int contiguous,
                            const blk_partners **out, int *made) {
  *out = NULL;
  *made = 0;
  blk__kept *kept = blk__op_kept(&m->op, owner, kept_free);
  kept_swap *ks = kept->mem;
  if (!ks && !(ks = kept->mem = blk__calloc(1, sizeof *ks)))
    return blk__fail(BLK_ENOMEM, "no memory to keep a collective's partners");
  if (!ks->p || ks->n != n || ks->k != k || ks->contiguous != contiguous) {
    blk_partners_destroy(ks->p);
    ks->p = NULL;
    blk_partners *p = NULL;
    int rc = blk__partners_create_folding(&p, BLK_SWAP, n, k, contiguous);
    if (rc) return rc;
    *ks = (kept_swap){p, n, k, contiguous};
    *made = 1;
  }
  *out = ks->p;
  return BLK_OK;
}
