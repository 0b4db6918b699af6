/*
 * test_settings: what a master is told at create, and what it does with it.
 *
 *   test_settings --case NAME
 *     versions   the config's version: BLK_MASTER_CONFIG_INIT and
 *                blk_master_config_init agree; version 0 (a memset config)
 *                and an unknown version are BLK_EINVAL on every rank naming
 *                the version, also when only one rank's config is wrong; a
 *                bad log_level likewise
 *     log        a master's log callback gets its lines (with its rank, at
 *                its own level) and stderr does not; two masters at once,
 *                one logging, one not; BLK_LOG_DEFAULT follows the process
 *     partners   blk_proxy_partners is the pattern blk_reduce was given,
 *                and NULL in foreach and in all_to_all's callbacks; a
 *                collective that succeeds clears blk_last_error()
 *     stop       (death test) a callback's misuse calls the master's stop
 *                callback with the message before the job stops
 */
#define _POSIX_C_SOURCE 200809L /* dup, fileno */

#include <blk/blk.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static int rank, size;

static int create(void **out, int gid, void *user) {
  (void)user;
  int *b = malloc(sizeof *b);
  if (!b) return BLK_ENOMEM;
  *b = gid;
  *out = b;
  return 0;
}

static void destroy(void *b, int gid, void *user) {
  (void)gid;
  (void)user;
  free(b);
}

static void expect_create_fails(const blk_master_config *cfg, const char *detail) {
  blk_master *m = (blk_master *)&rank;
  int rc = blk_master_create(&m, MPI_COMM_WORLD, cfg);
  CHECK_EQ_INT(rc, BLK_EINVAL);
  CHECK(m == NULL);
  CHECK_MSG(strstr(blk_last_error(), detail), "\"%s\" does not say \"%s\"", blk_last_error(),
            detail);
}

static void case_versions(void) {
  blk_master_config a = BLK_MASTER_CONFIG_INIT, b;
  memset(&b, 0x5a, sizeof b);
  CHECK_OK(blk_master_config_init(&b, BLK_MASTER_CONFIG_VERSION));
  CHECK_EQ_INT(b.version, BLK_MASTER_CONFIG_VERSION);
  CHECK_EQ_INT(a.version, BLK_MASTER_CONFIG_VERSION);
  CHECK_EQ_INT(b.threads, a.threads);
  CHECK_EQ_INT(b.compression_level, a.compression_level);
  CHECK_EQ_INT(b.shuffle, a.shuffle);
  CHECK_EQ_INT(b.queue_spill_bytes, a.queue_spill_bytes);
  CHECK_EQ_INT(b.log_level, BLK_LOG_DEFAULT);
  CHECK(b.log == NULL && b.stop == NULL && b.create == NULL && b.spill_dir == NULL);
  CHECK_ERR(blk_master_config_init(&b, 0), BLK_EINVAL, "version 0");
  CHECK_ERR(blk_master_config_init(&b, BLK_MASTER_CONFIG_VERSION + 1), BLK_EINVAL, "knows 1..");
  CHECK_ERR(blk_master_config_init(NULL, 1), BLK_EINVAL, "NULL");

  blk_master_config zero;
  memset(&zero, 0, sizeof zero);
  zero.threads = 1;
  expect_create_fails(&zero, "version 0");
  /* Only the last rank's config is wrong: every rank fails, naming it. */
  blk_master_config late = BLK_MASTER_CONFIG_INIT;
  if (rank == size - 1) late.version = 7;
  char who[64];
  snprintf(who, sizeof who, "on rank %d", size - 1);
  expect_create_fails(&late, who);
  expect_create_fails(&late, "version 7");
  blk_master_config level = BLK_MASTER_CONFIG_INIT;
  level.log_level = 9;
  expect_create_fails(&level, "log_level = 9");
  /* And a good one still works afterwards. */
  blk_master *m = NULL;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &b));
  blk_master_destroy(m);
}

/* ---- log ---- */

typedef struct captured {
  atomic_int lines, infos, wrong_rank;
  char first[256];
} captured;

static void capture(blk_log_level level, const char *line, void *user) {
  captured *c = user;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "blk[%d] ", rank);
  if (strncmp(line, prefix, strlen(prefix)) != 0) atomic_fetch_add(&c->wrong_rank, 1);
  if (atomic_fetch_add(&c->lines, 1) == 0) snprintf(c->first, sizeof c->first, "%s", line);
  if (level == BLK_LOG_INFO) atomic_fetch_add(&c->infos, 1);
}

static int noop(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)p;
  (void)user;
  return 0;
}

static int log_in_callback(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  blk_log(BLK_LOG_INFO, "callback of gid %d", blk_proxy_gid(p));
  return 0;
}

