/*
 * composite: sort-last image compositing by swap rounds.
 *
 * A scientific renderer that splits its data over many blocks cannot ray-cast a
 * pixel in one place: each block renders its own part of the domain into a
 * full-size image, and the images are composited into one. Sending them all
 * to one block costs it n - 1 images; a swap (binary swap, radix-k) spreads
 * the work instead: in each round a block splits the part of the image it is
 * responsible for into as many pieces as its group has members, sends piece j
 * to member j, and composites the pieces its group sent it for the piece it
 * kept. Each round divides a block's part by the round's radix, so after the
 * last round every block holds one finished piece, having sent less than one
 * image in all (1 - 1/n of it), in log_k(n) rounds of k - 1 messages. That is
 * BLK_SWAP, the reduce-scatter of docs/patterns.md section 4, with
 * compositing as the combine. This example runs it, gathers the pieces onto
 * gid 0 with a merge, and checks the picture against a serial render.
 *
 * The scene: a field of five Gaussian blobs over the box [-1.6, 1.6] x
 * [-1.2, 1.2] x [-1.6, 1.6], cut into blocks by a continuous decomposer, seen
 * along +z by an orthographic camera (pixel (col, row) looks down x, y; the
 * front is low z). Every ray takes --samples samples at fixed z; the
 * decomposer's owner of a sample's z (blk_decomposer_caxis_owner) is the one
 * block that takes it, so the blocks of a column take between them exactly
 * the samples a serial ray takes. Two modes:
 *
 *  --mode depth  an opaque isosurface (f = 0.5), shaded; a pixel is r, g, b,
 *                a and the depth of its hit (+inf: none). Compositing keeps
 *                the nearer pixel, the front one of the two on a tie. A block
 *                finds the first of its own samples inside the surface,
 *                exactly as the serial ray does with all of them, so the
 *                nearest hit is the serial one to the bit: the check is
 *                exact. (Two blocks never take the same sample, so only
 *                background pixels, identical, can tie.)
 *  --mode over   a translucent volume, emission and absorption integrated
 *                front to back; a pixel is r, g, b, a, premultiplied.
 *                Compositing is "front over back". Over is associative but
 *                not commutative: the pieces of a group must go together in
 *                visibility order, and every group must join sets of blocks
 *                that do not interleave along any ray.
 *
 * Why the order is right. The swap runs over a line of the gids
 * (blk_partners_create_folded). The decomposer numbers blocks with axis 0
 * fastest, so gid order is sorted by z first: along any ray the blocks it
 * crosses come in increasing gid order. In contiguous order a group joins
 * adjacent runs of gids, listed by position (a fold joins gids 2i and 2i + 1
 * first, runs too), so its members' sets follow each other along every ray,
 * front to back in position order, and blk gives the in queues in that
 * order whatever the ranks, threads or timing. In
 * halving order a group first joins blocks far apart in gid (with 4 layers
 * along z and k = 2, layers 0 and 2, then 1 and 3) and a set would
 * interleave with another along a ray; so for over in halving order the
 * example takes the layers along z in one first round of that many members
 * (blk_partners_create_rounds), after which every round joins columns side
 * by side, whose pixels do not overlap. The depth test commutes and takes
 * blk's rounds as they are.
 *
 * Determinism and the check. A block composites its group's pieces in the
 * group's order, the same on every run: "in_0 over (in_1 over (... over
 * own)) over in_(s+1) over ...", with its own piece at its position s. The
 * image depends only on the pattern (block count, radices, order), never on
 * the rank or thread count; the summary prints a hash of it. Rank 0 renders
 * the whole domain serially, one ray through all samples. The depth test must
 * match it bit for bit; over regroups the same sums (each block's part of a
 * ray is summed on its own, in doubles, stored as floats, then blended in
 * floats), so it must match within 1e-5 per channel (measured: 1.2e-7).
 *
 * Cost, n blocks of an image of m bytes (W x H pixels of 4 or 5 floats;
 * alpha-beta as in docs/patterns.md): T = sum_e [alpha + (k_e - 1) beta m /
 * (k_0 .. k_e)] + gamma m (1 - 1/n): log_k(n) latencies and less than one
 * image sent and composited per block, whatever k; a larger k saves rounds
 * and costs messages per round. Only the rounds that cross ranks pay alpha
 * and beta: with a contiguous assigner and contiguous order the first rounds
 * stay on a rank and the last log_k(P) of P ranks cross, with the smallest
 * pieces (1/n of an image per block with k = 2), whereas a direct send (one
 * round of n, --k n, or the last of --bench's rows) sends (P - 1)/P of every
 * image across. The gather to gid 0 moves each finished piece up a merge
 * tree, one image into gid 0 in all.
 *
 *   mpiexec -n 4 ./composite [--blocks 12] [--k 4|auto] [--halving] [--threads 2]
 *                            [--mode depth|over] [--width 128] [--height 96]
 *                            [--samples N] [--png [FILE]] [--bench [--reps 5]]
 *                            [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * --png writes the final image (over a dark background) with libpng, reads
 * the file back and compares it with the image in memory. --bench renders
 * once and times the compositing (blk_reduce between a barrier and its
 * return, the slowest rank) at k = 2, 4, 8 and a direct send, --reps times
 * each, and prints the median, minimum and maximum as a table, checking
 * every k's image. Out-of-core (--mem-blocks N), save writes a block's part
 * of its image (and, with --bench, its render) and load reads it back.
 *
 * Prints one line with PASS, or FAIL and exit status 1 (and, out-of-core, a
 * line of rank 0's storage figures).
 */
