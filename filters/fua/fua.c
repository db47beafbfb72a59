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
 * flush-on-close=true adds one flush of the plugin when a client that
 * could write goes away (in .finalize, whatever the mode: with discard
 * it is the one flush the plugin gets), so that what the client wrote
 * is durable once the connection is gone, even if it never flushed.
 *
 * The settings come from config and are read-only afterwards: no
 * locking.
 */
#include <config.h>

#include <errno.h>
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
static bool flush_on_close = false;

static int
fua_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  size_t i;

  if (strcmp (key, "flush-on-close") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    flush_on_close = r;
    return 0;
  }
  /* fua-mode is nbdkit 1.44's name, fuamode the older one. */
  if (strcmp (key, "fuamode") != 0 && strcmp (key, "fua-mode") != 0)
    return next (nxdata, key, value);
  for (i = 0; i < ARRAY_SIZE (mode_names); i++) {
    if (strcmp (value, mode_names[i]) == 0) {
      mode = i;
      return 0;
    }
  }
  nbdkit_error ("%s: unknown mode '%s' (expecting none, emulate, "
                "native, force, pass or discard)", key, value);
  return -1;
}

#define fua_config_help \
  "fua-mode=<MODE>      none (default), emulate, native, force, pass\n" \
  "                     or discard (also spelt fuamode=).\n" \
  "flush-on-close=BOOL  Flush when a client that can write goes away."

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

/* flush-on-close: the client is gone (or going); flush what it wrote.
 * A connection that could not write, or a plugin that cannot flush,
 * has nothing to flush.  A failed flush fails the finalize, which the
 * server logs: the data may not be durable.
 */
static int
fua_finalize (nbdkit_next *next, void *handle)
{
  int err = 0, r;

  if (!flush_on_close)
    return 0;
  r = next->can_write (next);
  if (r == -1)
    return -1;
  if (r == 0)
    return 0;
  r = next->can_flush (next);
  if (r == -1)
    return -1;
  if (r == 0) {
    nbdkit_debug ("flush-on-close: the plugin cannot flush");
    return 0;
  }
  r = next->flush (next, 0, &err);
  NBDKIT_PROBE (fua_flush_on_close, r == -1 ? (err ? err : EIO) : 0);
  if (r == -1) {
    nbdkit_error ("flush-on-close: flush failed: %s",
                  strerror (err ? err : EIO));
    return -1;
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
      NBDKIT_PROBE (fua_forced, nbdkit_connection_id (),
                    nbdkit_request_cookie (), offset, count);
    return flags | NBDKIT_FLAG_FUA;
  case MODE_DISCARD:
    if (fua)
      NBDKIT_PROBE (fua_discarded, nbdkit_connection_id (),
                    nbdkit_request_cookie (), offset, count);
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
    NBDKIT_PROBE (fua_flush_ignored, nbdkit_connection_id (),
                  nbdkit_request_cookie ());
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
  .finalize = fua_finalize,
  .can_flush = fua_can_flush,
  .can_fua = fua_can_fua,
  .pwrite = fua_pwrite,
  .trim = fua_trim,
  .zero = fua_zero,
  .flush = fua_flush,
};

NBDKIT_REGISTER_FILTER (filter)
