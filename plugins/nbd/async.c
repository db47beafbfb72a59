/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin's poller and its asynchronous data callbacks.
 *
 * Each upstream connection has one poller thread (started and stopped
 * by nbd.c) that moves its bytes and in which libnbd runs the
 * completions of both paths (io.c says how they fit together).  The
 * asynchronous callbacks (nbdkit_async_ops) issue their command and
 * return at once; each request has a record (struct aio_req) on its
 * upstream's in-flight list, oldest first, that the completion hands
 * back to the server from the poller, and that the poller looks at for
 * request-timeout= and after a cancel.
 *
 * Locks: up->lock protects the in-flight and spare lists; it is taken
 * inside libnbd's handle lock and never held across a libnbd call.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include <libnbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>

#include "nbd.h"
#include "now-ns.h"

/* The most requests one client connection has in flight on the
 * asynchronous path (the server's own default).  Spread over the
 * connections= upstream connections; the upstream queues what it does
 * not take at once in its socket, as with any client.
 */
#define NBD_ASYNC_MAX_IN_FLIGHT 256

/* After cancel (the client hung up with requests in flight), how long
 * the upstream connection has to answer them before it is dropped.
 */
#define CANCEL_GRACE_NS UINT64_C (200000000)

/* For deadlines counted in seconds: cheaper, a few ms coarse. */
static uint64_t
coarse_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec * UINT64_C (1000000000) + ts.tv_nsec;
}

/* One asynchronous request in flight upstream (or, on up->spare,
 * waiting to be used again: then only the first field counts, as the
 * link).
 */
struct aio_req {
  struct aio_req *next, *prev;  /* on the in-flight list */
  struct upstream *up;
  struct nbdkit_async_request *req;
  enum op op;
  uint32_t count;
  uint64_t offset;
  uint64_t start_ns;            /* coarse_ns, for request-timeout */
  uint64_t trace_ns;            /* now_ns, 0 when nobody traces */
  uint64_t conn_id, cookie;     /* for the probe */
  struct aio_req *done_next;    /* on the poller's batch */
  int err;                      /* the client's errno, once completed */
};

/* In a poller thread: the asynchronous requests libnbd completed during
 * one notify_read/write, delivered together once it returns (deliver),
 * so that libnbd's handle lock is not held meanwhile and the server's
 * replier, woken by the first, finds the others queued.
 */
static __thread bool in_poller;
static __thread struct aio_req *done_head, *done_tail;
static void deliver (struct upstream *up);

/* --- The poller ---------------------------------------------------------- */

/* Drop the connection if its oldest asynchronous request is older than
 * request-timeout, or a cancel's grace is over with requests left.  The
 * shutdown makes libnbd fail every command in flight on the poller's
 * next turn.  (Synchronous requests time themselves: sync.c.)
 */
static void
look_at_deadlines (struct upstream *up, uint64_t now)
{
  uint64_t cancel_at = atomic_load (&up->cancel_at);
  const char *why = NULL;
  int fd;

  pthread_mutex_lock (&up->lock);
  if (up->oldest) {
    if (up->request_timeout > 0 &&
        now - up->oldest->start_ns >=
        up->request_timeout * UINT64_C (1000000000))
      why = "timeout";
    else if (cancel_at && now >= cancel_at)
      why = "cancel";
  }
  else if (cancel_at)
    /* Everything was answered in time. */
    atomic_store (&up->cancel_at, 0);
  pthread_mutex_unlock (&up->lock);
  if (why == NULL)
    return;

  if (why[0] == 't')
    nbdkit_error ("no answer from the upstream in %u s: dropping the "
                  "connection (request-timeout=)", up->request_timeout);
  else
    nbdkit_debug ("the client is gone and the upstream has not answered "
                  "its requests: dropping the upstream connection");
  atomic_store (&up->cancel_at, 0);
  fd = nbd_aio_get_fd (up->nbd);
  if (fd >= 0)
    shutdown (fd, SHUT_RDWR);
}

