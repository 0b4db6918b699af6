/*
 * comm.c: headers and payloads between ranks over non-blocking MPI.
 *
 * Invariants:
 * - Every send is a record holding its requests (header first, then payload
 *   pieces) and the storage they read from; the storage goes back to the
 *   buffer cache only when every request of the record has completed.
 * - A payload receive is posted the moment its header is received, so for
 *   one source the payload receives are posted in the order the sender
 *   posted the payload sends: MPI's non-overtaking rule pairs them.
 * - unmatched counts synchronous headers whose MPI_Issend has not completed.
 *
 * Cost of one message of n bytes: alpha + beta*n; above the eager limit a
 * second latency (the payload message) but no copy of the payload.
 * Payload storage comes from the master's buffer cache and returns to it, so
 * a large receive reuses memory that is already faulted in.
 * Only the creating thread calls in; there is no locking here.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "comm.h"

/* MPICH declares MPI_Testall/Waitall with an access attribute that makes gcc
 * read MPI_STATUSES_IGNORE (a sentinel pointer) as a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fail.h"
#include "logger.h"

enum { TAG_HEADER = 1, TAG_PAYLOAD = 2 };

/* Payloads up to this size ride inside the header message (one copy each
 * side, cheaper than a second message latency). */
#define EAGER_BYTES ((size_t)16384)
/* The largest piece of a payload: MPI counts are int. */
#define PIECE_BYTES ((size_t)1 << 30)
/* One allocation: the record, then its requests, then the header bytes. */
typedef struct send_rec {
  MPI_Request *reqs; /* [0] header, then payload pieces */
  int nreq;
  int unmatched;         /* synchronous header not yet matched */
  unsigned char *header; /* header and inline payload */
  blk_buffer payload;    /* non-inline payload storage, or a reference */
} send_rec;

typedef struct recv_rec {
  blk__msg msg;
  MPI_Request *reqs;
  int nreq;
  blk_buffer payload;
} recv_rec;

struct blk__comm {
  MPI_Comm comm;
  int rank, size;
  send_rec **sends;
  size_t nsends, cap_sends;
  recv_rec **recvs;
  size_t nrecvs, cap_recvs;
  size_t unmatched;
  unsigned char *scratch;   /* header receive buffer, EAGER_BYTES + header */
  blk__buffer_cache *cache; /* where payload storage comes from and goes */
  size_t ref_sends;         /* sends from memory blk does not own, not complete */
};

/* The panic path. MPI_Abort makes the launcher kill every rank, and output
 * not yet forwarded by the launcher is lost with them, so the message that
 * says why gets a moment to travel first. */
static void stop_all_ranks(void) {
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int blk__comm_check(int mpi_rc, const char *what) {
  if (mpi_rc == MPI_SUCCESS) return BLK_OK;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS) strcpy(text, "unknown MPI error");
  return blk__fail(BLK_EMPI, "%s: %s", what, text);
}

int blk__comm_create(blk__comm **out, MPI_Comm comm, blk__buffer_cache *cache) {
  *out = NULL;
  int rc = BLK_OK;
  blk__comm *c = calloc(1, sizeof *c);
  if (!c) return blk__fail(BLK_ENOMEM, "comm: no memory for the communicator state");
  c->comm = MPI_COMM_NULL;
  c->cache = cache;
  c->scratch = malloc(sizeof(blk__msg) + EAGER_BYTES);
  if (!c->scratch) {
    rc = blk__fail(BLK_ENOMEM, "comm: no memory for the receive buffer");
    goto fail;
  }
  if ((rc = blk__comm_check(MPI_Comm_dup(comm, &c->comm), "MPI_Comm_dup"))) goto fail;
  if ((rc = blk__comm_check(MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN),
                            "MPI_Comm_set_errhandler")))
    goto fail;
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  blk__set_stop_handler(stop_all_ranks);
  *out = c;
  return BLK_OK;
fail:
  blk__comm_destroy(c);
  return rc;
}

static void free_send(blk__comm *c, send_rec *s) {
  if (blk__buffer_is_ref(&s->payload)) c->ref_sends--;
  blk__buffer_cache_give(c->cache, &s->payload);
  free(s);
}

static void free_recv(blk__comm *c, recv_rec *r) {
  free(r->reqs);
  blk__buffer_cache_give(c->cache, &r->payload);
  free(r);
}

void blk__comm_destroy(blk__comm *c) {
  if (!c) return;
  /* Sends still in flight belong to operations the receivers complete (every
   * message is received within its operation), so waiting ends; freeing the
   * storage before would let MPI read freed memory. */
  for (size_t i = 0; i < c->nsends; i++) {
    MPI_Waitall(c->sends[i]->nreq, c->sends[i]->reqs, MPI_STATUSES_IGNORE);
    free_send(c, c->sends[i]);
  }
  /* Receives can only be left by an operation that failed half-way. */
  for (size_t i = 0; i < c->nrecvs; i++) {
    for (int j = 0; j < c->recvs[i]->nreq; j++)
      if (c->recvs[i]->reqs[j] != MPI_REQUEST_NULL) {
        MPI_Cancel(&c->recvs[i]->reqs[j]);
        MPI_Request_free(&c->recvs[i]->reqs[j]);
      }
    free_recv(c, c->recvs[i]);
  }
  free(c->sends);
  free(c->recvs);
  free(c->scratch);
  if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
  free(c);
}

