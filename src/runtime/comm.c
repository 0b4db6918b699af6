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
 * second latency (the payload message) but no copy of the payload, and none
 * on the way out of comm either when the receiver says where the payload
 * goes (blk__place_fn: a broadcast's array receives it in place; an inline
 * payload is copied there from the header message, its only copy).
 * Payload storage comes from the master's buffer cache and returns to it, so
 * a large receive reuses memory that is already faulted in.
 * Only the creating thread calls in; there is no locking here.
 */
#include "runtime/comm.h"

/* MPICH declares MPI_Testall/Waitall with an access attribute that makes gcc
 * read MPI_STATUSES_IGNORE (a sentinel pointer) as a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/copy.h"
#include "base/fail.h"
#include "base/fault.h"
#include "base/logger.h"

enum { TAG_HEADER = 1, TAG_PAYLOAD = 2 };

/* blk-tune places sizes around MPI's eager step by it (bench/blk_tune.c). */
_Static_assert(sizeof(blk__msg) == 32, "a message header is 32 bytes");

/* The largest piece of a payload: MPI counts are int. */
#define PIECE_BYTES ((size_t)1 << 30)
/* Sent records kept for the next sends: an operation's few messages then
 * cost no allocation (a record with a kilobyte inline is past glibc's
 * per-thread cache, and its malloc and free cost about 100 ns). */
#define SPARE_SENDS 16
/* One allocation: the record, then its requests, then the header bytes. */
typedef struct send_rec {
  size_t bytes;      /* the allocation's size */
  MPI_Request *reqs; /* [0] header, then payload pieces */
  int nreq;
  int unmatched;         /* synchronous header not yet matched */
  unsigned char *header; /* header and inline payload */
  blk_buffer payload;    /* non-inline payload storage, or a reference */
  int *refs_in_flight;   /* blk__comm_send_counted's counter, or NULL */
} send_rec;

typedef struct recv_rec {
  blk__msg msg;
  int peer;
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
  unsigned char *scratch;   /* header receive buffer, BLK__COMM_INLINE_BYTES + header */
  blk__buffer_cache *cache; /* where payload storage comes from and goes */
  size_t ref_sends;         /* sends from memory blk does not own, not complete */
  size_t placed_recvs;      /* receives into memory a place function gave, not complete */
  size_t payload_sends;     /* sends with a payload of their own, not complete */
  blk__comm_counts counts;  /* messages and bytes sent so far */
  /* Completed send records to reuse, and how many. */
  send_rec *spare[SPARE_SENDS];
  int nspare;
};

int blk__comm_check(int mpi_rc, const char *what) {
  if (mpi_rc == MPI_SUCCESS) return BLK_OK;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS) strcpy(text, "unknown MPI error");
  return blk__fail(BLK_EMPI, "%s: %s", what, text);
}

int blk__comm_create(blk__comm **out, MPI_Comm comm, blk__buffer_cache *cache) {
  *out = NULL;
  blk__comm *c = blk__calloc(1, sizeof *c);
  unsigned char *scratch = blk__malloc(sizeof(blk__msg) + BLK__COMM_INLINE_BYTES);
  if (!c || !scratch) {
    free(c);
    free(scratch);
    return blk__fail(BLK_ENOMEM, "comm: no memory for the communicator state");
  }
  c->comm = comm;
  c->cache = cache;
  c->scratch = scratch;
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  *out = c;
  return BLK_OK;
}

static void free_send(blk__comm *c, send_rec *s) {
  if (blk__buffer_is_ref(&s->payload)) c->ref_sends--;
  if (s->refs_in_flight) --*s->refs_in_flight;
  if (s->nreq > 1) c->payload_sends--;
  blk__buffer_cache_give(c->cache, &s->payload);
  if (c->nspare < SPARE_SENDS)
    c->spare[c->nspare++] = s;
  else
    free(s);
}

/* A record of at least bytes: the smallest spare one that is large
 * enough, or a new one. */
static send_rec *new_send(blk__comm *c, size_t bytes) {
  int best = -1;
  for (int i = 0; i < c->nspare; i++)
    if (c->spare[i]->bytes >= bytes && (best < 0 || c->spare[i]->bytes < c->spare[best]->bytes))
      best = i;
  if (best >= 0) {
    send_rec *s = c->spare[best];
    c->spare[best] = c->spare[--c->nspare];
    return s;
  }
  send_rec *s = blk__malloc(bytes);
  if (s) s->bytes = bytes;
  return s;
}

