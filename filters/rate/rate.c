/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 * The rate filter: limit the bandwidth of reads and writes, for the
 * whole server (rate=) and for each connection (connection-rate=), with
 * token buckets counted in bits.  Reads and writes have separate
 * buckets.  A request takes its bits from the bucket at once, going
 * into debt if there are not enough, and then sleeps until the debt
 * would be paid: requests in flight together queue up in the order
 * they took their tokens.  Zero, trim and the rest are free.
 *
 * The rates can be changed while the server runs by writing a new rate
 * into rate-file= or connection-rate-file=, read again at most every
 * RECHECK_NS.
 *
 * Locks: each bucket has its own, held only to update it (never while
 * sleeping).  A rate file's lock only guards its re-reading.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "now-ns.h"
#include "cleanup.h"
#include "minmax.h"

#define RECHECK_NS UINT64_C (200000000)

/* A rate in bits per second (0: unlimited), maybe read from a file. */
struct rate_source {
  _Atomic uint64_t rate;
  char *file;                   /* NULL: no rate file */
  pthread_mutex_t lock;         /* guards last_check */
  uint64_t last_check;          /* monotonic ns of the last read */
};

static struct rate_source total_rate = {
  .lock = PTHREAD_MUTEX_INITIALIZER
};
static struct rate_source conn_rate = {
  .lock = PTHREAD_MUTEX_INITIALIZER
};
static double burstiness = 2.0; /* bucket capacity, in seconds of rate */

struct bucket {
  pthread_mutex_t lock;         /* guards the fields below */
  double tokens;                /* bits; negative: debt */
  uint64_t last;                /* monotonic ns of the last refill */
};

#define BUCKET_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

static struct bucket total_read = BUCKET_INIT;
static struct bucket total_write = BUCKET_INIT;

struct handle {
  struct bucket read, write;
};

static void
rate_unload (void)
{
  free (total_rate.file);
  free (conn_rate.file);
}

static int
parse_rate (const char *key, const char *value, struct rate_source *src)
{
  int64_t r = nbdkit_parse_size (value);
  if (r == -1)
    return -1;
  if (r == 0) {
    nbdkit_error ("%s: the rate cannot be 0", key);
    return -1;
  }
  src->rate = r;
  return 0;
}

static int
set_file (const char *value, struct rate_source *src)
{
  char *path = nbdkit_absolute_path (value);
  if (path == NULL)
    return -1;
  free (src->file);
  src->file = path;
  return 0;
}

static int
rate_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
             const char *key, const char *value)
{
  if (strcmp (key, "rate") == 0)
    return parse_rate (key, value, &total_rate);
  if (strcmp (key, "connection-rate") == 0)
    return parse_rate (key, value, &conn_rate);
  if (strcmp (key, "rate-file") == 0)
    return set_file (value, &total_rate);
  if (strcmp (key, "connection-rate-file") == 0)
    return set_file (value, &conn_rate);
  if (strcmp (key, "burstiness") == 0) {
    char *end;
    errno = 0;
    double d = strtod (value, &end);
    if (errno || end == value || *end != '\0' || !(d > 0 && d <= 1e6)) {
      nbdkit_error ("burstiness: expected a positive number of seconds: "
                    "'%s'", value);
      return -1;
    }
    burstiness = d;
    return 0;
  }
  return next (nxdata, key, value);
}

#define rate_config_help \
  "rate=BITSPERSEC                Limit total bandwidth.\n" \
  "connection-rate=BITSPERSEC     Limit each connection's bandwidth.\n" \
  "rate-file=FILENAME             Read the total limit from FILENAME.\n" \
  "connection-rate-file=FILENAME  Read the connection limit from FILENAME.\n" \
  "burstiness=SECS                Bucket capacity in seconds (default 2)."

/* Read the rate file again if it is time to.  A missing or unreadable
 * file, or one that does not hold a positive rate, changes nothing.
 */
static void
recheck (struct rate_source *src)
{
  char buf[64];
  uint64_t now;

  if (src->file == NULL)
    return;
  now = now_ns ();
  {
    LOCK_FOR_SCOPE (&src->lock);
    if (src->last_check && now - src->last_check < RECHECK_NS)
      return;
    src->last_check = now;
  }

  FILE *fp = fopen (src->file, "r");
  if (fp == NULL)
    return;
  size_t n = fread (buf, 1, sizeof buf - 1, fp);
  fclose (fp);
  buf[n] = '\0';
  buf[strcspn (buf, " \t\r\n")] = '\0';
  if (buf[0] == '\0')
    return;
  int64_t r = nbdkit_parse_size (buf);
  if (r <= 0)
    return;
  uint64_t old = atomic_exchange (&src->rate, (uint64_t) r);
  if (old != (uint64_t) r)
    nbdkit_debug ("rate: %s: rate changed from %" PRIu64 " to %" PRIi64,
                  src->file, old, r);
}

/* Take bits from the bucket; return the nanoseconds to wait. */
static uint64_t
bucket_take (struct bucket *b, uint64_t rate, uint64_t bits)
{
  LOCK_FOR_SCOPE (&b->lock);
  uint64_t now = now_ns ();
  double capacity = (double) rate * burstiness;

  if (b->last != 0) {
    double added = (double) (now - b->last) * (double) rate / 1e9;
    b->tokens = MIN (capacity, b->tokens + added);
  }
  b->last = now;
  b->tokens -= (double) bits;
  if (b->tokens >= 0)
    return 0;
  return (uint64_t) (-b->tokens / (double) rate * 1e9);
}

static int
limit (struct bucket *b, struct rate_source *src, const char *name,
       uint32_t count, int *err)
{
  recheck (src);
  uint64_t rate = src->rate;
  if (rate == 0)
    return 0;
  uint64_t ns = bucket_take (b, rate, (uint64_t) count * 8);
  if (ns == 0)
    return 0;
  NBDKIT_PROBE (rate_wait, nbdkit_connection_id (), nbdkit_request_cookie (),
                name, ns, count);
  if (nbdkit_nanosleep (ns / 1000000000, ns % 1000000000) == -1) {
    *err = errno;
    return -1;
  }
  return 0;
}

static void *
rate_open (nbdkit_next_open *next, nbdkit_context *context,
           int readonly, const char *exportname, int is_tls)
{
  if (next (context, readonly, exportname) == -1)
    return NULL;
  struct handle *h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  pthread_mutex_init (&h->read.lock, NULL);
  pthread_mutex_init (&h->write.lock, NULL);
  return h;
}

static void
rate_close (void *handle)
{
  struct handle *h = handle;
  pthread_mutex_destroy (&h->read.lock);
  pthread_mutex_destroy (&h->write.lock);
  free (h);
}

static int
rate_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  if (limit (&total_read, &total_rate, "total", count, err) == -1 ||
      limit (&h->read, &conn_rate, "connection", count, err) == -1)
    return -1;
  return next->pread (next, buf, count, offset, flags, err);
}

static int
rate_pwrite (nbdkit_next *next, void *handle, const void *buf,
             uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  if (limit (&total_write, &total_rate, "total", count, err) == -1 ||
      limit (&h->write, &conn_rate, "connection", count, err) == -1)
    return -1;
  return next->pwrite (next, buf, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "rate",
  .longname = "nbdkit rate filter",
  .unload = rate_unload,
  .config = rate_config,
  .config_help = rate_config_help,
  .open = rate_open,
  .close = rate_close,
  .pread = rate_pread,
  .pwrite = rate_pwrite,
};

NBDKIT_REGISTER_FILTER (filter)
