/* version.c: the run-time version, to compare with the header's macros. */
#include "blk/version.h"

#define BLK__STR2(x) #x
#define BLK__STR(x) BLK__STR2(x)

int blk_version(void) {
  return BLK_VERSION_NUMBER;
}

const char *blk_version_string(void) {
  return BLK__STR(BLK_VERSION_MAJOR) "." BLK__STR(BLK_VERSION_MINOR) "." BLK__STR(
      BLK_VERSION_PATCH);
}
