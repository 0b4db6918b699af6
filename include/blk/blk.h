/*
 * blk/blk.h: the umbrella header. Including it gives the whole public API.
 *
 * Layers (docs/architecture.md): base (version, error, log, buffer, types),
 * geometry (bounds, decomposer, assigner, link), patterns (partners),
 * runtime (proxy), master, collectives (reduce, all_to_all, all_gather,
 * all_reduce, arrays, checkpoint, kdtree).
 */
#ifndef BLK_BLK_H
#define BLK_BLK_H

/* Grouped by layer, bottom up. */
/* clang-format off */
#include "blk/version.h"
#include "blk/error.h"
#include "blk/log.h"
#include "blk/buffer.h"
#include "blk/types.h"

#include "blk/bounds.h"
#include "blk/decomposer.h"
#include "blk/assigner.h"
#include "blk/link.h"

#include "blk/partners.h"

#include "blk/proxy.h"
#include "blk/master.h"
#include "blk/reduce.h"
#include "blk/all_to_all.h"
#include "blk/all_gather.h"
#include "blk/all_reduce.h"
#include "blk/arrays.h"
#include "blk/checkpoint.h"
#include "blk/kdtree.h"
/* clang-format on */

#endif
