/*
 * blk/error.h: error codes.
 *
 * Every public function that can fail returns int: 0 for success, one of the
 * negative codes below otherwise. Codes and their strings come from one list,
 * so they cannot drift. Failures a caller can handle (bad arguments, I/O,
 * corrupt data, no memory) are returned; the detail (which value was wrong,
 * which path failed) is kept per thread and readable with blk_last_error().
 *
 * Collective calls return the same code on every rank, with the same
 * detail, naming the rank, block and round where the failure happened and
 * why ("reduce 7 failed on rank 1, gid 3, round 2: ..."); a rank never
 * returns 0 when another rank's failure changed its result. What cannot be
 * returned (a programming error inside a callback, MPI failing in the
 * middle of a message) stops the job with a message. docs/errors.md has the
 * table.
 */
#ifndef BLK_ERROR_H
#define BLK_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, string) */
#define BLK_ERROR_MAP(X)                                                      \
  X(OK, 0, "success")                                                         \
  X(EINVAL, -1, "invalid argument")                                           \
  X(ENOMEM, -2, "out of memory")                                              \
  X(EIO, -3, "input/output error")                                            \
  X(ECORRUPT, -4, "corrupt data")                                             \
  X(ERANGE, -5, "read past the end of the data")                              \
  X(EMPI, -6, "MPI call failed")                                              \
  X(ETHREADLEVEL, -7, "MPI thread support too low for the requested threads") \
  X(ESTATE, -8, "operation not allowed in this state")                        \
  X(ECALLBACK, -9, "a user callback reported failure")                        \
  X(ENOTFOUND, -10, "no such item")

typedef enum blk_error {
#define BLK_ERROR_ENUM_(name, value, str) BLK_##name = (value),
  BLK_ERROR_MAP(BLK_ERROR_ENUM_)
#undef BLK_ERROR_ENUM_
} blk_error;

/* The fixed string for an error code ("unknown error" for a code not in the
 * list). Static storage; any thread. */
const char *blk_strerror(int code);

/* The detailed message of the last error blk returned on the calling thread,
 * for example "decomposer: divisions[1] = 4 but 7 blocks remain to divide", or
 * "" if there was none. Valid until the next blk call on the same thread that
 * fails; a collective call that succeeds clears it, other calls that succeed
 * may leave it as it was. */
const char *blk_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
