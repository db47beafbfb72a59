/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin's data path: requests go upstream through libnbd's
 * asynchronous API, so a client's parallel requests stay parallel.
 *
 * A worker thread issues its command (nbd_aio_*) with a completion
 * callback and sleeps on a semaphore of its own.  One poller thread per
 * upstream connection watches the socket and runs libnbd's state
 * machine (nbd_aio_notify_read/write); when a reply arrives libnbd calls
 * the completion callback in the poller, which records the error and
 * posts the semaphore.  A worker whose command left bytes unsent kicks
 * the poller through a pipe, so that it starts watching for POLLOUT.
 *
 * If the upstream goes away, libnbd fails every command in flight (their
 * callbacks see ENOTCONN) and every later one at once; the client gets
 * EIO and the poller returns.  Each completed request fires the probe
 * nbd_request_done.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include <libnbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "nbd.h"

NBDKIT_PROBE_SEMAPHORE (nbd_request_done);

/* --- The poller ---------------------------------------------------------- */

static void
kick (struct upstream *up)
{
  char c = 0;

  /* The pipe is non-blocking: if it is full, the poller is already due
   * to wake, which is all a kick is for.
   */
  if (write (up->wake[1], &c, 1) == -1 && errno != EAGAIN)
    nbdkit_debug ("kicking the poller: %m");
}

static void *
poller (void *arg)
{
  struct upstream *up = arg;
  struct nbd_handle *nbd = up->nbd;

  while (!atomic_load (&up->stopping) &&
         !nbd_aio_is_dead (nbd) && !nbd_aio_is_closed (nbd)) {
    unsigned dir = nbd_aio_get_direction (nbd);
    struct pollfd fds[2] = {
      { .fd = nbd_aio_get_fd (nbd), .events = 0 },
      { .fd = up->wake[0], .events = POLLIN },
    };
    if (dir & LIBNBD_AIO_DIRECTION_READ)
      fds[0].events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE)
      fds[0].events |= POLLOUT;
    if (fds[0].fd == -1)
      break;

    if (poll (fds, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      nbdkit_error ("poll: %m");
      break;
    }

    if (fds[1].revents & POLLIN) {
      char buf[64];
      while (read (up->wake[0], buf, sizeof buf) > 0)
        ;
    }

    /* Reading first: a reply may change what there is to write. */
    if ((fds[0].revents & POLLIN) ||
        ((fds[0].revents & (POLLHUP | POLLERR)) &&
         (dir & LIBNBD_AIO_DIRECTION_READ))) {
      if (nbd_aio_notify_read (nbd) == -1)
        nbdkit_debug ("upstream: %s", nbd_get_error ());
    }
    else if (fds[0].revents & (POLLOUT | POLLHUP | POLLERR)) {
      if (nbd_aio_notify_write (nbd) == -1)
        nbdkit_debug ("upstream: %s", nbd_get_error ());
    }
  }

  if (nbd_aio_is_dead (nbd))
    nbdkit_debug ("upstream connection is dead");
  return NULL;
}

int
nbd_up_start_poller (struct upstream *up)
{
  int err;

  if (pipe2 (up->wake, O_CLOEXEC | O_NONBLOCK) == -1) {
    nbdkit_error ("pipe2: %m");
    return -1;
  }
  atomic_store (&up->stopping, false);
  err = pthread_create (&up->poller, NULL, poller, up);
  if (err != 0) {
    errno = err;
    nbdkit_error ("pthread_create: %m");
    close (up->wake[0]);
    close (up->wake[1]);
    up->wake[0] = up->wake[1] = -1;
    return -1;
  }
  up->poller_running = true;
  return 0;
}

/* Called with no command in flight (the server closes a connection only
 * once its requests are done).
 */
void
nbd_up_stop_poller (struct upstream *up)
{
  if (!up->poller_running)
    return;
  atomic_store (&up->stopping, true);
  kick (up);
  pthread_join (up->poller, NULL);
  up->poller_running = false;
  close (up->wake[0]);
  close (up->wake[1]);
  up->wake[0] = up->wake[1] = -1;
}

/* --- One request --------------------------------------------------------- */

static struct upstream *
pick (void *handle)
{
  struct proxy *p = handle;

  if (p->n == 1)
    return p->up[0];
  return p->up[atomic_fetch_add_explicit (&p->next, 1, memory_order_relaxed)
               % p->n];
}

