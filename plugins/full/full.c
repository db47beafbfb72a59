/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The full plugin: a disk that reads as zeroes and is always out of
 * space, like a thin-provisioned disk whose host has filled up.  Every
 * write, trim and zero fails with ENOSPC; block status reports it all
 * as a hole.  No state but the size, set by config: fully parallel.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

static int64_t size = -1;

static int
full_config (const char *key, const char *value)
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

static int
full_config_complete (void)
{
  if (size == -1) {
    nbdkit_error ("you must give the disk size, for example: "
                  "nbdkit full 1G");
    return -1;
  }
  return 0;
}

#define full_config_help \
  "[size=]SIZE               (required) Size of the disk."

static void *
full_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
full_get_size (void *handle)
{
  return size;
}

static int
full_can_yes (void *handle)
{
  return 1;
}

static int
full_can_cache (void *handle)
{
  return NBDKIT_CACHE_NATIVE;
}

static int
full_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  memset (buf, 0, count);
  return 0;
}

static int
full_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  errno = ENOSPC;
  return -1;
}

/* Trim and zero: no space either (even a fast zero). */
static int
full_no_space (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  errno = ENOSPC;
  return -1;
}

static int
full_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return 0;
}

static int
full_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  return nbdkit_add_extent (extents, offset, count,
                            NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "full",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit full plugin",
  .description       = "A disk that reads as zeroes and is always full",
  .config            = full_config,
  .config_complete   = full_config_complete,
  .config_help       = full_config_help,
  .magic_config_key  = "size",
  .open              = full_open,
  .get_size          = full_get_size,
  .can_write         = full_can_yes,
  .can_trim          = full_can_yes,
  .can_zero          = full_can_yes,
  .can_fast_zero     = full_can_yes,
  .can_multi_conn    = full_can_yes,
  .can_extents       = full_can_yes,
  .can_cache         = full_can_cache,
  .pread             = full_pread,
  .pwrite            = full_pwrite,
  .trim              = full_no_space,
  .zero              = full_no_space,
  .cache             = full_cache,
  .extents           = full_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