int blk__comm_rank(const blk__comm *c) {
  return c->rank;
}
int blk__comm_size(const blk__comm *c) {
  return c->size;
}
MPI_Comm blk__comm_mpi(const blk__comm *c) {
  return c->comm;
}
size_t blk__comm_unmatched(const blk__comm *c) {
  return c->unmatched;
}
size_t blk__comm_sends_pending(const blk__comm *c) {
  return c->nsends;
}
size_t blk__comm_ref_sends(const blk__comm *c) {
  return c->ref_sends;
}
size_t blk__comm_recvs_pending(const blk__comm *c) {
  return c->nrecvs;
}

static int npieces(size_t size) {
  return size <= EAGER_BYTES ? 0 : (int)((size + PIECE_BYTES - 1) / PIECE_BYTES);
}

/* Grows a pointer array by one slot, doubling. */
static int push_ptr(void ***array, size_t *n, size_t *cap, void *item) {
  if (*n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 16;
    void **grown = realloc(*array, ncap * sizeof *grown);
    if (!grown) return BLK_ENOMEM;
    *array = grown;
    *cap = ncap;
  }
  (*array)[(*n)++] = item;
  return BLK_OK;
}

/* Posts receives (or sends) of a payload in pieces of at most PIECE_BYTES. */
static int post_pieces(MPI_Comm comm, int peer, unsigned char *data, size_t size, MPI_Request *reqs,
                       int receive) {
  for (size_t off = 0, i = 0; off < size; off += PIECE_BYTES, i++) {
    size_t len = size - off < PIECE_BYTES ? size - off : PIECE_BYTES;
    int rc = receive ? MPI_Irecv(data + off, (int)len, MPI_BYTE, peer, TAG_PAYLOAD, comm, &reqs[i])
                     : MPI_Isend(data + off, (int)len, MPI_BYTE, peer, TAG_PAYLOAD, comm, &reqs[i]);
    if (rc != MPI_SUCCESS) return blk__comm_check(rc, receive ? "MPI_Irecv" : "MPI_Isend");
  }
  return BLK_OK;
}

int blk__comm_send(blk__comm *c, int dst, const blk__msg *msg, blk_buffer *payload,
                   int synchronous) {
  int rc = BLK_OK;
  size_t size = payload->size;
  int pieces = npieces(size);
  size_t inline_bytes = pieces ? 0 : size;
  size_t reqs_at = (sizeof(send_rec) + sizeof(MPI_Request) - 1) / sizeof(MPI_Request);
  send_rec *s =
      malloc((reqs_at + 1 + (size_t)pieces) * sizeof(MPI_Request) + sizeof *msg + inline_bytes);
  if (!s)
    return blk__fail(BLK_ENOMEM, "comm: no memory for a send of %zu bytes to rank %d", size, dst);
  s->nreq = 1 + pieces;
  s->reqs = (MPI_Request *)s + reqs_at;
  s->header = (unsigned char *)(s->reqs + s->nreq);
  s->unmatched = 0;
  blk_buffer_init(&s->payload);
  for (int i = 0; i < s->nreq; i++) s->reqs[i] = MPI_REQUEST_NULL;
  blk__msg h = *msg;
  h.size = (int64_t)size;
  memcpy(s->header, &h, sizeof h);
  if (inline_bytes) memcpy(s->header + sizeof h, payload->data, inline_bytes);
  int hbytes = (int)(sizeof h + inline_bytes);
  int mrc = synchronous
                ? MPI_Issend(s->header, hbytes, MPI_BYTE, dst, TAG_HEADER, c->comm, &s->reqs[0])
                : MPI_Isend(s->header, hbytes, MPI_BYTE, dst, TAG_HEADER, c->comm, &s->reqs[0]);
  if ((rc = blk__comm_check(mrc, synchronous ? "MPI_Issend" : "MPI_Isend"))) goto fail;
  if (pieces) {
    blk_buffer_swap(&s->payload, payload);
    if (blk__buffer_is_ref(&s->payload)) c->ref_sends++;
    if ((rc = post_pieces(c->comm, dst, s->payload.data, size, s->reqs + 1, 0))) goto fail;
  } else {
    blk__buffer_release(payload); /* copied inline */
  }
  s->unmatched = synchronous;
  if (push_ptr((void ***)&c->sends, &c->nsends, &c->cap_sends, s)) {
    /* The MPI requests are live: wait for them rather than lose the send. */
    MPI_Waitall(s->nreq, s->reqs, MPI_STATUSES_IGNORE);
    free_send(c, s);
    return blk__fail(BLK_ENOMEM, "comm: no memory to track a send to rank %d", dst);
  }
  c->unmatched += (size_t)synchronous;
  return BLK_OK;
fail:
  if (blk__buffer_is_ref(&s->payload)) c->ref_sends--;
  if (s->payload.data) blk_buffer_swap(&s->payload, payload);
  free_send(c, s);
  return rc;
}

