/*
 * fail.h: how blk reports what went wrong.
 *
 * blk__fail records a detailed message (and the code) for blk_last_error()
 * on the calling thread, logs it at debug level and returns the code, so a
 * failing path reads
 *     return blk__fail(BLK_EINVAL, "decomposer: nblocks = %d", n);
 * blk__panic is for what cannot be returned: a caller's programming error
 * inside a collective phase, or a failure that leaves blk unable to keep its
 * side of the protocol. It prints and stops the job the way the running
 * master says (context.h: its stop callback, then MPI_Abort on its
 * communicator), or with abort() outside any master's call; on a pool
 * worker it hands the message to the driver thread, which stops the job.
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

/* Clears the calling thread's last error message and code. */
void blk__clear_error(void);

/* The code of the calling thread's last blk__fail since the last clear (0
 * if none): a driver compares it with a callback's return to tell a code
 * blk gave the callback from the callback's own. */
int blk__last_code(void);

void blk__panic(const char *fmt, ...) BLK__PRINTF(1, 2) BLK__NORETURN;

/* A thread that must not stop the job itself (a pool worker) installs a
 * handoff: blk__panic on that thread calls it with the message, and it
 * never returns. */
typedef void (*blk__handoff_fn)(const char *message);
void blk__set_panic_handoff(blk__handoff_fn fn);

#endif
