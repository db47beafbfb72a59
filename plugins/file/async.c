/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's aio=io_uring entry points (built with liburing
 * only): nbdkit_async_ops, filled in by file_async_enable when
 * config_complete chooses io_uring.  Reads, writes and flushes go to
 * the connection's ring (uring.c, made by file_async_open) and
 * complete from its thread; uring_done turns each result into the same
 * bytes and errors as the synchronous callbacks (rw.c) give, which the
 * server still uses for everything else (and under filters, or with
 * -D nbdkit.async=0).
 *
 * Locks: none of this file's own.  uring.c has one per ring, evict.c
 * one per descriptor (and one per file); the completion thread calls
 * into evict.c holding none, so neither is ever taken under the other.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>

#include "handle.h"

/* With every callback NULL (the default, aio=threads) the server calls
 * the plugin as it always has.
 */
NBDKIT_DLL_PUBLIC struct nbdkit_async_ops nbdkit_async_ops = {
  .version = NBDKIT_ASYNC_VERSION,
};

/* aio=io_uring.  What the ring cannot take as it is (unaligned under
 * O_DIRECT, or a connection whose ring could not be made) is served at
 * once, on the worker, by the synchronous callback.
 */
static int
file_async_pread (void *handle, struct nbdkit_async_request *req, void *buf,
                  uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;

  if (h->uring && is_dio_aligned (h, buf, count, offset) &&
      uring_submit (h->uring, req, URING_READ, buf, count, offset,
                    false) == 0)
    return 0;
  if (file_pread (h, buf, count, offset, flags) == -1)
    return -1;
  nbdkit_async_complete (req, 0);
  return 0;
}

static int
file_async_pwrite (void *handle, struct nbdkit_async_request *req,
                   const void *buf, uint32_t count, uint64_t offset,
                   uint32_t flags)
{
  struct handle *h = handle;

  /* The ring only reads BUF, whatever liburing's prototype says. */
  if (h->uring && is_dio_aligned (h, buf, count, offset) &&
      uring_submit (h->uring, req, URING_WRITE, (void *) buf, count, offset,
                    flags & NBDKIT_FLAG_FUA) == 0)
    return 0;
  if (file_pwrite (h, buf, count, offset, flags) == -1)
    return -1;
  nbdkit_async_complete (req, 0);
  return 0;
}

static int
file_async_flush (void *handle, struct nbdkit_async_request *req,
                  uint32_t flags)
{
  struct handle *h = handle;

  if (h->uring &&
      uring_submit (h->uring, req, URING_FDATASYNC, NULL, 0, 0, false) == 0)
    return 0;
  if (file_flush (h, flags) == -1)
    return -1;
  nbdkit_async_complete (req, 0);
  return 0;
}

/* On the ring's completion thread: what the kernel's result RES means
 * for the client, as the synchronous callbacks would say it.
 */
static int
uring_done (void *opaque, enum uring_kind kind, char *buf, uint32_t count,
            uint64_t offset, bool fua, int32_t res)
{
  static const char *const what[] = {
    [URING_READ] = "pread (io_uring)",
    [URING_WRITE] = "pwrite (io_uring)",
    [URING_FDATASYNC] = "fdatasync (io_uring)",
  };
  struct handle *h = opaque;

  if (res < 0) {
    errno = -res;
    file_fail (h, what[kind]);
    return -res;
  }
  /* A short transfer: the rest as the synchronous path does it, so
   * that the end of the file gives the same EIO.
   */
  switch (kind) {
  case URING_READ:
    if ((uint32_t) res < count &&
        file_read_range (h, buf + res, count - res, offset + res) == -1)
      return errno;
    if (h->cache_none)
      evict_after_read (&h->evict, offset, count);
    break;
  case URING_WRITE:
    if ((uint32_t) res < count &&
        (file_write_range (h, buf + res, count - res, offset + res) == -1 ||
         (fua && file_sync_data (h) == -1)))
      return errno;
    if (h->cache_none && res > 0)
      evict_after_write (&h->evict, offset, res);
    break;
  case URING_FDATASYNC:
    break;
  }
  return 0;
}

/* aio=io_uring: called once, by config_complete. */
void
file_async_enable (void)
{
  nbdkit_async_ops.max_in_flight = URING_ENTRIES;
  nbdkit_async_ops.pread = file_async_pread;
  nbdkit_async_ops.pwrite = file_async_pwrite;
  nbdkit_async_ops.flush = file_async_flush;
}

/* aio=io_uring: H's ring, made as H is opened.  A connection that
 * cannot have one is served by threads.
 */
void
file_async_open (struct handle *h)
{
  h->uring = uring_new (h->fd, uring_done, h);
  if (h->uring == NULL)
    nbdkit_debug ("%s: io_uring: %m: this connection is served by "
                  "threads", h->path);
}