static int progress_sends(blk__comm *c, int *progressed) {
  size_t kept = 0;
  for (size_t i = 0; i < c->nsends; i++) {
    send_rec *s = c->sends[i];
    int flag = 0;
    if (s->unmatched) {
      int rc = MPI_Test(&s->reqs[0], &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return blk__comm_check(rc, "MPI_Test");
      if (flag) {
        s->unmatched = 0;
        c->unmatched--;
        *progressed = 1;
      }
    }
    int rc = MPI_Testall(s->nreq, s->reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return blk__comm_check(rc, "MPI_Testall");
    if (flag) {
      if (s->unmatched) c->unmatched--;
      free_send(c, s);
      *progressed = 1;
    } else {
      c->sends[kept++] = s;
    }
  }
  c->nsends = kept;
  return BLK_OK;
}

static int receive_header(blk__comm *c, blk__deliver_fn deliver, void *ctx, int *got) {
  int flag = 0, count = 0, rc;
  MPI_Message handle;
  MPI_Status st;
  *got = 0;
  if ((rc = blk__comm_check(MPI_Improbe(MPI_ANY_SOURCE, TAG_HEADER, c->comm, &flag, &handle, &st),
                            "MPI_Improbe")))
    return rc;
  if (!flag) return BLK_OK;
  *got = 1;
  MPI_Get_count(&st, MPI_BYTE, &count);
  if (count < (int)sizeof(blk__msg) || (size_t)count > sizeof(blk__msg) + EAGER_BYTES)
    blk__panic("comm: a header of %d bytes from rank %d is not a blk header", count, st.MPI_SOURCE);
  if ((rc = blk__comm_check(MPI_Mrecv(c->scratch, count, MPI_BYTE, &handle, MPI_STATUS_IGNORE),
                            "MPI_Mrecv")))
    return rc;
  blk__msg msg;
  memcpy(&msg, c->scratch, sizeof msg);
  size_t size = (size_t)msg.size;
  int pieces = npieces(size);
  if (!pieces) { /* whole already: delivered from here, no record */
    blk_buffer payload = BLK_BUFFER_INIT;
    if (size && blk__buffer_cache_reserve(c->cache, &payload, size))
      return blk__fail(BLK_ENOMEM, "comm: no memory for a %zu-byte message from rank %d", size,
                       st.MPI_SOURCE);
    if (size) memcpy(payload.data, c->scratch + sizeof msg, size);
    payload.size = size;
    deliver(&msg, &payload, ctx);
    blk__buffer_cache_give(c->cache, &payload);
    return BLK_OK;
  }
  recv_rec *r = calloc(1, sizeof *r);
  if (!r || blk__buffer_cache_reserve(c->cache, &r->payload, size)) {
    if (r) free_recv(c, r);
    return blk__fail(BLK_ENOMEM, "comm: no memory for a %zu-byte message from rank %d", size,
                     st.MPI_SOURCE);
  }
  r->msg = msg;
  r->payload.size = size;
  r->nreq = pieces;
  r->reqs = malloc((size_t)pieces * sizeof *r->reqs);
  if (!r->reqs) {
    free_recv(c, r);
    return blk__fail(BLK_ENOMEM, "comm: no memory for the receive of %d pieces", pieces);
  }
  for (int i = 0; i < pieces; i++) r->reqs[i] = MPI_REQUEST_NULL;
  rc = post_pieces(c->comm, st.MPI_SOURCE, r->payload.data, size, r->reqs, 1);
  if (!rc && push_ptr((void ***)&c->recvs, &c->nrecvs, &c->cap_recvs, r))
    rc = blk__fail(BLK_ENOMEM, "comm: no memory to track a receive");
  if (rc) {
    /* Cannot lose a posted receive into freed memory: this is beyond repair. */
    blk__panic("comm: could not post the payload receive from rank %d: %s", st.MPI_SOURCE,
               blk_last_error());
  }
  return BLK_OK;
}

static int progress_recvs(blk__comm *c, blk__deliver_fn deliver, void *ctx, int *progressed) {
  size_t kept = 0;
  for (size_t i = 0; i < c->nrecvs; i++) {
    recv_rec *r = c->recvs[i];
    int flag = 0;
    int rc = MPI_Testall(r->nreq, r->reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return blk__comm_check(rc, "MPI_Testall");
    if (flag) {
      deliver(&r->msg, &r->payload, ctx);
      free_recv(c, r);
      *progressed = 1;
    } else {
      c->recvs[kept++] = r;
    }
  }
  c->nrecvs = kept;
  return BLK_OK;
}

int blk__comm_progress(blk__comm *c, blk__deliver_fn deliver, void *ctx, int probe,
                       int *progressed) {
  int rc, got = 0;
  *progressed = 0;
  if ((rc = progress_sends(c, progressed))) return rc;
  if (probe) {
    do {
      if ((rc = receive_header(c, deliver, ctx, &got))) return rc;
      if (got) *progressed = 1;
    } while (got);
  }
  return progress_recvs(c, deliver, ctx, progressed);
}
