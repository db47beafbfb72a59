/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The retry filter: when a request fails, close the layers below this
 * connection's filter, wait, open them again (with the next-context
 * API) and repeat the request, up to retries= times per request, the
 * wait doubling each time with retry-exponential=yes.  With
 * retry-readonly=yes the layers below are reopened read-only after the
 * first failure, for the rest of the connection.
 *
 * The thread model is SERIALIZE_REQUESTS: a connection's requests run
 * one at a time, so a reopen never pulls the layer below out from
 * under another request of the same connection, and the handle needs
 * no lock.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

/* Set by config; read-only afterwards. */
static unsigned retries = 5;
static unsigned retry_delay = 2;        /* seconds */
static bool retry_exponential = true;
static bool retry_readonly = false;

/* --metrics' retries by command; NULL without --metrics. */
static struct nbdkit_metric *retries_metric;

static void
retry_load (void)
{
  retries_metric = nbdkit_metric_counter ("retries", "Requests retried "
                                          "after a failure, by command.",
                                          "command");
}

static int
retry_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  int r;

  if (strcmp (key, "retries") == 0)
    return nbdkit_parse_unsigned (key, value, &retries);
  if (strcmp (key, "retry-delay") == 0) {
    if (nbdkit_parse_unsigned (key, value, &retry_delay) == -1)
      return -1;
    if (retry_delay == 0) {
      nbdkit_error ("retry-delay cannot be 0");
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "retry-exponential") == 0) {
    if ((r = nbdkit_parse_bool (value)) == -1)
      return -1;
    retry_exponential = r;
    return 0;
  }
  if (strcmp (key, "retry-readonly") == 0) {
    if ((r = nbdkit_parse_bool (value)) == -1)
      return -1;
    retry_readonly = r;
    return 0;
  }
  return next (nxdata, key, value);
}

#define retry_config_help \
  "retries=<N>              Number of retries (default: 5).\n" \
  "retry-delay=<N>          Seconds to wait before retry (default: 2).\n" \
  "retry-exponential=yes|no Exponential back-off (default: yes).\n" \
  "retry-readonly=yes|no    Force read-only on failure (default: no)."

static int
retry_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS;
}

struct retry_handle {
  nbdkit_context *context;      /* ours, to swap the layer below */
  char *exportname;
  bool readonly;                /* the mode to (re)open below in */
  bool open;                    /* false: the last reopen failed */
  unsigned reopens;
};

static void *
retry_open (nbdkit_next_open *next, nbdkit_context *context,
            int readonly, const char *exportname, int is_tls)
{
  struct retry_handle *h;

  if (next (context, readonly, exportname) == -1)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->exportname = strdup (exportname);
  if (h->exportname == NULL) {
    nbdkit_error ("strdup: %m");
    free (h);
    return NULL;
  }
  h->context = context;
  h->readonly = readonly;
  h->open = true;
  return h;
}

static void
retry_close (void *handle)
{
  struct retry_handle *h = handle;

  if (h->reopens)
    nbdkit_debug ("retry: reopens needed: %u", h->reopens);
  free (h->exportname);
  free (h);
}

/* One request's retries so far. */
struct attempt {
  unsigned retry;               /* retries done */
  unsigned delay;               /* seconds before the next one */
};

/* After a failure of command: wait, reopen the layers below, and say
 * whether to try again (with *next replaced).  Gives up (false) when
 * the retries are used up; *err then keeps the last failure's errno.
 */
