/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The delay filter: sleep before passing a request (or an open or a
 * close) to the layer below, to imitate a slow or distant server.  One
 * delay per command, set by config (in milliseconds) and read-only
 * afterwards; the sleeps hold no lock, so parallel requests sleep in
 * parallel.
 */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "array-size.h"

enum {
  D_READ, D_WRITE, D_ZERO, D_TRIM, D_EXTENTS, D_CACHE, D_OPEN, D_CLOSE,
  D_COUNT
};

static const char *const names[D_COUNT] = {
  [D_READ] = "read", [D_WRITE] = "write", [D_ZERO] = "zero",
  [D_TRIM] = "trim", [D_EXTENTS] = "extents", [D_CACHE] = "cache",
  [D_OPEN] = "open", [D_CLOSE] = "close",
};

static unsigned delay_ms[D_COUNT];
static bool delay_fast_zero = true;

/* SECS (a whole number of seconds) or NNms. */
static int
parse_delay (const char *key, const char *value, unsigned *ms)
{
  size_t len = strlen (value);

  if (len > 2 && strcmp (value + len - 2, "ms") == 0) {
    char digits[32];
    if (len - 2 >= sizeof digits) {
      nbdkit_error ("%s: cannot parse milliseconds: %s", key, value);
      return -1;
    }
    memcpy (digits, value, len - 2);
    digits[len - 2] = '\0';
    if (nbdkit_parse_unsigned (key, digits, ms) == -1)
      return -1;
    return 0;
  }

  unsigned secs;
  if (nbdkit_parse_unsigned (key, value, &secs) == -1)
    return -1;
  if (secs > UINT_MAX / 1000) {
    nbdkit_error ("%s: %s seconds is too long", key, value);
    return -1;
  }
  *ms = secs * 1000;
  return 0;
}

/* Keys, including the spellings nbdkit 1.32 also accepts. */
static const struct {
  const char *key;
  int which;
} keys[] = {
  { "rdelay", D_READ }, { "delay-read", D_READ }, { "delay-reads", D_READ },
  { "delay-write", D_WRITE }, { "delay-writes", D_WRITE },
  { "delay-zero", D_ZERO }, { "delay-zeroes", D_ZERO },
  { "delay-trim", D_TRIM }, { "delay-trims", D_TRIM },
  { "delay-discard", D_TRIM }, { "delay-discards", D_TRIM },
  { "delay-extent", D_EXTENTS }, { "delay-extents", D_EXTENTS },
  { "delay-cache", D_CACHE },
  { "delay-open", D_OPEN }, { "delay-close", D_CLOSE },
};

static int
delay_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  if (strcmp (key, "wdelay") == 0) {
    unsigned ms;
    if (parse_delay (key, value, &ms) == -1)
      return -1;
    delay_ms[D_WRITE] = delay_ms[D_ZERO] = delay_ms[D_TRIM] = ms;
    return 0;
  }
  if (strcmp (key, "delay-fast-zero") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    delay_fast_zero = r;
    return 0;
  }
  for (size_t i = 0; i < ARRAY_SIZE (keys); i++)
    if (strcmp (key, keys[i].key) == 0)
      return parse_delay (key, value, &delay_ms[keys[i].which]);
  return next (nxdata, key, value);
}

#define delay_config_help \
  "rdelay=<NN>[ms]             Read delay in seconds or milliseconds.\n" \
  "delay-read=<NN>[ms]         The same.\n" \
  "delay-write=<NN>[ms]        Write delay.\n" \
  "delay-zero=<NN>[ms]         Write-zeroes delay.\n" \
  "delay-trim=<NN>[ms]         Trim delay.\n" \
  "delay-extents=<NN>[ms]      Block status delay.\n" \
  "delay-cache=<NN>[ms]        Cache delay.\n" \
  "wdelay=<NN>[ms]             Write, zero and trim delay.\n" \
  "delay-fast-zero=<BOOL>      Delay fast zeroes too (default true).\n" \
  "delay-open=<NN>[ms]         Delay opening a connection.\n" \
  "delay-close=<NN>[ms]        Delay closing a connection."

/* Sleep for one command's delay.  Returns -1 with *err set if the
 * sleep was cut short.
 */
static int
do_delay (int which, int *err)
{
  unsigned ms = delay_ms[which];

  if (ms == 0)
    return 0;
  NBDKIT_PROBE (delay_sleep, nbdkit_connection_id (), nbdkit_request_cookie (),
                names[which], (uint64_t) ms * 1000000);
  if (nbdkit_nanosleep (ms / 1000, (ms % 1000) * 1000000) == -1) {
    *err = errno;
    return -1;
  }
  return 0;
}

static void *
delay_open (nbdkit_next_open *next, nbdkit_context *context,
            int readonly, const char *exportname, int is_tls)
{
  int err;

  /* A sleep cut short by shutdown still lets the open go on. */
  if (do_delay (D_OPEN, &err) == -1 && err != ESHUTDOWN) {
    errno = err;
    nbdkit_error ("delay-open: %m");
    return NULL;
  }
  if (next (context, readonly, exportname) == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static void
delay_close (void *handle)
{
  int err;
  do_delay (D_CLOSE, &err);
}

/* Fast zeroes that are not delayed fail at once: say we can. */
static int
delay_can_fast_zero (nbdkit_next *next, void *handle)
{
  if (delay_ms[D_ZERO] && !delay_fast_zero)
    return 1;
  return next->can_fast_zero (next);
}

static int
delay_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  if (do_delay (D_READ, err) == -1)
    return -1;
  return next->pread (next, buf, count, offset, flags, err);
}

static int
delay_pwrite (nbdkit_next *next, void *handle, const void *buf,
              uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (do_delay (D_WRITE, err) == -1)
    return -1;
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
delay_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  if ((flags & NBDKIT_FLAG_FAST_ZERO) && delay_ms[D_ZERO] &&
      !delay_fast_zero) {
    *err = ENOTSUP;
    return -1;
  }
  if (do_delay (D_ZERO, err) == -1)
    return -1;
  return next->zero (next, count, offset, flags, err);
}

static int
delay_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  if (do_delay (D_TRIM, err) == -1)
    return -1;
  return next->trim (next, count, offset, flags, err);
}

static int
delay_extents (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags,
               struct nbdkit_extents *extents, int *err)
{
  if (do_delay (D_EXTENTS, err) == -1)
    return -1;
  return next->extents (next, count, offset, flags, extents, err);
}

static int
delay_cache (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  if (do_delay (D_CACHE, err) == -1)
    return -1;
  return next->cache (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "delay",
  .longname = "nbdkit delay filter",
  .config = delay_config,
  .config_help = delay_config_help,
  .open = delay_open,
  .close = delay_close,
  .can_fast_zero = delay_can_fast_zero,
  .pread = delay_pread,
  .pwrite = delay_pwrite,
  .zero = delay_zero,
  .trim = delay_trim,
  .extents = delay_extents,
  .cache = delay_cache,
};

NBDKIT_REGISTER_FILTER (filter)
