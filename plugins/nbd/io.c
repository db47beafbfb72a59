/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin's data path: requests go upstream through libnbd's
 * asynchronous API, so a client's parallel requests stay parallel.
 *
 * Every command is issued (issue) with nbd_aio_* and a completion
 * callback, on the thread the server called us on.  One poller thread
 * per upstream connection watches the socket and runs libnbd's state
 * machine (nbd_aio_notify_read/write); when a reply arrives libnbd calls
 * the completion callback in the poller.  A command that left bytes
 * unsent kicks the poller through a pipe, so that it starts watching
 * for POLLOUT.  Two ways to wait for the reply:
 *
 *  - the synchronous callbacks (nbd_io_*: under a filter, with
 *    -D nbdkit.async=0, and for cache and extents) sleep on a semaphore
 *    that the completion posts;
 *  - the asynchronous ones (nbdkit_async_ops, include/nbdkit-async.h)
 *    return at once; the completion calls nbdkit_async_complete from
 *    the poller, so the worker goes back to reading the client and no
 *    thread waits per request.  Each such request has a record (struct
 *    aio_req) on its upstream's in-flight list, oldest first, which the
 *    poller looks at for request-timeout= and after a cancel.
 *
 * Both use the same flags and the same error mapping.  If the upstream
 * goes away, libnbd fails every command in flight (their callbacks see
 * ENOTCONN) and every later one at once; the client gets EIO and the
 * poller returns.  An upstream silent for request-timeout= seconds with
 * a request outstanding has its socket shut down, which fails them all
 * the same way.  Each completed request fires the probe
 * nbd_request_done (a failed one nbd_request_error first).
 *
 * Lock order: libnbd's handle lock (held while it runs a completion),
 * then up->lock, then the server's own (nbdkit_async_complete).  No
 * libnbd call is made holding up->lock.
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
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include <libnbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>

#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "nbd.h"
#include "now-ns.h"

NBDKIT_PROBE_SEMAPHORE (nbd_request_done);
NBDKIT_PROBE_SEMAPHORE (nbd_request_error);

/* Whether a request must note its ids and start for the probes. */
static bool
tracing_requests (void)
{
  return NBDKIT_PROBE_ENABLED (nbd_request_done) ||
    NBDKIT_PROBE_ENABLED (nbd_request_error);
}

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

/* OP_EXTENTS is issued by nbd_io_extents itself (it has a callback of
 * its own), not by issue.
 */
enum op {
  OP_PREAD, OP_PWRITE, OP_FLUSH, OP_TRIM, OP_ZERO, OP_CACHE, OP_EXTENTS,
};

static const char *const op_name[] = {
  [OP_PREAD] = "pread", [OP_PWRITE] = "pwrite", [OP_FLUSH] = "flush",
  [OP_TRIM] = "trim", [OP_ZERO] = "zero", [OP_CACHE] = "cache",
  [OP_EXTENTS] = "extents",
};

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

/* Drop the connection if its oldest asynchronous request is older than
 * request-timeout, or a cancel's grace is over with requests left.  The
 * shutdown makes libnbd fail every command in flight on the poller's
 * next turn.  (Synchronous requests time themselves: wait_for_answer.)
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

  in_poller = true;

  while (!atomic_load (&up->stopping) &&
         !nbd_aio_is_dead (nbd) && !nbd_aio_is_closed (nbd)) {
    unsigned dir = nbd_aio_get_direction (nbd);
    struct pollfd fds[2] = {
      { .fd = nbd_aio_get_fd (nbd), .events = 0 },
      { .fd = up->wake[0], .events = POLLIN },
    };
    /* Deadlines are looked at about once a second (every 50 ms after a
     * cancel); an idle upstream without request-timeout sleeps.
     */
    int timeout = atomic_load (&up->cancel_at) ? 50 :
      up->request_timeout > 0 ? 1000 : -1;
    uint64_t now;
    int r;

    if (dir & LIBNBD_AIO_DIRECTION_READ)
      fds[0].events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE)
      fds[0].events |= POLLOUT;
    if (fds[0].fd == -1)
      break;

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
    deliver (up);
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
  kick (up);
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

/* --- Issuing a command --------------------------------------------------- */

static struct upstream *
pick (void *handle)
{
  struct proxy *p = handle;

  if (p->n == 1)
    return p->up[0];
  return p->up[atomic_fetch_add_explicit (&p->next, 1, memory_order_relaxed)
               % p->n];
}

