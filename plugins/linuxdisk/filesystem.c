/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The filesystem inside the linuxdisk plugin's partition: how big to
 * make it, and making it with mke2fs -d into a temporary file.
 *
 * Without size=, the filesystem gets the space the directory's files
 * use on the host (as "du -sk" counts it: allocated blocks, each hard
 * linked file once) plus 20%, rounded up to a sector, and at least
 * 1 MiB, and 32 MiB more for the journal of ext3 and ext4;
 * size=+SIZE adds SIZE to that; size=SIZE is used as it is.
 * These are nbdkit's sizes too, so the two give disks of one size.
 * Where the directory has more entries than mke2fs's default inode
 * ratio would give inodes, the inode count is asked for with -N.
 *
 * Runs once, single-threaded, at start-up.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "cleanup.h"
#include "minmax.h"
#include "rounding.h"
#include "subprocess.h"
#include "vector.h"

#include "linuxdisk.h"

#define JOURNAL_ROOM (32 * 1024 * 1024)

/* A file with several links, counted once. */
struct linked {
  dev_t dev;
  ino_t ino;
  uint64_t blocks;
};
DEFINE_VECTOR_TYPE (linked_vector, struct linked);

struct usage {
  uint64_t blocks;              /* 512-byte blocks, linked files apart */
  uint64_t entries;             /* inodes needed */
  linked_vector linked;
};

static int
count_entry (struct usage *u, const struct stat *st)
{
  u->entries++;
  if (!S_ISDIR (st->st_mode) && st->st_nlink > 1) {
    struct linked l = { st->st_dev, st->st_ino, st->st_blocks };

    if (linked_vector_append (&u->linked, l) == -1) {
      nbdkit_error ("realloc: %m");
      return -1;
    }
  }
  else
    u->blocks += st->st_blocks;
  return 0;
}

/* Add up directory DFD (named PATH, for messages), recursively, not
 * following symbolic links.  Takes ownership of DFD.
 */
