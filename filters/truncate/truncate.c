/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The truncate filter: give the export a different size from the layer
 * below.  truncate= sets the size outright, round-up= and round-down=
 * then round it to a power of two.  Bytes past the end of the layer
 * below (the "tail") read as zeroes, and may be written only with
 * zeroes (other data fails with ENOSPC, as in nbdkit); requests are
 * clipped to the layer below's real size before being passed on.
 * Those that need nothing else (all of them within the real size, a
 * trim or zero clipped) pass on to a plugin that completes them later
 * (nbdkit-async(3)); a read or write reaching into the tail takes the
 * synchronous path, which fills or checks the tail.
 *
 * Each connection computes its sizes in .prepare (the layer below may
 * report a different size to each connection); they are read-only
 * afterwards, so requests in parallel need no lock.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-async.h>
#include <nbdkit-probe.h>

#include "iszero.h"
#include "ispowerof2.h"
#include "minmax.h"
#include "rounding.h"

/* Set by config before any connection; read-only afterwards. */
static int64_t truncate_size = -1;      /* -1: keep the size below */
static unsigned round_up = 0;           /* 0: no rounding */
static unsigned round_down = 0;

struct handle {
  int64_t real_size;            /* size of the layer below */
  int64_t size;                 /* size we serve */
};

static int
parse_round (const char *key, const char *value, unsigned *ret)
{
  int64_t r = nbdkit_parse_size (value);

  if (r == -1)
    return -1;
  if (r == 0) {
    nbdkit_error ("%s: must be > 0 if set", key);
    return -1;
  }
  if (r > UINT32_MAX) {
    nbdkit_error ("%s: %s is too large (at most 4294967295)", key, value);
    return -1;
  }
  if (!is_power_of_2 (r)) {
    nbdkit_error ("%s: %s is not a power of 2", key, value);
    return -1;
  }
  *ret = r;
  return 0;
}

static int
truncate_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  if (strcmp (key, "truncate") == 0) {
    truncate_size = nbdkit_parse_size (value);
    return truncate_size == -1 ? -1 : 0;
  }
  if (strcmp (key, "round-up") == 0)
    return parse_round (key, value, &round_up);
  if (strcmp (key, "round-down") == 0)
    return parse_round (key, value, &round_down);
  return next (nxdata, key, value);
}

#define truncate_config_help \
  "truncate=<SIZE>     The new size of the export.\n" \
  "round-up=<N>        Round the size up to a multiple of N (a power of 2).\n" \
  "round-down=<N>      Round the size down to a multiple of N (a power of 2)."

static void *
truncate_open (nbdkit_next_open *next, nbdkit_context *nxdata,
               int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (next (nxdata, readonly, exportname) == -1)
    return NULL;
  h = malloc (sizeof *h);
  if (h == NULL) {
    nbdkit_error ("malloc: %m");
    return NULL;
  }
  h->real_size = h->size = -1;
  return h;
}

static void
truncate_close (void *handle)
{
  free (handle);
}

/* The served size, from the size below, or -1 after an error. */
static int64_t
served_size (int64_t real_size)
{
  int64_t size = truncate_size >= 0 ? truncate_size : real_size;

  if (round_up > 0) {
    if (size > INT64_MAX - (round_up - 1)) {
      nbdkit_error ("cannot round size %" PRIi64
                    " up to a multiple of %u", size, round_up);
      return -1;
    }
    size = ROUND_UP (size, (int64_t) round_up);
  }
  if (round_down > 0)
    size = ROUND_DOWN (size, (int64_t) round_down);
  return size;
}

static int
truncate_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;

  h->real_size = next->get_size (next);
  if (h->real_size == -1)
    return -1;
  h->size = served_size (h->real_size);
  return h->size == -1 ? -1 : 0;
}

static int64_t
truncate_get_size (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->size;
}

/* How many of the COUNT bytes at OFFSET lie inside the layer below. */
static uint32_t
below_count (const struct handle *h, uint32_t count, uint64_t offset)
{
  if (offset >= (uint64_t) h->real_size)
    return 0;
  return MIN ((uint64_t) count, h->real_size - offset);
}

