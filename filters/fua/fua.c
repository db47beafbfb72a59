/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The fua filter: change how Forced Unit Access (the FUA flag on
 * writes, trims and zeroes) and flushes reach the plugin.
 *
 *   none      FUA not advertised (flush still is, if the plugin can)
 *   emulate   FUA advertised as emulated: the server sends the request
 *             down without the flag and flushes after it
 *   native    FUA advertised as native and passed down as it comes
 *   force     FUA added to every write, trim and zero; flush a no-op
 *   pass      nothing changed
 *   discard   FUA dropped from every request; flush a no-op (unsafe)
 *
 * The mode is set by config and read-only afterwards: no locking.
 */
#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "array-size.h"

enum fua_mode { MODE_NONE, MODE_EMULATE, MODE_NATIVE, MODE_FORCE,
                MODE_PASS, MODE_DISCARD };

static const char *const mode_names[] = {
  [MODE_NONE] = "none", [MODE_EMULATE] = "emulate",
  [MODE_NATIVE] = "native", [MODE_FORCE] = "force",
  [MODE_PASS] = "pass", [MODE_DISCARD] = "discard",
};

static enum fua_mode mode = MODE_NONE;

static int
fua_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  size_t i;

  if (strcmp (key, "fuamode") != 0)
    return next (nxdata, key, value);
  for (i = 0; i < ARRAY_SIZE (mode_names); i++) {
    if (strcmp (value, mode_names[i]) == 0) {
      mode = i;
      return 0;
    }
  }
  nbdkit_error ("fuamode: unknown mode '%s' (expecting none, emulate, "
                "native, force, pass or discard)", value);
  return -1;
}

#define fua_config_help \
  "fuamode=<MODE>       none (default), emulate, native, force, pass\n" \
  "                     or discard."

/* emulate needs flush below, native and force need FUA below. */
static int
fua_prepare (nbdkit_next *next, void *handle, int readonly)
{
  int r;

  switch (mode) {
  case MODE_EMULATE:
    r = next->can_flush (next);
    if (r == -1)
      return -1;
    if (r == 0) {
      nbdkit_error ("fuamode: 'emulate' needs a plugin that can flush");
      return -1;
    }
    break;
  case MODE_NATIVE:
  case MODE_FORCE:
    r = next->can_fua (next);
    if (r == -1)
      return -1;
    if (r == NBDKIT_FUA_NONE) {
      nbdkit_error ("fuamode: '%s' needs a plugin that supports FUA",
                    mode_names[mode]);
      return -1;
    }
    break;
  default:
    break;
  }
  return 0;
}

static int
fua_can_flush (nbdkit_next *next, void *handle)
{
  if (mode == MODE_FORCE || mode == MODE_DISCARD)
    return 1;                   /* a no-op, so always possible */
  return next->can_flush (next);
}

static int
fua_can_fua (nbdkit_next *next, void *handle)
{
  switch (mode) {
  case MODE_NONE:
    return NBDKIT_FUA_NONE;
  case MODE_EMULATE:
    return NBDKIT_FUA_EMULATE;
  case MODE_PASS:
    return next->can_fua (next);
  default:                      /* native, force, discard */
    return NBDKIT_FUA_NATIVE;
  }
}

/* The flags to send down for a write, trim or zero.  *FLUSH is set if
 * a flush must follow (FUA reaching us in emulate mode: the server
 * normally emulates it before calling us, so this is a safeguard).
 */
static uint32_t
adjust_flags (uint32_t flags, uint64_t offset, uint32_t count,
              bool *flush)
{
  bool fua = flags & NBDKIT_FLAG_FUA;

  *flush = false;
  switch (mode) {
  case MODE_EMULATE:
    *flush = fua;
    return flags & ~NBDKIT_FLAG_FUA;
  case MODE_FORCE:
    if (!fua)
      NBDKIT_PROBE (fua_forced, offset, count);
    return flags | NBDKIT_FLAG_FUA;
  case MODE_DISCARD:
    if (fua)
      NBDKIT_PROBE (fua_discarded, offset, count);
    return flags & ~NBDKIT_FLAG_FUA;
  default:
    return flags;
  }
}

static int
fua_pwrite (nbdkit_next *next, void *handle, const void *buf,
            uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  bool flush;

  flags = adjust_flags (flags, offset, count, &flush);
  if (next->pwrite (next, buf, count, offset, flags, err) == -1)
    return -1;
  return flush ? next->flush (next, 0, err) : 0;
}

static int
fua_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  bool flush;

  flags = adjust_flags (flags, offset, count, &flush);
  if (next->trim (next, count, offset, flags, err) == -1)
    return -1;
  return flush ? next->flush (next, 0, err) : 0;
}

static int
fua_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  bool flush;

  flags = adjust_flags (flags, offset, count, &flush);
  if (next->zero (next, count, offset, flags, err) == -1)
    return -1;
  return flush ? next->flush (next, 0, err) : 0;
}

static int
fua_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  /* force: every write was already durable; discard: by request. */
  if (mode == MODE_FORCE || mode == MODE_DISCARD) {
    NBDKIT_PROBE (fua_flush_ignored);
    return 0;
  }
  return next->flush (next, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "fua",
  .longname = "nbdkit fua filter",
  .config = fua_config,
  .config_help = fua_config_help,
  .prepare = fua_prepare,
  .can_flush = fua_can_flush,
  .can_fua = fua_can_fua,
  .pwrite = fua_pwrite,
  .trim = fua_trim,
  .zero = fua_zero,
  .flush = fua_flush,
};

NBDKIT_REGISTER_FILTER (filter)
