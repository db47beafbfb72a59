/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The checkwrite filter: every write-like request becomes a check that
 * the plugin already holds what the client is writing.  Writes compare
 * bytes; zero and trim requests check that the range reads as zeroes
 * (by block status where the plugin has it, else by reading).  A
 * difference fails the request with EIO.  The plugin is opened
 * read-only and never changes, so nothing here needs a lock.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "cleanup-extents.h"
#include "iszero.h"
#include "minmax.h"

/* Reads done to check a zero or trim go in pieces of at most this. */
#define CHECK_CHUNK UINT32_C (1048576)

static void *
checkwrite_open (nbdkit_next_open *next, nbdkit_context *context,
                 int readonly, const char *exportname, int is_tls)
{
  /* Whatever the client asked for, the plugin is only read. */
  if (next (context, 1, exportname) == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

/* Writes of every kind are accepted (and checked); FUA and flush cost
 * nothing since nothing is ever written; several connections see the
 * same unchanging data.
 */
static int
checkwrite_can_write (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
checkwrite_can_flush (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
checkwrite_can_fua (nbdkit_next *next, void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
checkwrite_can_trim (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
checkwrite_can_zero (nbdkit_next *next, void *handle)
{
  return NBDKIT_ZERO_NATIVE;
}

static int
checkwrite_can_fast_zero (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
checkwrite_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
mismatch (uint32_t count, uint64_t offset, int *err)
{
  NBDKIT_PROBE (checkwrite_mismatch, nbdkit_connection_id (),
                nbdkit_request_cookie (), offset, count);
  nbdkit_error ("data written does not match expected");
  *err = EIO;
  return -1;
}

static int
checkwrite_pwrite (nbdkit_next *next, void *handle, const void *buf,
                   uint32_t count, uint64_t offset, uint32_t flags,
                   int *err)
{
  CLEANUP_FREE char *expected = malloc (count ? count : 1);

  if (expected == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (next->pread (next, expected, count, offset, 0, err) == -1)
    return -1;
  if (memcmp (buf, expected, count) != 0)
    return mismatch (count, offset, err);
  return 0;
}

/* Read [offset, offset+count) from the plugin and check it is zero. */
static int
read_is_zero (nbdkit_next *next, uint32_t count, uint64_t offset,
              int *err)
{
  CLEANUP_FREE char *buf = malloc (MIN (count, CHECK_CHUNK));

  if (buf == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    return -1;
  }
  while (count > 0) {
    uint32_t n = MIN (count, CHECK_CHUNK);
    if (next->pread (next, buf, n, offset, 0, err) == -1)
      return -1;
    if (!is_zero (buf, n))
      return 0;
    count -= n;
    offset += n;
  }
  return 1;
}

/* A zero or trim is right if the range already reads as zeroes. */
static int
check_zero (nbdkit_next *next, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  const uint64_t req_offset = offset;
  const uint32_t req_count = count;
  int r;

  if (count == 0)
    return 0;

  if (next->can_extents (next) == 1) {
    /* Ranges the plugin reports as reading zero need no read. */
    CLEANUP_EXTENTS_FREE struct nbdkit_extents *exts =
      nbdkit_extents_full (next, count, offset, 0, err);
    if (exts == NULL)
      return -1;
    for (size_t i = 0; i < nbdkit_extents_count (exts) && count > 0; i++) {
      struct nbdkit_extent e = nbdkit_get_extent (exts, i);
      uint64_t end = e.offset + e.length;
      uint32_t n;

      if (end <= offset)
        continue;
      n = MIN ((uint64_t) count, end - offset);
      if ((e.type & NBDKIT_EXTENT_ZERO) == 0) {
        /* Only reading can tell: a fast zero must not wait for it. */
        if (flags & NBDKIT_FLAG_FAST_ZERO) {
          *err = ENOTSUP;
          return -1;
        }
        r = read_is_zero (next, n, offset, err);
        if (r == -1)
          return -1;
        if (r == 0)
          return mismatch (req_count, req_offset, err);
      }
      count -= n;
      offset += n;
    }
    /* nbdkit_extents_full covers the whole range, or fails. */
    if (count == 0)
      return 0;
  }

  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    *err = ENOTSUP;
    return -1;
  }
  r = read_is_zero (next, count, offset, err);
  if (r == -1)
    return -1;
  if (r == 0)
    return mismatch (req_count, req_offset, err);
  return 0;
}

static int
checkwrite_zero (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err)
{
  return check_zero (next, count, offset, flags, err);
}

static int
checkwrite_trim (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err)
{
  return check_zero (next, count, offset, flags & ~NBDKIT_FLAG_FAST_ZERO,
                     err);
}

static int
checkwrite_flush (nbdkit_next *next, void *handle, uint32_t flags,
                  int *err)
{
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "checkwrite",
  .longname = "nbdkit checkwrite filter",
  .open = checkwrite_open,
  .can_write = checkwrite_can_write,
  .can_flush = checkwrite_can_flush,
  .can_fua = checkwrite_can_fua,
  .can_trim = checkwrite_can_trim,
  .can_zero = checkwrite_can_zero,
  .can_fast_zero = checkwrite_can_fast_zero,
  .can_multi_conn = checkwrite_can_multi_conn,
  .pwrite = checkwrite_pwrite,
  .zero = checkwrite_zero,
  .trim = checkwrite_trim,
  .flush = checkwrite_flush,
};

NBDKIT_REGISTER_FILTER (filter)
