/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The error filter: fail a chosen share of requests with a chosen
 * errno, so that clients' error paths can be tested.  Each command
 * (pread, pwrite, trim, zero, extents, cache) has its own settings:
 * an errno, a rate between 0 and 1, and an optional trigger file that
 * must exist for errors to be injected.  error=, error-rate= and
 * error-file= set all six at once; error-CMD*= set one.
 *
 * Settings are filled by config and read-only afterwards; the random
 * state is per thread, so requests never contend for it.
 */
#include <config.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "array-size.h"

struct error_settings {
  const char *cmd;              /* the command's name, as in keys */
  int error;                    /* errno to inject */
  double rate;                  /* 0 = never .. 1 = always */
  char *file;                   /* inject only while this exists */
};

enum { CMD_PREAD, CMD_PWRITE, CMD_TRIM, CMD_ZERO, CMD_EXTENTS, CMD_CACHE };

static struct error_settings settings[] = {
  [CMD_PREAD] = { "pread", EIO, 0, NULL },
  [CMD_PWRITE] = { "pwrite", EIO, 0, NULL },
  [CMD_TRIM] = { "trim", EIO, 0, NULL },
  [CMD_ZERO] = { "zero", EIO, 0, NULL },
  [CMD_EXTENTS] = { "extents", EIO, 0, NULL },
  [CMD_CACHE] = { "cache", EIO, 0, NULL },
};

/* The errors NBD can carry, by name. */
static const struct {
  const char *name;
  int err;
} errnos[] = {
  { "EPERM", EPERM }, { "EIO", EIO }, { "ENOMEM", ENOMEM },
  { "EINVAL", EINVAL }, { "ENOSPC", ENOSPC }, { "ESHUTDOWN", ESHUTDOWN },
};

static const char *
errno_name (int err)
{
  for (size_t i = 0; i < ARRAY_SIZE (errnos); i++)
    if (errnos[i].err == err)
      return errnos[i].name;
  return "unknown";
}

static int
parse_errno (const char *key, const char *value, int *r)
{
  for (size_t i = 0; i < ARRAY_SIZE (errnos); i++)
    if (strcmp (value, errnos[i].name) == 0) {
      *r = errnos[i].err;
      return 0;
    }
  nbdkit_error ("%s: unknown error name '%s' (expected EPERM, EIO, ENOMEM, "
                "EINVAL, ENOSPC or ESHUTDOWN)", key, value);
  return -1;
}

/* "N%" (0..100) or a probability (0..1). */
static int
parse_rate (const char *key, const char *value, double *r)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (value, &end);
  if (errno != 0 || end == value) {
    nbdkit_error ("%s: could not parse rate '%s'", key, value);
    return -1;
  }
  if (*end == '%') {
    d /= 100;
    end++;
  }
  if (*end != '\0') {
    nbdkit_error ("%s: could not parse rate '%s'", key, value);
    return -1;
  }
  if (!(d >= 0 && d <= 1)) {     /* also refuses NaN */
    nbdkit_error ("%s: rate out of range (0..1 or 0%%..100%%): '%s'",
                  key, value);
    return -1;
  }
  *r = d;
  return 0;
}

static void
error_unload (void)
{
  for (size_t i = 0; i < ARRAY_SIZE (settings); i++)
    free (settings[i].file);
}

/* Apply one setting (what = "", "-rate" or "-file") to one command,
 * or to all of them when i is -1.
 */
static int
set_one (int i, const char *what, const char *key, const char *value)
{
  size_t first = i == -1 ? 0 : (size_t) i;
  size_t last = i == -1 ? ARRAY_SIZE (settings) : (size_t) i + 1;

  if (strcmp (what, "") == 0) {
    int err;
    if (parse_errno (key, value, &err) == -1)
      return -1;
    for (size_t j = first; j < last; j++)
      settings[j].error = err;
  }
  else if (strcmp (what, "-rate") == 0) {
    double rate;
    if (parse_rate (key, value, &rate) == -1)
      return -1;
    for (size_t j = first; j < last; j++)
      settings[j].rate = rate;
  }
  else {
    for (size_t j = first; j < last; j++) {
      char *path = nbdkit_absolute_path (value);
      if (path == NULL)
        return -1;
      free (settings[j].file);
      settings[j].file = path;
    }
  }
  return 0;
}