static int
walk (struct usage *u, int dfd, const char *path)
{
  DIR *d = fdopendir (dfd);
  struct dirent *e;
  int r = 0;

  if (d == NULL) {
    nbdkit_error ("%s: %m", path);
    close (dfd);
    return -1;
  }
  while (r == 0 && (errno = 0, e = readdir (d)) != NULL) {
    struct stat st;

    if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
      continue;
    if (fstatat (dirfd (d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1) {
      nbdkit_error ("%s/%s: %m", path, e->d_name);
      r = -1;
      break;
    }
    r = count_entry (u, &st);
    if (r == 0 && S_ISDIR (st.st_mode)) {
      CLEANUP_FREE char *sub = NULL;
      int fd = openat (dirfd (d), e->d_name,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

      if (fd == -1 || asprintf (&sub, "%s/%s", path, e->d_name) == -1) {
        nbdkit_error ("%s/%s: %m", path, e->d_name);
        if (fd >= 0)
          close (fd);
        sub = NULL;
        r = -1;
        break;
      }
      r = walk (u, fd, sub);
    }
  }
  if (r == 0 && errno != 0) {
    nbdkit_error ("readdir: %s: %m", path);
    r = -1;
  }
  closedir (d);
  return r;
}

static int
compare_linked (const void *a, const void *b)
{
  const struct linked *x = a, *y = b;

  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino)
    return x->ino < y->ino ? -1 : 1;
  return 0;
}

/* Bytes the directory uses, in whole KiB as du counts, and entries. */
static int
estimate (const char *dir, uint64_t *bytes, uint64_t *entries)
{
  struct usage u = { 0, 0, empty_vector };
  struct stat st;
  int fd, r;
  size_t i;

  fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd == -1 || fstat (fd, &st) == -1) {
    nbdkit_error ("dir=%s: %m", dir);
    if (fd >= 0)
      close (fd);
    return -1;
  }
  r = count_entry (&u, &st);
  if (r == 0)
    r = walk (&u, fd, dir);
  else
    close (fd);
  if (r == 0) {
    if (u.linked.len > 1)       /* (qsort may not be given NULL) */
      qsort (u.linked.ptr, u.linked.len, sizeof u.linked.ptr[0],
             compare_linked);
    for (i = 0; i < u.linked.len; i++) {
      if (i == 0 || compare_linked (&u.linked.ptr[i - 1],
                                    &u.linked.ptr[i]) != 0) {
        u.blocks += u.linked.ptr[i].blocks;
        u.entries++;
      }
      u.entries--;            /* counted once above, per link */
    }
    *bytes = DIV_ROUND_UP (u.blocks, 2) * 1024;
    *entries = u.entries;
  }
  linked_vector_reset (&u.linked);
  return r;
}

/* Run mke2fs with ARGV; on failure report its last line of errors (or
 * its status) in one line.
 */
static int
run_mke2fs (char **argv)
{
  const char *path = getenv ("PATH");
  CLEANUP_FREE char *search = NULL;
  struct subprocess sp = {
    .argv = (const char *const *) argv, .file = "mke2fs",
    .stdin_mode = SUBPROCESS_NULL, .stdout_mode = SUBPROCESS_NULL,
    .stderr_mode = SUBPROCESS_PIPE, .err_keep_tail = true,
  };
  const char *line;
  int ret = -1;

  /* mke2fs is in /sbin, which may not be on a user's $PATH. */
  if (asprintf (&search, "%s:/usr/sbin:/sbin",
                path ? path : "/bin:/usr/bin") == -1) {
    search = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  sp.search_path = search;
  if (subprocess_run (&sp) != SUBPROCESS_FINISHED) {
    nbdkit_error ("%s: %m", sp.failed_call);
    goto out;
  }
  if (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 0) {
    ret = 0;
    goto out;
  }
  line = subprocess_last_line (&sp);
  if (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 127 && *line == '\0')
    nbdkit_error ("mke2fs: could not run it (is e2fsprogs installed?)");
  else if (WIFEXITED (sp.status))
    nbdkit_error ("mke2fs failed (exit status %d): %s",
                  WEXITSTATUS (sp.status), *line ? line : "no message");
  else
    nbdkit_error ("mke2fs killed by signal %d", WTERMSIG (sp.status));
 out:
  subprocess_free (&sp);
  return ret;
}

int
build_filesystem (const char *dir, const char *type, const char *label,
                  struct size_request req, uint64_t *size)
{
  const char *tmp = getenv ("TMPDIR");
  CLEANUP_FREE char *path = NULL;
  char inodes_str[32];
  uint64_t bytes = 0, entries = 0, fs_size, inodes;
  char *argv[16];
  size_t i = 0;
  int fd;

  if (estimate (dir, &bytes, &entries) == -1)
    return -1;
  if (req.size > 0 && !req.add)
    fs_size = ROUND_UP ((uint64_t) req.size, SECTOR_SIZE);
  else {
    fs_size = ROUND_UP (DIV_ROUND_UP (bytes * 6, 5), SECTOR_SIZE);
    fs_size = MAX (fs_size, (uint64_t) 1024 * 1024);
    if (strcmp (type, "ext2") != 0)
      fs_size += JOURNAL_ROOM;
    if (req.add)
      fs_size = ROUND_UP (fs_size + req.size, SECTOR_SIZE);
  }
  nbdkit_debug ("linuxdisk: %s uses %" PRIu64 " bytes in %" PRIu64
                " entries: filesystem of %" PRIu64 " bytes",
                dir, bytes, entries, fs_size);

  if (tmp == NULL || *tmp == '\0')
    tmp = "/var/tmp";
  if (asprintf (&path, "%s/linuxdiskXXXXXX", tmp) == -1) {
    path = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  fd = mkostemp (path, O_CLOEXEC);
  if (fd == -1) {
    nbdkit_error ("mkstemp: %s: %m", path);
    return -1;
  }
  if (ftruncate (fd, fs_size) == -1) {
    nbdkit_error ("ftruncate: %s: %m", path);
    goto err;
  }

  argv[i++] = (char *) "mke2fs";
  argv[i++] = (char *) "-q";
  argv[i++] = (char *) "-F";
  argv[i++] = (char *) "-t";
  argv[i++] = (char *) type;
  if (label) {
    argv[i++] = (char *) "-L";
    argv[i++] = (char *) label;
  }
  /* The most sparing default ratio is one inode per 16 KiB. */
  inodes = entries + entries / 8 + 32;
  if (inodes > fs_size / 16384) {
    snprintf (inodes_str, sizeof inodes_str, "%" PRIu64, inodes);
    argv[i++] = (char *) "-N";
    argv[i++] = inodes_str;
  }
  argv[i++] = (char *) "-d";
  argv[i++] = (char *) dir;
  argv[i++] = path;
  argv[i] = NULL;
  if (run_mke2fs (argv) == -1)
    goto err;

  /* The file is reachable only through fd from now on. */
  unlink (path);
  *size = fs_size;
  return fd;

 err:
  unlink (path);
  close (fd);
  return -1;
}
