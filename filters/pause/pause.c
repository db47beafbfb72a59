/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The pause filter: hold new requests while paused, through a Unix
 * socket (pause-control=) that takes one-byte commands: 'p' pauses
 * (answered 'P' once the requests already in flight have finished),
 * 'r' resumes (answered 'R'), anything else is answered 'X'.
 *
 * The socket is made in .get_ready, served by one thread started in
 * .after_fork (one control client at a time) and removed at .unload.
 * Every data request passes begin_request and end_request.
 *
 * Lock: `lock' guards paused, in_flight and held; `cond' is broadcast
 * whenever one of them changes in a way a waiter cares about.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"

static char *control_path;
static int listen_fd = -1;
static int stop_pipe[2] = { -1, -1 };   /* written at unload */
static pthread_t control_thread;
static bool thread_started;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool paused;
static uint64_t in_flight;      /* requests between begin and end */
static uint64_t held;           /* requests that waited in this pause */

static int
pause_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  if (strcmp (key, "pause-control") == 0) {
    struct sockaddr_un sun;
    size_t len = strlen (value);
    if (len == 0 || len >= sizeof sun.sun_path) {
      nbdkit_error ("pause-control: socket path must be 1 to %zu bytes "
                    "long, not %zu", sizeof sun.sun_path - 1, len);
      return -1;
    }
    free (control_path);
    control_path = strdup (value);
    if (control_path == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

static int
pause_config_complete (nbdkit_next_config_complete *next,
                       nbdkit_backend *nxdata)
{
  if (control_path == NULL) {
    nbdkit_error ("pause-control: the control socket was not set");
    return -1;
  }
  return next (nxdata);
}

#define pause_config_help \
  "pause-control=SOCKET      The control socket (required)."

static int
pause_get_ready (int thread_model)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };

  strcpy (sun.sun_path, control_path);  /* length checked in config */
  listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd == -1) {
    nbdkit_error ("pause-control: socket: %m");
    return -1;
  }
  unlink (control_path);
  if (bind (listen_fd, (struct sockaddr *) &sun, sizeof sun) == -1) {
    nbdkit_error ("pause-control: bind: %s: %m", control_path);
    return -1;
  }
  if (listen (listen_fd, 4) == -1) {
    nbdkit_error ("pause-control: listen: %m");
    return -1;
  }
  if (pipe2 (stop_pipe, O_CLOEXEC) == -1) {
    nbdkit_error ("pause-control: pipe2: %m");
    return -1;
  }
  return 0;
}

/* Wait until fd is readable; false if the filter is being unloaded. */
static bool
wait_readable (int fd)
{
  struct pollfd fds[2] = {
    { .fd = fd, .events = POLLIN },
    { .fd = stop_pipe[0], .events = POLLIN },
  };
  for (;;) {
    if (poll (fds, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      nbdkit_error ("pause-control: poll: %m");
      return false;
    }
    if (fds[1].revents)
      return false;
    if (fds[0].revents)
      return true;
  }
}

static char
do_pause (void)
{
  LOCK_FOR_SCOPE (&lock);
  if (!paused) {
    uint64_t draining = in_flight;
    paused = true;
    held = 0;
    nbdkit_debug ("pause: pausing, waiting for %" PRIu64
                  " requests to finish", draining);
    while (in_flight > 0)
      pthread_cond_wait (&cond, &lock);
    NBDKIT_PROBE (pause_paused, draining);
    nbdkit_debug ("pause: paused");
  }
  return 'P';
}

static char
do_resume (void)
{
  LOCK_FOR_SCOPE (&lock);
  if (paused) {
    /* Read into a local: a probe argument naming a global is a
     * %rip-relative operand, which some tracers misread in a .so.
     */
    uint64_t n = held;
    held = 0;
    paused = false;
    pthread_cond_broadcast (&cond);
    NBDKIT_PROBE (pause_resumed, n);
    nbdkit_debug ("pause: resumed (%" PRIu64 " requests held)", n);
  }
  return 'R';
}

/* Serve one control client until it hangs up. */
static void
serve (int fd)
{
  char c;
  ssize_t n;

  while (wait_readable (fd)) {
    n = read (fd, &c, 1);
    if (n == -1 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    char reply = c == 'p' ? do_pause () : c == 'r' ? do_resume () : 'X';
    if (write (fd, &reply, 1) != 1)
      return;
  }
}

static void *
control_main (void *arg)
{
  while (wait_readable (listen_fd)) {
    int fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1) {
      if (errno != EINTR && errno != ECONNABORTED)
        nbdkit_error ("pause-control: accept: %m");
      continue;
    }
    serve (fd);
    close (fd);
  }
  return NULL;
}

static int
pause_after_fork (nbdkit_backend *backend)
{
  int err = pthread_create (&control_thread, NULL, control_main, NULL);
  if (err) {
    errno = err;
    nbdkit_error ("pause-control: pthread_create: %m");
    return -1;
  }
  thread_started = true;
  return 0;
}

static void
pause_unload (void)
{
  if (thread_started) {
    char c = 0;
    if (write (stop_pipe[1], &c, 1) == 1)
      pthread_join (control_thread, NULL);
  }
  if (listen_fd >= 0) {
    close (listen_fd);
    unlink (control_path);
  }
  for (int i = 0; i < 2; i++)
    if (stop_pipe[i] >= 0)
      close (stop_pipe[i]);
  free (control_path);
}

static void
begin_request (void)
{
  LOCK_FOR_SCOPE (&lock);
  if (paused) {
    held++;
    while (paused)
      pthread_cond_wait (&cond, &lock);
  }
  in_flight++;
}

static void
end_request (void)
{
  LOCK_FOR_SCOPE (&lock);
  if (--in_flight == 0 && paused)
    pthread_cond_broadcast (&cond);
}

static int
pause_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  begin_request ();
  int r = next->pread (next, buf, count, offset, flags, err);
  end_request ();
  return r;
}

static int
pause_pwrite (nbdkit_next *next, void *handle, const void *buf,
              uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  begin_request ();
  int r = next->pwrite (next, buf, count, offset, flags, err);
  end_request ();
  return r;
}

static int
pause_zero (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  begin_request ();
  int r = next->zero (next, count, offset, flags, err);
  end_request ();
  return r;
}

static int
pause_trim (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  begin_request ();
  int r = next->trim (next, count, offset, flags, err);
  end_request ();
  return r;
}

static int
pause_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  begin_request ();
  int r = next->flush (next, flags, err);
  end_request ();
  return r;
}

static int
pause_extents (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags,
               struct nbdkit_extents *extents, int *err)
{
  begin_request ();
  int r = next->extents (next, count, offset, flags, extents, err);
  end_request ();
  return r;
}

static int
pause_cache (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  begin_request ();
  int r = next->cache (next, count, offset, flags, err);
  end_request ();
  return r;
}

static struct nbdkit_filter filter = {
  .name = "pause",
  .longname = "nbdkit pause filter",
  .unload = pause_unload,
  .config = pause_config,
  .config_complete = pause_config_complete,
  .config_help = pause_config_help,
  .get_ready = pause_get_ready,
  .after_fork = pause_after_fork,
  .pread = pause_pread,
  .pwrite = pause_pwrite,
  .zero = pause_zero,
  .trim = pause_trim,
  .flush = pause_flush,
  .extents = pause_extents,
  .cache = pause_cache,
};

NBDKIT_REGISTER_FILTER (filter)
