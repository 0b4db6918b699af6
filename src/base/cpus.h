/*
 * cpus.h: the processors this process may run on, for choosing how many
 * threads a rank should use (blk_master_config's BLK_THREADS_AUTO).
 *
 * Any thread; no state.
 */
#ifndef BLK_CPUS_H
#define BLK_CPUS_H

#include <stddef.h>

/* The bytes of a CPU mask from blk__cpus_usable: enough for 1024 CPUs. */
#define BLK__CPU_MASK_BYTES 128

/* Sets bit c (mask[c / 8] & (1 << c % 8)) for each CPU c the calling
 * thread may run on (its affinity, which is the process's unless changed)
 * and returns how many. Where affinity is unknown (not Linux, or the call
 * fails) it marks CPUs 0 .. n-1 of the n online and returns n; at least 1. */
int blk__cpus_usable(unsigned char mask[BLK__CPU_MASK_BYTES]);

#endif
