/*
 * fault.c: fault injection; see fault.h.
 *
 * `armed` has one bit per armed kind, so the unarmed check is one load. An
 * armed kind counts its calls with an atomic counter, so calls from worker
 * threads (allocations in callbacks) are counted once each.
 */
#include "base/fault.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"

static atomic_uint armed;
static atomic_uint_fast64_t calls[BLK__FAULT_KINDS], fired[BLK__FAULT_KINDS];
static atomic_uint_fast64_t first_bad[BLK__FAULT_KINDS], bad_count[BLK__FAULT_KINDS];

void blk__fault_arm(blk__fault_kind kind, uint64_t first, uint64_t count) {
  unsigned bit = 1u << kind;
  atomic_fetch_and(&armed, ~bit);
  atomic_store(&calls[kind], 0);
  atomic_store(&fired[kind], 0);
  atomic_store(&first_bad[kind], first);
  atomic_store(&bad_count[kind], count);
  if (count && first) atomic_fetch_or(&armed, bit);
}

uint64_t blk__fault_calls(blk__fault_kind kind) {
  return atomic_load(&calls[kind]);
}

uint64_t blk__fault_fired(blk__fault_kind kind) {
  return atomic_load(&fired[kind]);
}

int blk__fault_check(blk__fault_kind kind) {
  if (!(atomic_load_explicit(&armed, memory_order_relaxed) & (1u << kind))) return 0;
  uint64_t n = atomic_fetch_add(&calls[kind], 1) + 1;
  uint64_t first = atomic_load(&first_bad[kind]);
  if (n < first || n - first >= atomic_load(&bad_count[kind])) return 0;
  atomic_fetch_add(&fired[kind], 1);
  return 1;
}

/* Reads an unsigned decimal number at *p, moving *p past it; 0 if none. */
static uint64_t number(const char **p) {
  uint64_t v = 0;
  while (**p >= '0' && **p <= '9') v = v * 10 + (uint64_t)(*(*p)++ - '0');
  return v;
}

int blk__fault_from_env(int rank) {
  const char *env = getenv("BLK_FAULT");
  if (!env || !*env) return 0;
  static const char *const names[BLK__FAULT_KINDS] = {"alloc", "isend", "irecv"};
  int kind = -1;
  for (int k = 0; k < BLK__FAULT_KINDS; k++) {
    size_t len = strlen(names[k]);
    if (!strncmp(env, names[k], len) && env[len] == ':') kind = k;
  }
  const char *p = kind < 0 ? env : strchr(env, ':') + 1;
  uint64_t first = kind < 0 ? 0 : number(&p), count = 1;
  if (*p == ':') {
    p++;
    count = number(&p);
  }
  long who = -1;
  int bad_rank = 0;
  if (*p == '@') {
    p++;
    bad_rank = *p < '0' || *p > '9';
    who = (long)number(&p);
  }
  if (kind < 0 || !first || !count || bad_rank || *p)
    return blk__fail(BLK_EINVAL,
                     "BLK_FAULT=%s: expected KIND:N[:COUNT][@RANK] with KIND alloc, isend or "
                     "irecv and N, COUNT >= 1",
                     env);
  if (who < 0 || who == rank) blk__fault_arm((blk__fault_kind)kind, first, count);
  return 0;
}
