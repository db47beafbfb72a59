/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The readahead filter: after each read, ask the layer below to
 * prefetch (NBD_CMD_CACHE) the window that follows it, from a
 * background thread so the client's read is never delayed.
 *
 * The window adapts as nbdkit 1.32's does, and like it is shared by
 * every connection: it starts at READAHEAD_MIN; a read that starts
 * beyond the end of the last prefetch doubles it (up to
 * READAHEAD_MAX); a read that goes backwards resets it; other reads
 * that move forward leave it alone.
 *
 * Each connection owns one background thread and a queue of prefetches
 * for it (struct bg), started in .prepare and stopped in .finalize,
 * while the layer below is usable.  Each connection also tracks, for
 * the probes only, the range it has asked to prefetch that the client
 * has not read yet (struct ahead), to tell prefetches used from
 * prefetches wasted.
 *
 * Locks: window_lock (the shared window) and a connection's h->lock
 * (its queue and its tracking) are never held together.
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
#include "minmax.h"
#include "vector.h"

#define READAHEAD_MIN UINT64_C (32768)
#define READAHEAD_MAX (UINT64_C (4) * 1024 * 1024)

/* Prefetches are hints: when this many wait for a slow plugin, new
 * ones are dropped rather than queued without bound.
 */
#define QUEUE_MAX 1024

/* The final thread model of the whole stack, set by .get_ready. */
static int thread_model = -1;

/* The adaptive window, shared by all connections. */
static pthread_mutex_t window_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t window = READAHEAD_MIN;
static uint64_t last_offset = 0;
static uint64_t last_readahead = 0;

struct prefetch {
  uint64_t offset;
  uint32_t count;
  uint64_t id, cookie;          /* of the read that asked for it */
};
DEFINE_VECTOR_TYPE (prefetch_queue, struct prefetch);

struct handle {
  pthread_mutex_t lock;         /* protects everything below */

  /* The background thread and its queue. */
  pthread_cond_t cond;          /* signalled when queue or quit change */
  prefetch_queue queue;
  bool quit;
  bool running;
  pthread_t thread;
  nbdkit_next *next;            /* the layer below, while running */

  /* Probes only: [ahead_start, ahead_end) was asked for and is not
   * read yet; the client's current sequential run began at run_start.
   */
  bool have_run;
  uint64_t run_start, ahead_start, ahead_end;
};

static int
readahead_get_ready (int model)
{
  thread_model = model;
  return 0;
}

static void *
readahead_open (nbdkit_next_open *next, nbdkit_context *context,
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
  pthread_mutex_init (&h->lock, NULL);
  pthread_cond_init (&h->cond, NULL);
  h->queue = (prefetch_queue) empty_vector;
  return h;
}

/* The background thread: issue queued prefetches in order until told
 * to quit; what is still queued then is dropped.
 */
static void *
prefetch_thread (void *vp)
{
  struct handle *h = vp;

  for (;;) {
    struct prefetch p;
    int err;

    {
      LOCK_FOR_SCOPE (&h->lock);
      while (!h->quit && h->queue.len == 0)
        pthread_cond_wait (&h->cond, &h->lock);
      if (h->quit)
        return NULL;
      p = h->queue.ptr[0];
      prefetch_queue_remove (&h->queue, 0);
    }

    NBDKIT_PROBE (readahead_issued, p.id, p.cookie, p.offset, p.count);
    /* A failed prefetch costs nothing but speed: the client's own
     * read will see the error, if there is one.
     */
    if (h->next->cache (h->next, p.count, p.offset, 0, &err) == -1)
      nbdkit_debug ("readahead: cache at %" PRIu64 " failed: %s",
                    p.offset, strerror (err));
  }
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
  LOCK_FOR_SCOPE (&h->lock);
  h->running = false;
  h->next = NULL;
  h->queue.len = 0;
}