static int
truncate_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  uint32_t n = below_count (h, count, offset);

  if (n > 0 && next->pread (next, buf, n, offset, flags, err) == -1)
    return -1;
  if (n < count) {
    NBDKIT_PROBE (truncate_read_tail, nbdkit_connection_id (),
                  nbdkit_request_cookie (), offset + n, count - n);
    memset ((char *) buf + n, 0, count - n);
  }
  return 0;
}

static int
truncate_pwrite (nbdkit_next *next, void *handle, const void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  uint32_t n = below_count (h, count, offset);

  /* Check the tail first, so a refused write changes nothing. */
  if (n < count && !is_zero ((const char *) buf + n, count - n)) {
    NBDKIT_PROBE (truncate_write_refused, nbdkit_connection_id (),
                  nbdkit_request_cookie (), offset + n, count - n);
    nbdkit_debug ("non-zero write past the end of the plugin "
                  "(offset %" PRIu64 ")", offset + n);
    *err = ENOSPC;
    return -1;
  }
  /* The zeroes of the tail need no storing, FUA or not. */
  if (n > 0)
    return next->pwrite (next, buf, n, offset, flags, err);
  return 0;
}

static int
truncate_trim (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  uint32_t n = below_count (h, count, offset);

  if (n > 0)
    return next->trim (next, n, offset, flags, err);
  return 0;
}

static int
truncate_zero (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  uint32_t n = below_count (h, count, offset);

  if (n > 0)
    return next->zero (next, n, offset, flags, err);
  return 0;
}

static int
truncate_cache (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  uint32_t n = below_count (h, count, offset);

  if (n > 0)
    return next->cache (next, n, offset, flags, err);
  return 0;
}

static int
truncate_extents (nbdkit_next *next, void *handle, uint32_t count,
                  uint64_t offset, uint32_t flags,
                  struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  uint32_t n = below_count (h, count, offset);
  struct nbdkit_extents *below;
  size_t i;

  /* The tail is a hole reading as zeroes, to the end of the export. */
  if (n == 0) {
    if (nbdkit_add_extent (extents, offset, h->size - offset,
                           NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1) {
      *err = errno;
      return -1;
    }
    return 0;
  }

  /* Ask below, clipped to its own size, and copy what it says.  The
   * client asks again for whatever lies past it.
   */
  below = nbdkit_extents_new (offset, MIN (h->real_size, h->size));
  if (below == NULL) {
    *err = errno;
    return -1;
  }
  if (next->extents (next, n, offset, flags, below, err) == -1) {
    nbdkit_extents_free (below);
    return -1;
  }
  for (i = 0; i < nbdkit_extents_count (below); i++) {
    struct nbdkit_extent e = nbdkit_get_extent (below, i);
    if (nbdkit_add_extent (extents, e.offset, e.length, e.type) == -1) {
      *err = errno;
      nbdkit_extents_free (below);
      return -1;
    }
  }
  nbdkit_extents_free (below);
  return 0;
}

static int
truncate_async_prepare (nbdkit_next *next, void *handle, int cmd,
                        uint32_t *count, uint64_t *offset, uint32_t *flags,
                        int *err)
{
  struct handle *h = handle;
  if (cmd == NBDKIT_ASYNC_CMD_FLUSH)
    return NBDKIT_ASYNC_PASS;
  uint32_t n = below_count (h, *count, *offset);
  if (n == *count)
    return NBDKIT_ASYNC_PASS;
  if (n > 0 && (cmd == NBDKIT_ASYNC_CMD_TRIM || cmd == NBDKIT_ASYNC_CMD_ZERO)) {
    *count = n;
    return NBDKIT_ASYNC_PASS;
  }
  return NBDKIT_ASYNC_SYNC;
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_filter_ops
nbdkit_async_filter_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .prepare = truncate_async_prepare,
};

static struct nbdkit_filter filter = {
  .name = "truncate",
  .longname = "nbdkit truncate filter",
  .config = truncate_config,
  .config_help = truncate_config_help,
  .open = truncate_open,
  .close = truncate_close,
  .prepare = truncate_prepare,
  .get_size = truncate_get_size,
  .pread = truncate_pread,
  .pwrite = truncate_pwrite,
  .trim = truncate_trim,
  .zero = truncate_zero,
  .cache = truncate_cache,
  .extents = truncate_extents,
};

NBDKIT_REGISTER_FILTER (filter)
