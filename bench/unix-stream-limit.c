/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* bench/unix-stream-limit.c: the ceiling a stream socket puts on 1 MiB
 * transfers on this machine, for bench/compare.sh.
 *
 *   unix-stream-limit unix|unix-grown|tcp SECONDS
 *
 * A writer pushes 1 MiB buffers into one stream (a Unix socketpair, or a
 * TCP connection over 127.0.0.1) for SECONDS, a reader thread receives
 * them into a 1 MiB buffer and discards them.  Prints the reader's rate
 * as "MiB/s N".  No NBD, no copying into storage: what a server's 1 MiB
 * sequential read or write can at best approach over that transport.
 * unix-grown: the writer's send buffer grown as our server grows its
 * own on a Unix connection (UNIX_SNDBUF in server/sockets.c), the limit
 * for its reads; plain unix keeps the default, as a client does.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (1024 * 1024)
#define GROWN_SNDBUF (1024 * 1024)      /* as UNIX_SNDBUF */

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A connected pair of stream sockets: fds[0] for the reader, fds[1] for
 * the writer.
 */
static int
stream_pair (const char *kind, int fds[2])
{
  struct sockaddr_in addr = { .sin_family = AF_INET };
  socklen_t len = sizeof addr;
  int lfd;

  if (strcmp (kind, "unix") == 0)
    return socketpair (AF_UNIX, SOCK_STREAM, 0, fds);
  if (strcmp (kind, "unix-grown") == 0) {
    int v = GROWN_SNDBUF;
    if (socketpair (AF_UNIX, SOCK_STREAM, 0, fds) == -1)
      return -1;
    return setsockopt (fds[1], SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
  }
  if (strcmp (kind, "tcp") != 0) {
    errno = EINVAL;
    return -1;
  }
  addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  lfd = socket (AF_INET, SOCK_STREAM, 0);
  if (lfd == -1 ||
      bind (lfd, (struct sockaddr *) &addr, sizeof addr) == -1 ||
      getsockname (lfd, (struct sockaddr *) &addr, &len) == -1 ||
      listen (lfd, 1) == -1)
    return -1;
  fds[1] = socket (AF_INET, SOCK_STREAM, 0);
  if (fds[1] == -1 ||
      connect (fds[1], (struct sockaddr *) &addr, sizeof addr) == -1)
    return -1;
  fds[0] = accept (lfd, NULL, NULL);
  close (lfd);
  return fds[0] == -1 ? -1 : 0;
}

static int
reader (int fd, int report)
{
  char *buf = malloc (BUF_SIZE);
  unsigned long long total = 0;
  double start = 0;
  ssize_t r;

  if (buf == NULL)
    return 1;
  while ((r = read (fd, buf, BUF_SIZE)) != 0) {
    if (r == -1) {
      if (errno == EINTR)
        continue;
      perror ("read");
      return 1;
    }
    if (start == 0)
      start = now ();
    total += r;
  }
  if (dprintf (report, "MiB/s %.1f\n",
               total / 1048576.0 / (now () - start)) < 0)
    return 1;
  return 0;
}

static int
writer (int fd, double seconds)
{
  char *buf = malloc (BUF_SIZE);
  double end = now () + seconds;
  size_t done;
  ssize_t r;

  if (buf == NULL)
    return 1;
  memset (buf, 0x5a, BUF_SIZE);
  while (now () < end) {
    for (done = 0; done < BUF_SIZE; done += r) {
      r = write (fd, buf + done, BUF_SIZE - done);
      if (r == -1) {
        if (errno == EINTR) {
          r = 0;
          continue;
        }
        perror ("write");
        return 1;
      }
    }
  }
  close (fd);
  return 0;
}

struct reader_args {
  int fd;
  int status;
};

static void *
reader_thread (void *arg)
{
  struct reader_args *a = arg;
  a->status = reader (a->fd, STDOUT_FILENO);
  return NULL;
}

int
main (int argc, char *argv[])
{
  int fds[2];
  double seconds;
  pthread_t thread;

  if (argc != 3 || (seconds = atof (argv[2])) <= 0) {
    fprintf (stderr, "usage: %s unix|unix-grown|tcp SECONDS\n", argv[0]);
    exit (2);
  }
  if (stream_pair (argv[1], fds) == -1) {
    perror (argv[1]);
    exit (1);
  }
  /* The reader runs in a thread of its own, as a client's receiving
   * thread would: the two ends are on the two CPUs either way.
   */
  struct reader_args ra = { .fd = fds[0] };
  int e = pthread_create (&thread, NULL, reader_thread, &ra);
  if (e != 0) {
    errno = e;
    perror ("pthread_create");
    exit (1);
  }
  if (writer (fds[1], seconds) != 0)
    exit (1);
  pthread_join (thread, NULL);
  exit (ra.status == 0 ? 0 : 1);
}
