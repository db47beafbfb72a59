/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The scan filter: while a client is connected to the default export,
 * a background thread walks the whole disk from start to end asking
 * the layer below to prefetch it (NBD_CMD_CACHE), scan-size bytes at a
 * time, as nbdkit 1.32's filter does:
 *
 * - scan-ahead (default on): a client read that ends beyond the scan
 *   moves the scan forward to that point;
 * - scan-clock (default on): the position is shared by all
 *   connections and kept when they close, so the next connection
 *   resumes where the last prefetch was (the "clock");
 * - scan-forever (default off): at the end, start again from 0.
 *
 * Each connection owns one thread (struct handle), started in .prepare
 * and stopped in .finalize, while the layer below is usable; its
 * client's reads reach it through h->read_end.
 *
 * Locks: clock_lock protects the shared clock; h->lock protects a
 * handle's fields marked so.  They are never held together.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "ispowerof2.h"
#include "minmax.h"

/* Parameters, set by .config and read-only afterwards. */
static bool scan_ahead = true;
static bool scan_clock = true;
static bool scan_forever = false;
static int64_t scan_size = 2 * 1024 * 1024;
static char *scan_size_str;             /* as given, for the error */

#define SCAN_SIZE_MIN 512
#define SCAN_SIZE_MAX (32 * 1024 * 1024)

/* The final thread model of the whole stack, set by .get_ready. */
static int thread_model = -1;

static pthread_mutex_t clock_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t scan_clock_pos = 0;

struct handle {
  bool is_default_export;

  pthread_mutex_t lock;
  pthread_cond_t cond;          /* signalled when quit is set */
  bool running;                 /* the thread runs (h->lock) */
  bool quit;                    /* the thread must stop (h->lock) */
  uint64_t read_end;            /* furthest end of a client read not yet
                                 * seen by the thread, or 0 (h->lock) */
  pthread_t thread;
  nbdkit_next *next;            /* the layer below, while running */
};

static void
scan_unload (void)
{
  free (scan_size_str);
}

static int
parse_bool_param (const char *value, bool *out)
{
  int r = nbdkit_parse_bool (value);
  if (r == -1)
    return -1;
  *out = r;
  return 0;
}