static int
readahead_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  int can_cache = next->can_cache (next);
  int r;

  if (can_cache == -1)
    return -1;
  if (thread_model != NBDKIT_THREAD_MODEL_PARALLEL ||
      can_cache != NBDKIT_CACHE_NATIVE) {
    nbdkit_error ("readahead: warning: underlying plugin does not support "
                  "NBD_CMD_CACHE or PARALLEL thread model, so the filter "
                  "won't do anything");
    if (can_cache != NBDKIT_CACHE_NATIVE)
      nbdkit_error ("readahead: try adding --filter=cache after this filter");
    return 0;
  }

  h->next = next;
  h->quit = false;
  r = pthread_create (&h->thread, NULL, prefetch_thread, h);
  if (r != 0) {
    errno = r;
    nbdkit_error ("pthread_create: %m");
    h->next = NULL;
    return -1;
  }
  h->running = true;
  return 0;
}

/* What the client never read of what was prefetched for it. */
static void
ahead_wasted (struct handle *h)
{
  if (h->ahead_end > h->ahead_start)
    NBDKIT_PROBE (readahead_wasted, nbdkit_connection_id (),
                  nbdkit_request_cookie (), h->ahead_start,
                  h->ahead_end - h->ahead_start);
  h->ahead_start = h->ahead_end;
}

static int
readahead_finalize (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  stop_thread (h);
  LOCK_FOR_SCOPE (&h->lock);
  ahead_wasted (h);
  return 0;
}

static void
readahead_close (void *handle)
{
  struct handle *h = handle;

  stop_thread (h);
  prefetch_queue_reset (&h->queue);
  pthread_cond_destroy (&h->cond);
  pthread_mutex_destroy (&h->lock);
  free (h);
}

/* Probes only: account the client's read [offset, end) against what
 * was prefetched.  A read inside the current run (parallel clients
 * send reads a little out of order) uses what it overlaps; a read
 * elsewhere starts a new run and wastes what the old one left.
 */
static void
account_read (struct handle *h, uint64_t offset, uint64_t end)
{
  if (h->have_run && offset >= h->run_start && offset <= h->ahead_end) {
    uint64_t s = MAX (offset, h->ahead_start);
    uint64_t e = MIN (end, h->ahead_end);
    /* A gap the client skips inside its run may still come, out of
     * order; it is counted neither used nor wasted.
     */
    if (s < e) {
      NBDKIT_PROBE (readahead_used, nbdkit_connection_id (),
                    nbdkit_request_cookie (), s, e - s);
      h->ahead_start = e;
    }
    else if (offset >= h->ahead_end)
      h->ahead_start = h->ahead_end;
    return;
  }
  ahead_wasted (h);
  h->have_run = true;
  h->run_start = offset;
  h->ahead_start = h->ahead_end = end;
}

/* Probes only: [offset, offset+count) is being asked for. */
static void
account_prefetch (struct handle *h, uint64_t offset, uint32_t count)
{
  if (offset > h->ahead_end)
    h->ahead_start = offset;
  h->ahead_end = MAX (h->ahead_end, offset + count);
}

static int
readahead_pread (nbdkit_next *next, void *handle, void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  const uint64_t end = offset + count;
  bool running;
  uint32_t ra_count = 0;

  {
    LOCK_FOR_SCOPE (&h->lock);
    running = h->running;
  }

  if (running) {
    int64_t size = next->get_size (next);
    if (size >= 0) {
      LOCK_FOR_SCOPE (&window_lock);
      if (end < (uint64_t) size)
        ra_count = MIN (window, (uint64_t) size - end);
      if (last_readahead < offset)
        window = MIN (window * 2, READAHEAD_MAX);
      else if (last_offset >= offset)
        window = READAHEAD_MIN;
      last_offset = offset;
      last_readahead = end + ra_count;
    }

    LOCK_FOR_SCOPE (&h->lock);
    account_read (h, offset, end);
    if (ra_count > 0 && h->queue.len < QUEUE_MAX) {
      struct prefetch p = { .offset = end, .count = ra_count,
                            .id = nbdkit_connection_id (),
                            .cookie = nbdkit_request_cookie () };
      if (prefetch_queue_append (&h->queue, p) == 0) {
        account_prefetch (h, end, ra_count);
        pthread_cond_signal (&h->cond);
      }
    }
  }

  return next->pread (next, buf, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "readahead",
  .longname = "nbdkit readahead filter",
  .get_ready = readahead_get_ready,
  .open = readahead_open,
  .prepare = readahead_prepare,
  .finalize = readahead_finalize,
  .close = readahead_close,
  .pread = readahead_pread,
};

NBDKIT_REGISTER_FILTER (filter)
