/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The retry-request filter: when a request (or, unless
 * retry-request-open=false, the open of the layers below) fails, wait
 * retry-request-delay seconds and send the same request again, up to
 * retry-request-retries times.  Unlike the retry filter nothing is
 * reopened, so requests stay parallel and the filter keeps no state
 * beyond its configuration (set by config, read-only afterwards).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#define MAX_RETRIES 1000

static unsigned retries = 2;
static unsigned retry_delay = 2;        /* seconds */
static bool retry_open = true;

/* --metrics' retries by command; NULL without --metrics. */
static struct nbdkit_metric *retries_metric;

static void
rr_load (void)
{
  retries_metric = nbdkit_metric_counter ("retries", "Requests (and opens) "
                                          "retried after a failure, by "
                                          "command.", "command");
}

static int
rr_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
           const char *key, const char *value)
{
  if (strcmp (key, "retry-request-retries") == 0) {
    if (nbdkit_parse_unsigned (key, value, &retries) == -1)
      return -1;
    if (retries > MAX_RETRIES) {
      nbdkit_error ("retry-request-retries: value too large (at most %d)",
                    MAX_RETRIES);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "retry-request-delay") == 0) {
    if (nbdkit_parse_unsigned (key, value, &retry_delay) == -1)
      return -1;
    if (retry_delay == 0) {
      nbdkit_error ("retry-request-delay cannot be 0");
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "retry-request-open") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    retry_open = r;
    return 0;
  }
  return next (nxdata, key, value);
}

#define rr_config_help \
  "retry-request-retries=<N> Number of retries (default: 2).\n" \
  "retry-request-delay=<N>   Seconds to wait before retry (default: 2).\n" \
  "retry-request-open=false  Do not retry opening the plugin (default: true)."

/* After try number `attempt' (from 0) of command failed: wait and say
 * whether to try again.  *err keeps the failure's errno when not.
 */
static bool
again (const char *command, unsigned attempt, int *err)
{
  if (attempt >= retries)
    return false;
  nbdkit_debug ("retry-request: %s failed (errno %d); retry %u in %u "
                "seconds", command, *err, attempt + 1, retry_delay);
  NBDKIT_PROBE (retry_request_attempt, nbdkit_connection_id (),
                nbdkit_request_cookie (), command, attempt + 1,
                (uint64_t) retry_delay * 1000000000);
  nbdkit_metric_add (retries_metric, command, 1);
  if (nbdkit_nanosleep (retry_delay, 0) == -1)
    return false;
  return true;
}

static void *
rr_open (nbdkit_next_open *next, nbdkit_context *context,
         int readonly, const char *exportname, int is_tls)
{
  for (unsigned i = 0;; i++) {
    if (next (context, readonly, exportname) == 0)
      return NBDKIT_HANDLE_NOT_NEEDED;
    int err = errno;
    if (!retry_open || !again ("open", i, &err))
      return NULL;
  }
}

/* One data request, whatever its command, so that one loop can retry
 * them all.
 */
enum command { PREAD, PWRITE, TRIM, ZERO, FLUSH, EXTENTS, CACHE };
static const char *const command_names[] = {
  [PREAD] = "pread", [PWRITE] = "pwrite", [TRIM] = "trim", [ZERO] = "zero",
  [FLUSH] = "flush", [EXTENTS] = "extents", [CACHE] = "cache",
};

struct request {
  enum command command;
  nbdkit_next *next;
  void *buf;                    /* pread */
  const void *wbuf;             /* pwrite */
  uint32_t count;
  uint64_t offset;
  uint32_t flags;
  struct nbdkit_extents *extents;
};

/* A failed try may have added extents: each try gets a fresh list,
 * copied out only when it worked.
 */