static bool
do_retry (struct retry_handle *h, struct attempt *a, nbdkit_next **next,
          const char *command, int *err)
{
  if (a->retry == 0)
    a->delay = retry_delay;

  for (;;) {
    if (a->retry >= retries) {
      nbdkit_debug ("retry: %s: could not recover after %u retries",
                    command, retries);
      return false;
    }
    nbdkit_debug ("retry: %s failed (errno %d); retry %u in %u seconds",
                  command, *err, a->retry + 1, a->delay);
    NBDKIT_PROBE (retry_attempt, nbdkit_connection_id (),
                  nbdkit_request_cookie (), command, a->retry + 1,
                  (uint64_t) a->delay * 1000000000);
    nbdkit_metric_add (retries_metric, command, 1);
    if (nbdkit_nanosleep (a->delay, 0) == -1) {
      if (*err == 0)
        *err = errno;
      return false;
    }
    a->retry++;
    if (retry_exponential && a->delay <= UINT32_MAX / 2)
      a->delay *= 2;

    /* Close what is below, unless an earlier reopen left nothing. */
    h->open = false;
    h->reopens++;
    if (*next) {
      int r = (*next)->finalize (*next);
      nbdkit_context_set_next (h->context, NULL);
      nbdkit_next_context_close (*next);
      *next = NULL;
      if (r == -1) {
        /* Data the layer below had not written is lost: that is the
         * command's failure, not something a retry can mend.
         */
        *err = EIO;
        return false;
      }
    }
    if (retry_readonly)
      h->readonly = true;

    nbdkit_next *n =
      nbdkit_next_context_open (nbdkit_context_get_backend (h->context),
                                h->readonly, h->exportname, false);
    if (n && n->prepare (n) == -1) {
      nbdkit_next_context_close (n);
      n = NULL;
    }
    NBDKIT_PROBE (retry_reopen, nbdkit_connection_id (),
                  nbdkit_request_cookie (), command, h->reopens, h->readonly,
                  n ? 0 : -1);
    if (n == NULL) {
      *err = ESHUTDOWN;
      continue;                 /* counts as a retry */
    }
    nbdkit_context_set_next (h->context, n);
    *next = n;
    h->open = true;
    return true;
  }
}

/* Checks before each try, as the layer below may have been reopened
 * with less: the range must still fit and the feature still exist.
 * Returns false with *err set (and *fatal if retrying cannot help).
 */
static bool
usable (struct retry_handle *h, nbdkit_next *next, uint32_t count,
        uint64_t offset, bool check_range, int *err)
{
  if (!h->open || next == NULL) {
    *err = ESHUTDOWN;
    return false;
  }
  if (check_range) {
    int64_t size = next->get_size (next);
    if (size == -1 || offset > (uint64_t) size ||
        count > (uint64_t) size - offset) {
      *err = EIO;
      return false;
    }
  }
  return true;
}

/* A write after the switch to read-only can never succeed. */
static bool
write_refused (struct retry_handle *h, nbdkit_next *next, int *err)
{
  if (h->open && next && next->can_write (next) != 1) {
    *err = EROFS;
    return true;
  }
  return false;
}

static int
retry_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  struct retry_handle *h = handle;
  struct attempt a = { 0 };
  int r;

  do {
    r = usable (h, next, count, offset, true, err)
      ? next->pread (next, buf, count, offset, flags, err) : -1;
  } while (r == -1 && do_retry (h, &a, &next, "pread", err));
  return r;
}

static int
retry_pwrite (nbdkit_next *next, void *handle, const void *buf,
              uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct retry_handle *h = handle;
  struct attempt a = { 0 };
  int r;

  do {
    if (write_refused (h, next, err))
      return -1;
    if (!usable (h, next, count, offset, true, err))
      r = -1;
    else if ((flags & NBDKIT_FLAG_FUA) &&
             next->can_fua (next) <= NBDKIT_FUA_NONE) {
      *err = EIO;
      r = -1;
    }
    else
      r = next->pwrite (next, buf, count, offset, flags, err);
  } while (r == -1 && do_retry (h, &a, &next, "pwrite", err));
  return r;
}

static int
retry_trim (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct retry_handle *h = handle;
  struct attempt a = { 0 };
  int r;

  do {
    if (write_refused (h, next, err))
      return -1;
    if (!usable (h, next, count, offset, true, err))
      r = -1;
    else if (next->can_trim (next) != 1 ||
             ((flags & NBDKIT_FLAG_FUA) &&
              next->can_fua (next) <= NBDKIT_FUA_NONE)) {
      *err = EIO;
      r = -1;
    }
    else
      r = next->trim (next, count, offset, flags, err);
  } while (r == -1 && do_retry (h, &a, &next, "trim", err));
  return r;
}

