/* settings.c: the versioned settings structs' initialiser; see settings.h. */
#include "base/settings.h"

#include <string.h>

#include "base/fail.h"

int blk__settings_init(void *cfg, const void *defaults, size_t size, const size_t *bytes_of,
                       unsigned int version, unsigned int known, const char *what) {
  if (!cfg) return blk__fail(BLK_EINVAL, "%s: the struct is NULL", what);
  if (version < 1 || version > known)
    return blk__fail(BLK_EINVAL, "%s: version %u; this blk knows 1..%u", what, version, known);
  memcpy(cfg, defaults, bytes_of ? bytes_of[version] : size);
  memcpy(cfg, &version, sizeof version); /* (the first member of every one) */
  return BLK_OK;
}
