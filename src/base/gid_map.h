/*
 * gid_map.h: a map from global block id to local index (open addressing).
 *
 * Lookups happen for every message delivered, so they are O(1): linear
 * probing in a power-of-two table kept at most half full.
 */
#ifndef BLK_GID_MAP_H
#define BLK_GID_MAP_H

#include <stddef.h>

typedef struct blk__gid_map {
  int *keys; /* gid, or -1 for an empty slot */
  int *values;
  size_t capacity; /* a power of two, or 0 */
  size_t count;
} blk__gid_map;

void blk__gid_map_init(blk__gid_map *map);
void blk__gid_map_free(blk__gid_map *map);
/* Removes every entry and keeps the table for reuse. */
void blk__gid_map_clear(blk__gid_map *map);
/* Inserts gid -> value (gid >= 0, not present). BLK_ENOMEM. */
int blk__gid_map_put(blk__gid_map *map, int gid, int value);
/* The value for gid, or -1. */
int blk__gid_map_get(const blk__gid_map *map, int gid);

#endif
