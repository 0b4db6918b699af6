/*
 * fail.h: how blk reports what went wrong.
 *
 * blk__fail records a detailed message for blk_last_error(), logs it at error
 * level and returns the code, so a failing path reads
 *     return blk__fail(BLK_EINVAL, "decomposer: nblocks = %d", n);
 * blk__panic is for a caller's programming error inside a collective phase:
 * returning would leave other ranks waiting, so it prints and stops the job
 * through the handler the runtime installs (MPI_Abort), or abort() before that.
 */
#ifndef BLK_FAIL_H
#define BLK_FAIL_H

#include "blk/error.h"

#if defined(__GNUC__)
#define BLK__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define BLK__NORETURN __attribute__((noreturn))
#else
#define BLK__PRINTF(f, a)
#define BLK__NORETURN
#endif

int blk__fail(int code, const char *fmt, ...) BLK__PRINTF(2, 3);

/* Clears the calling thread's last error message. */
void blk__clear_error(void);

void blk__panic(const char *fmt, ...) BLK__PRINTF(1, 2) BLK__NORETURN;

/* The runtime installs a handler that stops every rank (it must not return). */
typedef void (*blk__stop_fn)(void);
void blk__set_stop_handler(blk__stop_fn fn);

#endif
