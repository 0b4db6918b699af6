/*
 * pages.h: the pages of a buffer that nothing has written yet, made real
 * before blk reads the buffer.
 *
 * Reading a page of anonymous memory that was never written maps the
 * kernel's shared zero page there, read only. The first write to that page
 * afterwards must swap the mapping for a page of its own and flush the old
 * one from every core that may hold it: on a machine with several cores,
 * an interrupt to each of them for every such page (on a virtual machine, an
 * exit to the hypervisor besides). That write usually comes from the
 * program: blk stores a block whose memory its evict callback handed over
 * (a histogram's counts, half of whose pages no cell reached), reads all of
 * it for the checksum and the codec, and frees it; the program's next
 * calloc gets that memory back and zeroes it. On 2 cores that was a
 * quarter of the processor time the histogram example spent beyond its
 * in-core run (docs/out-of-core.md).
 *
 * blk__pages_populate asks the kernel which pages of the buffer have no
 * mapping yet (mincore) and faults those in as if written
 * (MADV_POPULATE_WRITE, Linux 5.14): what the program's first write would
 * have cost, without the flush, and not a byte changes. Pages that are
 * mapped already are left alone, and so are buffers below
 * BLK__PAGES_POPULATE_MIN: message-sized, written in full by their enqueues
 * as a rule, where the system call would add a few percent to the read it
 * precedes for nothing.
 *
 * Only for memory that blk owns and may write (heap memory: a block's bytes
 * on their way to storage); pages already mapped are never touched. Any
 * thread; no state.
 */
#ifndef BLK_PAGES_H
#define BLK_PAGES_H

#include <stddef.h>

/* Buffers below this are left as they are: 64 pages of 4 KiB. */
#define BLK__PAGES_POPULATE_MIN ((size_t)256 << 10)

/* Faults in, writable, the pages of data[0, n) that have no mapping yet
 * (with the partial pages at its ends: no byte changes, its neighbours'
 * included). Returns 0 when it found that the system cannot (not Linux,
 * or a kernel without MADV_POPULATE_WRITE; nothing changed: it is only a
 * saving), else 1 (below the minimum, without asking). */
int blk__pages_populate(void *data, size_t n);

#endif
