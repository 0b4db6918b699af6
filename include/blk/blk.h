/*
 * blk/blk.h: the umbrella header. Including it gives the whole public API.
 */
#ifndef BLK_BLK_H
#define BLK_BLK_H

#include "blk/error.h"
#include "blk/log.h"
#include "blk/version.h"

#endif