#include <blk/blk.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

/* ---- the scene ----------------------------------------------------------- */

typedef struct blob {
  double c[3], sigma, amp, rgb[3];
} blob;

#define NBLOBS 5
static const blob blobs[NBLOBS] = {
    {{-0.70, 0.35, -0.20}, 0.45, 1.0, {1.00, 0.55, 0.15}},
    {{0.55, 0.30, 0.30}, 0.50, 1.0, {0.15, 0.75, 0.80}},
    {{0.00, -0.45, -0.40}, 0.38, 1.0, {0.90, 0.25, 0.60}},
    {{0.95, -0.55, -0.50}, 0.30, 0.9, {0.60, 0.90, 0.25}},
    {{-1.05, -0.50, 0.50}, 0.35, 0.9, {0.30, 0.45, 1.00}},
};

#define ISO 0.5       /* depth mode: the surface f = ISO */
#define OVER_TOL 1e-5 /* over mode: largest difference from the serial render */

static const double domain_lo[3] = {-1.6, -1.2, -1.6}, domain_hi[3] = {1.6, 1.2, 1.6};

/* The field at p and, where rgb or grad is not NULL, its colour there (the
 * blobs' colours weighted by their share of the field) and its gradient. A
 * blob ends at 4 sigma, where it has fallen to exp(-8) = 3e-4 of its peak:
 * most samples then cost no exp() at all. */
static double field(const double *p, double *rgb, double *grad) {
  double f = 0, mix[3] = {0, 0, 0}, g[3] = {0, 0, 0};
  for (int i = 0; i < NBLOBS; i++) {
    const blob *b = &blobs[i];
    double d[3] = {p[0] - b->c[0], p[1] - b->c[1], p[2] - b->c[2]};
    double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2], s2 = b->sigma * b->sigma;
    if (r2 > 16 * s2) continue;
    double w = b->amp * exp(-r2 / (2 * s2));
    f += w;
    for (int a = 0; a < 3; a++) {
      mix[a] += w * b->rgb[a];
      g[a] -= w * d[a] / s2;
    }
  }
  for (int a = 0; a < 3; a++) {
    if (rgb) rgb[a] = f > 0 ? mix[a] / f : 0;
    if (grad) grad[a] = g[a];
  }
  return f;
}

typedef enum mode { MODE_DEPTH, MODE_OVER } mode;

/* Everything a callback needs, read-only while they run (so shared by the
 * threads). */
typedef struct scene {
  mode mode;
  size_t channels; /* floats a pixel: r, g, b, a (premultiplied), and depth */
  int width, height, samples;
  size_t npix;
  const blk_decomposer *d;
  double h, x0, y0;  /* pixel size; the centre of pixel (0, 0) */
  double z0, dz;     /* sample k is at z = z0 + (k + 0.5) dz */
  int *col_owner;    /* the grid coordinate on axis 0 of pixel column i (< 0: none) */
  int *row_owner;    /* the same on axis 1 for pixel row j */
  int *sample_owner; /* the same on axis 2 for sample k */
  float *serial;     /* rank 0: the serial render of the whole domain */
  const char *png;   /* gid 0 writes the final image here; NULL: no PNG */
  int bench;         /* blocks keep their render to composite it again */
} scene;

static double sample_z(const scene *s, int k) {
  return s->z0 + (k + 0.5) * s->dz;
}

/* One ray, through samples [k0, k1): the pixel in px (s->channels floats).
 * The serial render takes all samples, a block those it owns. */
