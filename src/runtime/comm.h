/*
 * comm.h: blk's messages between ranks (the only MPI point-to-point code).
 *
 * A message is a fixed header (blk__msg) and a payload of any 64-bit size.
 * Small payloads travel inside the header message; larger ones follow as
 * their own message(s), sent straight from the sender's buffer and received
 * straight into the buffer the receiver keeps, so a big payload is never
 * copied by blk. Payloads over 1 GiB go in 1 GiB pieces (MPI counts are int).
 *
 * Headers are received in any order from any source (matched probe); a
 * payload follows its header on a second tag, and MPI's non-overtaking rule
 * for one (source, tag) pair keeps each payload with its header.
 *
 * Headers may be sent synchronously (MPI_Issend), which lets a caller know
 * when the receiver has matched every header it sent: the basis of the
 * exchange's termination test (a non-blocking consensus, Hoefler et al.'s
 * NBX), where nobody knows in advance who sends to whom.
 *
 * Failures: a send that cannot start (no memory for its record, or MPI
 * refusing the header) is returned and nothing of it is under way. Past
 * that point a message is partly under way and its peer waits for the
 * rest: an MPI error then (MPI's state after one is undefined), or no
 * memory for a large payload the sender waits to hand over, stops the job
 * with a message naming the call and the peer.
 *
 * Only the thread that created the comm calls these functions.
 */
#ifndef BLK_COMM_H
#define BLK_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buffer_cache.h"
#include "blk/buffer.h"

typedef struct blk__msg {
  uint32_t op;     /* operation number (epoch), compared modulo 2^32 */
  int32_t src_gid; /* sending block */
  int32_t dst_gid; /* receiving block */
  int32_t key;     /* operation-specific (round, link direction) */
  int32_t aux;     /* operation-specific (link occurrence) */
  int32_t flags;   /* BLK__MSG_* (operation.h) */
  int64_t size;    /* payload bytes */
} blk__msg;

/* Payloads up to this size ride inside the header message: one MPI
 * message of sizeof(blk__msg) + size bytes, one copy each side, cheaper
 * than a second message latency. */
#define BLK__COMM_INLINE_BYTES ((size_t)16384)

typedef struct blk__comm blk__comm;

/* Called for every message that has fully arrived. A large payload comes
 * in its own storage, which the callee may take with blk_buffer_swap (what
 * it leaves goes to the cache); a small one (inline) is a reference
 * (blk__buffer_is_ref) to bytes lent only for the call: the callee copies
 * what it keeps. Returns nonzero when the message gave the caller work to
 * do now: the pass then receives no more headers (the next pass does). */
typedef int (*blk__deliver_fn)(const blk__msg *msg, blk_buffer *payload, void *ctx);

/* Asked when the header of a message with a payload has arrived: where the
 * payload should be received. The callee may make `into` a reference
 * (buffer_cache.h) to msg->size bytes of memory of its own that nothing
 * else touches until the message is delivered, and return 1: the payload
 * then lands there (a large one with no copy, an inline one copied from the
 * header message) and is delivered as that reference, with
 * BLK__COMM_PLACED in the flags deliver sees. 0: comm receives it into
 * storage of its own (or lends an inline one). */
typedef int (*blk__place_fn)(const blk__msg *msg, blk_buffer *into, void *ctx);

/* In the flags of a delivered message (never on the wire): the payload was
 * received where the place function said. */
#define BLK__COMM_PLACED 0x40000000

/* Takes over comm (a duplicate the caller made for blk, with
 * MPI_ERRORS_RETURN; freed by destroy). Payload storage comes from cache and goes back to it
 * (NULL: malloc). BLK_ENOMEM (comm is then still the caller's). */
int blk__comm_create(blk__comm **out, MPI_Comm comm, blk__buffer_cache *cache);
void blk__comm_destroy(blk__comm *c);

int blk__comm_rank(const blk__comm *c);
int blk__comm_size(const blk__comm *c);
MPI_Comm blk__comm_mpi(const blk__comm *c);

/* Starts sending msg (with msg->size = payload->size) and payload to
 * dst_rank. The comm takes payload's storage (payload is left empty, or
 * keeps its storage if the payload went inline) and gives it to the cache
 * once sent. A reference payload is sent from the memory it refers to.
 * synchronous: the header is an MPI_Issend, counted by blk__comm_unmatched
 * until the receiver has matched it. BLK_ENOMEM or BLK_EMPI when the send
 * could not start: then nothing was sent and payload is as it was. */
int blk__comm_send(blk__comm *c, int dst_rank, const blk__msg *msg, blk_buffer *payload,
                   int synchronous);
/* blk__comm_send, and when the payload is a reference that goes as a
 * message of its own (above the inline size; an inline one is copied),
 * *refs_in_flight counts it until the send is complete: until then MPI may
 * still read the memory it refers to, which must not be written. */
int blk__comm_send_counted(blk__comm *c, int dst_rank, const blk__msg *msg, blk_buffer *payload,
                           int synchronous, int *refs_in_flight);

/* One pass of progress: completes finished sends, receives headers that
 * have arrived (if probe is set, until a delivery returns nonzero; asking
 * place, which may be NULL, where a payload goes) and payloads that have
 * completed, calling deliver for each message that is whole. *progressed
 * is set to 1 if anything happened. */
void blk__comm_progress(blk__comm *c, blk__deliver_fn deliver, blk__place_fn place, void *ctx,
                        int probe, int *progressed);

/* Synchronous headers not yet matched by their receiver. */
size_t blk__comm_unmatched(const blk__comm *c);
/* What this comm has sent so far (for the log's per-operation figures). */
typedef struct blk__comm_counts {
  uint64_t messages, bytes;
} blk__comm_counts;
void blk__comm_counts_get(const blk__comm *c, blk__comm_counts *out);

/* Sends not complete, and payload receives not complete. */
size_t blk__comm_sends_pending(const blk__comm *c);
size_t blk__comm_recvs_pending(const blk__comm *c);
/* Payload receives into memory a place function gave, not yet complete: the
 * memory must stay valid until this is 0. */
size_t blk__comm_placed_recvs(const blk__comm *c);
/* Payloads (their own messages, above the inline size) being sent or
 * received. Their bytes move only while MPI is polled (a rendezvous needs
 * both sides), so a caller waiting for them should poll, not sleep. */
size_t blk__comm_transfers(const blk__comm *c);
/* Sends whose payload is a reference (buffer_cache.h) not yet complete: the
 * memory they read must stay as it is until this is 0. */
size_t blk__comm_ref_sends(const blk__comm *c);

/* Turns an MPI return code into BLK_OK or BLK_EMPI with MPI's text. */
int blk__comm_check(int mpi_rc, const char *what);

#endif
