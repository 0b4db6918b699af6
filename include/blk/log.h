/*
 * blk/log.h: logging with levels.
 *
 * Lines go to stderr, each prefixed with "blk[rank]" once a master knows the
 * rank; a master may send its own lines elsewhere, at its own level
 * (blk_master_config's log and log_level). The level starts from the environment variable BLK_LOG
 * (none, error, warn, info, debug, trace or 0-5; default warn) and can be changed with
 * blk_log_set_level(). BLK_LOG is read once per process, when the first
 * master is created or the level is first read or set, whichever comes
 * first; any other value is reported then, in one line on stderr, and
 * ignored.
 *
 * What is logged where (docs/errors.md): an error that blk returns is not
 * printed (the caller has the code and blk_last_error(); BLK_LOG=debug
 * shows each one where it arises); what stops the job is printed once, at
 * error level whatever the level, by the rank that stops it; info prints a
 * line per collective operation (its time, callbacks, messages and bytes)
 * and out-of-core figures when a master is destroyed.
 */
#ifndef BLK_LOG_H
#define BLK_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum blk_log_level {
  BLK_LOG_NONE = 0,
  BLK_LOG_ERROR = 1,
  BLK_LOG_WARN = 2,
  BLK_LOG_INFO = 3,
  BLK_LOG_DEBUG = 4,
  BLK_LOG_TRACE = 5
} blk_log_level;

/* A master's log level that follows the process's (blk_master_config). */
#define BLK_LOG_DEFAULT (-1)

/* Where a master's lines go instead of stderr (blk_master_config.log):
 * called with each line blk writes during that master's calls and from its
 * threads (also by blk_log in its callbacks), the prefix included
 * ("blk[3] warn: ..."), without a newline. Called from the master's
 * driver thread and its pool threads, possibly at once: it must be
 * thread-safe. It must not call into blk. */
typedef void (*blk_log_fn)(blk_log_level level, const char *line, void *user);

/* Set the level; lines above it are dropped. It wins over BLK_LOG, which is
 * still checked (and a bad value reported) if nothing read it before. Any
 * thread. */
void blk_log_set_level(blk_log_level level);

/* The current level: the last one set, else BLK_LOG's, else warn. Any
 * thread. */
blk_log_level blk_log_get_level(void);

/* Parse a level name ("warn", "debug", ... or a digit 0-5). Returns
 * BLK_EINVAL for anything else, leaving *level unchanged. */
int blk_log_parse_level(blk_log_level *level, const char *name);

/* Write one line at a level, printf-style, with blk's prefix. For user code
 * that wants its lines to look like blk's. Any thread; lines never interleave. */
void blk_log(blk_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