static void march(const scene *s, double x, double y, int k0, int k1, float *px) {
  if (s->mode == MODE_DEPTH) {
    /* The first sample inside the surface, refined between it and the one
     * before (which may be another block's: the field is known everywhere). */
    px[0] = px[1] = px[2] = px[3] = 0;
    px[4] = INFINITY;
    double p[3] = {x, y, sample_z(s, k0 - 1)}, prev = field(p, NULL, NULL);
    for (int k = k0; k < k1; k++) {
      p[2] = sample_z(s, k);
      double f = field(p, NULL, NULL);
      if (f < ISO) {
        prev = f;
        continue;
      }
      if (prev < ISO) p[2] -= s->dz * (f - ISO) / (f - prev);
      double rgb[3], g[3];
      field(p, rgb, g);
      double len = sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]), n[3];
      for (int a = 0; a < 3; a++) n[a] = len > 0 ? -g[a] / len : 0;
      /* Light from the upper left, in front; the viewer looks along +z. */
      const double light[3] = {-0.4082, 0.5443, -0.7328}, half[3] = {-0.2193, 0.2924, -0.9308};
      double diffuse = n[0] * light[0] + n[1] * light[1] + n[2] * light[2];
      double nh = n[0] * half[0] + n[1] * half[1] + n[2] * half[2];
      double spec = nh > 0 ? pow(nh, 40) : 0;
      diffuse = diffuse > 0 ? diffuse : 0;
      for (int a = 0; a < 3; a++) {
        double c = rgb[a] * (0.18 + 0.75 * diffuse) + 0.35 * spec;
        px[a] = (float)(c < 1 ? c : 1);
      }
      px[3] = 1;
      px[4] = (float)p[2];
      return;
    }
    return;
  }
  /* Emission and absorption, front to back, premultiplied: a haze that
   * thickens towards the blobs' cores, and a denser shell around f = ISO. */
  double acc[4] = {0, 0, 0, 0};
  for (int k = k0; k < k1; k++) {
    double p[3] = {x, y, sample_z(s, k)}, rgb[3], f = field(p, rgb, NULL);
    double haze = (f - 0.1) / 0.7, shell = 1 - fabs(f - ISO) / 0.07;
    haze = haze <= 0 ? 0 : haze < 1 ? haze * haze : 1;
    double density = 2.0 * haze + 7.0 * (shell > 0 ? shell : 0);
    if (density == 0) continue;
    double alpha = 1 - exp(-density * s->dz), w = (1 - acc[3]) * alpha;
    for (int a = 0; a < 3; a++) acc[a] += w * rgb[a] * (0.5 + 0.7 * f);
    acc[3] += w;
  }
  for (int a = 0; a < 4; a++) px[a] = (float)acc[a];
}

/* A pixel nothing was drawn into. */
static void clear_pixel(const scene *s, float *px) {
  px[0] = px[1] = px[2] = px[3] = 0;
  if (s->mode == MODE_DEPTH) px[4] = INFINITY;
}

/* front over back into dst (which may be either). Depth: the nearer, the
 * front one on a tie. Over: premultiplied "over". */
static void blend(const scene *s, float *dst, const float *front, const float *back) {
  if (s->mode == MODE_DEPTH) {
    const float *nearer = back[4] < front[4] ? back : front;
    if (dst != nearer) memcpy(dst, nearer, 5 * sizeof *dst);
    return;
  }
  float t = 1 - front[3], out[4];
  for (int c = 0; c < 4; c++) out[c] = front[c] + t * back[c];
  memcpy(dst, out, sizeof out);
}

/* ---- a block: its image -------------------------------------------------- */

typedef struct image_block {
  float *img;     /* width x height pixels of s->channels floats */
  float *orig;    /* --bench: the render, to start each repetition from */
  size_t lo, len; /* the pixels [lo, lo + len) of img that this block holds */
} image_block;

static int create_block(void **out, int gid, void *user) {
  (void)gid;
  const scene *s = user;
  image_block *b = calloc(1, sizeof *b);
  size_t bytes = s->npix * s->channels * sizeof(float);
  if (b) b->img = malloc(bytes);
  if (b && s->bench) b->orig = malloc(bytes);
  *out = b;
  return b && b->img && (b->orig || !s->bench) ? 0 : BLK_ENOMEM;
}

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  image_block *b = block;
  if (b) {
    free(b->img);
    free(b->orig);
  }
  free(b);
}

/* Out-of-core: the part of the image the block holds (outside it the
 * image means nothing any more), and with --bench the render. */
static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  const scene *s = user;
  const image_block *b = block;
  blk_buffer_write_size(out, b->lo);
  blk_buffer_write_size(out, b->len);
  blk_buffer_write(out, b->img + b->lo * s->channels, b->len * s->channels * sizeof(float));
  if (s->bench) blk_buffer_write(out, b->orig, s->npix * s->channels * sizeof(float));
  return blk_buffer_error(out);
}

static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  const scene *s = user;
  image_block *b = block; /* fresh from create_block */
  size_t lo = 0, len = 0;
  blk_buffer_read_size(in, &lo);
  blk_buffer_read_size(in, &len);
  if (blk_buffer_error(in)) return blk_buffer_error(in);
  if (lo > s->npix || len > s->npix - lo) return BLK_ECORRUPT;
  blk_buffer_read(in, b->img + lo * s->channels, len * s->channels * sizeof(float));
  if (s->bench) blk_buffer_read(in, b->orig, s->npix * s->channels * sizeof(float));
  if (blk_buffer_error(in)) return blk_buffer_error(in);
  b->lo = lo;
  b->len = len;
  return blk_buffer_remaining(in) == 0 ? 0 : BLK_ECORRUPT;
}

/* foreach: render this block's part of the domain into a full-size image,
 * transparent (and infinitely deep) wherever the block is not. */
