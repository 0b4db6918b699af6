/*
 * cpus.c: the processors this process may run on; see cpus.h. Linux's
 * sched_getaffinity, else sysconf's online count.
 */
#if defined(__linux__)
#define _GNU_SOURCE /* sched_getaffinity, CPU_ISSET */
#include <sched.h>
#else
#define _POSIX_C_SOURCE 200809L
#endif

#include "base/cpus.h"

#include <string.h>
#include <unistd.h>

int blk__cpus_usable(unsigned char mask[BLK__CPU_MASK_BYTES]) {
  memset(mask, 0, BLK__CPU_MASK_BYTES);
  int n = 0;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (size_t c = 0; c < CPU_SETSIZE && c < 8 * BLK__CPU_MASK_BYTES; c++)
      if (CPU_ISSET(c, &set)) {
        mask[c / 8] |= (unsigned char)(1u << (c % 8));
        n++;
      }
    if (n > 0) return n;
  }
#endif
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  n = online < 1 ? 1 : online > 8 * BLK__CPU_MASK_BYTES ? 8 * BLK__CPU_MASK_BYTES : (int)online;
  for (int c = 0; c < n; c++) mask[c / 8] |= (unsigned char)(1u << (c % 8));
  return n;
}
