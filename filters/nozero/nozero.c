/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nozero filter: change how zero requests (NBD_CMD_WRITE_ZEROES)
 * and their fast variant reach the plugin, to compare clients and
 * plugins with and without efficient zeroing.
 *
 * zeromode= decides whether zeroing is advertised and how a zero
 * request travels down: not at all (none), as writes of zeroes
 * (emulate), as a zero without permission to trim (notrim), or
 * unchanged (plugin).  fastzeromode= decides whether fast zeroes are
 * advertised and what becomes of them.
 *
 * Emulation happens here, not in the server: the filter answers
 * can_zero with NBDKIT_ZERO_NATIVE in emulate mode and writes the
 * zeroes itself, so that the plugin sees what nbdkit 1.32's plugin
 * sees (one write per 64 MiB, FUA on the last) and the
 * nozero_emulated probe can fire.  A fast zero is refused in emulate
 * mode whatever fastzeromode says, as nbdkit 1.32 does.
 *
 * Only the two modes are state; they are set by config and read-only
 * afterwards, so any number of requests may run in parallel.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "array-size.h"
#include "minmax.h"

enum zero_mode { ZERO_NONE, ZERO_EMULATE, ZERO_NOTRIM, ZERO_PLUGIN };
enum fast_zero_mode { FAST_DEFAULT, FAST_SLOW, FAST_IGNORE, FAST_NONE };

static const char *const zero_mode_names[] = {
  [ZERO_NONE] = "none", [ZERO_EMULATE] = "emulate",
  [ZERO_NOTRIM] = "notrim", [ZERO_PLUGIN] = "plugin",
};
static const char *const fast_zero_mode_names[] = {
  [FAST_DEFAULT] = "default", [FAST_SLOW] = "slow",
  [FAST_IGNORE] = "ignore", [FAST_NONE] = "none",
};

static enum zero_mode zero_mode = ZERO_NONE;
static enum fast_zero_mode fast_zero_mode = FAST_DEFAULT;

/* The largest write an emulated zero is split into. */
#define EMULATE_CHUNK (64 * 1024 * 1024)

/* Index of VALUE in NAMES (of N entries), or -1. */
static int
lookup (const char *const *names, size_t n, const char *value)
{
  size_t i;

  for (i = 0; i < n; i++)
    if (strcmp (names[i], value) == 0)
      return i;
  return -1;
}

static int
nozero_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
               const char *key, const char *value)
{
  int i;

  if (strcmp (key, "zeromode") == 0) {
    i = lookup (zero_mode_names, ARRAY_SIZE (zero_mode_names), value);
    if (i == -1) {
      nbdkit_error ("zeromode: unknown mode '%s' (expecting none, emulate, "
                    "notrim or plugin)", value);
      return -1;
    }
    zero_mode = i;
    return 0;
  }
  if (strcmp (key, "fastzeromode") == 0) {
    i = lookup (fast_zero_mode_names, ARRAY_SIZE (fast_zero_mode_names),
                value);
    if (i == -1) {
      nbdkit_error ("fastzeromode: unknown mode '%s' (expecting default, "
                    "slow, ignore or none)", value);
      return -1;
    }
    fast_zero_mode = i;
    return 0;
  }
  return next (nxdata, key, value);
}

#define nozero_config_help \
  "zeromode=<MODE>      none (default), emulate, notrim or plugin.\n" \
  "fastzeromode=<MODE>  default, slow, ignore or none."

/* notrim and plugin pass zero requests down: the layer below must
 * take them.  A read-only connection never zeroes, so is not checked.
 */
static int
nozero_prepare (nbdkit_next *next, void *handle, int readonly)
{
  int r;

  if (readonly || (zero_mode != ZERO_NOTRIM && zero_mode != ZERO_PLUGIN))
    return 0;
  r = next->can_zero (next);
  if (r == -1)
    return -1;
  if (r == NBDKIT_ZERO_NONE) {
    nbdkit_error ("zeromode: '%s' needs a plugin that can zero",
                  zero_mode_names[zero_mode]);
    return -1;
  }
  return 0;
}

static int
nozero_can_zero (nbdkit_next *next, void *handle)
{
  switch (zero_mode) {
  case ZERO_NONE:
    return NBDKIT_ZERO_NONE;
  case ZERO_EMULATE:
    return NBDKIT_ZERO_NATIVE;  /* we emulate it ourselves: see above */
  default:
    return next->can_zero (next);
  }
}

static int
nozero_can_fast_zero (nbdkit_next *next, void *handle)
{
  if (zero_mode == ZERO_NONE || fast_zero_mode == FAST_NONE)
    return 0;
  if (zero_mode != ZERO_EMULATE && fast_zero_mode == FAST_DEFAULT)
    return next->can_fast_zero (next);
  return 1;
}

/* Write zeroes in chunks; FUA, if asked for, on the last one. */
static int
emulate_zero (nbdkit_next *next, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  /* In .bss, never written: costs no memory until read. */
  static char zeroes[EMULATE_CHUNK];

  NBDKIT_PROBE (nozero_emulated, nbdkit_connection_id (),
                nbdkit_request_cookie (), offset, count);
  while (count > 0) {
    uint32_t n = MIN (count, (uint32_t) EMULATE_CHUNK);
    uint32_t f = n == count ? flags & NBDKIT_FLAG_FUA : 0;

    if (next->pwrite (next, zeroes, n, offset, f, err) == -1)
      return -1;
    offset += n;
    count -= n;
  }
  return 0;
}

static int
nozero_zero (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    /* "Not fast" makes the client fall back to writing zeroes. */
    if (fast_zero_mode == FAST_SLOW || zero_mode == ZERO_EMULATE) {
      NBDKIT_PROBE (nozero_fast_refused, nbdkit_connection_id (),
                    nbdkit_request_cookie (), offset, count);
      *err = ENOTSUP;
      return -1;
    }
    if (fast_zero_mode == FAST_IGNORE)
      flags &= ~NBDKIT_FLAG_FAST_ZERO;
  }

  switch (zero_mode) {
  case ZERO_EMULATE:
    return emulate_zero (next, count, offset, flags, err);
  case ZERO_NOTRIM:
    flags &= ~NBDKIT_FLAG_MAY_TRIM;
    break;
  default:
    break;
  }
  return next->zero (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "nozero",
  .longname = "nbdkit nozero filter",
  .config = nozero_config,
  .config_help = nozero_config_help,
  .prepare = nozero_prepare,
  .can_zero = nozero_can_zero,
  .can_fast_zero = nozero_can_fast_zero,
  .zero = nozero_zero,
};

NBDKIT_REGISTER_FILTER (filter)
