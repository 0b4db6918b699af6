/*
 * blk/checkpoint.h: every block of every rank into one file, and back.
 *
 * blk_checkpoint_write saves each block through the master's save callback
 * (out-of-core blocks are loaded around their turn, within the budget) and
 * writes the records, with each block's links, into one file with MPI-IO
 * collective writes; rank 0 adds a header, the caller's extra bytes (a step
 * number, the domain, ...) and an index by gid. blk_checkpoint_read makes
 * the blocks of a master again from such a file, on any number of ranks
 * and threads: each rank reads only the blocks its assigner gives it, makes
 * each with create, fills it with load from the saved bytes, and adds it
 * with its stored links (their ranks from the reader's assigner).
 *
 * Guarantees: a file is written under a temporary name, <path>.tmp, and
 * renamed to path by rank 0 only once every rank agreed that all of it was
 * written, so path holds either the complete new checkpoint or what it held
 * before (an older checkpoint is never damaged by a failed write). Every
 * byte blk reads back is checked: the header, the extra bytes, the index
 * and each block's record carry checksums, and a file whose size differs
 * from what its header says is refused. Fields are little-endian; a
 * block's saved bytes are in the writer's byte order (blk_buffer's values
 * are native), so a file written on a machine of the other byte order is
 * refused with BLK_EINVAL rather than misread. docs/checkpoint.md has the
 * format, field by field.
 *
 * What is saved: each block (its save callback's bytes), its gid and its
 * links (gid, direction, wrap, bounds; not the rank). Not saved: messages
 * in the blocks' queues (enqueued and not yet exchanged, or delivered and
 * not dequeued), value all-reduce results, and the master's settings:
 * checkpoint between exchange steps.
 *
 * Collectives: both are collective over the master's communicator and
 * return the same code on every rank, with the same detail in
 * blk_last_error() naming the lowest failing rank, the gid where there is
 * one, the file and the cause (docs/errors.md). Afterwards the master is
 * usable whatever happened.
 *
 * Threads: call them on the master's thread (the one that created it).
 * save, create and load run on that thread too, one block at a time.
 */
#ifndef BLK_CHECKPOINT_H
#define BLK_CHECKPOINT_H

#include <stddef.h>

#include "blk/assigner.h"
#include "blk/buffer.h"
#include "blk/master.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes every block of every rank, with its links, and extra_bytes bytes
 * at extra, into the file path (created or replaced; rank 0's path and
 * extra are the ones used: pass the same on every rank, or NULL and 0 on
 * the others). The blocks' gids must be 0..N-1 over all ranks, N the
 * number of blocks, each on one rank, and their links must name gids in
 * that range. Nothing about the blocks changes; out of core, blocks are
 * loaded in turn (and others evicted) within the budget, and memory holds,
 * beside the budget's blocks, one round of records (64 MiB, or more by at
 * most three blocks' saved bytes: a round ends after the block that fills
 * it and the two read ahead) and one block's saved bytes being copied into
 * it. The file is written under <path>.tmp (replacing one there) and
 * renamed to path by rank 0 after every rank agreed it is complete; on
 * failure the temporary file is removed and path is left as it was.
 * Collective: the same code on every rank.
 * Errors: BLK_EINVAL (m is NULL (that rank only); no save callback; rank
 * 0's path NULL, empty or longer than 4095 bytes, or extra NULL with
 * extra_bytes > 0; a gid outside 0..N-1 or on two ranks, a link to a gid
 * outside 0..N-1), BLK_ECALLBACK (save failed; the detail names the gid
 * and its code), BLK_EIO (the file cannot be created, written, synced,
 * closed or renamed: the detail names it and MPI's or the system's reason),
 * BLK_ENOMEM, BLK_EMPI, and out of core BLK_EIO and BLK_ECORRUPT (a block
 * that could not be loaded to be saved). */
int blk_checkpoint_write(blk_master *m, const char *path, const void *extra, size_t extra_bytes);

/* Reads the checkpoint at path (rank 0's) into m, which must hold no
 * blocks yet: every block that assigner a puts on this rank is made with
 * create, filled by load with the bytes save wrote (as for out-of-core
 * loads: `in` owns its memory, and load may take it with
 * blk_buffer_detach), and added with the links it was written with, their
 * ranks from a. a must have the file's block count (any rank count and
 * placement). Out of core, blocks are evicted as others are read, within
 * the budget. extra (may be NULL) receives the extra bytes of the write,
 * on every rank: it is emptied first, and holds them only on success; the
 * caller frees it with blk_buffer_free. Collective: the same code on every
 * rank. On failure the master holds the blocks that were read whole
 * (possibly none, possibly all but the ones named): it is usable, but
 * destroy it (or read into a new one) to restart.
 * Errors: BLK_EINVAL (m is NULL (that rank only); a NULL, or its rank count
 * is not the communicator's; its block count is not the file's (the detail
 * names both); no create or load callback; m holds blocks already; rank
 * 0's path NULL, empty or too long; a file of a format version this blk
 * does not read, or written on a machine of the other byte order),
 * BLK_EIO (the file cannot be opened or read: a missing file is this),
 * BLK_ECORRUPT (not a checkpoint, a header, extra, index or block record
 * that fails its checksum or contradicts the others, a file shorter or
 * longer than its header says: the detail names the file, and the gid and
 * offset of a block), BLK_ECALLBACK (create or load failed; the detail
 * names the gid and its code), BLK_ENOMEM, BLK_EMPI, and out of core
 * BLK_EIO (an eviction that could not be written). */
int blk_checkpoint_read(blk_master *m, const char *path, const blk_assigner *a, blk_buffer *extra);

#ifdef __cplusplus
}
#endif
#endif
