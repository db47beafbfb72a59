/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test filter that logs after it has passed a parameter, and the end
 * of configuration, on to the layer below, for
 * test-probes-stages-origin.sh: the log probe must name this filter as
 * the origin of those messages, not the plugin whose callback ran just
 * before them.
 */
#include <config.h>

#include <nbdkit-filter.h>

static int
origin_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
               const char *key, const char *value)
{
  int r = next (nxdata, key, value);
  nbdkit_debug ("origin-test: after next_config %s", key);
  return r;
}

static int
origin_config_complete (nbdkit_next_config_complete *next,
                        nbdkit_backend *nxdata)
{
  int r = next (nxdata);
  nbdkit_debug ("origin-test: after next_config_complete");
  return r;
}

static struct nbdkit_filter filter = {
  .name = "origin",
  .config = origin_config,
  .config_complete = origin_config_complete,
};

NBDKIT_REGISTER_FILTER (filter)
