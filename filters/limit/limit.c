/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The limit filter: at most limit=N clients at once (default 1; 0
 * means no limit).  A client over the limit is turned away in
 * .preconnect, before the handshake; the count is checked again and
 * taken in .open (a slow handshake must not let extra clients
 * through) and given back in .close.
 */
#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"

/* Set by config, read-only afterwards. */
static unsigned limit = 1;

/* Clients that have opened the export and not yet closed it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned connections;

static int
limit_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  if (strcmp (key, "limit") == 0)
    return nbdkit_parse_unsigned ("limit", value, &limit);
  return next (nxdata, key, value);
}

#define limit_config_help \
  "limit=N             At most N clients at once (default 1, 0: no limit)."

/* Called with the lock held: may one more client come in? */
static bool
over_limit (void)
{
  if (limit == 0 || connections < limit)
    return false;
  NBDKIT_PROBE (limit_refused, connections, limit);
  nbdkit_error ("%u clients already connected (limit=%u), "
                "connection refused", connections, limit);
  return true;
}

static int
limit_preconnect (nbdkit_next_preconnect *next, nbdkit_backend *nxdata,
                  int readonly)
{
  {
    LOCK_FOR_SCOPE (&lock);
    if (over_limit ())
      return -1;
  }
  return next (nxdata, readonly);
}

static void *
limit_open (nbdkit_next_open *next, nbdkit_context *context,
            int readonly, const char *exportname, int is_tls)
{
  /* Take the place first, so the layers below are never opened for a
   * client that will be refused.
   */
  {
    LOCK_FOR_SCOPE (&lock);
    if (over_limit ())
      return NULL;
    connections++;
  }
  if (next (context, readonly, exportname) == -1) {
    LOCK_FOR_SCOPE (&lock);
    connections--;
    return NULL;
  }
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static void
limit_close (void *handle)
{
  LOCK_FOR_SCOPE (&lock);
  connections--;
}

static struct nbdkit_filter filter = {
  .name = "limit",
  .longname = "nbdkit limit filter",
  .config = limit_config,
  .config_help = limit_config_help,
  .preconnect = limit_preconnect,
  .open = limit_open,
  .close = limit_close,
};

NBDKIT_REGISTER_FILTER (filter)
