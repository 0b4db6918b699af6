/*
 * codec_bench: what the out-of-core codec costs and gains, to choose its
 * default from (docs/compression.md).
 *
 * For five fields (smooth and random float32, smooth and random float64, and
 * a histogram's sparse 64-bit counts) at two sizes (1 MiB and 16 MiB), it
 * encodes and decodes with blk__codec at several zstd levels, without the
 * byte shuffle, with it by the element size and with it by the other size (4
 * on float64, 8 on float32), and prints one markdown table row each:
 * compression ratio (raw / encoded), encode MB/s and decode MB/s of raw
 * bytes (MB = 10^6 bytes). Then the reference speeds: blk__checksum,
 * blk__shuffle / blk__unshuffle and memcpy, in GB/s.
 *
 * Timing: clock_gettime(CLOCK_MONOTONIC); each figure is the median of
 * `runs` runs (default 5), a run repeating the operation until at least
 * 64 MiB of raw data has passed (so a 1 MiB run is not one timer tick, and
 * its data is warm in cache, as a block just computed would be). Every
 * decode is checked against the original once.
 *
 * Usage: blk-codec-bench [--runs N] [--levels L,L,...] [--sizes MiB,MiB,...]
 * One thread; run it on a quiet machine, and more than once.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blk/blk.h"
#include "storage/checksum.h"
#include "storage/codec.h"
#include "storage/shuffle.h"

#define MAX_LIST 16
#define MIN_BYTES_PER_RUN ((size_t)64 << 20)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rng_state = 0x853C49E6748FEA9Bull;

static double rand_unit(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* A smooth 2D field on a grid 1024 values wide: what a simulation block of
 * temperatures or densities looks like. */
static double smooth(size_t i) {
  double x = (double)(i % 1024), y = (double)(i / 1024);
  return 300.0 + 20.0 * sin(0.02 * x) * cos(0.03 * y) + 5.0 * sin(0.005 * (x + y));
}

enum { SMOOTH_F32, RANDOM_F32, SMOOTH_F64, RANDOM_F64, SPARSE_U64, NFIELDS };
static const char *field_names[NFIELDS] = {"smooth float32", "random float32", "smooth float64",
                                           "random float64", "sparse counts u64"};
static const size_t field_es[NFIELDS] = {4, 4, 8, 8, 8};

/* A histogram's counts (examples/histogram with many bins): 64-bit
 * integers, about one in twelve not zero, small where they are not. */
static void fill_counts(void *buf, size_t bytes) {
  size_t count = bytes / 8;
  memset(buf, 0, count * 8);
  for (size_t j = 0; j < count / 12; j++) {
    size_t i = (size_t)(rand_unit() * (double)count);
    uint64_t c;
    memcpy(&c, (char *)buf + 8 * i, 8);
    c += 1 + (uint64_t)(rand_unit() * 3.0);
    memcpy((char *)buf + 8 * i, &c, 8);
  }
}

static void fill(void *buf, size_t bytes, int field) {
  if (field == SPARSE_U64) {
    fill_counts(buf, bytes);
    return;
  }
  size_t es = field_es[field], count = bytes / es;
  for (size_t i = 0; i < count; i++) {
    double v = (field == SMOOTH_F32 || field == SMOOTH_F64) ? smooth(i) : rand_unit();
    if (es == 4) {
      float f = (float)v;
      memcpy((char *)buf + 4 * i, &f, 4);
    } else {
      memcpy((char *)buf + 8 * i, &v, 8);
    }
  }
}

/* Repetitions per run so that a run covers at least MIN_BYTES_PER_RUN. */
static size_t reps_for(size_t bytes) {
  size_t r = MIN_BYTES_PER_RUN / bytes;
  return r ? r : 1;
}

static int bench_codec(int runs, const int *levels, int nlevels, const size_t *sizes, int nsizes) {
  int rc = 0;
  printf("| data | size | level | shuffle | ratio | encode MB/s | decode MB/s |\n");
  printf("|---|---:|---:|---|---:|---:|---:|\n");
  for (int s = 0; s < nsizes; s++) {
    size_t n = sizes[s];
    unsigned char *raw = malloc(n), *back = malloc(n);
    blk_buffer enc = BLK_BUFFER_INIT;
    if (!raw || !back) {
      fprintf(stderr, "codec_bench: no memory for %zu bytes\n", n);
      free(raw);
      free(back);
      return 1;
    }
    for (int f = 0; f < NFIELDS; f++) {
      fill(raw, n, f);
      for (int l = 0; l < nlevels; l++) {
        blk__codec *c = NULL;
        rc = blk__codec_create(&c, levels[l]);
        if (rc) {
          fprintf(stderr, "codec_bench: level %d: %s\n", levels[l], blk_last_error());
          goto out;
        }
        /* no shuffle, the element's own size, and the other size (what an
         * untyped default does to the other type) */
        const size_t shuffles[3] = {0, field_es[f], field_es[f] == 4 ? 8 : 4};
        for (int sh = 0; sh < 3; sh++) {
          size_t es = shuffles[sh], reps = reps_for(n);
          uint32_t format = 0;
          double te[MAX_LIST], td[MAX_LIST];
          for (int r = 0; r < runs; r++) {
            double t0 = now();
            for (size_t k = 0; k < reps && !rc; k++) {
              blk_buffer_clear(&enc);
              rc = blk__codec_encode(c, &enc, raw, n, es, &format);
            }
            te[r] = (now() - t0) / (double)reps;
            t0 = now();
            for (size_t k = 0; k < reps && !rc; k++)
              rc = blk__codec_decode(c, back, n, enc.data, enc.size, format);
            td[r] = (now() - t0) / (double)reps;
            if (rc) {
              fprintf(stderr, "codec_bench: %s\n", blk_last_error());
              blk__codec_destroy(c);
              goto out;
            }
          }
          if (memcmp(raw, back, n) != 0) {
            fprintf(stderr, "codec_bench: %s level %d: decoded data differ\n", field_names[f],
                    levels[l]);
            rc = 1;
            blk__codec_destroy(c);
            goto out;
          }
          printf("| %s | %zu MiB | %d | %s | %.2f | %.0f | %.0f |\n", field_names[f], n >> 20,
                 levels[l], es ? (es == 4 ? "4-byte" : "8-byte") : "none",
                 (double)n / (double)enc.size, (double)n / median(te, runs) / 1e6,
                 (double)n / median(td, runs) / 1e6);
          fflush(stdout);
        }
        blk__codec_destroy(c);
      }
    }
  out:
    free(raw);
    free(back);
    blk_buffer_free(&enc);
    if (rc) return 1;
  }
  return 0;
}

