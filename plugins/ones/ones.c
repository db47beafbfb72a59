/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ones plugin: a disk on which every byte reads as 0xff (or the
 * byte chosen with byte=N) and which forgets whatever is written.
 *
 * This file owns the two parameters (size, byte) and the callbacks.
 * Both are set by config and only read afterwards, so every request
 * runs in parallel and needs no lock.  Unlike the null plugin the
 * disk is not a hole: block status says every byte is data, as a
 * disk really filled with the byte would (zeroes only for byte=0).
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
static uint8_t fill = 0xff;

static int
ones_config (const char *key, const char *value)
{
  if (strcmp (key, "byte") == 0)
    return nbdkit_parse_uint8_t ("byte", value, &fill);
  return param_size_only (key, value, &size);
}

#define ones_config_help \
  "[size=]SIZE               Size of the disk (default 0).\n" \
  "byte=N                    The byte every read returns (default 0xff)."

static int64_t
ones_get_size (void *handle)
{
  return size;
}

static int
ones_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  memset (buf, fill, count);
  return 0;
}

/* Writes are accepted and dropped: the next read gives the fill byte
 * again, which is the plugin's whole point (a device that never keeps
 * what it is given).
 */
static int
ones_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  return 0;
}

static int
ones_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  return nbdkit_add_extent (extents, offset, count,
                            fill == 0 ? NBDKIT_EXTENT_ZERO : 0);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "ones",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit ones plugin",
  .description       = "A disk of 0xff (or another byte) that discards "
                       "writes",
  .config            = ones_config,
  .config_help       = ones_config_help,
  .magic_config_key  = "size",
  .open              = answer_no_handle,
  .get_size          = ones_get_size,
  .can_write         = answer_yes,
  .can_flush         = answer_yes,
  .can_trim          = answer_yes,
  .can_zero          = answer_yes,
  .can_fast_zero     = answer_yes,
  .can_fua           = answer_fua_native,
  .can_multi_conn    = answer_yes,
  .can_extents       = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = ones_pread,
  .pwrite            = ones_pwrite,
  .flush             = answer_flush_done,
  /* Trim and zero are dropped like writes; cache has nothing to fetch. */
  .trim              = answer_range_done,
  .zero              = answer_range_done,
  .cache             = answer_range_done,
  .extents           = ones_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
