/*
 * trace_file.c: every rank's timeline in one JSON file on rank 0; see
 * trace_file.h.
 *
 * The file: a header, the ranks' events in rank order with ",\n" between
 * two ranks that have any, and a footer. Rank 0 knows every rank's size, so
 * it knows where each piece goes and writes it there (pwrite) as it
 * arrives; a round moves at most PIECE_BYTES in all, so rank 0 never holds
 * much more than that, however long the traces. Cost: one gather of the
 * sizes, then ceil(largest / piece) gathers.
 */
#define _POSIX_C_SOURCE 200809L
#include "runtime/trace_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/fail.h"
#include "base/logger.h"
#include "base/thread.h"

#define PIECE_BYTES ((uint64_t)256 << 20) /* a round's bytes, over all ranks */
#define MIN_PIECE ((uint64_t)4096)        /* a rank's bytes a round, at least */
#define PATH_MAX_BYTES 4096

static const char header[] = "{\"traceEvents\":[\n";
static const char separator[] = ",\n";
static const char footer[] = "\n],\"displayTimeUnit\":\"ms\"}\n";

struct blk__trace_file {
  blk__trace *trace;
  int fd; /* rank 0: the file; -1 elsewhere */
  char path[PATH_MAX_BYTES];
};

int blk__trace_file_open(blk__trace_file **out, MPI_Comm comm, const char *path) {
  *out = NULL;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  /* Rank 0's path, to every rank: whether to trace, and what to say. */
  char name[PATH_MAX_BYTES] = {0};
  if (rank == 0) {
    if (!path) path = getenv("BLK_TRACE");
    if (path && strlen(path) < sizeof name) memcpy(name, path, strlen(path) + 1);
    if (path && strlen(path) >= sizeof name) name[0] = '\1'; /* too long: fails below */
  }
  int len = rank == 0 ? (int)strlen(name) : 0;
  MPI_Bcast(&len, 1, MPI_INT, 0, comm);
  if (len == 0) return BLK_OK;
  MPI_Bcast(name, len + 1, MPI_CHAR, 0, comm);
  blk__trace_file *f = blk__calloc(1, sizeof *f);
  if (!f) return blk__fail(BLK_ENOMEM, "trace: no memory");
  f->fd = -1;
  memcpy(f->path, name, (size_t)len + 1);
  int rc = blk__trace_create(&f->trace, rank, blk__now_ns());
  if (!rc && rank == 0) {
    if (name[0] == '\1') {
      rc = blk__fail(BLK_EINVAL, "trace: the file's path is longer than %d bytes",
                     PATH_MAX_BYTES - 1);
    } else if ((f->fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0) {
      rc = blk__fail(BLK_EIO, "trace file %s: %s", name, strerror(errno));
    }
  }
  if (!rc) blk__trace_name_thread(f->trace, "driver");
  if (rc) {
    blk__trace_file_discard(f);
    return rc;
  }
  *out = f;
  return BLK_OK;
}

blk__trace *blk__trace_file_trace(blk__trace_file *f) {
  return f->trace;
}

void blk__trace_file_discard(blk__trace_file *f) {
  if (!f) return;
  if (f->fd >= 0) { /* created, never written: nothing is left behind */
    close(f->fd);
    unlink(f->path);
  }
  blk__trace_destroy(f->trace);
  free(f);
}

/* Rank 0: writes n bytes at off; the first failure is kept in *e. */
static void write_at(int fd, const void *p, uint64_t n, uint64_t off, int *e) {
  const unsigned char *c = p;
  while (n > 0 && !*e) {
    ssize_t w = pwrite(fd, c, n, (off_t)off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *e = w < 0 ? errno : EIO;
      return;
    }
    c += w;
    n -= (uint64_t)w;
    off += (uint64_t)w;
  }
}

/* Rank 0's plan: each rank's size and where its piece starts in the file,
 * and one round's counts, displacements and bytes. */
typedef struct plan {
  uint64_t *size, *at;
  int *counts, *displs;
  char *round;
} plan;

static void plan_free(plan *p) {
  free(p->size);
  free(p->at);
  free(p->counts);
  free(p->displs);
  free(p->round);
}

static int plan_alloc(plan *p, int ranks) {
  size_t n = (size_t)ranks;
  p->size = blk__calloc(n, sizeof *p->size);
  p->at = blk__calloc(n, sizeof *p->at);
  p->counts = blk__calloc(n, sizeof *p->counts);
  p->displs = blk__calloc(n, sizeof *p->displs);
  return p->size && p->at && p->counts && p->displs;
}

/* Whether rank 0 has what it needs (every rank must go on, or stop, alike). */
static int agreed(int ok, int rank, MPI_Comm comm, const char *path) {
  MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
  if (!ok && rank == 0) BLK__LOG(BLK_LOG_WARN, "trace: no memory to write %s", path);
  return ok;
}

void blk__trace_file_close(blk__trace_file *f, MPI_Comm comm) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  blk_buffer text;
  blk_buffer_init(&text);
  if (blk__trace_json(f->trace, &text))
    BLK__LOG(BLK_LOG_WARN, "trace: this rank's spans are left out of %s: %s", f->path,
             blk_last_error());
  uint64_t dropped = blk__trace_dropped(f->trace);
  if (dropped)
    BLK__LOG(BLK_LOG_WARN, "trace: %llu spans did not fit and are not in %s",
             (unsigned long long)dropped, f->path);
  plan p = {0};
  if (!agreed(rank != 0 || plan_alloc(&p, ranks), rank, comm, f->path)) goto done;
  uint64_t mine = text.size, largest = 0;
  MPI_Gather(&mine, 1, MPI_UINT64_T, p.size, 1, MPI_UINT64_T, 0, comm);
  MPI_Allreduce(&mine, &largest, 1, MPI_UINT64_T, MPI_MAX, comm);
  uint64_t piece = PIECE_BYTES / (uint64_t)ranks;
  if (piece < MIN_PIECE) piece = MIN_PIECE;
  if (piece > largest) piece = largest ? largest : 1;
  if (rank == 0) p.round = blk__malloc((size_t)(piece * (uint64_t)ranks));
  if (!agreed(rank != 0 || p.round, rank, comm, f->path)) goto done;
  int e = 0;
  uint64_t end = sizeof header - 1;
  if (rank == 0) {
    write_at(f->fd, header, end, 0, &e);
    int any = 0;
    for (int r = 0; r < ranks; r++) {
      if (!p.size[r]) continue;
      if (any) {
        write_at(f->fd, separator, sizeof separator - 1, end, &e);
        end += sizeof separator - 1;
      }
      any = 1;
      p.at[r] = end;
      end += p.size[r];
    }
  }
  for (uint64_t done = 0; done < largest; done += piece) {
    int count = mine > done ? (int)(mine - done < piece ? mine - done : piece) : 0;
    if (rank == 0)
      for (int r = 0, d = 0; r < ranks; r++) {
        uint64_t left = p.size[r] > done ? p.size[r] - done : 0;
        p.counts[r] = (int)(left < piece ? left : piece);
        p.displs[r] = d;
        d += p.counts[r];
      }
    MPI_Gatherv(text.data ? (char *)text.data + done : NULL, count, MPI_CHAR, p.round, p.counts,
                p.displs, MPI_CHAR, 0, comm);
    if (rank == 0)
      for (int r = 0; r < ranks; r++)
        write_at(f->fd, p.round + p.displs[r], (uint64_t)p.counts[r], p.at[r] + done, &e);
  }
  if (rank == 0) {
    write_at(f->fd, footer, sizeof footer - 1, end, &e);
    if (close(f->fd) && !e) e = errno; /* a file system may report a write only here */
    f->fd = -1;
    if (e)
      BLK__LOG(BLK_LOG_WARN, "trace file %s: %s", f->path, strerror(e));
    else
      BLK__LOG(BLK_LOG_INFO, "trace: %d ranks' timelines in %s (%llu bytes)", ranks, f->path,
               (unsigned long long)(end + sizeof footer - 1));
  }
done:
  plan_free(&p);
  blk_buffer_free(&text);
  blk__trace_file_discard(f);
}
