/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The spinning filter: make the export behave like a hard disk, whose
 * heads take time to move.  The disk is cut into as many equal
 * sections as there are heads (heads=N); each read, write or zero is
 * served by the head of the section it starts in, which first travels
 * from where the previous request it served ended.  A move shorter
 * than a track (TRACK_BYTES) is free; a longer one sleeps for a seek
 * time that grows with the distance, as a fraction of the section,
 * along the quadratic through (0, min-seek-time), (1/2, half-seek-time)
 * and (1, max-seek-time).  With separate-heads=false (the default)
 * the heads sit on one arm: they move together and one request at a
 * time seeks; with true, each head moves alone.
 *
 * Settings are filled by config and read-only afterwards.  Each
 * connection has its own disk model (its handle): a head's lock (or
 * the arm's, head 0's) protects its position and is held across the
 * seek's sleep, so requests queue for the arm as on a real disk.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"

#define MAX_HEADS 64
#define TRACK_BYTES (256 * 1024)

static unsigned heads = 1;
static bool separate_heads;
/* Seek times in nanoseconds. */
static double min_seek = 10e6, half_seek = 200e6, max_seek = 500e6;
/* The curve through the three: qa d^2 + qb d + qc. */
static double qa, qb, qc;

struct head {
  pthread_mutex_t lock;
  uint64_t pos;                 /* bytes into its section */
};

struct handle {
  uint64_t section;             /* bytes per head; 0 for an empty disk */
  unsigned nheads;
  struct head head[MAX_HEADS];
};

static int
parse_seek (const char *key, const char *value, double *ns)
{
  unsigned sec, nsec;
  if (nbdkit_parse_delay (key, value, &sec, &nsec) == -1)
    return -1;
  *ns = sec * 1e9 + nsec;
  return 0;
}

static int
spinning_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  if (strcmp (key, "heads") == 0) {
    if (nbdkit_parse_unsigned (key, value, &heads) == -1)
      return -1;
    if (heads < 1 || heads > MAX_HEADS) {
      nbdkit_error ("heads: must be from 1 to %d: %s", MAX_HEADS, value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "separate-heads") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    separate_heads = r;
    return 0;
  }
  if (strcmp (key, "min-seek-time") == 0)
    return parse_seek (key, value, &min_seek);
  if (strcmp (key, "half-seek-time") == 0)
    return parse_seek (key, value, &half_seek);
  if (strcmp (key, "max-seek-time") == 0)
    return parse_seek (key, value, &max_seek);
  return next (nxdata, key, value);
}

static int
spinning_config_complete (nbdkit_next_config_complete *next,
                          nbdkit_backend *nxdata)
{
  if (!(min_seek <= half_seek && half_seek <= max_seek)) {
    nbdkit_error ("seek times must not shrink with distance: "
                  "min-seek-time <= half-seek-time <= max-seek-time");
    return -1;
  }
  qc = min_seek;
  qb = 4 * (half_seek - min_seek) - (max_seek - min_seek);
  qa = (max_seek - min_seek) - qb;
  return next (nxdata);
}

#define spinning_config_help \
  "heads=<N>                   Number of heads (default 1, at most 64).\n" \
  "separate-heads=<BOOL>       Heads move alone (default false: one arm).\n" \
  "min-seek-time=<TIME>        Seek to the next track (default 0.01 s).\n" \
  "half-seek-time=<TIME>       Seek across half the disk (default 0.2 s).\n" \
  "max-seek-time=<TIME>        Seek across the disk (default 0.5 s)."

static void *
spinning_open (nbdkit_next_open *next, nbdkit_context *context,
               int readonly, const char *exportname, int is_tls)
{
  if (next (context, readonly, exportname) == -1)
    return NULL;
  struct handle *h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  for (unsigned i = 0; i < MAX_HEADS; i++)
    pthread_mutex_init (&h->head[i].lock, NULL);
  return h;
}

static void
spinning_close (void *handle)
{
  struct handle *h = handle;
  for (unsigned i = 0; i < MAX_HEADS; i++)
    pthread_mutex_destroy (&h->head[i].lock);
  free (h);
}

/* The disk's size is known once the layer below is ready. */
static int
spinning_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  int64_t size = next->get_size (next);

  if (size == -1)
    return -1;
  /* No more heads than bytes: every section holds at least one. */
  h->nheads = (uint64_t) size < heads ? (size ? size : 1) : heads;
  h->section = size ? (size + h->nheads - 1) / h->nheads : 0;
  return 0;
}

static int
spinning_is_rotational (nbdkit_next *next, void *handle)
{
  return 1;
}

/* Each connection has its own heads: other connections would not wait
 * for this one's arm, so clients must not spread over several.
 */
static int
spinning_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 0;
}

/* Move the head that serves [offset, offset+count), sleeping for the
 * seek.  Returns -1 with *err set if the sleep was cut short.
 */
static int
seek (struct handle *h, uint32_t count, uint64_t offset, int *err)
{
  if (h->section == 0)
    return 0;
  unsigned i = offset / h->section;
  uint64_t base = i * h->section;
  uint64_t target = offset - base;
  struct head *arm = &h->head[separate_heads ? i : 0];
  LOCK_FOR_SCOPE (&arm->lock);
  uint64_t dist = target > arm->pos ? target - arm->pos : arm->pos - target;

  if (dist >= TRACK_BYTES) {
    double d = (double) dist / h->section;
    double ns = qa * d * d + qb * d + qc;
    /* The curve may dip or rise past the ends between its points. */
    if (ns < min_seek)
      ns = min_seek;
    if (ns > max_seek)
      ns = max_seek;
    uint64_t delay = ns;
    NBDKIT_PROBE (spinning_seek, nbdkit_connection_id (),
                  nbdkit_request_cookie (), i, base + arm->pos, offset, delay);
    if (nbdkit_nanosleep (delay / 1000000000, delay % 1000000000) == -1) {
      *err = errno;
      return -1;
    }
  }
  /* The head stays where the request ended (within its section). */
  uint64_t end = target + count;
  arm->pos = end < h->section ? end : h->section - 1;
  return 0;
}

static int
spinning_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  if (seek (handle, count, offset, err) == -1)
    return -1;
  return next->pread (next, buf, count, offset, flags, err);
}

static int
spinning_pwrite (nbdkit_next *next, void *handle, const void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (seek (handle, count, offset, err) == -1)
    return -1;
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
spinning_zero (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  if (seek (handle, count, offset, err) == -1)
    return -1;
  return next->zero (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "spinning",
  .longname = "nbdkit spinning filter",
  .config = spinning_config,
  .config_complete = spinning_config_complete,
  .config_help = spinning_config_help,
  .open = spinning_open,
  .close = spinning_close,
  .prepare = spinning_prepare,
  .is_rotational = spinning_is_rotational,
  .can_multi_conn = spinning_can_multi_conn,
  .pread = spinning_pread,
  .pwrite = spinning_pwrite,
  .zero = spinning_zero,
};

NBDKIT_REGISTER_FILTER (filter)
