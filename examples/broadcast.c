/*
 * broadcast: a parameter set sent from gid 0 to every block.
 *
 * gid 0 holds a run's parameters: a few ints and doubles, a label string and
 * a variable-length array of coefficients. blk_reduce with BLK_BROADCAST
 * partners sends them down a k-ary tree (a merge run backwards): in each
 * round the blocks that have the parameters send them to the other members
 * of their group, so after log_k(nblocks) rounds every block has them.
 *
 * The struct is serialised field by field with blk_buffer_write_* straight
 * into the proxy's outgoing buffer (blk_proxy_outgoing) and read back with
 * blk_buffer_read_* from the incoming one (blk_proxy_incoming): the buffer's
 * sticky error means one check after all the fields. A real code would do
 * the same to ship any struct with pointers in it.
 *
 * The parameters are a function of the seed, so every block can check that
 * what it received is exactly what gid 0 has, field by field and bit for bit,
 * and that it received them exactly once.
 *
 * Out-of-core (--mem-blocks N), save writes a whole block with the same
 * params_write (after a flag saying whether the block has parameters yet,
 * and its counters) and load reads it back with params_read.
 *
 *   mpiexec -n 4 ./broadcast [--blocks 12] [--k 3] [--halving] [--threads 2]
 *                            [--coeffs 500] [--seed 1]
 *                            [--mem-blocks N] [--spill-dir DIR] [--spill-in-memory]
 *
 * Prints one line with PASS, or FAIL and exit status 1 (and, out-of-core, a
 * line of rank 0's storage figures).
 */
#include <blk/blk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

typedef struct params {
  int32_t steps, order;
  double dt, tolerance;
  uint64_t seed;
  char *label; /* NUL-terminated */
  size_t ncoeffs;
  double *coeffs;
} params;

static void params_free(params *p) {
  free(p->label);
  free(p->coeffs);
  memset(p, 0, sizeof *p);
}

/* gid 0's parameters. */
static int params_make(params *p, uint64_t seed, size_t ncoeffs) {
  memset(p, 0, sizeof *p);
  p->steps = 100 + (int32_t)(seed % 900);
  p->order = 2 + (int32_t)(seed % 3);
  p->dt = 1e-3 * (1.0 + ex_unit(ex_random(seed, 0, 0)));
  p->tolerance = 1e-9;
  p->seed = seed;
  char label[128];
  int len = snprintf(label, sizeof label, "blk broadcast example: %zu coefficients, seed %llu",
                     ncoeffs, (unsigned long long)seed);
  p->label = malloc((size_t)len + 1);
  p->coeffs = malloc((ncoeffs ? ncoeffs : 1) * sizeof *p->coeffs);
  if (!p->label || !p->coeffs) return BLK_ENOMEM;
  memcpy(p->label, label, (size_t)len + 1);
  p->ncoeffs = ncoeffs;
  for (size_t i = 0; i < ncoeffs; i++) p->coeffs[i] = 2.0 * ex_unit(ex_random(seed, 1, i)) - 1.0;
  return 0;
}

/* Appends the parameters to b; the sticky error makes one check enough. */
static int params_write(blk_buffer *b, const params *p) {
  blk_buffer_write_i32(b, p->steps);
  blk_buffer_write_i32(b, p->order);
  blk_buffer_write_f64(b, p->dt);
  blk_buffer_write_f64(b, p->tolerance);
  blk_buffer_write_u64(b, p->seed);
  blk_buffer_write_array(b, p->label, 1, strlen(p->label) + 1);
  blk_buffer_write_array(b, p->coeffs, sizeof *p->coeffs, p->ncoeffs);
  return blk_buffer_error(b);
}

