/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The pattern plugin: a read-only disk in which every aligned 8-byte
 * word holds its own offset, big endian, so that any byte read says
 * where it came from.  Nothing is stored: each read computes its bytes.
 * No state but the size, set by config: fully parallel.
 */
#include <config.h>

#include <stdint.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "minmax.h"

static int64_t size = 0;

static int
pattern_config (const char *key, const char *value)
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

#define pattern_config_help \
  "[size=]SIZE               Size of the disk (default 0)."

static void *
pattern_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
pattern_get_size (void *handle)
{
  return size;
}

static int
pattern_can_yes (void *handle)
{
  return 1;
}

static int
pattern_can_cache (void *handle)
{
  return NBDKIT_CACHE_NATIVE;
}

/* The byte at OFFSET: byte (OFFSET % 8) of the word OFFSET & ~7,
 * most significant first.
 */
static int
pattern_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  uint8_t *p = buf;

  while (count > 0) {
    uint64_t word = offset & ~(uint64_t) 7;
    unsigned i = offset & 7;
    uint32_t n = MIN ((uint32_t) (8 - i), count);
    uint8_t be[8];

    for (unsigned j = 0; j < 8; ++j)
      be[j] = word >> (56 - 8 * j);
    memcpy (p, be + i, n);
    p += n;
    offset += n;
    count -= n;
  }
  return 0;
}

static int
pattern_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "pattern",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit pattern plugin",
  .description       = "A read-only disk whose every 8-byte word is its "
                       "own offset",
  .config            = pattern_config,
  .config_help       = pattern_config_help,
  .magic_config_key  = "size",
  .open              = pattern_open,
  .get_size          = pattern_get_size,
  .can_multi_conn    = pattern_can_yes,
  .can_cache         = pattern_can_cache,
  .pread             = pattern_pread,
  .cache             = pattern_cache,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
