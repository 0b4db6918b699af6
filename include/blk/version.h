/*
 * blk/version.h: the version of the blk headers, and of the library at run time.
 */
#ifndef BLK_VERSION_H
#define BLK_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define BLK_VERSION_MAJOR 0
#define BLK_VERSION_MINOR 1
#define BLK_VERSION_PATCH 0
#define BLK_VERSION_NUMBER (BLK_VERSION_MAJOR * 10000 + BLK_VERSION_MINOR * 100 + BLK_VERSION_PATCH)

/* The version of the library linked at run time, as BLK_VERSION_NUMBER.
 * Compare with the macro to catch a header/library mismatch. Any thread. */
int blk_version(void);

/* The same as "major.minor.patch". Static storage; any thread. */
const char *blk_version_string(void);

#ifdef __cplusplus
}
#endif
#endif
