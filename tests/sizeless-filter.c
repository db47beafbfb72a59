/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test filter that answers get_size itself (half the size given by
 * sizeless-size=, default 512 KiB) without ever asking the layer below,
 * then reads and writes through to it, as a decompressing filter does.
 * The server must check such calls against the size below, which it
 * then has to ask itself (test-filter-no-size-below.sh).
 */
#include <config.h>

#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>

static int64_t size = 512 * 1024;

static int
sizeless_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  if (strcmp (key, "sizeless-size") == 0) {
    size = nbdkit_parse_size (value);
    return size == -1 ? -1 : 0;
  }
  return next (nxdata, key, value);
}

static int64_t
sizeless_get_size (nbdkit_next *next, void *handle)
{
  return size;
}

static struct nbdkit_filter filter = {
  .name = "sizeless",
  .config = sizeless_config,
  .get_size = sizeless_get_size,
};

NBDKIT_REGISTER_FILTER (filter)
