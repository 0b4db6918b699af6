/*
 * callback.h: running a user's callback and turning what it returns into
 * the running operation's failure.
 *
 * A callback's own code is never read as a blk code: it becomes
 * BLK_ECALLBACK with a detail naming it ("the callback returned -7"). When
 * the code is one blk gave the callback on its thread (an enqueue that
 * found no memory), blk's reason follows, so nothing is reported as a
 * mystery. blk's own drivers (all_to_all's rounds) keep their codes.
 */
#ifndef BLK_CALLBACK_H
#define BLK_CALLBACK_H

#include "runtime/operation.h"
#include "runtime/proxy_state.h"

/* Runs fn(block, p, user), on the calling (pool) thread, and returns 0 or
 * its failure: a user's code becomes BLK_ECALLBACK naming it (own_codes:
 * the callback is blk's own driver, whose codes are returned as they are).
 * *why gets the failure's detail (malloc'd; NULL without memory). */
int blk__run_callback(int (*fn)(void *, blk_proxy *, void *), void *block, blk_proxy *p, void *user,
                      int own_codes, char **why);

/* BLK_ECALLBACK with a detail naming which callback returned what, and
 * blk's reason when the code is one blk gave it on this thread. Call on the
 * callback's thread, right after it. */
int blk__callback_error(const char *which, int code);

/* Records a failed callback in the running operation (driver thread) and
 * frees why. */
void blk__note_callback_failure(blk__op *o, int gid, int round, int code, char **why);

#endif
