/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's space operations on a connection's descriptor:
 * trim (punch a hole, or BLKDISCARD), zero (the cheapest way the file
 * system or device offers, else writing zeroes through rw.c), extents
 * (holes as lseek SEEK_DATA/SEEK_HOLE sees them) and cache (a readahead
 * hint).  -D file.zero=1 logs how each zero request was carried out.
 *
 * What the kernel refuses as not supported is remembered in the
 * handle's can_* flags and not tried again on that connection.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/fs.h>   /* BLKDISCARD, BLKZEROOUT */
#endif

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "minmax.h"

#include "handle.h"

/* -D file.zero=1: log how each zero request was done. */
NBDKIT_DLL_PUBLIC int file_debug_zero;

static inline bool
supported (bool *flag)
{
  return __atomic_load_n (flag, __ATOMIC_RELAXED);
}

static inline void
unsupported (bool *flag)
{
  __atomic_store_n (flag, false, __ATOMIC_RELAXED);
}

static bool
is_unsupported_errno (int err)
{
  return err == EOPNOTSUPP || err == ENOTSUP || err == ENOSYS || err == ENOTTY;
}

/* One fallocate call.  Returns 0 on success, 1 if this way of doing it
 * is not available here (FLAG is cleared when that is permanent), or
 * -1 on a real error, reported.
 */
static int
try_fallocate (struct handle *h, bool *flag, int mode, uint32_t count,
               uint64_t offset)
{
  if (!supported (flag))
    return 1;
  if (fallocate (h->fd, mode, offset, count) == 0)
    return 0;
  if (is_unsupported_errno (errno)) {
    unsupported (flag);
    return 1;
  }
  /* Block devices refuse ranges not aligned to their sector size. */
  if (errno == EINVAL)
    return 1;
  return file_fail (h, "fallocate");
}

static int
punch_hole (struct handle *h, uint32_t count, uint64_t offset)
{
  return try_fallocate (h, &h->can_punch_hole,
                        FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        count, offset);
}

int
file_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  int r = 1;

#ifdef BLKDISCARD
  if (h->is_block) {
    uint64_t range[2] = { offset, count };

    if (ioctl (h->fd, BLKDISCARD, range) == 0)
      r = 0;
    else if (!is_unsupported_errno (errno) && errno != EINVAL)
      return file_fail (h, "ioctl BLKDISCARD");
  }
  else
#endif
    r = punch_hole (h, count, offset);

  /* Trim is advisory: a request we cannot carry out is not an error. */
  if (r == -1)
    return -1;
  if (r == 1)
    nbdkit_debug ("%s: trim not supported here, ignored", h->path);
  if (flags & NBDKIT_FLAG_FUA)
    return file_sync_data (h);
  return 0;
}

/* -D file.zero=1: say how a zero request was carried out. */
static void
zero_debug (struct handle *h, const char *how, uint32_t count,
            uint64_t offset)
{
  if (file_debug_zero)
    nbdkit_debug ("%s: zero %" PRIu32 " bytes at %" PRIu64 ": %s",
                  h->path, count, offset, how);
}

/* The ways of zeroing, cheapest first.  Returns 0 if one worked, 1 if
 * none applies, -1 on error.
 */
static int
zero_fast (struct handle *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  int r;

  /* A hole reads as zeroes.  (On block devices the kernel implements
   * punch hole as a zero-out that never falls back to writing.)
   */
  if (flags & NBDKIT_FLAG_MAY_TRIM) {
    r = punch_hole (h, count, offset);
    if (r == 0)
      zero_debug (h, "punched a hole (fallocate PUNCH_HOLE)", count, offset);
    if (r <= 0)
      return r;
  }

  /* On block devices the remaining methods may make the kernel write
   * the zeroes itself, which is not what a fast zero asks for.
   */
  if (h->is_block && (flags & NBDKIT_FLAG_FAST_ZERO)) {
    zero_debug (h, "block device: no fast way without trim", count, offset);
    return 1;
  }

  r = try_fallocate (h, &h->can_zero_range, FALLOC_FL_ZERO_RANGE,
                     count, offset);
  if (r == 0)
    zero_debug (h, "fallocate ZERO_RANGE", count, offset);
  if (r <= 0)
    return r;

  if (!h->is_block) {
    /* No ZERO_RANGE (tmpfs, for one): punch, then allocate the range
     * again so that it stays allocated as the client asked.
     */
    r = punch_hole (h, count, offset);
    if (r <= 0) {
      if (r == 0 && fallocate (h->fd, 0, offset, count) == -1)
        nbdkit_debug ("%s: re-allocating after punch: %m (ignored)",
                      h->path);
      if (r == 0)
        zero_debug (h, "fallocate PUNCH_HOLE, then allocated again",
                    count, offset);
      return r;
    }
  }

#ifdef BLKZEROOUT
  if (h->is_block && supported (&h->can_zeroout)) {
    uint64_t range[2] = { offset, count };

    if (ioctl (h->fd, BLKZEROOUT, range) == 0) {
      zero_debug (h, "ioctl BLKZEROOUT", count, offset);
      return 0;
    }
    if (is_unsupported_errno (errno))
      unsupported (&h->can_zeroout);
    else if (errno != EINVAL)
      return file_fail (h, "ioctl BLKZEROOUT");
  }
#endif
  return 1;
}

