/*
 * swap_partners.h: the folded swap partners a collective runs on every call
 * (all_to_all, all_gather), kept by the master between calls, and
 * all_to_all's rounds with those inside a rank merged.
 *
 * Making them (blk__partners_create_folding) allocates, and a call of a
 * kilobyte's messages spent measurable time on it (docs/performance.md,
 * 13.12). So each caller keeps the last partners it used, under its own
 * key, and they are made again only when the block count, k or the order
 * changes. Driver thread only.
 */
#ifndef BLK_SWAP_PARTNERS_H
#define BLK_SWAP_PARTNERS_H

#include "blk/assigner.h"
#include "blk/partners.h"
#include "master/master_state.h"

/* The swap partners of n blocks for radix k in the given order, kept by m
 * under owner (a static object of the caller's, one per caller); the
 * caller must not destroy them. *made says whether they were made by this
 * call (what the caller derived from earlier ones is then stale). On
 * failure (no memory, bad k) returns the code, with the detail set, and
 * *out is NULL. */
int blk__swap_partners_kept(blk_master *m, const void *owner, int n, int k, int contiguous,
                            const blk_partners **out, int *made);

/* The widest round a merge of rounds inside a rank makes (see below): of
 * several rounds, and when it makes the only one. */
#define BLK__MERGED_GROUP_MAX 16
#define BLK__MERGED_DIRECT_MAX 64

/* As blk__swap_partners_kept, but with the rounds inside a rank of a merged. All n blocks on
 * one rank and n <= BLK__MERGED_DIRECT_MAX: one round of n, a direct exchange (64 blocks at
 * k = 4 take one round, not three; 47, which k would fold, one too). The same for any n <=
 * BLK__MERGED_DIRECT_MAX when `stored` says a message between rounds is a trip through storage
 * on some rank. Otherwise each run of consecutive rounds whose groups all lie on one rank
 * (every block's group in them) becomes one round, while the merged group has at most
 * BLK__MERGED_GROUP_MAX members; folded partners stay as they are, and so do the rounds that
 * cross ranks.
 *
 * Why: in a collective whose middle rounds only forward (all_to_all), a round between blocks
 * of one rank saves no latency and costs a pass over their messages (under a memory budget,
 * a trip through storage). But a wide round among several costs more per message than the
 * rounds it saves, while a direct exchange, whose messages go unpacked, pays for itself: inside
 * a rank always, and across ranks when every forward would be written and read back (in core
 * there, k's fewer and larger messages win); docs/performance.md (12.2) has the figures.
 *
 * The result depends only on (a, n, k, contiguous, stored), which every rank must have alike
 * (stored: the master's any_budget), so every rank runs the same rounds. Costs O(n) rank
 * look-ups per round on every call: an assigner's content, not its address, decides. */
int blk__swap_partners_merged_kept(blk_master *m, const void *owner, const blk_assigner *a, int n,
                                   int k, int contiguous, int stored, const blk_partners **out,
                                   int *made);

#endif