static int render_block(void *block, blk_proxy *p, void *user) {
  const scene *s = user;
  image_block *b = block;
  int c[3];
  blk_decomposer_gid_to_coords(s->d, blk_proxy_gid(p), c);
  int k0 = 0, k1 = 0; /* the samples of this block's layer along z */
  while (k0 < s->samples && s->sample_owner[k0] < c[2]) k0++;
  for (k1 = k0; k1 < s->samples && s->sample_owner[k1] == c[2];) k1++;
  for (int row = 0; row < s->height; row++)
    for (int col = 0; col < s->width; col++) {
      float *px = b->img + ((size_t)row * (size_t)s->width + (size_t)col) * s->channels;
      if (s->row_owner[row] == c[1] && s->col_owner[col] == c[0])
        march(s, s->x0 + col * s->h, s->y0 - row * s->h, k0, k1, px);
      else
        clear_pixel(s, px);
    }
  b->lo = 0;
  b->len = s->npix;
  if (b->orig) memcpy(b->orig, b->img, s->npix * s->channels * sizeof(float));
  return 0;
}

/* foreach (--bench): back to the render, to composite it again. */
static int restore_block(void *block, blk_proxy *p, void *user) {
  (void)p;
  const scene *s = user;
  image_block *b = block;
  memcpy(b->img, b->orig, s->npix * s->channels * sizeof(float));
  b->lo = 0;
  b->len = s->npix;
  return 0;
}

/* ---- compositing: the swap ---------------------------------------------- */

/* A piece on the wire: which pixels, then their floats. */
typedef struct piece_header {
  uint64_t lo, len;
} piece_header;

/* Enqueues pixels [lo, lo + len) of the block's image to out queue j. */
static int send_piece(blk_proxy *p, int j, const scene *s, const image_block *b, size_t lo,
                      size_t len) {
  piece_header h = {lo, len};
  size_t bytes = len * s->channels * sizeof(float);
  blk_buffer *out = blk_proxy_outgoing(p, j);
  blk_buffer_reserve(out, sizeof h + bytes);
  blk_buffer_write(out, &h, sizeof h);
  blk_buffer_write(out, b->img + lo * s->channels, bytes);
  return blk_buffer_error(out);
}

/* Reads in queue i's header: it must be for the block's part [lo, lo + len)
 * and bring its pixels. Points *data at them (unaligned: memcpy). */
static int receive_piece(blk_proxy *p, int i, const scene *s, const image_block *b,
                         const unsigned char **data) {
  piece_header h;
  size_t bytes = b->len * s->channels * sizeof(float);
  if (blk_proxy_incoming_remaining(p, i) != sizeof h + bytes) return BLK_ECORRUPT;
  blk_proxy_dequeue(p, i, &h, sizeof h);
  if (h.lo != b->lo || h.len != b->len) return BLK_ECORRUPT;
  *data = blk_proxy_dequeue_view(p, i, bytes);
  return 0;
}

/* Blends n received pixels with the block's own, in front of them or behind. */
static void blend_piece(const scene *s, float *own, const unsigned char *in, size_t n,
                        int in_front) {
  size_t pixel = s->channels * sizeof(float);
  for (size_t i = 0; i < n; i++) {
    float px[5], *o = own + i * s->channels;
    memcpy(px, in + i * pixel, pixel);
    if (in_front)
      blend(s, o, px, o);
    else
      blend(s, o, o, px);
  }
}

/* reduce (swap): composite what the group sent for the block's part, then
 * split the part among the next group and keep one piece in place. */
static int composite_round(void *block, blk_proxy *p, void *user) {
  const scene *s = user;
  image_block *b = block;
  int gid = blk_proxy_gid(p), nin = blk_proxy_in_count(p), nout = blk_proxy_out_count(p);
  const unsigned char *data = NULL;
  int rc = 0, own = -1; /* the block's own position in its group */
  for (int i = 0; i < nin; i++)
    if (blk_proxy_in_gid(p, i) == gid) own = i;
  if (own >= 0 && blk_proxy_incoming_remaining(p, own) != 0) return BLK_ECORRUPT;
  if (own < 0 && nin > 0) {
    /* A block that handed its part to a stand-in (a fold's extra) gets its
     * piece back from it alone, and keeps it as its part. */
    piece_header h;
    if (blk_proxy_incoming_remaining(p, 0) < sizeof h) return BLK_ECORRUPT;
    blk_proxy_dequeue(p, 0, &h, sizeof h);
    if (h.lo > s->npix || h.len > s->npix - h.lo ||
        blk_proxy_incoming_remaining(p, 0) != h.len * s->channels * sizeof(float))
      return BLK_ECORRUPT;
    b->lo = h.lo;
    b->len = h.len;
    blk_proxy_dequeue(p, 0, b->img + b->lo * s->channels, h.len * s->channels * sizeof(float));
    own = 0;
  }
  /* The members in front, nearest to the block first, then those behind. */
  float *mine = b->img + b->lo * s->channels;
  for (int i = own - 1; i >= 0 && !rc; i--)
    if (!(rc = receive_piece(p, i, s, b, &data))) blend_piece(s, mine, data, b->len, 1);
  for (int i = own + 1; i < nin && !rc; i++)
    if (!(rc = receive_piece(p, i, s, b, &data))) blend_piece(s, mine, data, b->len, 0);

  /* Piece j of the part goes to out-partner j; the block's own stays. */
  size_t lo = b->lo, len = b->len, keep_lo = 0, keep_len = 0;
  for (int j = 0; j < nout && !rc; j++) {
    size_t from = lo + len * (size_t)j / (size_t)nout,
           to = lo + len * (size_t)(j + 1) / (size_t)nout;
    if (blk_proxy_out_gid(p, j) == gid) {
      keep_lo = from;
      keep_len = to - from;
    } else {
      rc = send_piece(p, j, s, b, from, to - from);
    }
  }
  if (nout > 0) { /* (a fold's extra keeps nothing) */
    b->lo = keep_lo;
    b->len = keep_len;
  }
  return rc;
}

