/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The null plugin: a disk that reads as zeroes and forgets writes.
 *
 * This file owns the plugin's only parameter, the size, and its
 * callbacks.  There is no state beyond the size, so every request can
 * run in parallel and every operation succeeds at once; useful for
 * testing clients and measuring the server's own overhead.
 */
#include <config.h>

#include <stdint.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

/* Set by config, read-only once the server starts serving. */
static int64_t size = 0;

static int
null_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0) {
    int64_t r = nbdkit_parse_size (value);

    if (r == -1)
      return -1;
    size = r;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

#define null_config_help \
  "[size=]SIZE               Size of the disk (default 0)."

static void *
null_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
null_get_size (void *handle)
{
  return size;
}

static int
null_can_yes (void *handle)
{
  return 1;
}

static int
null_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
null_can_cache (void *handle)
{
  return NBDKIT_CACHE_NATIVE;
}

static int
null_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  memset (buf, 0, count);
  return 0;
}

static int
null_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  return 0;
}

static int
null_flush (void *handle, uint32_t flags)
{
  return 0;
}

/* Trim, zero and cache have nothing to do: the disk is already zero. */
static int
null_range_op (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return 0;
}

static int
null_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  return nbdkit_add_extent (extents, offset, count,
                            NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "null",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit null plugin",
  .description       = "A disk of zeroes that discards writes",
  .config            = null_config,
  .config_help       = null_config_help,
  .magic_config_key  = "size",
  .open              = null_open,
  .get_size          = null_get_size,
  .can_write         = null_can_yes,
  .can_flush         = null_can_yes,
  .can_trim          = null_can_yes,
  .can_zero          = null_can_yes,
  .can_fast_zero     = null_can_yes,
  .can_fua           = null_can_fua,
  .can_multi_conn    = null_can_yes,
  .can_extents       = null_can_yes,
  .can_cache         = null_can_cache,
  .pread             = null_pread,
  .pwrite            = null_pwrite,
  .flush             = null_flush,
  .trim              = null_range_op,
  .zero              = null_range_op,
  .cache             = null_range_op,
  .extents           = null_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
