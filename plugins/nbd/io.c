/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin's data path: requests go upstream through libnbd's
 * asynchronous API, so a client's parallel requests stay parallel.
 *
 * Every command is issued (nbd_up_issue, here) with nbd_aio_* and a
 * completion callback, on the thread the server called us on.  One
 * poller thread per upstream connection (async.c) watches the socket
 * and runs libnbd's state machine (nbd_aio_notify_read/write); when a
 * reply arrives libnbd calls the completion callback in the poller.  A
 * command that left bytes unsent kicks the poller through a pipe, so
 * that it starts watching for POLLOUT.  Two ways to wait for the reply:
 *
 *  - the synchronous callbacks (sync.c: nbd_io_*, under a filter, with
 *    -D nbdkit.async=0, and for cache and extents) sleep on a semaphore
 *    that the completion posts;
 *  - the asynchronous ones (async.c: nbdkit_async_ops,
 *    include/nbdkit-async.h) return at once; the completion calls
 *    nbdkit_async_complete from the poller, so the worker goes back to
 *    reading the client and no thread waits per request.  Each such
 *    request has a record (struct aio_req) on its upstream's in-flight
 *    list, oldest first, which the poller looks at for request-timeout=
 *    and after a cancel.
 *
 * Both use what this file holds: the choice of connection, the same
 * flags, the same error mapping and the same probes.  If the upstream
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
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <libnbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "nbd.h"
#include "now-ns.h"

NBDKIT_PROBE_SEMAPHORE (nbd_request_done);
NBDKIT_PROBE_SEMAPHORE (nbd_request_error);

/* Whether a request must note its ids and start for the probes. */
bool
nbd_io_tracing (void)
{
  return NBDKIT_PROBE_ENABLED (nbd_request_done) ||
    NBDKIT_PROBE_ENABLED (nbd_request_error);
}

/* For messages and the probes. */
const char *const nbd_io_op_name[] = {
  [OP_PREAD] = "pread", [OP_PWRITE] = "pwrite", [OP_FLUSH] = "flush",
  [OP_TRIM] = "trim", [OP_ZERO] = "zero", [OP_CACHE] = "cache",
  [OP_EXTENTS] = "extents",
};

/* Wake UP's poller (async.c), to look again at what it should watch. */
void
nbd_up_kick (struct upstream *up)
{
  char c = 0;

  /* The pipe is non-blocking: if it is full, the poller is already due
   * to wake, which is all a kick is for.
   */
  if (write (up->wake[1], &c, 1) == -1 && errno != EAGAIN)
    nbdkit_debug ("kicking the poller: %m");
}

/* The connection of the proxy HANDLE that takes the next request. */
struct upstream *
nbd_up_pick (void *handle)
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
int64_t
nbd_up_issue (struct upstream *up, enum op op, void *buf, uint32_t count,
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
    nbd_up_kick (up);
  return cookie;
}

/* After nbd_up_issue returned -1: the errno of the failure, reported. */
int
nbd_up_issue_error (struct upstream *up, const char *op)
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
int
nbd_io_client_errno (int err)
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

/* A request is over: its probes, if anyone is tracing. */
void
nbd_io_probe_done (uint64_t conn_id, uint64_t cookie, const char *op,
                   int err, uint64_t start_ns, uint64_t offset,
                   uint32_t count)
{
  /* The errno has a probe of its own: bpftrace 0.17 reads only a
   * USDT probe's first six arguments.
   */
  if (err)
    NBDKIT_PROBE (nbd_request_error, conn_id, cookie, op, (int64_t) err);
  NBDKIT_PROBE (nbd_request_done, conn_id, cookie, op, now_ns () - start_ns,
                offset, (uint64_t) count);
}
