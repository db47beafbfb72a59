/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin's synchronous data callbacks (nbd_io_*): the server
 * calls them under a filter, with -D nbdkit.async=0, and always for
 * cache and extents.  Each issues its command through io.c and sleeps
 * on a semaphore until the completion, run by the poller (async.c),
 * posts it; it times its own wait against request-timeout=.
 */
#include <config.h>

#include <errno.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>

#include <libnbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "nbd.h"
#include "now-ns.h"

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
  r->op = nbd_io_op_name[op];
  r->offset = offset;
  r->count = count;
  r->start_ns = nbd_io_tracing () ? now_ns () : 0;
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
      nbd_up_kick (up);
      break;
    }
  }
  while (sem_wait (&r->done) == -1 && errno == EINTR)
    ;
}

/* COOKIE is what nbd_up_issue returned.  Wait for the command to complete and
 * turn its outcome into the callback's result.
 */
static int
request_wait (struct upstream *up, struct request *r, int64_t cookie)
{
  if (cookie == -1)
    r->err = nbd_up_issue_error (up, r->op);
  else {
    wait_for_answer (up, r);
    if (r->err)
      nbdkit_error ("%s: upstream: %s", r->op, strerror (r->err));
  }
  sem_destroy (&r->done);

  if (r->start_ns)
    nbd_io_probe_done (nbdkit_connection_id (), nbdkit_request_cookie (),
                       r->op, r->err, r->start_ns, r->offset, r->count);

  if (r->err) {
    nbdkit_set_error (nbd_io_client_errno (r->err));
    return -1;
  }
  return 0;
}

static int
sync_op (void *handle, enum op op, void *buf, uint32_t count,
         uint64_t offset, uint32_t flags)
{
  struct upstream *up = nbd_up_pick (handle);
  struct request r;

  request_init (&r, op, offset, count);
  return request_wait (up, &r, nbd_up_issue (up, op, buf, count, offset,
                                             flags, COMPLETION (&r)));
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
  struct upstream *up = nbd_up_pick (handle);
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
    nbd_up_kick (up);
  ret = request_wait (up, &r, cookie);
  if (ret == 0 && !ctx.seen) {
    nbdkit_error ("upstream answered block status without "
                  "base:allocation");
    nbdkit_set_error (EIO);
    return -1;
  }
  return ret;
}
