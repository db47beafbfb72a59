/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cacheextents filter: remember the whole answer of the last block
 * status call that reached the plugin, and answer later requests that
 * start inside it from memory.  Clients like qemu-img convert ask for
 * one extent at a time; plugins like vddk return many for the price of
 * one, so most of those requests never reach the plugin.
 *
 * One cache for the whole server (connections to one export share the
 * disk), tagged with the export name it came from, under one mutex.
 * Any write, trim or zero through the filter drops it, since it may
 * change the map.
 *
 * Deprecated, as nbdkit 1.44 deprecated it: it still works, and says
 * at load (in the debug log) that it will go.
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
#include "vector.h"

DEFINE_VECTOR_TYPE (extent_vector, struct nbdkit_extent);

/* The cache.  Protected by lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static extent_vector cache = empty_vector;  /* contiguous, in order */
static char *cache_export;                  /* NULL: the cache is empty */
/* Bumped by every invalidation, so that a block status answer fetched
 * while a write ran is not stored: it may predate the write.
 */
static uint64_t generation;

static void
cacheextents_unload (void)
{
  extent_vector_reset (&cache);
  free (cache_export);
}

/* Per connection: the export name, to match the cache against. */
struct handle {
  char *export;
};

static void *
cacheextents_open (nbdkit_next_open *next, nbdkit_context *context,
                   int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (next (context, readonly, exportname) == -1)
    return NULL;
  h = malloc (sizeof *h);
  if (h == NULL || (h->export = strdup (exportname)) == NULL) {
    nbdkit_error ("malloc: %m");
    free (h);
    return NULL;
  }
  return h;
}

static void
cacheextents_close (void *handle)
{
  struct handle *h = handle;

  free (h->export);
  free (h);
}

/* Call with the lock held. */
static void
drop_cache (void)
{
  cache.len = 0;
  free (cache_export);
  cache_export = NULL;
}

/* Does the cache answer a request starting at OFFSET?  Lock held. */
static bool
cache_covers (const struct handle *h, uint64_t offset)
{
  const struct nbdkit_extent *first, *last;

  if (cache_export == NULL || cache.len == 0 ||
      strcmp (cache_export, h->export) != 0)
    return false;
  first = &cache.ptr[0];
  last = &cache.ptr[cache.len - 1];
  return offset >= first->offset && offset < last->offset + last->length;
}

static int
compare_holding (const void *key, const void *elem)
{
  uint64_t offset = *(const uint64_t *) key;
  const struct nbdkit_extent *e = elem;

  if (offset < e->offset)
    return -1;
  if (offset >= e->offset + e->length)
    return 1;
  return 0;
}

/* Answer [offset, offset+count) from the cache, which covers offset.
 * It may end sooner: a short answer is allowed.  Lock held.
 */
static int
answer_from_cache (uint32_t count, uint64_t offset, uint32_t flags,
                   struct nbdkit_extents *extents, int *err)
{
  const struct nbdkit_extent *e =
    extent_vector_search (&cache, &offset, compare_holding);
  const uint64_t end = offset + count;

  for (; e && e < cache.ptr + cache.len && e->offset < end; e++) {
    if (nbdkit_add_extent (extents, e->offset, e->length, e->type) == -1) {
      *err = errno;
      return -1;
    }
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
  }
  return 0;
}

/* Store FRESH, fetched at generation GEN, as the cache unless a write
 * came since.  Lock held.  Failing to store is not an error: the
 * request is answered from FRESH anyway.
 */
static void
store (const struct handle *h, const struct nbdkit_extents *fresh,
       uint64_t gen)
{
  size_t n = nbdkit_extents_count (fresh);

  if (gen != generation)
    return;
  drop_cache ();
  if (extent_vector_reserve (&cache, n) == -1 ||
      (cache_export = strdup (h->export)) == NULL)
    return;
  for (size_t i = 0; i < n; i++)
    cache.ptr[cache.len++] = nbdkit_get_extent (fresh, i);
}

static int
cacheextents_extents (nbdkit_next *next, void *handle, uint32_t count,
                      uint64_t offset, uint32_t flags,
                      struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  struct nbdkit_extents *fresh;
  uint64_t gen;
  int64_t size;
  int r = -1;

  {
    LOCK_FOR_SCOPE (&lock);
    if (cache_covers (h, offset)) {
      NBDKIT_PROBE (cacheextents_hit, nbdkit_connection_id (),
                    nbdkit_request_cookie (), offset, count);
      return answer_from_cache (count, offset, flags, extents, err);
    }
    gen = generation;
  }
  NBDKIT_PROBE (cacheextents_miss, nbdkit_connection_id (),
                nbdkit_request_cookie (), offset, count);

  /* Ask for everything the plugin will tell: without REQ_ONE, and up
   * to the end of the disk, not just of the request.
   */
  size = next->get_size (next);
  if (size == -1) {
    *err = EIO;
    return -1;
  }
  fresh = nbdkit_extents_new (offset, size);
  if (fresh == NULL) {
    *err = errno;
    return -1;
  }
  if (next->extents (next, count, offset, flags & ~NBDKIT_FLAG_REQ_ONE,
                     fresh, err) == 0) {
    const uint64_t end = offset + count;
    {
      LOCK_FOR_SCOPE (&lock);
      store (h, fresh, gen);
    }
    r = 0;
    for (size_t i = 0; i < nbdkit_extents_count (fresh); i++) {
      struct nbdkit_extent e = nbdkit_get_extent (fresh, i);
      if (e.offset >= end)
        break;
      if (nbdkit_add_extent (extents, e.offset, e.length, e.type) == -1) {
        *err = errno;
        r = -1;
        break;
      }
      if (flags & NBDKIT_FLAG_REQ_ONE)
        break;
    }
  }
  nbdkit_extents_free (fresh);
  return r;
}

/* Anything that may change the map drops the cache first. */
static void
invalidate (void)
{
  LOCK_FOR_SCOPE (&lock);
  generation++;
  drop_cache ();
}

static int
cacheextents_pwrite (nbdkit_next *next, void *handle, const void *buf,
                     uint32_t count, uint64_t offset, uint32_t flags,
                     int *err)
{
  invalidate ();
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
cacheextents_trim (nbdkit_next *next, void *handle, uint32_t count,
                   uint64_t offset, uint32_t flags, int *err)
{
  invalidate ();
  return next->trim (next, count, offset, flags, err);
}

static int
cacheextents_zero (nbdkit_next *next, void *handle, uint32_t count,
                   uint64_t offset, uint32_t flags, int *err)
{
  invalidate ();
  return next->zero (next, count, offset, flags, err);
}

static void
cacheextents_load (void)
{
  nbdkit_debug ("the cacheextents filter is deprecated and may be removed "
                "in a later version: see nbdkit-cacheextents-filter(1)");
}

static struct nbdkit_filter filter = {
  .name = "cacheextents",
  .longname = "nbdkit cacheextents filter",
  .load = cacheextents_load,
  .unload = cacheextents_unload,
  .open = cacheextents_open,
  .close = cacheextents_close,
  .extents = cacheextents_extents,
  .pwrite = cacheextents_pwrite,
  .trim = cacheextents_trim,
  .zero = cacheextents_zero,
};

NBDKIT_REGISTER_FILTER (filter)