/* An MPI call of a message that is partly posted failed: the peer waits for
 * the rest, which cannot come, and MPI's state after an error is undefined,
 * so the job stops. */
static void broken(int mpi_rc, const char *what, int peer) {
  blk__comm_check(mpi_rc, what);
  if (peer < 0) blk__panic("comm: %s failed with messages under way: %s", what, blk_last_error());
  blk__panic("comm: %s with rank %d failed after part of the message was under way: %s", what, peer,
             blk_last_error());
}

/* The MPI calls that fault.h can make fail, as if MPI had failed. */
static int isend(const void *buf, int n, int dst, int tag, MPI_Comm comm, MPI_Request *req,
                 int synchronous) {
  if (blk__fault_check(BLK__FAULT_ISEND)) return MPI_ERR_OTHER;
  return synchronous ? MPI_Issend(buf, n, MPI_BYTE, dst, tag, comm, req)
                     : MPI_Isend(buf, n, MPI_BYTE, dst, tag, comm, req);
}

static int irecv(void *buf, int n, int src, int tag, MPI_Comm comm, MPI_Request *req) {
  if (blk__fault_check(BLK__FAULT_IRECV)) return MPI_ERR_OTHER;
  return MPI_Irecv(buf, n, MPI_BYTE, src, tag, comm, req);
}

static void free_recv(blk__comm *c, recv_rec *r) {
  free(r->reqs);
  blk__buffer_cache_give(c->cache, &r->payload);
  free(r);
}

