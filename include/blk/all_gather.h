/*
 * blk/all_gather.h: every block ends with every block's bytes, in gid order.
 *
 * blk_all_gather is MPI_Allgatherv over blocks, with pieces of any size
 * (zero included) that no block needs to know in advance: give runs once on
 * every block and says what the block brings; take runs once on every block
 * with all n pieces, concatenated in gid order, and where each begins.
 * (blk_arrays_all_gather is the fixed-size, in-place form for arrays.)
 *
 * Underneath: the k-ary swap rounds of partners.h in contiguous order. After
 * rounds 0..e-1 a block holds the pieces of a run of gids, and the members of
 * its round-e group hold adjacent runs, in the order of their positions; each
 * sends its run to the others, and each joins the group's runs in position
 * order. After the last round every block holds all n pieces. A count with a
 * prime factor above max(k, 16) is folded first (docs/patterns.md): gid 2i+1
 * sends its piece to gid 2i for i < r, the rest gather as virtual blocks, and
 * a last round hands the extras the whole.
 *
 * Cost (n blocks, D bytes in all, R rounds): in round e a block sends the
 * k_e - 1 others its run, about D k_0..k_(e-1) / n bytes each, so every byte
 * reaches every block once, as in MPI's recursive doubling, and the last
 * round moves (k-1)/k of D per block; every byte a block receives is copied
 * once into its run, and in the last round into the result (blk's, or the
 * region blk_all_gather_with's place gives); 8 bytes of size per piece
 * travel with it. Memory: each block ends holding D bytes until its take
 * returns (in its own region, with place).
 *
 * Threads and collectives as for blk_reduce: the callbacks run on pool
 * threads, one block at a time, and must not call MPI or blk_master_*.
 */
#ifndef BLK_ALL_GATHER_H
#define BLK_ALL_GATHER_H

#include <stddef.h>

#include "blk/assigner.h"
#include "blk/master.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What block gid brings: *data and *size bytes (0 is fine; *data may then
 * be NULL). blk copies the bytes as soon as give returns, so they need to
 * stay valid only that long. Returns 0, or a code of the program's own, which fails the
 * operation (BLK_ECALLBACK on every rank, naming it). */
typedef int (*blk_gather_give_fn)(void *block, int gid, const void **data, size_t *size,
                                  void *user);

/* Every block's bytes: piece g is data[offsets[g], offsets[g + 1]) for g in
 * 0..n-1 (offsets has n + 1 entries; offsets[n] is the total). data and
 * offsets are valid during the call only. Returns 0 or a code of the
 * program's own (as give). */
typedef int (*blk_gather_take_fn)(void *block, int gid, const void *data, const size_t *offsets,
                                  int n, void *user);

/* Where block gid's result goes (blk_all_gather_with): a region of at
 * least total bytes (the n pieces, in gid order), or NULL for blk's own
 * storage. blk writes every piece there, then calls take with data equal
 * to the region, so a program that gathers into its own array (as
 * MPI_Allgatherv fills its receive buffer) neither copies the result out
 * nor has blk allocate it. The region may hold the bytes this block's give
 * pointed at (blk copied them when give returned); it must stay valid and
 * untouched by anyone else until take returns. Runs once per block, just
 * before take and on the thread take runs on; no blk calls. */
typedef void *(*blk_gather_place_fn)(void *block, int gid, size_t total, void *user);

/* The optional settings of blk_all_gather_with; start from
 * BLK_ALL_GATHER_CONFIG_INIT (or blk_all_gather_config_init). It grows like
 * blk_master_config: version names the layout the program was built with,
 * and new fields only go at the end. */
typedef struct blk_all_gather_config {
  unsigned int version;      /* BLK_ALL_GATHER_CONFIG_VERSION, set by the initialisers */
  blk_gather_place_fn place; /* NULL: every result in blk's storage */
} blk_all_gather_config;

/* The layout of blk_all_gather_config in this header. */
#define BLK_ALL_GATHER_CONFIG_VERSION 1u

#define BLK_ALL_GATHER_CONFIG_INIT \
  { BLK_ALL_GATHER_CONFIG_VERSION, NULL }

/* Sets *cfg to the defaults of layout version, as BLK_ALL_GATHER_CONFIG_INIT
 * does. Returns 0, or BLK_EINVAL for a NULL cfg or a version this blk does
 * not know. Any thread. */
int blk_all_gather_config_init(blk_all_gather_config *cfg, unsigned int version);

/* Runs give on every block, then take on every block with every block's
 * bytes in gid order, through swap rounds of radix k (>= 2). Collective like
 * blk_reduce: every rank calls it with the same assigner and k and returns
 * the same code. Errors: BLK_EINVAL (a NULL argument, k < 2, the assigner's
 * rank count does not match; a local block the assigner puts elsewhere, or
 * one it puts here that was never added), BLK_ECALLBACK (give or take
 * failed; the detail names which and its code), BLK_ENOMEM (a run that
 * finds no memory), BLK_EMPI, BLK_EIO and BLK_ECORRUPT (out of core). After
 * a failure, take runs on no block that depended on the failed one. */
int blk_all_gather(blk_master *m, const blk_assigner *a, int k, blk_gather_give_fn give,
                   blk_gather_take_fn take, void *user);

/* blk_all_gather with settings (cfg NULL: the defaults, which is
 * blk_all_gather). With cfg->place, a block's result is written where
 * place says. Collective, with the same version on every rank (place is
 * each rank's own, and may be NULL on some). Errors as blk_all_gather, and
 * BLK_EINVAL (on every rank) for a cfg version this blk does not know. If
 * the operation fails, a placed region may hold some of the pieces,
 * whether or not its take ran. */
int blk_all_gather_with(blk_master *m, const blk_assigner *a, int k, blk_gather_give_fn give,
                        blk_gather_take_fn take, const blk_all_gather_config *cfg, void *user);

#ifdef __cplusplus
}
#endif
#endif