/* The server's flags as libnbd's, the same on both paths. */
static uint32_t
upstream_flags (enum op op, uint32_t flags)
{
  uint32_t f = 0;

  if ((flags & NBDKIT_FLAG_FUA) &&
      (op == OP_PWRITE || op == OP_TRIM || op == OP_ZERO))
    f |= LIBNBD_CMD_FLAG_FUA;
  if (op == OP_ZERO) {
    if (!(flags & NBDKIT_FLAG_MAY_TRIM))
      f |= LIBNBD_CMD_FLAG_NO_HOLE;
    if (flags & NBDKIT_FLAG_FAST_ZERO)
      f |= LIBNBD_CMD_FLAG_FAST_ZERO;
  }
  return f;
}

/* Send OP upstream with completion CB: libnbd's cookie, or -1 (then CB
 * is never called).  CB may run before this returns, on this thread.
 */
static int64_t
issue (struct upstream *up, enum op op, void *buf, uint32_t count,
       uint64_t offset, uint32_t flags, nbd_completion_callback cb)
{
  uint32_t f = upstream_flags (op, flags);
  int64_t cookie;

  switch (op) {
  case OP_PREAD:
    cookie = nbd_aio_pread (up->nbd, buf, count, offset, cb, f);
    break;
  case OP_PWRITE:
    cookie = nbd_aio_pwrite (up->nbd, buf, count, offset, cb, f);
    break;
  case OP_FLUSH:
    cookie = nbd_aio_flush (up->nbd, cb, f);
    break;
  case OP_TRIM:
    cookie = nbd_aio_trim (up->nbd, count, offset, cb, f);
    break;
  case OP_ZERO:
    cookie = nbd_aio_zero (up->nbd, count, offset, cb, f);
    break;
  case OP_CACHE:
    cookie = nbd_aio_cache (up->nbd, count, offset, cb, f);
    break;
  default:
    abort ();
  }
  /* Bytes left to send: make the poller watch for POLLOUT. */
  if (cookie != -1 &&
      (nbd_aio_get_direction (up->nbd) & LIBNBD_AIO_DIRECTION_WRITE))
    kick (up);
  return cookie;
}

/* After issue returned -1: the errno of the failure, reported. */
static int
issue_error (struct upstream *up, const char *op)
{
  int err = nbd_get_errno ();

  /* On a connection that has died libnbd refuses the command with
   * EINVAL ("invalid state"), which would tell the client that its own
   * request was wrong: it is the upstream that is gone (EIO).
   */
  if (nbd_aio_is_dead (up->nbd) || nbd_aio_is_closed (up->nbd)) {
    nbdkit_error ("%s: the upstream connection is lost", op);
    return ENOTCONN;
  }
  nbdkit_error ("%s: %s", op, nbd_get_error ());
  return err ? err : EIO;
}

/* Errors the NBD protocol carries pass through; anything else (the
 * upstream went away: ENOTCONN, ECONNRESET, EPIPE, ...) is EIO.
 */
static int
client_errno (int err)
{
  switch (err) {
  case 0:
  case EPERM: case EIO: case ENOMEM: case EINVAL: case ENOSPC:
  case EOVERFLOW: case ENOTSUP: case ESHUTDOWN:
    return err;
  default:
    return EIO;
  }
}

static void
probe_done (uint64_t conn_id, uint64_t cookie, const char *op, int err,
            uint64_t start_ns, uint64_t offset, uint32_t count)
{
  /* The errno has a probe of its own: bpftrace 0.17 reads only a
   * USDT probe's first six arguments.
   */
  if (err)
    NBDKIT_PROBE (nbd_request_error, conn_id, cookie, op, (int64_t) err);
  NBDKIT_PROBE (nbd_request_done, conn_id, cookie, op, now_ns () - start_ns,
                offset, (uint64_t) count);
}

/* --- The synchronous path ------------------------------------------------ */

/* What a waiting worker and the completion callback share. */
struct request {
  sem_t done;
  int err;                      /* the command's errno, 0 on success */
  const char *op;
  uint64_t offset;
  uint32_t count;
  uint64_t start_ns;            /* for the probe, 0 when nobody traces */
};