static void *
poller (void *arg)
{
  struct upstream *up = arg;
  struct nbd_handle *nbd = up->nbd;
  uint64_t looked = coarse_ns ();
  /* Each libnbd call takes the handle's lock, which the workers issuing
   * commands hold as they send: a turn of the loop makes as few as it
   * can.  The socket stays the same for the connection's life, and a
   * connection that dies or closes has no direction to wait in, or
   * failed the notify before.
   */
  int fd = nbd_aio_get_fd (nbd);

  in_poller = true;

  while (!atomic_load (&up->stopping) && fd >= 0) {
    unsigned dir = nbd_aio_get_direction (nbd);
    struct pollfd fds[2] = {
      { .fd = fd, .events = 0 },
      { .fd = up->wake[0], .events = POLLIN },
    };
    /* Deadlines are looked at about once a second (every 50 ms after a
     * cancel); an idle upstream without request-timeout sleeps.
     */
    int timeout = atomic_load (&up->cancel_at) ? 50 :
      up->request_timeout > 0 ? 1000 : -1;
    uint64_t now;
    int r;

    if (dir == 0 && (nbd_aio_is_dead (nbd) || nbd_aio_is_closed (nbd)))
      break;
    if (dir & LIBNBD_AIO_DIRECTION_READ)
      fds[0].events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE)
      fds[0].events |= POLLOUT;

    r = poll (fds, 2, timeout);
    if (r == -1) {
      if (errno != EINTR) {
        /* Returning would leave the commands in flight unanswered:
         * try again a little later.
         */
        nbdkit_error ("poll: %m");
        usleep (10000);
      }
      continue;
    }

    if (timeout >= 0) {
      now = coarse_ns ();
      if (r == 0 || now - looked >= UINT64_C (1000000000) ||
          atomic_load (&up->cancel_at)) {
        looked = now;
        look_at_deadlines (up, now);
      }
    }

    if (fds[1].revents & POLLIN) {
      char buf[64];
      while (read (up->wake[0], buf, sizeof buf) > 0)
        ;
    }

    /* Reading first: a reply may change what there is to write. */
    r = 0;
    if ((fds[0].revents & POLLIN) ||
        ((fds[0].revents & (POLLHUP | POLLERR)) &&
         (dir & LIBNBD_AIO_DIRECTION_READ)))
      r = nbd_aio_notify_read (nbd);
    else if (fds[0].revents & (POLLOUT | POLLHUP | POLLERR))
      r = nbd_aio_notify_write (nbd);
    if (r == -1)
      nbdkit_debug ("upstream: %s", nbd_get_error ());
    deliver (up);
    if (r == -1 && (nbd_aio_is_dead (nbd) || nbd_aio_is_closed (nbd)))
      break;
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
  pthread_mutex_init (&up->lock, NULL);
  up->oldest = up->newest = up->spare = NULL;
  up->n_spare = 0;
  atomic_store (&up->cancel_at, 0);
  atomic_store (&up->stopping, false);
  err = pthread_create (&up->poller, NULL, poller, up);
  if (err != 0) {
    errno = err;
    nbdkit_error ("pthread_create: %m");
    pthread_mutex_destroy (&up->lock);
    close (up->wake[0]);
    close (up->wake[1]);
    up->wake[0] = up->wake[1] = -1;
    return -1;
  }
  up->poller_running = true;
  return 0;
}

/* Called with no command in flight (the server closes a connection only
 * once its requests are done, the asynchronous ones included).
 */
void
nbd_up_stop_poller (struct upstream *up)
{
  if (!up->poller_running)
    return;
  atomic_store (&up->stopping, true);
  nbd_up_kick (up);
  pthread_join (up->poller, NULL);
  up->poller_running = false;
  close (up->wake[0]);
  close (up->wake[1]);
  up->wake[0] = up->wake[1] = -1;
  while (up->spare) {
    struct aio_req *a = up->spare;
    up->spare = a->next;
    free (a);
  }
  pthread_mutex_destroy (&up->lock);
}

