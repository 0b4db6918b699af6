/*
 * backoff.h: how blk's driver thread waits for MPI without hogging a core.
 *
 * MPI has no portable blocking wait for "any message or any request", so the
 * driver polls. Polling flat out would steal the core from worker threads
 * and, when ranks share cores, from the rank being waited for. So after a
 * short burst of polls (cheap, and what keeps small-message latency low) it
 * yields the core, then sleeps, doubling up to a cap. Any progress resets it.
 */
#ifndef BLK_BACKOFF_H
#define BLK_BACKOFF_H

typedef struct blk__backoff {
  unsigned idle; /* polls in a row that found nothing */
} blk__backoff;

static inline void blk__backoff_reset(blk__backoff *b) {
  b->idle = 0;
}

/* Called after a poll that found nothing. */
void blk__backoff_idle(blk__backoff *b);

/* The same while a large message is under way, whose bytes move only while
 * MPI is polled: spins, then yields, but never sleeps (a sleep here costs at
 * least 70 us, docs/performance.md), as MPI_Wait would. */
void blk__backoff_poll(blk__backoff *b);

#endif
