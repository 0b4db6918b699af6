/*
 * test_log_env: a bad BLK_LOG is reported exactly once per process, in one
 * line naming the value and the valid levels: when nothing is ever logged
 * (only blk__log_init runs, as at master create), when the program sets its
 * own level first (which then wins), when four threads first read the level
 * at once (50 times: the old lazy read reported twice in about 1 run in 70),
 * and beside other lines; a good BLK_LOG is never reported.
 *
 * The level is read once per process, so every case runs in a fresh child:
 * this program execs itself as "test_log_env child MODE LEVEL" with BLK_LOG
 * set, and the parent reads the child's stderr through a pipe. The child
 * exits 0 when the level it ended with is LEVEL.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blk/blk.h"
#include "check.h"
#include "base/logger.h"
#include "base/thread.h"

/* ---- the child ---------------------------------------------------------- */

enum { NTHREADS = 4 };

typedef struct race {
  atomic_int arrived;
  blk_log_level seen[NTHREADS];
} race;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Every thread waits for all of them (for at most 5 s), then reads the level
 * for the first time in the process. */
typedef struct toucher {
  race *r;
  size_t i;
} toucher;

static void first_touch(void *arg) {
  race *r = ((toucher *)arg)->r;
  size_t i = ((toucher *)arg)->i;
  atomic_fetch_add(&r->arrived, 1);
  double until = now_s() + 5.0;
  while (atomic_load(&r->arrived) < NTHREADS && now_s() < until) continue;
  r->seen[i] = blk_log_get_level();
}

static int child(const char *mode, blk_log_level want) {
  if (!strcmp(mode, "init")) { /* what the master does at create; nothing is logged */
    blk__log_init();
    blk__log_init();
  } else if (!strcmp(mode, "set-first")) {
    blk_log_set_level(want);
    blk__log_init();
  } else if (!strcmp(mode, "threads")) {
    race r = {0};
    blk__thread *t[NTHREADS];
    toucher args[NTHREADS];
    for (size_t i = 0; i < NTHREADS; i++) {
      args[i] = (toucher){&r, i};
      if (blk__thread_start(&t[i], first_touch, &args[i])) return 2;
    }
    for (size_t i = 0; i < NTHREADS; i++) blk__thread_join(t[i]);
    for (int i = 0; i < NTHREADS; i++)
      if (r.seen[i] != want) return 3;
    blk__log_init(); /* what a master created afterwards does */
  } else if (!strcmp(mode, "logs")) {
    blk__log_init();
    blk_log(BLK_LOG_WARN, "a warning");
    blk_log(BLK_LOG_DEBUG, "a debug line");
    blk_log_set_level(blk_log_get_level());
  } else {
    return 4;
  }
  return blk_log_get_level() == want ? 0 : 5;
}

/* ---- the parent --------------------------------------------------------- */

static const char *self_path = "/proc/self/exe";

/* Runs the child with BLK_LOG=env and returns its stderr in out. */
static void run(const char *mode, const char *env, blk_log_level want, char *out, size_t size) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    char name[] = "test_log_env", role[] = "child", how[32], level[2] = {0};
    snprintf(how, sizeof how, "%s", mode);
    level[0] = (char)('0' + (int)want);
    char *argv[] = {name, role, how, level, NULL};
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    setenv("BLK_LOG", env, 1);
    execv(self_path, argv);
    _exit(127);
  }
  close(fds[1]);
  size_t used = 0;
  for (;;) {
    ssize_t n = read(fds[0], out + used, size - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += (size_t)n;
    if (used == size - 1) break;
  }
  out[used] = '\0';
  close(fds[0]);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "child %s with BLK_LOG=%s: status %d, stderr:\n%s", mode, env, status, out);
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

static void expect_report(const char *mode, blk_log_level want, int lines) {
  char err[4096];
  run(mode, "loud", want, err, sizeof err);
  CHECK_MSG(count(err, "is not a level") == 1, "%s: stderr:\n%s", mode, err);
  CHECK_MSG(count(err, "\n") == lines, "%s: %d lines expected, stderr:\n%s", mode, lines, err);
  CHECK_MSG(strstr(err,
                   "blk: BLK_LOG=loud is not a level (none, error, warn, info, debug, "
                   "trace, or 0-5)") != NULL,
            "%s: stderr:\n%s", mode, err);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "child"))
    return child(argv[2], (blk_log_level)(argv[3][0] - '0'));
  if (access(self_path, X_OK) != 0) self_path = argv[0];

  expect_report("init", BLK_LOG_WARN, 1);
  expect_report("set-first", BLK_LOG_ERROR, 1);
  expect_report("logs", BLK_LOG_WARN, 2);
  for (int i = 0; i < 50; i++) expect_report("threads", BLK_LOG_WARN, 1);

  /* A valid BLK_LOG is taken and never reported. */
  char err[4096];
  run("init", "debug", BLK_LOG_DEBUG, err, sizeof err);
  CHECK_MSG(err[0] == '\0', "stderr:\n%s", err);
  run("threads", "4", BLK_LOG_DEBUG, err, sizeof err);
  CHECK_MSG(err[0] == '\0', "stderr:\n%s", err);
  run("set-first", "debug", BLK_LOG_INFO, err, sizeof err);
  CHECK_MSG(err[0] == '\0', "stderr:\n%s", err);
  run("logs", "debug", BLK_LOG_DEBUG, err, sizeof err);
  CHECK_MSG(count(err, "BLK_LOG") == 0 && count(err, "\n") == 2, "stderr:\n%s", err);
  CHECK_MSG(strstr(err, "blk warn: a warning\n") && strstr(err, "blk debug: a debug line\n"),
            "stderr:\n%s", err);

  printf("test_log_env: ok\n");
  return 0;
}