static void case_log(void) {
  blk_log_set_level(BLK_LOG_WARN); /* the process's: info lines are dropped */
  /* stderr into a file, to see that nothing of m's goes there. */
  FILE *err = tmpfile();
  CHECK(err);
  fflush(stderr);
  int saved = dup(2);
  CHECK(saved >= 0 && dup2(fileno(err), 2) == 2);
  captured got = {0};
  blk_master_config cfg = BLK_MASTER_CONFIG_INIT;
  cfg.threads = 2;
  cfg.create = create;
  cfg.destroy = destroy;
  cfg.log = capture;
  cfg.log_user = &got;
  cfg.log_level = BLK_LOG_INFO;
  blk_master *m = NULL, *quiet = NULL;
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &cfg));
  blk_master_config plain = BLK_MASTER_CONFIG_INIT; /* the process's level and stderr */
  CHECK_OK(blk_master_create(&quiet, MPI_COMM_WORLD, &plain));
  blk_assigner *a = NULL;
  blk_decomposer *d = NULL;
  blk_bounds domain = {1, {0}, {63}};
  CHECK_OK(blk_decomposer_create(&d, &domain, 2 * size + 1, NULL));
  CHECK_OK(blk_assigner_create_contiguous(&a, size, 2 * size + 1));
  CHECK_OK(blk_master_decompose(m, d, a));
  CHECK_OK(blk_master_foreach(m, log_in_callback, NULL)); /* from the pool threads too */
  CHECK_OK(blk_master_exchange(m));
  int before = atomic_load(&got.lines);
  CHECK_OK(blk_master_foreach(quiet, noop, NULL)); /* its lines are not m's */
  CHECK_EQ_INT(atomic_load(&got.lines), before);
  blk_log(BLK_LOG_INFO, "outside any master: dropped at the process's level");
  CHECK_EQ_INT(atomic_load(&got.lines), before);
  /* decompose, foreach, exchange: an info line each, and one per local block. */
  int local = blk_master_local_count(m);
  CHECK_MSG(atomic_load(&got.infos) >= 3 + local, "%d info lines for %d blocks: first \"%s\"",
            atomic_load(&got.infos), local, got.first);
  CHECK_EQ_INT(atomic_load(&got.wrong_rank), 0);
  blk_master_destroy(quiet);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
  fflush(stderr);
  CHECK(dup2(saved, 2) == 2);
  close(saved);
  rewind(err);
  char line[512];
  while (fgets(line, sizeof line, err)) CHECK_MSG(!strstr(line, "blk"), "on stderr: %s", line);
  fclose(err);
}

/* ---- partners ---- */

static const blk_partners *given;

static int check_partners(void *b, blk_proxy *p, void *user) {
  (void)b;
  atomic_int *calls = user; /* the default threads may run blocks at once */
  CHECK(blk_proxy_partners(p) == given);
  atomic_fetch_add(calls, 1);
  int v = 1;
  for (int i = 0; i < blk_proxy_out_count(p); i++) CHECK_OK(blk_proxy_enqueue(p, i, &v, sizeof v));
  return 0;
}

static int no_partners(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  CHECK(blk_proxy_partners(p) == NULL);
  return 0;
}

static void case_partners(void) {
  int n = 3 * size + 2;
  blk_master_config cfg = BLK_MASTER_CONFIG_INIT;
  cfg.create = create;
  cfg.destroy = destroy;
  blk_master *m = NULL;
  blk_assigner *a = NULL;
  blk_decomposer *d = NULL;
  blk_bounds domain = {1, {0}, {(int64_t)n * 4 - 1}};
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &cfg));
  CHECK_OK(blk_decomposer_create(&d, &domain, n, NULL));
  CHECK_OK(blk_assigner_create_contiguous(&a, size, n));
  CHECK_OK(blk_master_decompose(m, d, a));
  blk_partners *p = NULL;
  CHECK_OK(blk_partners_create(&p, BLK_ALLREDUCE, 1, &n, 2, 1));
  given = p;
  atomic_int calls = 0;
  CHECK_OK(blk_reduce(m, a, p, check_partners, &calls));
  CHECK(atomic_load(&calls) > 0 || blk_master_local_count(m) == 0);
  /* A collective that succeeds clears the detail an earlier failure left. */
  CHECK_ERR(blk_master_add(m, -1, NULL, NULL, 0), BLK_EINVAL, "gid = -1");
  CHECK_OK(blk_master_foreach(m, no_partners, NULL));
  CHECK_STR(blk_last_error(), "");
  CHECK_OK(blk_all_to_all(m, a, 2, 1, no_partners, no_partners, NULL));
  blk_partners_destroy(p);
  blk_master_destroy(m);
  blk_assigner_destroy(a);
  blk_decomposer_destroy(d);
}

/* ---- stop ---- */

static void say_stop(const char *message, void *user) {
  fprintf(stderr, "stop callback (%s): %s\n", (const char *)user, message);
  fflush(stderr);
}

static int misuse(void *b, blk_proxy *p, void *user) {
  (void)b;
  (void)user;
  if (blk_proxy_gid(p) == 0) blk_proxy_enqueue(p, 5, "x", 1); /* no out queue 5 */
  return 0;
}

static void case_stop(void) {
  blk_master_config cfg = BLK_MASTER_CONFIG_INIT;
  cfg.threads = 2;
  cfg.create = create;
  cfg.destroy = destroy;
  cfg.stop = say_stop;
  static char who[] = "the user's";
  cfg.stop_user = who;
  blk_master *m = NULL;
  blk_assigner *a = NULL;
  blk_decomposer *d = NULL;
  blk_bounds domain = {1, {0}, {63}};
  CHECK_OK(blk_master_create(&m, MPI_COMM_WORLD, &cfg));
  CHECK_OK(blk_decomposer_create(&d, &domain, size + 1, NULL));
  CHECK_OK(blk_assigner_create_contiguous(&a, size, size + 1));
  CHECK_OK(blk_master_decompose(m, d, a));
  blk_master_foreach(m, misuse, NULL);
  CHECK_MSG(0, "the job did not stop");
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *which = argc > 2 && !strcmp(argv[1], "--case") ? argv[2] : "";
  if (!strcmp(which, "versions"))
    case_versions();
  else if (!strcmp(which, "log"))
    case_log();
  else if (!strcmp(which, "partners"))
    case_partners();
  else if (!strcmp(which, "stop"))
    case_stop();
  else
    CHECK_MSG(0, "usage: test_settings --case versions|log|partners|stop");
  if (rank == 0) printf("test_settings %s: ok\n", which);
  MPI_Finalize();
  return 0;
}