/* What a waiting worker and the completion callback share. */
struct request {
  sem_t done;
  int err;                      /* the command's errno, 0 on success */
  const char *op;
  uint64_t offset;
  uint32_t count;
  uint64_t start_ns;            /* for the probe, 0 when nobody traces */
};

static uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * UINT64_C (1000000000) + ts.tv_nsec;
}

static void
request_init (struct request *r, const char *op, uint64_t offset,
              uint32_t count)
{
  sem_init (&r->done, 0, 0);
  r->err = 0;
  r->op = op;
  r->offset = offset;
  r->count = count;
  r->start_ns = NBDKIT_PROBE_ENABLED (nbd_request_done) ? now_ns () : 0;
}

/* libnbd calls this in the poller (or, if the command fails at once,
 * in the worker) when the command is over.  Returning 1 retires it.
 */
static int
request_complete (void *opaque, int *error)
{
  struct request *r = opaque;

  r->err = *error;
  sem_post (&r->done);
  return 1;
}

/* Errors the NBD protocol carries pass through; anything else (the
 * upstream went away: ENOTCONN, ECONNRESET, EPIPE, ...) is EIO.
 */
static int
client_errno (int err)
{
  switch (err) {
  case EPERM: case EIO: case ENOMEM: case EINVAL: case ENOSPC:
  case EOVERFLOW: case ENOTSUP: case ESHUTDOWN:
    return err;
  default:
    return EIO;
  }
}

/* Wait for the command's completion.  An upstream that has not
 * answered within request-timeout is taken for hung: its socket is shut
 * down, which makes libnbd fail every command in flight on it, this one
 * included, so the wait after that is short.
 */
static void
wait_for_answer (struct upstream *up, struct request *r)
{
  if (up->request_timeout > 0) {
    struct timespec deadline;
    int fd;

    clock_gettime (CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += up->request_timeout;
    for (;;) {
      if (sem_clockwait (&r->done, CLOCK_MONOTONIC, &deadline) == 0)
        return;
      if (errno == EINTR)
        continue;
      if (errno != ETIMEDOUT) {
        nbdkit_error ("sem_clockwait: %m");
        break;
      }
      nbdkit_error ("%s: no answer from the upstream in %u s: dropping "
                    "the connection (request-timeout=)",
                    r->op, up->request_timeout);
      fd = nbd_aio_get_fd (up->nbd);
      if (fd >= 0)
        shutdown (fd, SHUT_RDWR);
      kick (up);
      break;
    }
  }
  while (sem_wait (&r->done) == -1 && errno == EINTR)
    ;
}

/* COOKIE is what nbd_aio_* returned.  Wait for the command to complete
 * and turn its outcome into the callback's result.
 */
static int
request_wait (struct upstream *up, struct request *r, int64_t cookie)
{
  if (cookie == -1) {
    int err = nbd_get_errno ();
    /* On a connection that has died libnbd refuses the command with
     * EINVAL ("invalid state"), which would tell the client that its
     * own request was wrong: it is the upstream that is gone (EIO).
     */
    if (nbd_aio_is_dead (up->nbd) || nbd_aio_is_closed (up->nbd)) {
      nbdkit_error ("%s: the upstream connection is lost", r->op);
      err = ENOTCONN;
    }
    else
      nbdkit_error ("%s: %s", r->op, nbd_get_error ());
    r->err = err ? err : EIO;
  }
  else {
    /* Bytes left to send: make the poller watch for POLLOUT. */
    if (nbd_aio_get_direction (up->nbd) & LIBNBD_AIO_DIRECTION_WRITE)
      kick (up);
    wait_for_answer (up, r);
    if (r->err)
      nbdkit_error ("%s: upstream: %s", r->op, strerror (r->err));
  }
  sem_destroy (&r->done);

  if (r->start_ns)
    /* errno and latency before offset and count: bpftrace 0.17 reads
     * only a USDT probe's first six arguments.
     */
    NBDKIT_PROBE (nbd_request_done, nbdkit_connection_id (),
                  nbdkit_request_cookie (), r->op, (int64_t) r->err,
                  now_ns () - r->start_ns, r->offset, (uint64_t) r->count);

  if (r->err) {
    nbdkit_set_error (client_errno (r->err));
    return -1;
  }
  return 0;
}

#define COMPLETION(r) \
  ((nbd_completion_callback) { .callback = request_complete, .user_data = (r) })

int
nbd_io_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  struct upstream *up = pick (handle);
  struct request r;

  request_init (&r, "pread", offset, count);
  return request_wait (up, &r,
                       nbd_aio_pread (up->nbd, buf, count, offset,
                                      COMPLETION (&r), 0));
}

