/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The blocksize-policy filter: advertise the block size constraints
 * given on the command line (or fill in those the plugin leaves out),
 * and, with blocksize-error-policy=error, refuse with EINVAL the
 * requests that break them before they reach the plugin.  The
 * constraints are computed from the parameters and the layer below's
 * answer (which the server asks once per connection and caches), so
 * the filter keeps no state of its own.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "ispowerof2.h"
#include "minmax.h"

#define MINIMUM_LIMIT (64 * 1024)
#define PREFERRED_MIN 512
#define PREFERRED_MAX (32 * 1024 * 1024)

/* Parameters, 0 when not given; read-only after config. */
static bool error_policy = false;
static uint32_t cfg_minimum, cfg_preferred, cfg_maximum;

static int
parse_u32_size (const char *key, const char *value, uint32_t *r)
{
  int64_t v = nbdkit_parse_size (value);

  if (v == -1)
    return -1;
  if (v > UINT32_MAX) {
    nbdkit_error ("%s=%s: must be less than 4G", key, value);
    return -1;
  }
  *r = v;
  return 0;
}

static int
policy_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
               const char *key, const char *value)
{
  if (strcmp (key, "blocksize-error-policy") == 0) {
    if (strcmp (value, "allow") == 0)
      error_policy = false;
    else if (strcmp (value, "error") == 0)
      error_policy = true;
    else {
      nbdkit_error ("blocksize-error-policy=%s: must be allow or error", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "blocksize-minimum") == 0) {
    if (parse_u32_size (key, value, &cfg_minimum) == -1)
      return -1;
    if (cfg_minimum && !is_power_of_2 (cfg_minimum)) {
      nbdkit_error ("blocksize-minimum=%s: must be a power of 2", value);
      return -1;
    }
    if (cfg_minimum > MINIMUM_LIMIT) {
      nbdkit_error ("blocksize-minimum=%s: must be at most 64K", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "blocksize-preferred") == 0) {
    if (parse_u32_size (key, value, &cfg_preferred) == -1)
      return -1;
    if (cfg_preferred &&
        (cfg_preferred < PREFERRED_MIN || cfg_preferred > PREFERRED_MAX)) {
      nbdkit_error ("blocksize-preferred=%s: must be between 512 and 32M",
                    value);
      return -1;
    }
    if (cfg_preferred && !is_power_of_2 (cfg_preferred)) {
      nbdkit_error ("blocksize-preferred=%s: must be a power of 2", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "blocksize-maximum") == 0)
    return parse_u32_size (key, value, &cfg_maximum);
  return next (nxdata, key, value);
}

#define policy_config_help \
  "blocksize-error-policy=allow|error  What to do with requests that\n" \
  "                                    break the constraints.\n" \
  "blocksize-minimum=<N>               Minimum block size to advertise.\n" \
  "blocksize-preferred=<N>             Preferred block size to advertise.\n" \
  "blocksize-maximum=<N>               Maximum block size to advertise."

static int
policy_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                   uint32_t *preferred, uint32_t *maximum)
{
  if (next->block_size (next, minimum, preferred, maximum) == -1)
    return -1;

  /* Nothing given: what the layer below says. */
  if (!cfg_minimum && !cfg_preferred && !cfg_maximum)
    return 0;

  if (*minimum == 0) {
    /* The layer below has no constraints: start from the loosest. */
    *minimum = cfg_minimum ? cfg_minimum : 1;
    *preferred = cfg_preferred ? cfg_preferred
      : MAX (*minimum, (uint32_t) 4096);
    *maximum = cfg_maximum ? cfg_maximum : UINT32_MAX;
  }
  else {
    if (cfg_minimum)
      *minimum = cfg_minimum;
    if (cfg_preferred)
      *preferred = cfg_preferred;
    if (cfg_maximum)
      *maximum = cfg_maximum;
  }

  if (*minimum > *preferred || *preferred > *maximum) {
    nbdkit_error ("blocksize-policy: the block size constraints do not "
                  "fit: minimum %" PRIu32 ", preferred %" PRIu32
                  ", maximum %" PRIu32 " (need minimum <= preferred <= "
                  "maximum)", *minimum, *preferred, *maximum);
    return -1;
  }
  if (*maximum != UINT32_MAX && *maximum % *minimum != 0) {
    nbdkit_error ("blocksize-policy: maximum %" PRIu32 " is not a multiple "
                  "of minimum %" PRIu32, *maximum, *minimum);
    return -1;
  }
  return 0;
}

/* With the error policy, may this request go down?  0 if so; -1 with
 * *err = EINVAL and an error saying why if not.  The maximum applies
 * to reads and writes only (CHECK_MAXIMUM): the NBD protocol bounds
 * the payload, not the length of a trim, zero, cache or block status.
 */
static int
check_policy (nbdkit_next *next, void *handle, const char *command,
              bool check_maximum, uint32_t count, uint64_t offset, int *err)
{
  uint32_t minimum, preferred, maximum;
  const char *why = NULL;

  if (!error_policy)
    return 0;
  if (policy_block_size (next, handle, &minimum, &preferred, &maximum) == -1) {
    *err = EIO;
    return -1;
  }
  if (minimum == 0)             /* no constraints at all */
    return 0;

  if (count < minimum)
    why = "its length is smaller than the minimum";
  else if (count % minimum != 0)
    why = "its length is not a multiple of the minimum";
  else if (offset % minimum != 0)
    why = "its offset is not a multiple of the minimum";
  else if (check_maximum && count > maximum)
    why = "its length is larger than the maximum";
  else
    return 0;

  NBDKIT_PROBE (blocksize_policy_reject, nbdkit_connection_id (),
                nbdkit_request_cookie (), offset, count, command);
  nbdkit_error ("client %s request rejected (%" PRIu32 " bytes at offset %"
                PRIu64 "): %s (minimum %" PRIu32 ", maximum %" PRIu32 ")",
                command, count, offset, why, minimum, maximum);
  *err = EINVAL;
  return -1;
}

static int
policy_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  if (check_policy (next, handle, "pread", true, count, offset, err) == -1)
    return -1;
  return next->pread (next, buf, count, offset, flags, err);
}

static int
policy_pwrite (nbdkit_next *next, void *handle, const void *buf,
               uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (check_policy (next, handle, "pwrite", true, count, offset, err) == -1)
    return -1;
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
policy_zero (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  if (check_policy (next, handle, "zero", false, count, offset, err) == -1)
    return -1;
  return next->zero (next, count, offset, flags, err);
}

static int
policy_trim (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  if (check_policy (next, handle, "trim", false, count, offset, err) == -1)
    return -1;
  return next->trim (next, count, offset, flags, err);
}

static int
policy_cache (nbdkit_next *next, void *handle, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  if (check_policy (next, handle, "cache", false, count, offset, err) == -1)
    return -1;
  return next->cache (next, count, offset, flags, err);
}

/* The protocol wants every extent to be a multiple of the advertised
 * minimum block size, whatever the layer below describes: the extents
 * of the blocks that the request touches are merged into whole blocks
 * (a block the layer below describes in pieces gets the type all of
 * them share), and the list drops what lies before offset, should the
 * default policy have let an unaligned request through.  Only the
 * partial block at the end of an export whose size is not a multiple
 * of the minimum gets the layer below's extents as they are.
 */
static int
policy_extents (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offset, uint32_t flags,
                struct nbdkit_extents *extents, int *err)
{
  uint32_t minimum, preferred, maximum;
  int64_t size;

  if (check_policy (next, handle, "extents", false, count, offset,
                    err) == -1)
    return -1;
  if (policy_block_size (next, handle, &minimum, &preferred, &maximum) == -1 ||
      (size = next->get_size (next)) == -1) {
    *err = EIO;
    return -1;
  }
  if (minimum > 1) {
    /* offset + count <= size <= INT64_MAX: no overflow. */
    uint64_t start = offset - offset % minimum;
    uint64_t end = MIN (offset + count + (minimum - 1),
                        (uint64_t) size - size % minimum);

    end -= end % minimum;
    if (end > offset) {
      uint32_t n = MIN (end - start,
                        (uint64_t) (UINT32_MAX - UINT32_MAX % minimum));

      return nbdkit_extents_aligned (next, n, start, flags, minimum,
                                     extents, err);
    }
  }
  return next->extents (next, count, offset, flags, extents, err);
}

static struct nbdkit_filter filter = {
  .name = "blocksize-policy",
  .longname = "nbdkit blocksize policy filter",
  .config = policy_config,
  .config_help = policy_config_help,
  .block_size = policy_block_size,
  .pread = policy_pread,
  .pwrite = policy_pwrite,
  .zero = policy_zero,
  .trim = policy_trim,
  .cache = policy_cache,
  .extents = policy_extents,
};

NBDKIT_REGISTER_FILTER (filter)