static int
scan_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
             const char *key, const char *value)
{
  if (strcmp (key, "scan-ahead") == 0)
    return parse_bool_param (value, &scan_ahead);
  if (strcmp (key, "scan-clock") == 0)
    return parse_bool_param (value, &scan_clock);
  if (strcmp (key, "scan-forever") == 0)
    return parse_bool_param (value, &scan_forever);
  if (strcmp (key, "scan-size") == 0) {
    scan_size = nbdkit_parse_size (value);
    if (scan_size == -1)
      return -1;
    free (scan_size_str);
    scan_size_str = strdup (value);
    if (scan_size_str == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

/* As in nbdkit, the last scan-size= given is the one checked. */
static int
scan_config_complete (nbdkit_next_config_complete *next,
                      nbdkit_backend *nxdata)
{
  if (scan_size < SCAN_SIZE_MIN || scan_size > SCAN_SIZE_MAX ||
      !is_power_of_2 (scan_size)) {
    nbdkit_error ("scan-size: %s is not a power of 2 between 512 and 32M",
                  scan_size_str);
    return -1;
  }
  return next (nxdata);
}

#define scan_config_help \
  "scan-ahead=false     Do not skip ahead of the client's reads.\n" \
  "scan-clock=false     Each connection starts from the beginning.\n" \
  "scan-forever=true    Scan again and again while clients are connected.\n" \
  "scan-size=SIZE       Bytes per prefetch (default 2M)."

static int
scan_get_ready (int model)
{
  thread_model = model;
  return 0;
}

/* With scan-clock, the position is shared: a connection's scan never
 * goes back behind the clock, and moves it forward.
 */
static uint64_t
adjust_clock (uint64_t offset)
{
  if (!scan_clock)
    return offset;
  LOCK_FOR_SCOPE (&clock_lock);
  if (scan_clock_pos > offset)
    offset = scan_clock_pos;
  else
    scan_clock_pos = offset;
  return offset;
}

static void
reset_clock (void)
{
  if (!scan_clock)
    return;
  LOCK_FOR_SCOPE (&clock_lock);
  scan_clock_pos = 0;
}

static void *
scan_open (nbdkit_next_open *next, nbdkit_context *context,
           int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (next (context, readonly, exportname) == -1)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->is_default_export = exportname[0] == '\0';
  pthread_mutex_init (&h->lock, NULL);
  pthread_cond_init (&h->cond, NULL);
  return h;
}

/* Between prefetches: false if the thread must stop; else moves
 * *offset past the client's latest reads (with scan-ahead).
 */
static bool
check_in (struct handle *h, uint64_t *offset)
{
  LOCK_FOR_SCOPE (&h->lock);
  if (h->quit)
    return false;
  if (h->read_end > *offset)
    *offset = h->read_end;
  h->read_end = 0;
  return true;
}

static void *
scan_thread (void *vp)
{
  struct handle *h = vp;
  int64_t r = h->next->get_size (h->next);
  uint64_t size, offset;

  if (r == -1)
    goto wait;
  size = r;

  do {
    for (offset = adjust_clock (0); offset < size; offset += scan_size) {
      uint32_t n;
      int err;

      if (!check_in (h, &offset))
        return NULL;
      adjust_clock (offset);
      if (offset >= size)
        break;
      n = MIN ((uint64_t) scan_size, size - offset);
      NBDKIT_PROBE (scan_progress, offset, n);
      if (h->next->cache (h->next, n, offset, 0, &err) == -1)
        nbdkit_debug ("scan: cache at %" PRIu64 " failed: %s",
                      offset, strerror (err));
    }
    if (scan_forever)
      reset_clock ();
  } while (scan_forever);
  nbdkit_debug ("scan: finished scanning the plugin");

 wait:
  {
    LOCK_FOR_SCOPE (&h->lock);
    while (!h->quit)
      pthread_cond_wait (&h->cond, &h->lock);
  }
  return NULL;
}

static int
scan_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  int r;

  if (!h->is_default_export) {
    nbdkit_error ("scan: warning: not the default export, not scanning");
    return 0;
  }
  if (thread_model != NBDKIT_THREAD_MODEL_PARALLEL) {
    nbdkit_error ("scan: warning: underlying plugin does not support the "
                  "PARALLEL thread model, not scanning");
    return 0;
  }
  r = next->can_cache (next);
  if (r == -1)
    return -1;
  if (r != NBDKIT_CACHE_NATIVE) {
    nbdkit_error ("scan: warning: underlying plugin does not support "
                  "NBD_CMD_CACHE, not scanning; try adding --filter=cache "
                  "after this filter");
    return 0;
  }

  h->next = next;
  h->quit = false;
  h->read_end = 0;
  r = pthread_create (&h->thread, NULL, scan_thread, h);
  if (r != 0) {
    errno = r;
    nbdkit_error ("pthread_create: %m");
    h->next = NULL;
    return -1;
  }
  LOCK_FOR_SCOPE (&h->lock);
  h->running = true;
  return 0;
}

static void
stop_thread (struct handle *h)
{
  {
    LOCK_FOR_SCOPE (&h->lock);
    if (!h->running)
      return;
    h->quit = true;
    pthread_cond_signal (&h->cond);
  }
  pthread_join (h->thread, NULL);
  nbdkit_debug ("scan: exiting background thread on connection close");
  LOCK_FOR_SCOPE (&h->lock);
  h->running = false;
  h->next = NULL;
}

static int
scan_finalize (nbdkit_next *next, void *handle)
{
  stop_thread (handle);
  return 0;
}

static void
scan_close (void *handle)
{
  struct handle *h = handle;

  stop_thread (h);
  pthread_cond_destroy (&h->cond);
  pthread_mutex_destroy (&h->lock);
  free (h);
}

static int
scan_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;

  if (scan_ahead) {
    LOCK_FOR_SCOPE (&h->lock);
    if (h->running)
      h->read_end = MAX (h->read_end, offset + count);
  }
  return next->pread (next, buf, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "scan",
  .longname = "nbdkit scan filter",
  .unload = scan_unload,
  .config = scan_config,
  .config_complete = scan_config_complete,
  .config_help = scan_config_help,
  .get_ready = scan_get_ready,
  .open = scan_open,
  .prepare = scan_prepare,
  .finalize = scan_finalize,
  .close = scan_close,
  .pread = scan_pread,
};

NBDKIT_REGISTER_FILTER (filter)