static void
request_init (struct request *r, enum op op, uint64_t offset,
              uint32_t count)
{
  sem_init (&r->done, 0, 0);
  r->err = 0;
  r->op = op_name[op];
  r->offset = offset;
  r->count = count;
  r->start_ns = tracing_requests () ? now_ns () : 0;
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

#define COMPLETION(r) \
  ((nbd_completion_callback) { .callback = request_complete, .user_data = (r) })

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

/* COOKIE is what issue returned.  Wait for the command to complete and
 * turn its outcome into the callback's result.
 */
static int
request_wait (struct upstream *up, struct request *r, int64_t cookie)
{
  if (cookie == -1)
    r->err = issue_error (up, r->op);
  else {
    wait_for_answer (up, r);
    if (r->err)
      nbdkit_error ("%s: upstream: %s", r->op, strerror (r->err));
  }
  sem_destroy (&r->done);

  if (r->start_ns)
    probe_done (nbdkit_connection_id (), nbdkit_request_cookie (), r->op,
                r->err, r->start_ns, r->offset, r->count);

  if (r->err) {
    nbdkit_set_error (client_errno (r->err));
    return -1;
  }
  return 0;
}

static int
sync_op (void *handle, enum op op, void *buf, uint32_t count,
         uint64_t offset, uint32_t flags)
{
  struct upstream *up = pick (handle);
  struct request r;

  request_init (&r, op, offset, count);
  return request_wait (up, &r, issue (up, op, buf, count, offset, flags,
                                      COMPLETION (&r)));
}

int
nbd_io_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  return sync_op (handle, OP_PREAD, buf, count, offset, flags);
}

int
nbd_io_pwrite (void *handle, const void *buf, uint32_t count,
               uint64_t offset, uint32_t flags)
{
  return sync_op (handle, OP_PWRITE, (void *) buf, count, offset, flags);
}

int
nbd_io_flush (void *handle, uint32_t flags)
{
  return sync_op (handle, OP_FLUSH, NULL, 0, 0, flags);
}

int
nbd_io_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return sync_op (handle, OP_TRIM, NULL, count, offset, flags);
}

int
nbd_io_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return sync_op (handle, OP_ZERO, NULL, count, offset, flags);
}

int
nbd_io_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  /* NBD_CMD_CACHE has no flags to pass on. */
  return sync_op (handle, OP_CACHE, NULL, count, offset, 0);
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
  int64_t cookie;
  int ret;

  request_init (&r, OP_EXTENTS, offset, count);
  cookie = nbd_aio_block_status (up->nbd, count, offset,
                                 (nbd_extent_callback) {
                                   .callback = extent_entries,
                                   .user_data = &ctx },
                                 COMPLETION (&r), f);
  if (cookie != -1 &&
      (nbd_aio_get_direction (up->nbd) & LIBNBD_AIO_DIRECTION_WRITE))
    kick (up);
  ret = request_wait (up, &r, cookie);
  if (ret == 0 && !ctx.seen) {
    nbdkit_error ("upstream answered block status without "
                  "base:allocation");
    nbdkit_set_error (EIO);
    return -1;
  }
  return ret;
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
  if (tracing_requests ()) {
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
  int err = *error;

  if (err)
    nbdkit_error ("%s: upstream: %s", op_name[a->op], strerror (err));
  if (a->trace_ns)
    probe_done (a->conn_id, a->cookie, op_name[a->op], err, a->trace_ns,
                a->offset, a->count);
  if (in_poller) {
    a->err = client_errno (err);
    a->done_next = NULL;
    if (done_tail)
      done_tail->done_next = a;
    else
      done_head = a;
    done_tail = a;
  }
  else {
    untrack (a);
    nbdkit_async_complete (req, client_errno (err));
  }
  return 1;
}

static int
aio_submit (void *handle, struct nbdkit_async_request *req, enum op op,
            void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct upstream *up = pick (handle);
  struct aio_req *a = track (up, req, op, count, offset);
  uint64_t trace_ns;
  int err;

  if (a == NULL) {
    nbdkit_error ("%s: malloc: %m", op_name[op]);
    nbdkit_set_error (ENOMEM);
    return -1;
  }
  trace_ns = a->trace_ns;       /* a may complete before issue returns */
  if (issue (up, op, buf, count, offset, flags,
             (nbd_completion_callback) { .callback = aio_complete,
                                         .user_data = a }) != -1)
    return 0;

  /* Refused: libnbd never calls the completion. */
  err = issue_error (up, op_name[op]);
  untrack (a);
  if (trace_ns)
    probe_done (nbdkit_connection_id (), nbdkit_request_cookie (),
                op_name[op], err, trace_ns, offset, count);
  nbdkit_set_error (client_errno (err));
  errno = client_errno (err);
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
    kick (p->up[i]);
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