int
nbd_io_pwrite (void *handle, const void *buf, uint32_t count,
               uint64_t offset, uint32_t flags)
{
  struct upstream *up = pick (handle);
  struct request r;
  uint32_t f = (flags & NBDKIT_FLAG_FUA) ? LIBNBD_CMD_FLAG_FUA : 0;

  request_init (&r, "pwrite", offset, count);
  return request_wait (up, &r,
                       nbd_aio_pwrite (up->nbd, buf, count, offset,
                                       COMPLETION (&r), f));
}

int
nbd_io_flush (void *handle, uint32_t flags)
{
  struct upstream *up = pick (handle);
  struct request r;

  request_init (&r, "flush", 0, 0);
  return request_wait (up, &r, nbd_aio_flush (up->nbd, COMPLETION (&r), 0));
}

int
nbd_io_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct upstream *up = pick (handle);
  struct request r;
  uint32_t f = (flags & NBDKIT_FLAG_FUA) ? LIBNBD_CMD_FLAG_FUA : 0;

  request_init (&r, "trim", offset, count);
  return request_wait (up, &r,
                       nbd_aio_trim (up->nbd, count, offset,
                                     COMPLETION (&r), f));
}

int
nbd_io_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct upstream *up = pick (handle);
  struct request r;
  uint32_t f = 0;

  if (flags & NBDKIT_FLAG_FUA)
    f |= LIBNBD_CMD_FLAG_FUA;
  if (!(flags & NBDKIT_FLAG_MAY_TRIM))
    f |= LIBNBD_CMD_FLAG_NO_HOLE;
  if (flags & NBDKIT_FLAG_FAST_ZERO)
    f |= LIBNBD_CMD_FLAG_FAST_ZERO;

  request_init (&r, "zero", offset, count);
  return request_wait (up, &r,
                       nbd_aio_zero (up->nbd, count, offset,
                                     COMPLETION (&r), f));
}

int
nbd_io_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct upstream *up = pick (handle);
  struct request r;

  request_init (&r, "cache", offset, count);
  return request_wait (up, &r,
                       nbd_aio_cache (up->nbd, count, offset,
                                      COMPLETION (&r), 0));
}

/* The upstream's base:allocation answer, added to the server's list.
 * The state flags have the same values in NBD and in nbdkit
 * (hole = 1, zero = 2); other bits are not ours to pass on.
 */
struct extents_ctx {
  struct nbdkit_extents *extents;
  bool seen;
};

static int
extent_entries (void *opaque, const char *metacontext, uint64_t offset,
                uint32_t *entries, size_t nr_entries, int *error)
{
  struct extents_ctx *ctx = opaque;
  size_t i;

  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0)
    return 0;
  if (ctx->seen) {
    nbdkit_debug ("upstream sent base:allocation twice, ignored");
    return 0;
  }
  ctx->seen = true;
  for (i = 0; i + 1 < nr_entries; i += 2) {
    uint32_t type = entries[i + 1] & (NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
    if (nbdkit_add_extent (ctx->extents, offset, entries[i], type) == -1) {
      *error = errno ? errno : EIO;
      return -1;
    }
    offset += entries[i];
  }
  return 0;
}

int
nbd_io_extents (void *handle, uint32_t count, uint64_t offset,
                uint32_t flags, struct nbdkit_extents *extents)
{
  struct upstream *up = pick (handle);
  struct request r;
  struct extents_ctx ctx = { .extents = extents };
  uint32_t f = (flags & NBDKIT_FLAG_REQ_ONE) ? LIBNBD_CMD_FLAG_REQ_ONE : 0;
  int ret;

  request_init (&r, "extents", offset, count);
  ret = request_wait (up, &r,
                      nbd_aio_block_status (up->nbd, count, offset,
                                            (nbd_extent_callback) {
                                              .callback = extent_entries,
                                              .user_data = &ctx },
                                            COMPLETION (&r), f));
  if (ret == 0 && !ctx.seen) {
    nbdkit_error ("upstream answered block status without "
                  "base:allocation");
    nbdkit_set_error (EIO);
    return -1;
  }
  return ret;
}