void blk__comm_destroy(blk__comm *c) {
  if (!c) return;
  /* The master drains every message before it destroys the comm (its
   * destroy is collective), so nothing should be left; if something is, it
   * is waited for, since freeing the storage first would let MPI read or
   * write freed memory. */
  for (size_t i = 0; i < c->nsends; i++) {
    MPI_Waitall(c->sends[i]->nreq, c->sends[i]->reqs, MPI_STATUSES_IGNORE);
    c->sends[i]->refs_in_flight = NULL; /* (its owner's operation is over) */
    free_send(c, c->sends[i]);
  }
  for (size_t i = 0; i < c->nrecvs; i++) {
    MPI_Waitall(c->recvs[i]->nreq, c->recvs[i]->reqs, MPI_STATUSES_IGNORE);
    free_recv(c, c->recvs[i]);
  }
  for (int i = 0; i < c->nspare; i++) free(c->spare[i]);
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
size_t blk__comm_placed_recvs(const blk__comm *c) {
  return c->placed_recvs;
}
size_t blk__comm_transfers(const blk__comm *c) {
  return c->nrecvs + c->payload_sends;
}
void blk__comm_counts_get(const blk__comm *c, blk__comm_counts *out) {
  *out = c->counts;
}

static int npieces(size_t size) {
  return size <= BLK__COMM_INLINE_BYTES ? 0 : (int)((size + PIECE_BYTES - 1) / PIECE_BYTES);
}

/* Makes room for one more pointer in an array, doubling, so that a record
 * can be kept once its requests are posted without anything left to fail. */
static int room_for_one(void ***array, size_t n, size_t *cap) {
  if (n < *cap) return BLK_OK;
  size_t ncap = *cap ? *cap * 2 : 16;
  void **grown = blk__realloc(*array, ncap * sizeof *grown);
  if (!grown) return BLK_ENOMEM;
  *array = grown;
  *cap = ncap;
  return BLK_OK;
}

/* The length of piece i of a payload of size bytes. */
static int piece_bytes(size_t size, int i) {
  size_t off = (size_t)i * PIECE_BYTES;
  return (int)(size - off < PIECE_BYTES ? size - off : PIECE_BYTES);
}

/* Posts the receives (or sends) of a payload's pieces; the header is
 * already matched (or posted), so a failure stops the job. */
static void post_pieces(MPI_Comm comm, int peer, unsigned char *data, size_t size,
                        MPI_Request *reqs, int receive) {
  for (int i = 0; (size_t)i * PIECE_BYTES < size; i++) {
    unsigned char *at = data + (size_t)i * PIECE_BYTES;
    int len = piece_bytes(size, i);
    int rc = receive ? irecv(at, len, peer, TAG_PAYLOAD, comm, &reqs[i])
                     : isend(at, len, peer, TAG_PAYLOAD, comm, &reqs[i], 0);
    if (rc != MPI_SUCCESS) broken(rc, receive ? "MPI_Irecv" : "MPI_Isend", peer);
  }
}

int blk__comm_send(blk__comm *c, int dst, const blk__msg *msg, blk_buffer *payload,
                   int synchronous) {
  return blk__comm_send_counted(c, dst, msg, payload, synchronous, NULL);
}

int blk__comm_send_counted(blk__comm *c, int dst, const blk__msg *msg, blk_buffer *payload,
                           int synchronous, int *refs_in_flight) {
  size_t size = payload->size;
  int pieces = npieces(size);
  size_t inline_bytes = pieces ? 0 : size;
  size_t reqs_at = (sizeof(send_rec) + sizeof(MPI_Request) - 1) / sizeof(MPI_Request);
  send_rec *s = new_send(
      c, (reqs_at + 1 + (size_t)pieces) * sizeof(MPI_Request) + sizeof *msg + inline_bytes);
  if (!s || room_for_one((void ***)&c->sends, c->nsends, &c->cap_sends)) {
    free(s);
    return blk__fail(BLK_ENOMEM, "comm: no memory for a send of %zu bytes to rank %d", size, dst);
  }
  s->nreq = 1 + pieces;
  s->reqs = (MPI_Request *)s + reqs_at;
  s->header = (unsigned char *)(s->reqs + s->nreq);
  blk_buffer_init(&s->payload);
  s->refs_in_flight = NULL;
  for (int i = 0; i < s->nreq; i++) s->reqs[i] = MPI_REQUEST_NULL;
  blk__msg h = *msg;
  h.size = (int64_t)size;
  memcpy(s->header, &h, sizeof h);
  blk__copy(s->header + sizeof h, payload->data, inline_bytes);
  int hbytes = (int)(sizeof h + inline_bytes);
  int mrc = isend(s->header, hbytes, dst, TAG_HEADER, c->comm, &s->reqs[0], synchronous);
  if (mrc != MPI_SUCCESS) { /* nothing is under way: the caller may go on without it */
    free(s);
    return blk__comm_check(mrc, synchronous ? "MPI_Issend" : "MPI_Isend");
  }
  if (pieces) {
    blk_buffer_swap(&s->payload, payload);
    if (blk__buffer_is_ref(&s->payload)) {
      c->ref_sends++;
      if ((s->refs_in_flight = refs_in_flight)) ++*refs_in_flight;
    }
    c->payload_sends++;
    post_pieces(c->comm, dst, s->payload.data, size, s->reqs + 1, 0);
  } else {
    blk__buffer_release(payload); /* copied inline */
  }
  s->unmatched = synchronous;
  c->sends[c->nsends++] = s;
  c->unmatched += (size_t)synchronous;
  c->counts.messages++;
  c->counts.bytes += size;
  return BLK_OK;
}

static void progress_sends(blk__comm *c, int *progressed) {
  size_t kept = 0;
  for (size_t i = 0; i < c->nsends; i++) {
    send_rec *s = c->sends[i];
    int flag = 0;
    if (s->unmatched) {
      int rc = MPI_Test(&s->reqs[0], &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) broken(rc, "MPI_Test", -1);
      if (flag) {
        s->unmatched = 0;
        c->unmatched--;
        *progressed = 1;
      }
    }
    int rc = MPI_Testall(s->nreq, s->reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) broken(rc, "MPI_Testall", -1);
    if (flag) {
      if (s->unmatched) c->unmatched--;
      free_send(c, s);
      *progressed = 1;
    } else {
      c->sends[kept++] = s;
    }
  }
  c->nsends = kept;
}

/* Receives one header if one has arrived: delivers an inline message at
 * once, lending its bytes (no allocation: the receiver copies what it
 * keeps, often into storage it already has), or posts the receives of its
 * payload. A large payload must be received, or its sender would wait
 * forever, so no memory for it stops the job. */
static void receive_header(blk__comm *c, blk__deliver_fn deliver, blk__place_fn place, void *ctx,
                           int *got, int *woke) {
  int flag = 0, count = 0, rc;
  MPI_Message handle;
  MPI_Status st;
  *got = 0;
  rc = MPI_Improbe(MPI_ANY_SOURCE, TAG_HEADER, c->comm, &flag, &handle, &st);
  if (rc != MPI_SUCCESS) broken(rc, "MPI_Improbe", -1);
  if (!flag) return;
  *got = 1;
  MPI_Get_count(&st, MPI_BYTE, &count);
  if (count < (int)sizeof(blk__msg) || (size_t)count > sizeof(blk__msg) + BLK__COMM_INLINE_BYTES)
    blk__panic("comm: a header of %d bytes from rank %d is not a blk header", count, st.MPI_SOURCE);
  rc = MPI_Mrecv(c->scratch, count, MPI_BYTE, &handle, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) broken(rc, "MPI_Mrecv", st.MPI_SOURCE);
  blk__msg msg;
  memcpy(&msg, c->scratch, sizeof msg);
  size_t size = (size_t)msg.size;
  int pieces = msg.size < 0 ? 0 : npieces(size);
  size_t inline_bytes = pieces ? 0 : size;
  if (msg.size < 0 || (size_t)count != sizeof msg + inline_bytes)
    blk__panic("comm: a header from rank %d announces %lld bytes but carries %d", st.MPI_SOURCE,
               (long long)msg.size, count - (int)sizeof msg);
  if (!pieces) { /* whole already: delivered from here, no record */
    blk_buffer at = BLK_BUFFER_INIT;
    if (size && place && place(&msg, &at, ctx)) { /* where it goes: saves the receiver a copy */
      blk__copy(at.data, c->scratch + sizeof msg, size);
      msg.flags |= BLK__COMM_PLACED;
    } else {
      blk__buffer_ref(&at, c->scratch + sizeof msg, size);
    }
    *woke = deliver(&msg, &at, ctx);
    blk__buffer_release(&at);
    return;
  }
  recv_rec *r = blk__calloc(1, sizeof *r);
  int placed = r && place && place(&msg, &r->payload, ctx);
  if (!r || (!placed && blk__buffer_cache_reserve(c->cache, &r->payload, size)) ||
      !(r->reqs = blk__malloc((size_t)pieces * sizeof *r->reqs)) ||
      room_for_one((void ***)&c->recvs, c->nrecvs, &c->cap_recvs))
    blk__panic(
        "comm: no memory to receive a %zu-byte message from rank %d, which waits for it "
        "to be received",
        size, st.MPI_SOURCE);
  if (placed) {
    msg.flags |= BLK__COMM_PLACED;
    c->placed_recvs++;
  }
  r->msg = msg;
  r->peer = st.MPI_SOURCE;
  r->payload.size = size;
  r->nreq = pieces;
  for (int i = 0; i < pieces; i++) r->reqs[i] = MPI_REQUEST_NULL;
  post_pieces(c->comm, st.MPI_SOURCE, r->payload.data, size, r->reqs, 1);
  c->recvs[c->nrecvs++] = r;
}

/* Delivers the messages whose payload has arrived in full. Each piece must
 * be as long as the header said (MPI would report a longer one as
 * truncated; a shorter one is a broken sender). */
static void progress_recvs(blk__comm *c, blk__deliver_fn deliver, void *ctx, int *progressed) {
  size_t kept = 0;
  for (size_t i = 0; i < c->nrecvs; i++) {
    recv_rec *r = c->recvs[i];
    int flag = 0;
    MPI_Status st[4];
    MPI_Status *statuses = r->nreq <= 4 ? st : MPI_STATUSES_IGNORE;
    int rc = MPI_Testall(r->nreq, r->reqs, &flag, statuses);
    if (rc != MPI_SUCCESS) broken(rc, "MPI_Testall", r->peer);
    if (flag) {
      for (int j = 0; statuses != MPI_STATUSES_IGNORE && j < r->nreq; j++) {
        int got = 0;
        MPI_Get_count(&statuses[j], MPI_BYTE, &got);
        if (got != piece_bytes(r->payload.size, j))
          blk__panic("comm: piece %d of a %zu-byte message from rank %d has %d bytes, not %d", j,
                     r->payload.size, r->peer, got, piece_bytes(r->payload.size, j));
      }
      if (r->msg.flags & BLK__COMM_PLACED) c->placed_recvs--;
      (void)deliver(&r->msg, &r->payload, ctx); /* (all of them: each pass completes what it can) */
      free_recv(c, r);
      *progressed = 1;
    } else {
      c->recvs[kept++] = r;
    }
  }
  c->nrecvs = kept;
}

void blk__comm_progress(blk__comm *c, blk__deliver_fn deliver, blk__place_fn place, void *ctx,
                        int probe, int *progressed) {
  int got = 0, woke = 0;
  *progressed = 0;
  progress_sends(c, progressed);
  if (probe) {
    do {
      receive_header(c, deliver, place, ctx, &got, &woke);
      if (got) *progressed = 1;
    } while (got && !woke);
  }
  progress_recvs(c, deliver, ctx, progressed);
}