/* ---- the gather: a merge to gid 0 ---------------------------------------- */

/* reduce (merge): every block sends its piece up the tree, and a group's
 * first member passes on what its group sent it; gid 0, alone in the last
 * round, pastes every piece into place. (A message is a list of pieces.) */
static int gather_round(void *block, blk_proxy *p, void *user) {
  const scene *s = user;
  image_block *b = block;
  size_t pixel = s->channels * sizeof(float);
  int round = blk_proxy_round(p), nin = blk_proxy_in_count(p);
  if (blk_proxy_out_count(p) > 0) {
    blk_buffer *out = blk_proxy_outgoing(p, 0);
    size_t bytes = round == 0 ? sizeof(piece_header) + b->len * pixel : 0;
    for (int i = 0; i < nin; i++) bytes += blk_proxy_incoming_remaining(p, i);
    blk_buffer_reserve(out, bytes);
    if (round == 0) {
      piece_header h = {b->lo, b->len};
      blk_buffer_write(out, &h, sizeof h);
      blk_buffer_write(out, b->img + b->lo * s->channels, b->len * pixel);
    }
    for (int i = 0; i < nin; i++) {
      size_t n = blk_proxy_incoming_remaining(p, i);
      blk_buffer_write(out, blk_proxy_dequeue_view(p, i, n), n);
    }
    return blk_buffer_error(out);
  }
  if (round == 0) return 0; /* one block: it holds the whole image already */
  unsigned char *covered = calloc(s->npix, 1);
  int rc = covered ? 0 : BLK_ENOMEM;
  for (int i = 0; i < nin && !rc; i++)
    while (!rc && blk_proxy_incoming_remaining(p, i) > 0) {
      piece_header h;
      if (blk_proxy_incoming_remaining(p, i) < sizeof h) rc = BLK_ECORRUPT;
      if (!rc) blk_proxy_dequeue(p, i, &h, sizeof h);
      if (!rc && (h.lo > s->npix || h.len > s->npix - h.lo ||
                  blk_proxy_incoming_remaining(p, i) < h.len * pixel))
        rc = BLK_ECORRUPT;
      if (rc) break;
      blk_proxy_dequeue(p, i, b->img + h.lo * s->channels, h.len * pixel);
      for (size_t j = h.lo; j < h.lo + h.len; j++) covered[j]++;
    }
  for (size_t j = 0; j < s->npix && !rc; j++)
    if (covered[j] != 1) rc = BLK_ECORRUPT; /* a pixel nobody held, or two did */
  free(covered);
  b->lo = 0;
  b->len = s->npix;
  return rc;
}

/* ---- the PNG ------------------------------------------------------------- */

/* The image over a dark background, 8-bit RGB. */
static void to_rgb8(const scene *s, const float *img, unsigned char *rgb) {
  for (size_t i = 0; i < s->npix; i++) {
    const float *px = img + i * s->channels;
    double t = (double)(i / (size_t)s->width) / s->height;
    const double bg[3] = {0.05 + 0.07 * t, 0.06 + 0.07 * t, 0.09 + 0.09 * t};
    for (int c = 0; c < 3; c++) {
      double v = px[c] + (1 - px[3]) * bg[c];
      v = v < 0 ? 0 : v > 1 ? 1 : v;
      rgb[3 * i + (size_t)c] = (unsigned char)(v * 255 + 0.5);
    }
  }
}

/* Writes the image to path, reads the file back with libpng and compares.
 * Returns the number of pixels that differ, or -1 if the file could not be
 * written or read (the reason on stderr). */
static int64_t write_png(const scene *s, const float *img, const char *path) {
  size_t bytes = s->npix * 3;
  unsigned char *rgb = malloc(bytes), *back = malloc(bytes);
  png_image w, r; /* libpng's simplified API: the writer and the reader */
  memset(&w, 0, sizeof w);
  memset(&r, 0, sizeof r);
  w.version = r.version = PNG_IMAGE_VERSION;
  w.width = (png_uint_32)s->width;
  w.height = (png_uint_32)s->height;
  w.format = PNG_FORMAT_RGB;
  const char *failed = !rgb || !back ? "no memory" : NULL, *why = "";
  if (!failed) {
    to_rgb8(s, img, rgb);
    if (!png_image_write_to_file(&w, path, 0, rgb, 0, NULL)) failed = "writing", why = w.message;
  }
  if (!failed && !png_image_begin_read_from_file(&r, path)) failed = "reading", why = r.message;
  if (!failed && (r.width != w.width || r.height != w.height)) failed = "reading: another size";
  if (!failed) {
    r.format = PNG_FORMAT_RGB; /* what to convert to: what it holds */
    if (!png_image_finish_read(&r, NULL, back, 0, NULL)) failed = "reading", why = r.message;
  }
  int64_t differ = -1;
  if (failed) {
    fprintf(stderr, "composite: %s: %s%s%s\n", path, failed, *why ? ": " : "", why);
  } else {
    differ = 0;
    for (size_t i = 0; i < s->npix; i++) differ += memcmp(rgb + 3 * i, back + 3 * i, 3) != 0;
  }
  png_image_free(&r);
  free(rgb);
  free(back);
  return differ;
}

