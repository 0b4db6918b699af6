/*
 * settings.h: initialising the public API's versioned settings structs.
 *
 * blk_master_config, blk_decomposer_config, blk_arrays and the
 * collectives' configs all start with `unsigned int version`, which their
 * initialisers set, and grow only at their end (docs/architecture.md,
 * ABI): a program built against layout v passes a struct of layout v's
 * size, so an initialiser writes only that many bytes. This is that one
 * initialiser, with its checks.
 */
#ifndef BLK_SETTINGS_H
#define BLK_SETTINGS_H

#include <stddef.h>

/* Sets *cfg to the defaults of layout `version`: copies the first
 * bytes_of[version] bytes of defaults (bytes_of NULL: `size`, every layout
 * being the whole struct so far) and sets cfg's version. Returns 0, or
 * BLK_EINVAL for a NULL cfg or a version outside 1..known, the detail
 * beginning with `what` (the caller's "master: config init"). Any thread. */
int blk__settings_init(void *cfg, const void *defaults, size_t size, const size_t *bytes_of,
                       unsigned int version, unsigned int known, const char *what);

#endif