/* Reads what params_write wrote; non-zero if b does not hold exactly that. */
static int params_read(params *p, blk_buffer *b) {
  memset(p, 0, sizeof *p);
  blk_buffer_read_i32(b, &p->steps);
  blk_buffer_read_i32(b, &p->order);
  blk_buffer_read_f64(b, &p->dt);
  blk_buffer_read_f64(b, &p->tolerance);
  blk_buffer_read_u64(b, &p->seed);
  void *label = NULL, *coeffs = NULL;
  size_t len = 0;
  blk_buffer_read_array_alloc(b, &label, 1, &len);
  blk_buffer_read_array_alloc(b, &coeffs, sizeof *p->coeffs, &p->ncoeffs);
  p->label = label;
  p->coeffs = coeffs;
  if (blk_buffer_error(b)) return blk_buffer_error(b);
  if (len == 0 || p->label[len - 1] != '\0' || blk_buffer_remaining(b) != 0) return BLK_ECORRUPT;
  return 0;
}

static int params_equal(const params *a, const params *b) {
  return a->steps == b->steps && a->order == b->order &&
         memcmp(&a->dt, &b->dt, sizeof a->dt) == 0 &&
         memcmp(&a->tolerance, &b->tolerance, sizeof a->tolerance) == 0 && a->seed == b->seed &&
         a->label && b->label && strcmp(a->label, b->label) == 0 && a->ncoeffs == b->ncoeffs &&
         (a->ncoeffs == 0 || memcmp(a->coeffs, b->coeffs, a->ncoeffs * sizeof *a->coeffs) == 0);
}

typedef struct param_block {
  params p;     /* gid 0: from the start; the others: as received */
  int received; /* messages that carried parameters */
  int bad;      /* messages that did not decode */
} param_block;

typedef struct run {
  uint64_t seed;
  size_t ncoeffs;
  const params *expected;
} run;

/* A block without parameters; give_params sets gid 0's. (Out-of-core, blk
 * also calls this to make the block that load fills.) */
static int create_block(void **out, int gid, void *user) {
  (void)gid;
  (void)user;
  *out = calloc(1, sizeof(param_block));
  return *out ? 0 : BLK_ENOMEM;
}

static void destroy_block(void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  param_block *b = block;
  if (b) params_free(&b->p);
  free(b);
}

/* Out-of-core: the counters, whether the block has parameters (the label
 * is set once it does), then the parameters as they travel. */
static int save_block(blk_buffer *out, const void *block, int gid, void *user) {
  (void)gid;
  (void)user;
  const param_block *b = block;
  blk_buffer_write_i32(out, b->received);
  blk_buffer_write_i32(out, b->bad);
  blk_buffer_write_i32(out, b->p.label != NULL);
  return b->p.label ? params_write(out, &b->p) : blk_buffer_error(out);
}

static int load_block(void *block, blk_buffer *in, int gid, void *user) {
  (void)gid;
  (void)user;
  param_block *b = block; /* fresh from create_block: no parameters */
  int32_t received = 0, bad = 0, has = 0;
  blk_buffer_read_i32(in, &received);
  blk_buffer_read_i32(in, &bad);
  blk_buffer_read_i32(in, &has);
  b->received = received;
  b->bad = bad;
  if (blk_buffer_error(in)) return blk_buffer_error(in);
  if (has) return params_read(&b->p, in); /* also checks that nothing follows */
  return blk_buffer_remaining(in) == 0 ? 0 : BLK_ECORRUPT;
}

/* foreach: gid 0 starts with the run's parameters. */
static int give_params(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  param_block *b = block;
  return blk_proxy_gid(p) == 0 ? params_make(&b->p, r->seed, r->ncoeffs) : 0;
}

/* reduce (broadcast): take the parameters from the parent (a block that
 * already has them is the first member of its group and receives nothing
 * from itself), then serialise them for every other member of the group. */
static int broadcast_params(void *block, blk_proxy *p, void *user) {
  (void)user;
  param_block *b = block;
  int gid = blk_proxy_gid(p);
  for (int i = 0; i < blk_proxy_in_count(p); i++) {
    if (blk_proxy_in_gid(p, i) == gid) continue;
    params_free(&b->p);
    if (params_read(&b->p, blk_proxy_incoming(p, i))) b->bad++;
    b->received++;
  }
  for (int i = 0; i < blk_proxy_out_count(p); i++) {
    if (blk_proxy_out_gid(p, i) == gid) continue;
    int rc = params_write(blk_proxy_outgoing(p, i), &b->p);
    if (rc) return rc;
  }
  return 0;
}