/* ---- the check ----------------------------------------------------------- */

/* foreach: gid 0 compares the final image with the serial render (and
 * writes the PNG); every block posts the pixels that differ, the largest
 * difference, the image's hash and the PNG's pixels that read back
 * differently or -1 (only gid 0's count). */
static int check_image(void *block, blk_proxy *p, void *user) {
  const scene *s = user;
  const image_block *b = block;
  int64_t errors = 0, png = 0;
  uint64_t hash = 0;
  double largest = 0;
  if (blk_proxy_gid(p) == 0) {
    if (!s->serial || b->lo != 0 || b->len != s->npix) errors++; /* not here, or not whole */
    for (size_t i = 0; i < s->npix && s->serial; i++) {
      const float *px = b->img + i * s->channels, *want = s->serial + i * s->channels;
      double diff = 0;
      for (size_t c = 0; c < s->channels; c++) {
        double d = px[c] == want[c] ? 0 : fabs((double)px[c] - (double)want[c]);
        if (d != d) d = INFINITY; /* inf - inf: one hit, one not */
        diff = d > diff ? d : diff;
      }
      largest = diff > largest ? diff : largest;
      errors += s->mode == MODE_DEPTH ? diff != 0 : diff > OVER_TOL;
    }
    for (size_t i = 0; i < s->npix * s->channels; i++) {
      uint32_t u;
      memcpy(&u, &b->img[i], sizeof u);
      hash = ex_mix64(hash ^ u);
    }
    if (s->png) png = write_png(s, b->img, s->png);
  }
  int rc = blk_proxy_all_reduce_i64(p, errors, BLK_OP_SUM);
  if (!rc) rc = blk_proxy_all_reduce_f64(p, largest, BLK_OP_MAX);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, (int64_t)hash, BLK_OP_SUM);
  if (!rc) rc = blk_proxy_all_reduce_i64(p, png, BLK_OP_SUM);
  return rc;
}

/* The serial render of the whole domain: one ray through every sample. */
static float *render_serial(const scene *s) {
  float *img = malloc(s->npix * s->channels * sizeof(float));
  for (int row = 0; img && row < s->height; row++)
    for (int col = 0; col < s->width; col++) {
      float *px = img + ((size_t)row * (size_t)s->width + (size_t)col) * s->channels;
      if (s->row_owner[row] >= 0 && s->col_owner[col] >= 0)
        march(s, s->x0 + col * s->h, s->y0 - row * s->h, 0, s->samples, px);
      else
        clear_pixel(s, px);
    }
  return img;
}

/* ---- the patterns -------------------------------------------------------- */

/* The swap over the line of gids: blk's rounds for k and the order (folded
 * when the count has a prime factor above max(k, 16)). For over in halving
 * order, the dz layers along z first, in one round (see the top of this
 * file), then blk's rounds for the n / dz columns of a layer. */
static int make_swap(blk_partners **out, const scene *s, int n, int dz, int k, int contiguous) {
  if (s->mode == MODE_DEPTH || contiguous || dz == 1 || k >= n)
    return blk_partners_create_folded(out, BLK_SWAP, n, k, contiguous);
  int m = n / dz, radices[64], axes[64] = {0};
  blk_partners *columns = NULL;
  int rc = blk_partners_create(&columns, BLK_SWAP, 1, &m, k, 0);
  int rounds = blk_partners_rounds(columns);
  radices[0] = dz;
  for (int r = 0; r < rounds && r < 63; r++) radices[r + 1] = blk_partners_round_radix(columns, r);
  blk_partners_destroy(columns);
  if (!rc) rc = blk_partners_create_rounds(out, BLK_SWAP, 1, &n, rounds + 1, axes, radices, 0);
  return rc;
}

/* The radices of p's rounds, "2,2,3" ("fold" for a fold's round). */
static ex_text radices_text(const blk_partners *p) {
  ex_text t = {"none"};
  size_t at = 0;
  for (int r = 0; r < blk_partners_rounds(p) && at + 8 < sizeof t.s; r++) {
    int k = blk_partners_round_radix(p, r);
    int n = k < 0 ? snprintf(t.s + at, sizeof t.s - at, "%sfold", r ? "," : "")
                  : snprintf(t.s + at, sizeof t.s - at, "%s%d", r ? "," : "", k);
    at += n > 0 ? (size_t)n : 0;
  }
  return t;
}

/* Composites once: the slowest rank's time, from a barrier to blk_reduce's
 * return. */
