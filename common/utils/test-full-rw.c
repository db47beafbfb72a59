/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of full-rw.c: short transfers are completed, end of file
 * is reported as a short count, errors as -1.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "full-rw.h"

#define BIG (1 << 20)           /* more than a pipe holds at once */

struct writer {
  int fd;
  const unsigned char *buf;
  ssize_t r;
};

static void *
writer (void *arg)
{
  struct writer *w = arg;
  /* The pipe takes 64 KiB at a time: full_write must loop. */
  w->r = full_write (w->fd, w->buf, BIG);
  close (w->fd);
  return NULL;
}

static void
test_pipe (void)
{
  int fds[2];
  pthread_t thread;
  unsigned char *out = malloc (BIG), *in = malloc (BIG);
  size_t i;

  assert (out && in);
  for (i = 0; i < BIG; ++i)
    out[i] = i * 7 + 3;
  assert (pipe (fds) == 0);
  struct writer w = { .fd = fds[1], .buf = out };
  assert (pthread_create (&thread, NULL, writer, &w) == 0);
  assert (full_read (fds[0], in, BIG) == BIG);
  assert (memcmp (in, out, BIG) == 0);
  /* The writer has finished: end of file is a short (zero) count. */
  assert (pthread_join (thread, NULL) == 0);
  assert (full_read (fds[0], in, 10) == 0);
  assert (w.r == BIG);
  close (fds[0]);
  free (out);
  free (in);
}

static void
test_file (void)
{
  char path[] = "/tmp/test-full-rw.XXXXXX";
  int fd = mkstemp (path);
  char buf[100];

  assert (fd >= 0);
  unlink (path);
  assert (full_pwrite (fd, "hello world", 11, 1000) == 11);
  assert (full_pread (fd, buf, 11, 1000) == 11);
  assert (memcmp (buf, "hello world", 11) == 0);
  /* Reading across the end of the file gives what there is. */
  assert (full_pread (fd, buf, sizeof buf, 1006) == 5);
  assert (memcmp (buf, "world", 5) == 0);
  assert (full_pread (fd, buf, 1, 5000) == 0);
  close (fd);

  /* Errors are -1 with errno. */
  errno = 0;
  assert (full_pread (fd, buf, 1, 0) == -1 && errno == EBADF);
  errno = 0;
  assert (full_write (-1, "x", 1) == -1 && errno == EBADF);
}

int
main (void)
{
  signal (SIGPIPE, SIG_IGN);
  test_pipe ();
  test_file ();
  printf ("test-full-rw: ok\n");
  return 0;
}
