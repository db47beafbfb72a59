/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's data path: reads, writes and flush on a
 * connection's descriptor (struct handle, opened by file.c), and what
 * O_DIRECT asks of them.  Requests use only pread/pwrite-style calls,
 * so any number run in parallel on one handle.
 *
 * direct=true: reads and writes whose offset, length and buffer are
 * aligned as the kernel asks go to the O_DIRECT descriptor; an
 * unaligned read goes through an aligned bounce buffer
 * (file_read_range), an unaligned write through the second descriptor
 * without O_DIRECT (file_write_range): the kernel keeps the two
 * coherent, writing back and dropping cached pages around each direct
 * transfer.  cache=none: each read's pages, and each write's once
 * written back, are dropped from the page cache (evict.c).
 *
 * space.c and async.c finish their requests through the functions
 * here, so that every path gives the same bytes and errors.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "full-rw.h"
#include "minmax.h"
#include "rounding.h"
#include "zerocopy.h"

#include "handle.h"

/* Report a failed system call on H, keeping errno for the server. */
int
file_fail (struct handle *h, const char *what)
{
  int err = errno;

  nbdkit_error ("%s: %s: %m", h->path, what);
  errno = err;
  return -1;
}

/* Under O_DIRECT: read up to COUNT bytes at OFFSET into BUF (all three
 * aligned).  A read that comes back short of an aligned length has
 * met the end of the file: asking for the rest would be unaligned.
 */
static ssize_t
pread_direct (struct handle *h, char *buf, size_t count, uint64_t offset)
{
  size_t done = 0;

  while (done < count) {
    ssize_t r = pread (h->fd, buf + done, count - done, offset + done);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0)
      break;
    done += r;
    if (done & (h->dio_align - 1))
      break;
  }
  return done;
}

/* Under O_DIRECT, a read that is not aligned: the aligned range around
 * it into an aligned buffer, then the part asked for.  Returns the
 * bytes of the request read (fewer at the end of the file), or -1.
 */
static ssize_t
pread_bounced (struct handle *h, char *buf, uint32_t count, uint64_t offset)
{
  /* OFFSET + COUNT is within the export, far from wrapping. */
  uint64_t start = ROUND_DOWN (offset, (uint64_t) h->dio_align);
  size_t len = ROUND_UP (offset + count, (uint64_t) h->dio_align) - start;
  size_t skip = offset - start;
  void *bounce;
  ssize_t r;
  int err;

  err = posix_memalign (&bounce, MAX (h->dio_align, h->dio_mem_align), len);
  if (err != 0) {
    errno = err;
    return -1;
  }
  r = pread_direct (h, bounce, len, start);
  if (r >= 0) {
    r = (size_t) r > skip ? MIN ((size_t) r - skip, (size_t) count) : 0;
    memcpy (buf, (char *) bounce + skip, r);
  }
  err = errno;
  free (bounce);
  errno = err;
  return r;
}

/* Read all of [OFFSET, OFFSET + COUNT) into BUF: 0, or -1 reported
 * with errno set (EIO if the file ends first).
 */
int
file_read_range (struct handle *h, char *buf, uint32_t count, uint64_t offset)
{
  ssize_t r;

  if (!h->direct)
    r = full_pread (h->fd, buf, count, offset);
  else if (is_dio_aligned (h, buf, count, offset))
    r = pread_direct (h, buf, count, offset);
  else
    r = pread_bounced (h, buf, count, offset);
  if (r == -1)
    return file_fail (h, "pread");
  if (r < count) {
    nbdkit_error ("%s: pread: unexpected end of file at offset %" PRIu64
                  " (did the file shrink?)", h->path, offset + r);
    errno = EIO;
    return -1;
  }
  return 0;
}

int
file_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  struct handle *h = handle;

  if (file_read_range (h, buf, count, offset) == -1)
    return -1;
  if (h->cache_none)
    evict_after_read (&h->evict, offset, count);
  return 0;
}

/* Reads this server sends straight from the file (common/zerocopy.h):
 * the export's bytes are the file's, at the same offsets, and the
 * descriptor lives as long as the connection.
 */
static int
file_read_fd (void *handle, uint32_t count, uint64_t offset, int *fd,
              uint64_t *fd_offset)
{
  struct handle *h = handle;

  /* sendfile would leave the pages cached: let pread drop them (or,
   * with O_DIRECT, never cache them).
   */
  if (h->cache_none || h->direct) {
    errno = ENOTSUP;
    return -1;
  }
  *fd = h->fd;
  *fd_offset = offset;
  return 0;
}

NBDKIT_DLL_PUBLIC const struct nbdkit_zerocopy_ops nbdkit_zerocopy_ops = {
  .version = NBDKIT_ZEROCOPY_VERSION,
  .read_fd = file_read_fd,
};

/* Write all of BUF to [OFFSET, OFFSET + COUNT): 0, or -1 reported. */
int
file_write_range (struct handle *h, const char *buf, uint32_t count,
             uint64_t offset)
{
  size_t done = 0;

  if (!h->direct && full_pwrite (h->fd, buf, count, offset) == -1)
    return file_fail (h, "pwrite");
  while (h->direct && done < count) {
    /* What O_DIRECT cannot take as it is (also the rest of a short
     * write) goes through the page cache.
     */
    int fd = is_dio_aligned (h, buf + done, count - done, offset + done)
      ? h->fd : h->fd_buffered;
    ssize_t r = pwrite (fd, buf + done, count - done, offset + done);

    if (r == -1 && errno == EINTR)
      continue;
    if (r == 0)
      errno = EIO;              /* no progress, as full_pwrite says */
    if (r <= 0)
      return file_fail (h, "pwrite");
    done += r;
  }
  if (h->cache_none)
    evict_after_write (&h->evict, offset, count);
  return 0;
}

int
file_sync_data (struct handle *h)
{
  if (fdatasync (h->fd) == -1)
    return file_fail (h, "fdatasync");
  return 0;
}

int
file_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  struct handle *h = handle;

  if (file_write_range (h, buf, count, offset) == -1)
    return -1;
  if (flags & NBDKIT_FLAG_FUA)
    return file_sync_data (h);
  return 0;
}

int
file_flush (void *handle, uint32_t flags)
{
  return file_sync_data (handle);
}
