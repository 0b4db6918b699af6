/*
 * spill_fd.h: finds this process's spill files for blk's tests.
 *
 * A spill file has no name (storage.h), so a test that needs to read, wreck
 * or measure one reaches it the way the kernel shows it: /proc/self/fd/N is a
 * link to "<dir>/<name> (deleted)" for an unlinked file (the name is "#<inode>"
 * for an O_TMPFILE one), and opening that link opens the file itself.
 * Linux only; elsewhere spill_fds says it cannot look (-1) and the test says
 * what it skipped. Needs _POSIX_C_SOURCE 200809L or _XOPEN_SOURCE 700.
 */
#ifndef BLK_TEST_SPILL_FD_H
#define BLK_TEST_SPILL_FD_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPILL_DELETED " (deleted)"

/* Whether the link target t is an unlinked file directly inside dir. */
static inline int spill_target_in(const char *t, const char *dir) {
  size_t dl = strlen(dir), tl = strlen(t), sl = strlen(SPILL_DELETED);
  while (dl > 1 && dir[dl - 1] == '/') dl--;
  if (tl <= dl + 1 + sl || strncmp(t, dir, dl) != 0 || t[dl] != '/') return 0;
  if (strcmp(t + tl - sl, SPILL_DELETED) != 0) return 0;
  return memchr(t + dl + 1, '/', tl - sl - dl - 1) == NULL;
}

/* Fills fds[0, max) with this process's descriptors of unlinked files inside
 * dir (and targets[i], when targets is not NULL, with each link's text) and
 * returns how many there are (even beyond max), or -1 when /proc/self/fd
 * cannot be read (not Linux). */
static inline int spill_fds(const char *dir, int *fds, char (*targets)[512], int max) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int self = dirfd(d), n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char *end = NULL;
    long fd = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == self) continue;
    char link[64], t[512];
    snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
    ssize_t len = readlink(link, t, sizeof t - 1);
    if (len < 0) continue; /* closed since readdir saw it */
    t[len] = '\0';
    if (!spill_target_in(t, dir)) continue;
    if (n < max) {
      fds[n] = (int)fd;
      if (targets) snprintf(targets[n], sizeof targets[n], "%s", t);
    }
    n++;
  }
  closedir(d);
  return n;
}

/* The path "/proc/self/fd/<fd>" in buf: open it to reach the unlinked file. */
static inline const char *spill_fd_path(char buf[64], int fd) {
  snprintf(buf, 64, "/proc/self/fd/%d", fd);
  return buf;
}

#endif