/* foreach: is this exactly gid 0's parameter set, received exactly once? */
static int check_params(void *block, blk_proxy *p, void *user) {
  const run *r = user;
  const param_block *b = block;
  int want_received = blk_proxy_gid(p) == 0 ? 0 : 1;
  int ok = b->bad == 0 && b->received == want_received && params_equal(&b->p, r->expected);
  return blk_proxy_all_reduce_i64(p, ok, BLK_OP_SUM);
}

int main(int argc, char **argv) {
  ex_options o = {.blocks = 12, .k = 3, .contiguous = 1, .threads = 2, .seed = 1};
  long long ncoeffs = 500;
  ex_int_option extra[] = {{"--coeffs", &ncoeffs, 0, "length of the coefficient array"}};
  if (!ex_start(&argc, &argv, &o, "a parameter set broadcast from gid 0", extra, 1))
    return o.status;
  int size = ex_size();

  /* What every block must end with, and its size on the wire. */
  params expected;
  if (params_make(&expected, o.seed, (size_t)ncoeffs))
    ex_fail(__FILE__, __LINE__, "params_make", BLK_ENOMEM, "expected parameters");
  blk_buffer wire = BLK_BUFFER_INIT;
  EX_CHECK(params_write(&wire, &expected));
  size_t bytes = wire.size;
  blk_buffer_free(&wire);

  run r = {o.seed, (size_t)ncoeffs, &expected};
  blk_assigner *a = NULL;
  blk_master *m = NULL;
  blk_partners *partners = NULL;
  EX_CHECK(blk_assigner_create_contiguous(&a, size, o.blocks));
  EX_CHECK(ex_choose_k(&o, BLK_BROADCAST, a, bytes, 0));
  blk_master_config mc = BLK_MASTER_CONFIG_INIT;
  mc.threads = o.threads;
  mc.create = create_block; /* out-of-core, blk makes the blocks it loads into */
  mc.destroy = destroy_block;
  mc.save = save_block;
  mc.load = load_block;
  mc.user = &r;
  mc.shuffle = sizeof(double); /* the records are mostly the coefficients */
  ex_ooc_configure(&mc, &o.ooc);
  EX_CHECK(blk_master_create(&m, MPI_COMM_WORLD, &mc));
  EX_CHECK(ex_add_blocks(m, a, create_block, &r));
  EX_CHECK(blk_master_foreach(m, give_params, &r));
  /* No geometry: the blocks form a 1D row of o.blocks, folded when the
   * count has a prime factor above max(k, 16) (otherwise DIY's rounds). */
  EX_CHECK(blk_partners_create_folded(&partners, BLK_BROADCAST, o.blocks, o.k, o.contiguous));

  double t0 = MPI_Wtime();
  EX_CHECK(blk_reduce(m, a, partners, broadcast_params, &r));
  double elapsed = MPI_Wtime() - t0;
  EX_CHECK(blk_master_foreach(m, check_params, &r));
  EX_CHECK(blk_master_exchange(m));
  int64_t matching = blk_master_result_i64(m, 0);

  int ok = ex_ooc_agree(m, &o.ooc, matching == o.blocks);
  ex_summary(m, &o.ooc, ok, "broadcast",
             "%zu bytes of parameters (%lld coefficients) from gid 0 to %d blocks on %d ranks x "
             "%d threads, %s, broadcast k=%d %s in %d rounds: %lld of %d blocks hold exactly gid "
             "0's parameters, %.3f s",
             bytes, ncoeffs, o.blocks, size, o.threads, ex_ooc_mode(&o.ooc).s, o.k, ex_order(&o),
             blk_partners_rounds(partners), (long long)matching, o.blocks, elapsed);
  params_free(&expected);
  blk_partners_destroy(partners);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  return ex_finish(ok);
}
