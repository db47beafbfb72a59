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
#include "answers.h"
#include "params.h"

/* Set by config, read-only once the server starts serving. */
static int64_t size = 0;

static int
null_config (const char *key, const char *value)
{
  return param_size_only (key, value, &size);
}

#define null_config_help \
  "[size=]SIZE               Size of the disk (default 0)."

static int64_t
null_get_size (void *handle)
{
  return size;
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
  .open              = answer_no_handle,
  .get_size          = null_get_size,
  .can_write         = answer_yes,
  .can_flush         = answer_yes,
  .can_trim          = answer_yes,
  .can_zero          = answer_yes,
  .can_fast_zero     = answer_yes,
  .can_fua           = answer_fua_native,
  .can_multi_conn    = answer_yes,
  .can_extents       = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = null_pread,
  .pwrite            = null_pwrite,
  .flush             = answer_flush_done,
  /* Trim, zero and cache have nothing to do: the disk is all zero. */
  .trim              = answer_range_done,
  .zero              = answer_range_done,
  .cache             = answer_range_done,
  .extents           = null_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