/* --- The asynchronous path ----------------------------------------------- */

/* A record for REQ at the end of UP's in-flight list (NULL: no
 * memory).
 */
static struct aio_req *
track (struct upstream *up, struct nbdkit_async_request *req, enum op op,
       uint32_t count, uint64_t offset)
{
  struct aio_req *a;

  pthread_mutex_lock (&up->lock);
  a = up->spare;
  if (a) {
    up->spare = a->next;
    up->n_spare--;
  }
  pthread_mutex_unlock (&up->lock);
  if (a == NULL && (a = malloc (sizeof *a)) == NULL)
    return NULL;

  a->up = up;
  a->req = req;
  a->op = op;
  a->count = count;
  a->offset = offset;
  a->start_ns = up->request_timeout > 0 ? coarse_ns () : 0;
  a->trace_ns = 0;
  if (nbd_io_tracing ()) {
    a->conn_id = nbdkit_connection_id ();
    a->cookie = nbdkit_request_cookie ();
    a->trace_ns = now_ns ();
  }

  pthread_mutex_lock (&up->lock);
  a->next = NULL;
  a->prev = up->newest;
  if (up->newest)
    up->newest->next = a;
  else
    up->oldest = a;
  up->newest = a;
  pthread_mutex_unlock (&up->lock);
  return a;
}

/* With up->lock held: A off the in-flight list, kept for the next
 * request if there is room (else returned, for the caller to free
 * outside the lock).
 */
static struct aio_req *
unlink_locked (struct upstream *up, struct aio_req *a)
{
  if (a->prev)
    a->prev->next = a->next;
  else
    up->oldest = a->next;
  if (a->next)
    a->next->prev = a->prev;
  else
    up->newest = a->prev;
  if (up->n_spare >= NBD_ASYNC_MAX_IN_FLIGHT)
    return a;
  a->next = up->spare;
  up->spare = a;
  up->n_spare++;
  return NULL;
}

static void
untrack (struct aio_req *a)
{
  struct upstream *up = a->up;

  pthread_mutex_lock (&up->lock);
  a = unlink_locked (up, a);
  pthread_mutex_unlock (&up->lock);
  free (a);
}

/* The poller's batch: complete each request, then recycle the records
 * under one lock.  A record stays off the spare list until its request
 * is completed, as nothing else may reuse it before.
 */
static void
deliver (struct upstream *up)
{
  struct aio_req *list = done_head, *a, *next, *extra = NULL;

  if (list == NULL)
    return;
  done_head = done_tail = NULL;
  for (a = list; a; a = a->done_next)
    nbdkit_async_complete (a->req, a->err);
  pthread_mutex_lock (&up->lock);
  for (a = list; a; a = next) {
    next = a->done_next;
    if (unlink_locked (up, a)) {
      a->done_next = extra;
      extra = a;
    }
  }
  pthread_mutex_unlock (&up->lock);
  for (a = extra; a; a = next) {
    next = a->done_next;
    free (a);
  }
}

/* libnbd's completion of an asynchronous request: in the poller, or in
 * the submitting worker if the connection died while it sent.
 */
static int
aio_complete (void *opaque, int *error)
{
  struct aio_req *a = opaque;
  struct nbdkit_async_request *req = a->req;
  const char *op = nbd_io_op_name[a->op];
  int err = *error;

  if (err)
    nbdkit_error ("%s: upstream: %s", op, strerror (err));
  if (a->trace_ns)
    nbd_io_probe_done (a->conn_id, a->cookie, op, err, a->trace_ns,
                       a->offset, a->count);
  if (in_poller) {
    a->err = nbd_io_client_errno (err);
    a->done_next = NULL;
    if (done_tail)
      done_tail->done_next = a;
    else
      done_head = a;
    done_tail = a;
  }
  else {
    untrack (a);
    nbdkit_async_complete (req, nbd_io_client_errno (err));
  }
  return 1;
}

