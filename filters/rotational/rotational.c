/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The rotational filter: tell clients the export is (or is not) a
 * spinning disk, whatever the plugin says.  The flag is set by config
 * and read-only afterwards; everything else passes through.
 */
#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

/* Adding the filter is asking for rotational: that is the default. */
static bool rotational = true;

static int
rotational_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                   const char *key, const char *value)
{
  if (strcmp (key, "rotational") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    rotational = r;
    return 0;
  }
  return next (nxdata, key, value);
}

#define rotational_config_help \
  "rotational=<BOOL>           Advertise rotational (default true)."

static int
rotational_is_rotational (nbdkit_next *next, void *handle)
{
  /* Asked once per connection, so asking below only for the probe is
   * cheap; a failure there does not matter to the answer.
   */
  NBDKIT_PROBE (rotational_answer, (int32_t) rotational,
                (int32_t) next->is_rotational (next));
  return rotational;
}

static struct nbdkit_filter filter = {
  .name = "rotational",
  .longname = "nbdkit rotational filter",
  .config = rotational_config,
  .config_help = rotational_config_help,
  .is_rotational = rotational_is_rotational,
};

NBDKIT_REGISTER_FILTER (filter)