static int
extents_once (const struct request *rq, int *err)
{
  nbdkit_next *next = rq->next;
  int64_t size = next->get_size (next);
  if (size == -1) {
    *err = EIO;
    return -1;
  }
  struct nbdkit_extents *tmp = nbdkit_extents_new (rq->offset, size);
  if (tmp == NULL) {
    *err = errno;
    return -1;
  }
  int r = next->extents (next, rq->count, rq->offset, rq->flags, tmp, err);
  for (size_t i = 0; r == 0 && i < nbdkit_extents_count (tmp); i++) {
    struct nbdkit_extent e = nbdkit_get_extent (tmp, i);
    if (nbdkit_add_extent (rq->extents, e.offset, e.length, e.type) == -1) {
      *err = errno;
      r = -1;
    }
  }
  nbdkit_extents_free (tmp);
  return r;
}

static int
once (const struct request *rq, int *err)
{
  nbdkit_next *next = rq->next;

  switch (rq->command) {
  case PREAD:
    return next->pread (next, rq->buf, rq->count, rq->offset, rq->flags,
                        err);
  case PWRITE:
    return next->pwrite (next, rq->wbuf, rq->count, rq->offset, rq->flags,
                         err);
  case TRIM:
    return next->trim (next, rq->count, rq->offset, rq->flags, err);
  case ZERO:
    return next->zero (next, rq->count, rq->offset, rq->flags, err);
  case FLUSH:
    return next->flush (next, rq->flags, err);
  case EXTENTS:
    return extents_once (rq, err);
  case CACHE:
    return next->cache (next, rq->count, rq->offset, rq->flags, err);
  }
  abort ();
}

static int
with_retries (const struct request *rq, int *err)
{
  for (unsigned i = 0;; i++) {
    if (once (rq, err) == 0)
      return 0;
    /* A fast zero refused is the answer the client asked for. */
    if (rq->command == ZERO && (rq->flags & NBDKIT_FLAG_FAST_ZERO) &&
        *err == ENOTSUP)
      return -1;
    if (!again (command_names[rq->command], i, err))
      return -1;
  }
}

static int
rr_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
          uint64_t offset, uint32_t flags, int *err)
{
  struct request rq = { .command = PREAD, .next = next, .buf = buf,
    .count = count, .offset = offset, .flags = flags };
  return with_retries (&rq, err);
}

static int
rr_pwrite (nbdkit_next *next, void *handle, const void *buf,
           uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct request rq = { .command = PWRITE, .next = next, .wbuf = buf,
    .count = count, .offset = offset, .flags = flags };
  return with_retries (&rq, err);
}

static int
rr_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
         uint32_t flags, int *err)
{
  struct request rq = { .command = TRIM, .next = next,
    .count = count, .offset = offset, .flags = flags };
  return with_retries (&rq, err);
}

static int
rr_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
         uint32_t flags, int *err)
{
  struct request rq = { .command = ZERO, .next = next,
    .count = count, .offset = offset, .flags = flags };
  return with_retries (&rq, err);
}

static int
rr_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  struct request rq = { .command = FLUSH, .next = next, .flags = flags };
  return with_retries (&rq, err);
}

static int
rr_extents (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags,
            struct nbdkit_extents *extents, int *err)
{
  struct request rq = { .command = EXTENTS, .next = next,
    .count = count, .offset = offset, .flags = flags, .extents = extents };
  return with_retries (&rq, err);
}

static int
rr_cache (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  struct request rq = { .command = CACHE, .next = next,
    .count = count, .offset = offset, .flags = flags };
  return with_retries (&rq, err);
}

static struct nbdkit_filter filter = {
  .name = "retry-request",
  .longname = "nbdkit retry request filter",
  .load = rr_load,
  .config = rr_config,
  .config_help = rr_config_help,
  .open = rr_open,
  .pread = rr_pread,
  .pwrite = rr_pwrite,
  .trim = rr_trim,
  .zero = rr_zero,
  .flush = rr_flush,
  .extents = rr_extents,
  .cache = rr_cache,
};

NBDKIT_REGISTER_FILTER (filter)
