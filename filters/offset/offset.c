/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The offset filter: serve a window [offset, offset+range) of the layer
 * below, as if it were the whole disk.  Every request is shifted by
 * offset; extents coming back are shifted the other way.  Requests for
 * a plugin that completes them asynchronously (nbdkit-async(3)) are
 * shifted the same way and passed on.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-async.h>

/* Set by config before any connection; read-only afterwards. */
static int64_t offset_param = 0;
static int64_t range_param = -1;

static int
offset_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
               const char *key, const char *value)
{
  if (strcmp (key, "offset") == 0) {
    offset_param = nbdkit_parse_size (value);
    return offset_param == -1 ? -1 : 0;
  }
  if (strcmp (key, "range") == 0) {
    range_param = nbdkit_parse_size (value);
    return range_param == -1 ? -1 : 0;
  }
  return next (nxdata, key, value);
}

#define offset_config_help \
  "offset=<OFFSET>     Start of the window (default 0).\n" \
  "range=<LENGTH>      Length of the window (default: to the end)."

static int64_t
offset_get_size (nbdkit_next *next, void *handle)
{
  int64_t size = next->get_size (next);
  if (size == -1)
    return -1;
  if (offset_param > size) {
    nbdkit_error ("offset %" PRIi64 " is beyond the end of the disk (%"
                  PRIi64 ")", offset_param, size);
    return -1;
  }
  if (range_param >= 0) {
    if (range_param > size - offset_param) {
      nbdkit_error ("offset + range is beyond the end of the disk");
      return -1;
    }
    return range_param;
  }
  return size - offset_param;
}

static int
offset_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
              uint64_t offs, uint32_t flags, int *err)
{
  return next->pread (next, buf, count, offs + offset_param, flags, err);
}

static int
offset_pwrite (nbdkit_next *next, void *handle, const void *buf,
               uint32_t count, uint64_t offs, uint32_t flags, int *err)
{
  return next->pwrite (next, buf, count, offs + offset_param, flags, err);
}

static int
offset_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offs,
             uint32_t flags, int *err)
{
  return next->trim (next, count, offs + offset_param, flags, err);
}

static int
offset_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offs,
             uint32_t flags, int *err)
{
  return next->zero (next, count, offs + offset_param, flags, err);
}

static int
offset_cache (nbdkit_next *next, void *handle, uint32_t count, uint64_t offs,
              uint32_t flags, int *err)
{
  return next->cache (next, count, offs + offset_param, flags, err);
}

static int
offset_extents (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offs, uint32_t flags,
                struct nbdkit_extents *extents, int *err)
{
  int64_t size = offset_get_size (next, handle);
  if (size == -1) {
    *err = EIO;
    return -1;
  }
  /* Ask below in its own coordinates, then shift the answer back. */
  struct nbdkit_extents *below =
    nbdkit_extents_new (offs + offset_param, size + offset_param);
  if (!below) {
    *err = errno;
    return -1;
  }
  if (next->extents (next, count, offs + offset_param, flags, below,
                     err) == -1) {
    nbdkit_extents_free (below);
    return -1;
  }
  for (size_t i = 0; i < nbdkit_extents_count (below); i++) {
    struct nbdkit_extent e = nbdkit_get_extent (below, i);
    if (nbdkit_add_extent (extents, e.offset - offset_param, e.length,
                           e.type) == -1) {
      *err = errno;
      nbdkit_extents_free (below);
      return -1;
    }
  }
  nbdkit_extents_free (below);
  return 0;
}

static int
offset_async_prepare (nbdkit_next *next, void *handle, int cmd,
                      uint32_t *count, uint64_t *offs, uint32_t *flags,
                      int *err)
{
  if (cmd != NBDKIT_ASYNC_CMD_FLUSH)
    *offs += offset_param;
  return NBDKIT_ASYNC_PASS;
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_filter_ops
nbdkit_async_filter_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .prepare = offset_async_prepare,
};

static struct nbdkit_filter filter = {
  .name = "offset",
  .longname = "nbdkit offset filter",
  .config = offset_config,
  .config_help = offset_config_help,
  .get_size = offset_get_size,
  .pread = offset_pread,
  .pwrite = offset_pwrite,
  .trim = offset_trim,
  .zero = offset_zero,
  .cache = offset_cache,
  .extents = offset_extents,
};

NBDKIT_REGISTER_FILTER (filter)
