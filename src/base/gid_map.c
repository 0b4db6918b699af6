/* gid_map.c: open addressing with linear probing; see gid_map.h. */
#include "base/gid_map.h"
#include "base/alloc.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/fail.h"

void blk__gid_map_init(blk__gid_map *map) {
  map->keys = map->values = NULL;
  map->capacity = map->count = 0;
}

void blk__gid_map_free(blk__gid_map *map) {
  free(map->keys);
  free(map->values);
  blk__gid_map_init(map);
}

void blk__gid_map_clear(blk__gid_map *map) {
  for (size_t i = 0; i < map->capacity; i++) map->keys[i] = -1;
  map->count = 0;
}

static size_t slot_of(int gid, size_t capacity) {
  /* Fibonacci hashing spreads consecutive gids over the table. */
  return (size_t)(((uint64_t)(unsigned)gid * 0x9E3779B97F4A7C15ull) >> 32) & (capacity - 1);
}

static void insert(int *keys, int *values, size_t capacity, int gid, int value) {
  size_t i = slot_of(gid, capacity);
  while (keys[i] >= 0) i = (i + 1) & (capacity - 1);
  keys[i] = gid;
  values[i] = value;
}

int blk__gid_map_put(blk__gid_map *map, int gid, int value) {
  if (2 * (map->count + 1) > map->capacity) {
    size_t ncap = map->capacity ? map->capacity * 2 : 16;
    int *keys = blk__malloc(ncap * sizeof *keys);
    int *values = blk__malloc(ncap * sizeof *values);
    if (!keys || !values) {
      free(keys);
      free(values);
      return blk__fail(BLK_ENOMEM, "gid map: no memory for %zu entries", ncap);
    }
    for (size_t i = 0; i < ncap; i++) keys[i] = -1;
    for (size_t i = 0; i < map->capacity; i++)
      if (map->keys[i] >= 0) insert(keys, values, ncap, map->keys[i], map->values[i]);
    free(map->keys);
    free(map->values);
    map->keys = keys;
    map->values = values;
    map->capacity = ncap;
  }
  insert(map->keys, map->values, map->capacity, gid, value);
  map->count++;
  return BLK_OK;
}

int blk__gid_map_get(const blk__gid_map *map, int gid) {
  if (map->capacity == 0 || gid < 0) return -1;
  for (size_t i = slot_of(gid, map->capacity);; i = (i + 1) & (map->capacity - 1)) {
    if (map->keys[i] == gid) return map->values[i];
    if (map->keys[i] < 0) return -1;
  }
}