int
file_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  /* Aligned for O_DIRECT. */
  static const char zeroes[64 * 1024] __attribute__ ((aligned (4096)));
  struct handle *h = handle;
  int r;

  r = zero_fast (h, count, offset, flags);
  if (r == -1)
    return -1;
  if (r == 1) {
    if (flags & NBDKIT_FLAG_FAST_ZERO) {
      nbdkit_debug ("%s: no fast way to zero here", h->path);
      zero_debug (h, "refused: fast zero asked, none available",
                  count, offset);
      nbdkit_set_error (ENOTSUP);
      errno = ENOTSUP;
      return -1;
    }
    zero_debug (h, "writing zeroes (no faster way here)", count, offset);
    while (count > 0) {
      uint32_t n = MIN (count, (uint32_t) sizeof zeroes);

      if (file_write_range (h, zeroes, n, offset) == -1)
        return -1;
      count -= n;
      offset += n;
    }
  }
  if (flags & NBDKIT_FLAG_FUA)
    return file_sync_data (h);
  return 0;
}

int
file_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  struct handle *h = handle;
  const bool one = flags & NBDKIT_FLAG_REQ_ONE;
  const uint64_t end = offset + count;
  uint64_t pos = offset;

  /* Block devices have no holes that lseek could show. */
  if (h->is_block)
    return nbdkit_add_extent (extents, offset, count, 0);

  /* lseek moves the descriptor's file position, which nothing else
   * uses, so concurrent calls on one descriptor are harmless: each
   * looks only at its own return value.
   */
  while (pos < end) {
    off_t data = lseek (h->fd, pos, SEEK_DATA);
    off_t hole;
    uint64_t stop;

    if (data == -1) {
      if (errno == ENXIO)     /* no data after POS: the rest is a hole */
        return nbdkit_add_extent (extents, pos, end - pos,
                                  NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
      if (errno == EINVAL || is_unsupported_errno (errno))
        return nbdkit_add_extent (extents, pos, end - pos, 0);
      return file_fail (h, "lseek SEEK_DATA");
    }
    if ((uint64_t) data > pos) {
      stop = MIN ((uint64_t) data, end);
      if (nbdkit_add_extent (extents, pos, stop - pos,
                             NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
        return -1;
      pos = stop;
      if (one)
        break;
      continue;
    }

    hole = lseek (h->fd, pos, SEEK_HOLE);
    if (hole == -1) {
      if (errno != ENXIO && errno != EINVAL && !is_unsupported_errno (errno))
        return file_fail (h, "lseek SEEK_HOLE");
      hole = end;               /* file changed under us: call it data */
    }
    /* A racing change could put the hole at or before POS; always make
     * progress by calling at least the rest of the range data.
     */
    if ((uint64_t) hole <= pos)
      hole = end;
    stop = MIN ((uint64_t) hole, end);
    if (nbdkit_add_extent (extents, pos, stop - pos, 0) == -1)
      return -1;
    pos = stop;
    if (one)
      break;
  }
  return 0;
}

int
file_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  int err;

  /* Only a hint: ask the kernel to start reading the range in. */
  err = posix_fadvise (h->fd, offset, count, POSIX_FADV_WILLNEED);
  if (err != 0) {
    errno = err;
    return file_fail (h, "posix_fadvise");
  }
  return 0;
}
