/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The time-limit filter: a client may use the export for so long after
 * opening it (time-limit, default 60 s), then its requests fail with
 * ESHUTDOWN: this filter fails the first, and nbdkit_disconnect (gently:
 * requests already running finish) has the server refuse the rest
 * until the client hangs up.  The limit is checked
 * when a request arrives, so a client that sends nothing can stay
 * connected past it until its next request.  The limit is set by
 * config and read-only afterwards; each connection's handle holds when
 * it opened and, as an atomic, whether its time is up.
 */
#include <config.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "now-ns.h"

static unsigned limit_sec = 60, limit_nsec;

struct handle {
  uint64_t opened_ns;
  atomic_bool expired;
};

static int
time_limit_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                   const char *key, const char *value)
{
  if (strcmp (key, "time-limit") == 0) {
    if (nbdkit_parse_delay (key, value, &limit_sec, &limit_nsec) == -1)
      return -1;
    if (limit_sec == 0 && limit_nsec == 0) {
      nbdkit_error ("time-limit: the limit must be above zero");
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

#define time_limit_config_help \
  "time-limit=<TIME>           How long a client may use the export\n" \
  "                            (default 60 seconds)."

static void *
time_limit_open (nbdkit_next_open *next, nbdkit_context *context,
                 int readonly, const char *exportname, int is_tls)
{
  if (next (context, readonly, exportname) == -1)
    return NULL;
  struct handle *h = malloc (sizeof *h);
  if (h == NULL) {
    nbdkit_error ("malloc: %m");
    return NULL;
  }
  h->opened_ns = now_ns ();
  atomic_init (&h->expired, false);
  return h;
}

static void
time_limit_close (void *handle)
{
  free (handle);
}

/* Whether the connection's time is up; if so *err is set. */
static bool
expired (struct handle *h, int *err)
{
  if (!atomic_load (&h->expired)) {
    uint64_t limit_ns = (uint64_t) limit_sec * 1000000000 + limit_nsec;
    uint64_t elapsed_ns = now_ns () - h->opened_ns;

    if (elapsed_ns < limit_ns)
      return false;
    /* The first request to see it (of any that race) ends the
     * connection.
     */
    if (!atomic_exchange (&h->expired, true)) {
      NBDKIT_PROBE (time_limit_expired, nbdkit_connection_id (),
                    nbdkit_request_cookie (), elapsed_ns, limit_ns);
      nbdkit_error ("time limit of %u.%09u seconds exceeded: "
                    "disconnecting the client", limit_sec, limit_nsec);
      nbdkit_disconnect (0);
    }
  }
  *err = ESHUTDOWN;
  return true;
}

static int
time_limit_pread (nbdkit_next *next, void *handle, void *buf,
                  uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (expired (handle, err))
    return -1;
  return next->pread (next, buf, count, offset, flags, err);
}

static int
time_limit_pwrite (nbdkit_next *next, void *handle, const void *buf,
                   uint32_t count, uint64_t offset, uint32_t flags,
                   int *err)
{
  if (expired (handle, err))
    return -1;
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
time_limit_flush (nbdkit_next *next, void *handle, uint32_t flags,
                  int *err)
{
  if (expired (handle, err))
    return -1;
  return next->flush (next, flags, err);
}

static int
time_limit_trim (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err)
{
  if (expired (handle, err))
    return -1;
  return next->trim (next, count, offset, flags, err);
}

static int
time_limit_zero (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err)
{
  if (expired (handle, err))
    return -1;
  return next->zero (next, count, offset, flags, err);
}

static int
time_limit_extents (nbdkit_next *next, void *handle, uint32_t count,
                    uint64_t offset, uint32_t flags,
                    struct nbdkit_extents *extents, int *err)
{
  if (expired (handle, err))
    return -1;
  return next->extents (next, count, offset, flags, extents, err);
}

static int
time_limit_cache (nbdkit_next *next, void *handle, uint32_t count,
                  uint64_t offset, uint32_t flags, int *err)
{
  if (expired (handle, err))
    return -1;
  return next->cache (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "time-limit",
  .longname = "nbdkit time-limit filter",
  .config = time_limit_config,
  .config_help = time_limit_config_help,
  .open = time_limit_open,
  .close = time_limit_close,
  .pread = time_limit_pread,
  .pwrite = time_limit_pwrite,
  .flush = time_limit_flush,
  .trim = time_limit_trim,
  .zero = time_limit_zero,
  .extents = time_limit_extents,
  .cache = time_limit_cache,
};

NBDKIT_REGISTER_FILTER (filter)