/* Reference speeds in GB/s. */
static volatile uint64_t sink;

static int bench_reference(int runs, const size_t *sizes, int nsizes) {
  printf("\n| operation | size | GB/s |\n|---|---:|---:|\n");
  for (int s = 0; s < nsizes; s++) {
    size_t n = sizes[s], reps = reps_for(n);
    unsigned char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
      free(a);
      free(b);
      fprintf(stderr, "codec_bench: no memory for %zu bytes\n", n);
      return 1;
    }
    fill(a, n, SMOOTH_F32);
    memset(b, 0, n);
    const char *names[] = {"blk__checksum",      "memcpy",           "blk__shuffle (4)",
                           "blk__unshuffle (4)", "blk__shuffle (8)", "blk__unshuffle (8)"};
    for (int op = 0; op < 6; op++) {
      double t[MAX_LIST];
      for (int r = 0; r < runs; r++) {
        double t0 = now();
        for (size_t k = 0; k < reps; k++) {
          switch (op) {
            case 0:
              sink += blk__checksum(a, n, k);
              break;
            case 1:
              memcpy(b, a, n);
              sink += b[k % n];
              break;
            case 2:
              blk__shuffle(b, a, n, 4);
              break;
            case 3:
              blk__unshuffle(b, a, n, 4);
              break;
            case 4:
              blk__shuffle(b, a, n, 8);
              break;
            default:
              blk__unshuffle(b, a, n, 8);
              break;
          }
        }
        t[r] = (now() - t0) / (double)reps;
      }
      sink += b[n / 2];
      printf("| %s | %zu MiB | %.1f |\n", names[op], n >> 20, (double)n / median(t, runs) / 1e9);
    }
    free(a);
    free(b);
  }
  return 0;
}

/* Parses "a,b,c" into at most MAX_LIST longs; returns the count or -1. */
static int parse_list(const char *s, long *out) {
  int k = 0;
  char *end = NULL;
  while (*s && k < MAX_LIST) {
    out[k++] = strtol(s, &end, 10);
    if (end == s || (*end && *end != ',')) return -1;
    s = *end ? end + 1 : end;
  }
  return *s ? -1 : k;
}

static void print_machine(void) {
  char model[256] = "unknown CPU";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0) {
        const char *colon = strchr(line, ':');
        if (colon) {
          snprintf(model, sizeof model, "%s", colon + 2);
          model[strcspn(model, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(f);
  }
  printf("zstd %s; %ld cores online; %s\n\n", blk__codec_zstd_version(),
         sysconf(_SC_NPROCESSORS_ONLN), model);
}

int main(int argc, char **argv) {
  blk_log_set_level(BLK_LOG_NONE);
  int runs = 5;
  long lv[MAX_LIST] = {-5, -1, 1, 3}, sz[MAX_LIST] = {1, 16};
  int nlevels = 4, nsizes = 2;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--levels") == 0 && i + 1 < argc) {
      nlevels = parse_list(argv[++i], lv);
    } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
      nsizes = parse_list(argv[++i], sz);
    } else {
      nlevels = -1;
    }
    if (nlevels < 1 || nsizes < 1 || runs < 1 || runs > MAX_LIST) {
      fprintf(stderr, "usage: %s [--runs N (1..%d)] [--levels L,L,...] [--sizes MiB,MiB,...]\n",
              argv[0], MAX_LIST);
      return 2;
    }
  }
  int levels[MAX_LIST];
  size_t sizes[MAX_LIST];
  for (int i = 0; i < nlevels; i++) levels[i] = (int)lv[i];
  for (int i = 0; i < nsizes; i++) {
    if (sz[i] < 1 || sz[i] > 4096) {
      fprintf(stderr, "%s: size %ld MiB is not in 1..4096\n", argv[0], sz[i]);
      return 2;
    }
    sizes[i] = (size_t)sz[i] << 20;
  }
  print_machine();
  if (bench_codec(runs, levels, nlevels, sizes, nsizes)) return 1;
  if (bench_reference(runs, sizes, nsizes)) return 1;
  return 0;
}