static int
retry_zero (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct retry_handle *h = handle;
  struct attempt a = { 0 };
  int r;

  do {
    if (write_refused (h, next, err))
      return -1;
    if (!usable (h, next, count, offset, true, err))
      r = -1;
    else if ((flags & NBDKIT_FLAG_FAST_ZERO) &&
             next->can_fast_zero (next) != 1) {
      *err = ENOTSUP;           /* an answer, not a failure */
      return -1;
    }
    else if (next->can_zero (next) <= NBDKIT_ZERO_NONE ||
             ((flags & NBDKIT_FLAG_FUA) &&
              next->can_fua (next) <= NBDKIT_FUA_NONE)) {
      *err = EIO;
      r = -1;
    }
    else
      r = next->zero (next, count, offset, flags, err);
    /* A fast zero refused is the answer the client asked for. */
    if (r == -1 && (flags & NBDKIT_FLAG_FAST_ZERO) && *err == ENOTSUP)
      return -1;
  } while (r == -1 && do_retry (h, &a, &next, "zero", err));
  return r;
}

static int
retry_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  struct retry_handle *h = handle;
  struct attempt a = { 0 };
  int r;

  do {
    if (!usable (h, next, 0, 0, false, err))
      r = -1;
    else if (next->can_flush (next) != 1) {
      *err = EIO;
      r = -1;
    }
    else
      r = next->flush (next, flags, err);
  } while (r == -1 && do_retry (h, &a, &next, "flush", err));
  return r;
}

static int
retry_extents (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags,
               struct nbdkit_extents *extents, int *err)
{
  struct retry_handle *h = handle;
  struct attempt a = { 0 };
  int r;

  do {
    if (!usable (h, next, count, offset, true, err))
      r = -1;
    else if (next->can_extents (next) != 1) {
      *err = EIO;
      r = -1;
    }
    else {
      /* A failed try may have added some extents: ask into a fresh
       * list and copy it only when the whole call worked.
       */
      struct nbdkit_extents *tmp =
        nbdkit_extents_new (offset, next->get_size (next));
      if (tmp == NULL) {
        *err = errno;
        return -1;
      }
      r = next->extents (next, count, offset, flags, tmp, err);
      for (size_t i = 0; r == 0 && i < nbdkit_extents_count (tmp); i++) {
        struct nbdkit_extent e = nbdkit_get_extent (tmp, i);
        if (nbdkit_add_extent (extents, e.offset, e.length, e.type) == -1) {
          *err = errno;
          nbdkit_extents_free (tmp);
          return -1;
        }
      }
      nbdkit_extents_free (tmp);
    }
  } while (r == -1 && do_retry (h, &a, &next, "extents", err));
  return r;
}

static int
retry_cache (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  struct retry_handle *h = handle;
  struct attempt a = { 0 };
  int r;

  do {
    if (!usable (h, next, count, offset, true, err))
      r = -1;
    else if (next->can_cache (next) <= NBDKIT_CACHE_NONE) {
      *err = EIO;
      r = -1;
    }
    else
      r = next->cache (next, count, offset, flags, err);
  } while (r == -1 && do_retry (h, &a, &next, "cache", err));
  return r;
}

static struct nbdkit_filter filter = {
  .name = "retry",
  .longname = "nbdkit retry filter",
  .load = retry_load,
  .config = retry_config,
  .config_help = retry_config_help,
  .thread_model = retry_thread_model,
  .open = retry_open,
  .close = retry_close,
  .pread = retry_pread,
  .pwrite = retry_pwrite,
  .trim = retry_trim,
  .zero = retry_zero,
  .flush = retry_flush,
  .extents = retry_extents,
  .cache = retry_cache,
};

NBDKIT_REGISTER_FILTER (filter)