static int
error_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  static const char *whats[] = { "", "-rate", "-file" };

  if (strncmp (key, "error", 5) == 0) {
    const char *rest = key + 5;
    int cmd = -1;

    /* error-CMD... names one command. */
    if (rest[0] == '-') {
      for (size_t i = 0; i < ARRAY_SIZE (settings); i++) {
        size_t n = strlen (settings[i].cmd);
        if (strncmp (rest + 1, settings[i].cmd, n) == 0) {
          cmd = i;
          rest += 1 + n;
          break;
        }
      }
    }
    for (size_t w = 0; w < ARRAY_SIZE (whats); w++)
      if (strcmp (rest, whats[w]) == 0)
        return set_one (cmd, whats[w], key, value);
  }
  return next (nxdata, key, value);
}

#define error_config_help \
  "error=EPERM|EIO|ENOMEM|EINVAL|ENOSPC|ESHUTDOWN\n" \
  "                     The errno to inject (default EIO).\n" \
  "error-rate=0%..100%|0..1\n" \
  "                     Share of requests that fail (default 0).\n" \
  "error-file=FILE      Inject only while FILE exists.\n" \
  "error-pread*, error-pwrite*, error-trim*, error-zero*, error-extents*,\n" \
  "error-cache*         The same, for one command only."

/* A uniform 64-bit random number.  Each thread has its own splitmix64
 * state, seeded apart from the others by a shared counter.
 */
static uint64_t
random64 (void)
{
  static _Atomic uint64_t seeds;
  static __thread uint64_t state;
  static __thread bool seeded;

  if (!seeded) {
    state = (uint64_t) time (NULL) ^ ((uint64_t) getpid () << 32) ^
      (atomic_fetch_add (&seeds, 1) * UINT64_C (0x9e3779b97f4a7c15));
    seeded = true;
  }
  uint64_t z = (state += UINT64_C (0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Whether this request fails: if so, *err is set and the error is
 * logged and traced.
 */
static bool
inject (int cmd, uint64_t offset, uint32_t count, int *err)
{
  const struct error_settings *s = &settings[cmd];

  if (s->rate <= 0)
    return false;
  if (s->file && access (s->file, F_OK) == -1)
    return false;
  if (s->rate < 1) {
    /* 53 random bits give a uniform double in [0, 1). */
    double x = (random64 () >> 11) * 0x1.0p-53;
    if (x >= s->rate)
      return false;
  }
  NBDKIT_PROBE (error_injected, nbdkit_connection_id (),
                nbdkit_request_cookie (), s->cmd, s->error, offset, count);
  nbdkit_error ("injecting %s error into %s", errno_name (s->error), s->cmd);
  *err = s->error;
  return true;
}

static int
error_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  if (inject (CMD_PREAD, offset, count, err))
    return -1;
  return next->pread (next, buf, count, offset, flags, err);
}

static int
error_pwrite (nbdkit_next *next, void *handle, const void *buf,
              uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (inject (CMD_PWRITE, offset, count, err))
    return -1;
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
error_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  if (inject (CMD_TRIM, offset, count, err))
    return -1;
  return next->trim (next, count, offset, flags, err);
}

static int
error_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  if (inject (CMD_ZERO, offset, count, err))
    return -1;
  return next->zero (next, count, offset, flags, err);
}

static int
error_extents (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags,
               struct nbdkit_extents *extents, int *err)
{
  if (inject (CMD_EXTENTS, offset, count, err))
    return -1;
  return next->extents (next, count, offset, flags, extents, err);
}

static int
error_cache (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  if (inject (CMD_CACHE, offset, count, err))
    return -1;
  return next->cache (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "error",
  .longname = "nbdkit error injection filter",
  .unload = error_unload,
  .config = error_config,
  .config_help = error_config_help,
  .pread = error_pread,
  .pwrite = error_pwrite,
  .trim = error_trim,
  .zero = error_zero,
  .extents = error_extents,
  .cache = error_cache,
};

NBDKIT_REGISTER_FILTER (filter)