static int
aio_submit (void *handle, struct nbdkit_async_request *req, enum op op,
            void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct upstream *up = nbd_up_pick (handle);
  struct aio_req *a = track (up, req, op, count, offset);
  uint64_t trace_ns;
  int err;

  if (a == NULL) {
    nbdkit_error ("%s: malloc: %m", nbd_io_op_name[op]);
    nbdkit_set_error (ENOMEM);
    return -1;
  }
  trace_ns = a->trace_ns;       /* a may complete before issue returns */
  if (nbd_up_issue (up, op, buf, count, offset, flags,
                    (nbd_completion_callback) { .callback = aio_complete,
                                                .user_data = a }) != -1)
    return 0;

  /* Refused: libnbd never calls the completion. */
  err = nbd_up_issue_error (up, nbd_io_op_name[op]);
  untrack (a);
  if (trace_ns)
    nbd_io_probe_done (nbdkit_connection_id (), nbdkit_request_cookie (),
                       nbd_io_op_name[op], err, trace_ns, offset, count);
  nbdkit_set_error (nbd_io_client_errno (err));
  errno = nbd_io_client_errno (err);
  return -1;
}

static int
aio_pread (void *handle, struct nbdkit_async_request *req, void *buf,
           uint32_t count, uint64_t offset, uint32_t flags)
{
  return aio_submit (handle, req, OP_PREAD, buf, count, offset, flags);
}

static int
aio_pwrite (void *handle, struct nbdkit_async_request *req, const void *buf,
            uint32_t count, uint64_t offset, uint32_t flags)
{
  /* libnbd only reads BUF, until the completion. */
  return aio_submit (handle, req, OP_PWRITE, (void *) buf, count, offset,
                     flags);
}

static int
aio_flush (void *handle, struct nbdkit_async_request *req, uint32_t flags)
{
  return aio_submit (handle, req, OP_FLUSH, NULL, 0, 0, flags);
}

static int
aio_trim (void *handle, struct nbdkit_async_request *req, uint32_t count,
          uint64_t offset, uint32_t flags)
{
  return aio_submit (handle, req, OP_TRIM, NULL, count, offset, flags);
}

static int
aio_zero (void *handle, struct nbdkit_async_request *req, uint32_t count,
          uint64_t offset, uint32_t flags)
{
  return aio_submit (handle, req, OP_ZERO, NULL, count, offset, flags);
}

/* The client hung up with requests in flight.  Commands already sent
 * cannot be called back, and libnbd owns their buffers until they
 * complete; so each upstream connection of this client gets a short
 * grace to answer, after which the poller drops it (libnbd then fails
 * what is left at once).  A shared connection serves other clients
 * too: it is left alone, and request-timeout= bounds the wait.
 */
static void
aio_cancel (void *handle)
{
  struct proxy *p = handle;
  uint64_t at = coarse_ns () + CANCEL_GRACE_NS;
  unsigned i;

  if (nbd_cfg.shared) {
    nbdkit_debug ("cancel: the upstream connection is shared: its "
                  "requests are left to finish");
    return;
  }
  for (i = 0; i < p->n; i++) {
    atomic_store (&p->up[i]->cancel_at, at);
    nbd_up_kick (p->up[i]);
  }
}

/* Only the server looks this up, by name. */
NBDKIT_DLL_PUBLIC const struct nbdkit_async_ops nbdkit_async_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .max_in_flight = NBD_ASYNC_MAX_IN_FLIGHT,
  .pread = aio_pread,
  .pwrite = aio_pwrite,
  .flush = aio_flush,
  .trim = aio_trim,
  .zero = aio_zero,
  .cancel = aio_cancel,
};