static double composite(blk_master *m, const blk_assigner *a, const blk_partners *p, scene *s) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  EX_CHECK(blk_reduce(m, a, p, composite_round, s));
  double mine = MPI_Wtime() - t0, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

/* What check_image found. */
typedef struct verdict {
  int64_t errors; /* pixels that differ from the serial render */
  double largest; /* the largest difference in a channel */
  uint64_t hash;  /* of the image's bits */
  int64_t png;    /* the PNG's pixels that read back differently; -1: no file */
} verdict;

/* Gathers the image onto gid 0 and checks it. */
static verdict gather_and_check(blk_master *m, const blk_assigner *a, const blk_partners *merge,
                                scene *s) {
  EX_CHECK(blk_reduce(m, a, merge, gather_round, s));
  EX_CHECK(blk_master_foreach(m, check_image, s));
  EX_CHECK(blk_master_exchange(m));
  verdict v = {blk_master_result_i64(m, 0), blk_master_result_f64(m, 1),
               (uint64_t)blk_master_result_i64(m, 2), blk_master_result_i64(m, 3)};
  return v;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- options ------------------------------------------------------------- */

/* The options ex_parse does not know: taken out of argv before it runs. */
typedef struct own_options {
  mode mode;
  const char *png;
  int bench;
  const char *bad; /* the option that was wrong */
} own_options;

static void take_own_options(int *argc, char **argv, own_options *own) {
  int kept = 1;
  for (int i = 1; i < *argc; i++) {
    const char *opt = argv[i], *arg = i + 1 < *argc ? argv[i + 1] : NULL;
    if (!strcmp(opt, "--mode")) {
      if (arg && !strcmp(arg, "depth"))
        own->mode = MODE_DEPTH;
      else if (arg && !strcmp(arg, "over"))
        own->mode = MODE_OVER;
      else
        own->bad = opt;
      i += arg != NULL;
    } else if (!strcmp(opt, "--png")) {
      int has_file = arg && strncmp(arg, "--", 2) != 0;
      own->png = has_file ? arg : "composite.png";
      i += has_file;
    } else if (!strcmp(opt, "--bench")) {
      own->bench = 1;
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  argv[kept] = NULL;
}

static const char *what =
    "sort-last image compositing: blocks render a 3-D field, swap rounds composite\n"
    "  --mode M      depth (opaque surfaces, the nearest wins; default) or over\n"
    "                (a translucent volume, blended front to back)\n"
    "  --png [FILE]  write the final image as a PNG (default composite.png) and check it\n"
    "  --bench       time the compositing at k = 2, 4, 8 and a direct send";

int main(int argc, char **argv) {
  own_options own = {MODE_DEPTH, NULL, 0, NULL};
  take_own_options(&argc, argv, &own);
  ex_options o = {.blocks = 12, .k = 4, .contiguous = 1, .threads = 2, .seed = 1};
  long long width = 128, height = 96, samples = 0, reps = 5;
  ex_int_option extra[] = {{"--width", &width, 1, "image width in pixels"},
                           {"--height", &height, 1, "image height in pixels"},
                           {"--samples", &samples, 0, "samples along a ray (0: the larger side)"},
                           {"--reps", &reps, 1, "--bench: repetitions of each k"}};
  if (!ex_start(&argc, &argv, &o, what, extra, 4)) return o.status;
  if (own.bad) {
    if (ex_rank() == 0) fprintf(stderr, "%s: bad option or value: %s\n", argv[0], own.bad);
    ex_usage(argv[0], what, &o, extra, 4);
    MPI_Finalize();
    return 2;
  }
  int size = ex_size();

  scene s = {.mode = own.mode, .png = own.png, .bench = own.bench};
  s.channels = own.mode == MODE_DEPTH ? 5 : 4;
  s.width = (int)width;
  s.height = (int)height;
  s.samples = samples ? (int)samples : (int)(width > height ? width : height);
  s.npix = (size_t)width * (size_t)height;
  blk_cbounds box;
  blk_decomposer *d = NULL;
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  blk_partners *swap = NULL, *merge = NULL;
  EX_CHECK(blk_cbounds_set(&box, 3, domain_lo, domain_hi));
  EX_CHECK(blk_decomposer_create_continuous(&d, &box, o.blocks, NULL));
  s.d = d;
  int div[3];
  blk_decomposer_divisions(d, div);

  /* Square pixels, the domain's x and y centred in the image. */
  double lx = domain_hi[0] - domain_lo[0], ly = domain_hi[1] - domain_lo[1];
  s.h = lx / s.width > ly / s.height ? lx / s.width : ly / s.height;
  s.x0 = (domain_lo[0] + domain_hi[0]) / 2 - (s.width / 2.0 - 0.5) * s.h;
  s.y0 = (domain_lo[1] + domain_hi[1]) / 2 + (s.height / 2.0 - 0.5) * s.h;
  s.z0 = domain_lo[2];
  s.dz = (domain_hi[2] - domain_lo[2]) / s.samples;
  s.col_owner = malloc((size_t)s.width * sizeof(int));
  s.row_owner = malloc((size_t)s.height * sizeof(int));
  s.sample_owner = malloc((size_t)s.samples * sizeof(int));
  if (!s.col_owner || !s.row_owner || !s.sample_owner)
    ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "the pixels' owners");
  for (int i = 0; i < s.width; i++)
    s.col_owner[i] = blk_decomposer_caxis_owner(d, 0, s.x0 + i * s.h);
  for (int j = 0; j < s.height; j++)
    s.row_owner[j] = blk_decomposer_caxis_owner(d, 1, s.y0 - j * s.h);
  for (int k = 0; k < s.samples; k++)
    s.sample_owner[k] = blk_decomposer_caxis_owner(d, 2, sample_z(&s, k));

  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks)); /* gid 0 is on rank 0 */
  EX_CHECK(ex_choose_k(&o, BLK_SWAP, a, s.npix * s.channels * sizeof(float), 1));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = create_block;
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.user = &s;
  mc.shuffle = sizeof(float); /* the records are floats */
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(blk_master_decompose(m, d, a));
  EX_CHECK(blk_partners_create_folded(&merge, BLK_MERGE, o.blocks, o.k, 1));

  EX_CHECK(blk_master_foreach(m, render_block, &s));
  if (ex_rank() == 0 && !(s.serial = render_serial(&s)))
    ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "the serial render");
  const char *mode_name = s.mode == MODE_DEPTH ? "depth test" : "over";
  int ok = 1;

  if (!own.bench) {
    EX_CHECK(make_swap(&swap, &s, o.blocks, div[2], o.k, o.contiguous));
    double elapsed = composite(m, a, swap, &s);
    verdict v = gather_and_check(m, a, merge, &s);
    ok = ex_ooc_agree(m, &o.ooc, v.errors == 0 && v.png == 0);
    char png[96] = "";
    if (s.png)
      snprintf(png, sizeof png, ", PNG %.40s %s", s.png,
               v.png == 0  ? "read back equal"
               : v.png < 0 ? "NOT WRITTEN"
                           : "READ BACK DIFFERENT");
    ex_summary(m, &o.ooc, ok, "composite",
               "%dx%d %s, %d samples a ray, %d blocks (%dx%dx%d) on %d ranks x %d threads, %s, "
               "swap k=%d %s in %d rounds (%s): %lld pixels differ from serial (largest "
               "difference %.2g, %s), image %016llx%s, %.4f s",
               s.width, s.height, mode_name, s.samples, o.blocks, div[0], div[1], div[2], size,
               o.threads, ex_ooc_mode(&o.ooc).s, o.k, ex_order(&o), blk_partners_rounds(swap),
               radices_text(swap).s, (long long)v.errors, v.largest,
               s.mode == MODE_DEPTH ? "exact" : "tolerance 1e-5", (unsigned long long)v.hash, png,
               elapsed);
  } else {
    /* k = 2, 4, 8 and a direct send (one round of n), each --reps times
     * from the same render; every k's image is checked. */
    const int ks[4] = {2, 4, 8, o.blocks > 2 ? o.blocks : 2};
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) ex_fail(__FILE__, __LINE__, "malloc", BLK_ENOMEM, "the times");
    if (ex_rank() == 0)
      printf(
          "composite --bench: %dx%d %s, %d blocks (%dx%dx%d) on %d ranks x %d threads, %s, "
          "%s order; compositing time of the slowest rank over %lld repetitions\n\n"
          "| k | rounds | median s | min s | max s |\n|---|---|---|---|---|\n",
          s.width, s.height, mode_name, o.blocks, div[0], div[1], div[2], size, o.threads,
          ex_ooc_mode(&o.ooc).s, ex_order(&o), reps);
    int64_t errors = 0;
    for (int i = 0; i < 4; i++) {
      EX_CHECK(make_swap(&swap, &s, o.blocks, div[2], ks[i], o.contiguous));
      for (long long r = 0; r < reps; r++) {
        EX_CHECK(blk_master_foreach(m, restore_block, &s));
        t[r] = composite(m, a, swap, &s);
      }
      verdict v = gather_and_check(m, a, merge, &s);
      errors += v.errors + (v.png != 0);
      qsort(t, (size_t)reps, sizeof *t, compare_doubles);
      char k[16] = "direct";
      if (i < 3) snprintf(k, sizeof k, "%d", ks[i]);
      if (ex_rank() == 0)
        printf("| %s | %s | %.4f | %.4f | %.4f |\n", k, radices_text(swap).s,
               reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2, t[0], t[reps - 1]);
      blk_partners_destroy(swap);
      swap = NULL;
    }
    free(t);
    if (ex_rank() == 0) printf("\n");
    ok = ex_ooc_agree(m, &o.ooc, errors == 0);
    ex_summary(m, &o.ooc, ok, "composite --bench", "%lld pixels differ from serial over all k",
               (long long)errors);
  }

  free(s.serial);
  free(s.col_owner);
  free(s.row_owner);
  free(s.sample_owner);
  blk_partners_destroy(swap);
  blk_partners_destroy(merge);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  return ex_finish(ok);
}
