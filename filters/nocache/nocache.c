/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nocache filter: change how cache requests (NBD_CMD_CACHE, a
 * client's hint to prefetch) are offered and handled, to measure what
 * they are worth.  cachemode=none stops advertising them, emulate has
 * the server read the range through this layer and throw the data
 * away (whatever the plugin could do), nop accepts them and does
 * nothing.  The mode is set by config and read-only afterwards.
 */
#include <config.h>

#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

enum cache_mode { MODE_NONE, MODE_EMULATE, MODE_NOP };

static enum cache_mode cache_mode = MODE_NONE;

static int
nocache_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                const char *key, const char *value)
{
  if (strcmp (key, "cachemode") == 0) {
    if (strcmp (value, "none") == 0)
      cache_mode = MODE_NONE;
    else if (strcmp (value, "emulate") == 0)
      cache_mode = MODE_EMULATE;
    else if (strcmp (value, "nop") == 0)
      cache_mode = MODE_NOP;
    else {
      nbdkit_error ("cachemode: unknown mode '%s' (expecting none, "
                    "emulate or nop)", value);
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

#define nocache_config_help \
  "cachemode=<MODE>     none (default), emulate or nop."

static int
nocache_can_cache (nbdkit_next *next, void *handle)
{
  switch (cache_mode) {
  case MODE_EMULATE:
    return NBDKIT_CACHE_EMULATE;    /* the server reads through us */
  case MODE_NOP:
    return NBDKIT_CACHE_NATIVE;     /* our .cache, which does nothing */
  default:
    return NBDKIT_CACHE_NONE;
  }
}

/* Called only in nop mode. */
static int
nocache_cache (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  NBDKIT_PROBE (nocache_dropped, nbdkit_connection_id (),
                nbdkit_request_cookie (), offset, count);
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "nocache",
  .longname = "nbdkit nocache filter",
  .config = nocache_config,
  .config_help = nocache_config_help,
  .can_cache = nocache_can_cache,
  .cache = nocache_cache,
};

NBDKIT_REGISTER_FILTER (filter)
