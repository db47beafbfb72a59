/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cache filter: keeps blocks of the plugin's disk in memory so that
 * reads and writes reach the plugin less often.
 *
 * Each block is in one of three states (a 2-bit bitmap):
 *   NOT_CACHED  only the plugin holds it
 *   CLEAN       the store holds the same bytes as the plugin
 *   DIRTY       the store holds bytes the plugin has not got yet
 * cache=writeback (and unsafe) writes make blocks DIRTY; flush (or
 * eviction) writes them to the plugin.  cache=writethrough, and a FUA
 * write in writeback mode, write the plugin at once and update the
 * cached copy.  Reads of NOT_CACHED blocks go to the plugin (and, with
 * cache-on-read, fill the cache); cache requests fill it.  With
 * cache-max-size, a clock sweep over an "accessed" bit per block evicts
 * blocks not used since the hand last passed (an approximation of
 * least-recently-used), writing dirty ones back first.
 *
 * The cached bytes live in an unnamed sparse file in $TMPDIR
 * (common/filestore, made at get_ready as nbdkit makes its own), so the
 * cache may grow to the size of the plugin's disk whatever the memory:
 * the process keeps only the bitmaps, and the kernel's page cache is
 * the memory in front of the file, written back and reclaimed under
 * pressure.  Evicted and trimmed blocks are punched out of the file.
 *
 * Locking: nothing global.  Block BLK's state and accessed bits, its
 * stored bytes while they are written or copied out (an eviction
 * zeroes them), and gens[] of its stripe are guarded by
 * stripes[(BLK >> 3) % NR_STRIPES] (eight neighbouring blocks share a
 * stripe, so bitmap bytes shared between blocks share a lock).  Reads
 * of the plugin are made without any lock: a reader that wants to fill
 * a block notes its stripe's generation, reads, and stores the block
 * only if it is still NOT_CACHED and the generation has not moved
 * (every change to the plugin's bytes, by write-through, trim, zero,
 * write-back or eviction, bumps it before and after).
 * Writing a DIRTY block back holds its stripe across the plugin's
 * pwrite, so that a later write-back of newer bytes cannot be passed by
 * an older one.  reclaim_lock is only ever tried, never waited for: one
 * thread sweeps at a time, taking stripes one by one.  size_lock guards
 * sizing the bitmaps at the first connection.
 *
 * For a plugin that completes requests later (nbdkit-async(3)), a read
 * whose blocks are all NOT_CACHED (and no cache-on-read) passes on to
 * it as it stands; everything else takes the synchronous path.
 *
 * This file holds the callbacks, reads, fills and writes; writeback.c
 * writes dirty blocks back and evicts; cache.h is the state they share.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-async.h>
#include <nbdkit-probe.h>

#include "bitmap.h"
#include "cache.h"
#include "cleanup.h"
#include "ispowerof2.h"
#include "minmax.h"
#include "rounding.h"

struct cache cache = {
  .mode = WRITEBACK, .blksize = 65536, .shift = 16,
  .max_size = -1, .high = 95, .low = 80,
  .size_lock = PTHREAD_MUTEX_INITIALIZER,
  .reclaim_lock = PTHREAD_MUTEX_INITIALIZER,
};

static bool
fill_on_read (void)
{
  if (cache.on_read_path)
    return access (cache.on_read_path, F_OK) == 0;
  return cache.on_read;
}

/* HELD: the bytes lie in a cached block, whose disk space the file
 * holds, so they may be copied in place.
 */
static int
store_write (const void *buf, uint32_t count, uint64_t offset, bool held,
             int *err)
{
  int r = held
    ? filestore_overwrite (cache.store, buf, count, offset)
    : filestore_write (cache.store, buf, count, offset);
  if (r == -1) {
    *err = errno;
    nbdkit_error ("cache: writing the cache file: %m");
    return -1;
  }
  return 0;
}

/* The plugin's block BLK into BUF, zero past the plugin's end. */
static int
plugin_block (nbdkit_next *next, uint64_t blk, uint8_t *buf, int *err)
{
  uint32_t n = blk_len (blk);
  if (next->pread (next, buf, n, blk_offset (blk), 0, err) == -1)
    return -1;
  memset (buf + n, 0, cache.blksize - n);
  return 0;
}

/* --- Loading and parameters --------------------------------------- */

static void
cache_load (void)
{
  for (size_t i = 0; i < NR_STRIPES; ++i)
    pthread_mutex_init (&cache.stripes[i], NULL);
  cache.hits = nbdkit_metric_counter ("hits", "Read requests served from "
                                      "the cache alone.", NULL);
  cache.misses = nbdkit_metric_counter ("misses", "Read requests that "
                                        "went to the plugin for some part.",
                                        NULL);
}

static void
cache_unload (void)
{
  filestore_destroy (cache.store);
  free (cache.zeroes);
  free (cache.on_read_path);
  bitmap_free (&cache.state);
  bitmap_free (&cache.accessed);
  for (size_t i = 0; i < NR_STRIPES; ++i)
    pthread_mutex_destroy (&cache.stripes[i]);
}

static int
parse_percent (const char *key, const char *value, unsigned *r)
{
  if (nbdkit_parse_unsigned (key, value, r) == -1)
    return -1;
  if (*r == 0 || *r > 100) {
    nbdkit_error ("%s=%s: must be a percentage from 1 to 100", key, value);
    return -1;
  }
  return 0;
}

static int
cache_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  if (strcmp (key, "cache") == 0) {
    if (strcmp (value, "writeback") == 0)
      cache.mode = WRITEBACK;
    else if (strcmp (value, "writethrough") == 0)
      cache.mode = WRITETHROUGH;
    else if (strcmp (value, "unsafe") == 0)
      cache.mode = UNSAFE;
    else {
      nbdkit_error ("cache=%s: must be writeback, writethrough or unsafe",
                    value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "cache-min-block-size") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    if (r < 4096 || r > UINT32_MAX / 2 + 1 || !is_power_of_2 (r)) {
      nbdkit_error ("cache-min-block-size=%s: must be a power of 2 from "
                    "4096 to 2G", value);
      return -1;
    }
    cache.blksize = r;
    cache.shift = log_2_bits (r);
    return 0;
  }
  if (strcmp (key, "cache-max-size") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    /* Below this, eviction would churn for no gain. */
    if (r < 1024 * 1024) {
      nbdkit_error ("cache-max-size=%s: too small (at least 1M)", value);
      return -1;
    }
    cache.max_size = r;
    return 0;
  }
  if (strcmp (key, "cache-high-threshold") == 0)
    return parse_percent (key, value, &cache.high);
  if (strcmp (key, "cache-low-threshold") == 0)
    return parse_percent (key, value, &cache.low);
  if (strcmp (key, "cache-on-read") == 0) {
    if (value[0] == '/') {
      free (cache.on_read_path);
      cache.on_read_path = strdup (value);
      if (cache.on_read_path == NULL) {
        nbdkit_error ("cache-on-read: strdup: %m");
        return -1;
      }
      return 0;
    }
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    free (cache.on_read_path);
    cache.on_read_path = NULL;
    cache.on_read = r;
    return 0;
  }
  return next (nxdata, key, value);
}

static int
cache_config_complete (nbdkit_next_config_complete *next,
                       nbdkit_backend *nxdata)
{
  if (cache.low >= cache.high) {
    nbdkit_error ("cache-low-threshold (%u) must be below "
                  "cache-high-threshold (%u)", cache.low, cache.high);
    return -1;
  }
  return next (nxdata);
}

#define cache_config_help \
  "cache=MODE                 writeback (default), writethrough or unsafe.\n" \
  "cache-min-block-size=SIZE  Cache block size (default 64K).\n" \
  "cache-max-size=SIZE        Limit the cache to SIZE bytes.\n" \
  "cache-high-threshold=PCT   Start evicting at PCT% of the limit (95).\n" \
  "cache-low-threshold=PCT    Stop evicting at PCT% of the limit (80).\n" \
  "cache-on-read=BOOL|/PATH   Keep what is read in the cache too."

static int
cache_get_ready (int thread_model)
{
  if (bitmap_init (&cache.state, cache.blksize, 2) == -1 ||
      bitmap_init (&cache.accessed, cache.blksize, 1) == -1) {
    nbdkit_error ("bitmap_init: %m");
    return -1;
  }
  cache.zeroes = calloc (1, cache.blksize);
  if (cache.zeroes == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  /* Made now, so that a TMPDIR that cannot hold it stops the server
   * at start-up rather than failing the first write.
   */
  cache.store = filestore_create ();
  if (cache.store == NULL) {
    nbdkit_error ("cache: making the cache file in %s: %m",
                  filestore_dir ());
    return -1;
  }
  return 0;
}

static int
cache_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_PARALLEL;
}

/* Size the bitmaps at the first connection; later ones must agree. */
static int
cache_prepare (nbdkit_next *next, void *handle, int readonly)
{
  int64_t size = next->get_size (next);
  if (size == -1)
    return -1;
  LOCK_FOR_SCOPE (&cache.size_lock);
  if (cache.sized) {
    if ((uint64_t) size != cache.size) {
      nbdkit_error ("cache: the plugin's size changed from %" PRIu64
                    " to %" PRIi64 ", which this filter cannot follow",
                    cache.size, size);
      return -1;
    }
    return 0;
  }
  uint64_t room = ROUND_UP ((uint64_t) size, cache.blksize);
  if (room > INT64_MAX) {
    nbdkit_error ("cache: the plugin's size %" PRIi64 " is too large", size);
    return -1;
  }
  if (bitmap_resize (&cache.state, size) == -1 ||
      bitmap_resize (&cache.accessed, size) == -1) {
    nbdkit_error ("cache: bitmaps for %" PRIi64 " bytes: %m", size);
    return -1;
  }
  filestore_set_size (cache.store, ROUND_UP ((uint64_t) size, cache.blksize));
  nbdkit_debug ("cache: the cache file in %s is %s", filestore_dir (),
                filestore_mapped (cache.store)
                ? "mapped" : "read and written by system calls");
  cache.size = size;
  cache.sized = true;
  return 0;
}

static int
cache_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                  uint32_t *preferred, uint32_t *maximum)
{
  if (next->block_size (next, minimum, preferred, maximum) == -1)
    return -1;
  *minimum = 1;
  *preferred = MAX (*preferred, cache.blksize);
  *maximum = 0xffffffff;
  return 0;
}

static int
cache_can_flush (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cache_can_fua (nbdkit_next *next, void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

/* Zeroes never go to the plugin as a fast zero, so a fast zero fails
 * at once (ENOTSUP) and the client writes them: the answer is "yes,
 * ask".  (Whether zero is offered at all is the plugin's answer, as in
 * nbdkit, though the filter stores zeroes itself.)
 */
static int
cache_can_fast_zero (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cache_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_NATIVE;
}

/* One cache shared by every connection. */
static int
cache_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

/* --- Filling ------------------------------------------------------ */

/* Block BLK's current bytes into BUF (blksize bytes): from the cache,
 * or from the plugin, then kept as CLEAN unless the block was cached
 * or the plugin written meanwhile.
 */
static int
fill_block (nbdkit_next *next, uint64_t blk, uint8_t *buf, int *err)
{
  uint64_t g;
  {
    LOCK_FOR_SCOPE (stripe (blk));
    if (bitmap_get_blk (&cache.state, blk) != NOT_CACHED) {
      bitmap_set_blk (&cache.accessed, blk, 1);
      return store_read (buf, cache.blksize, blk_offset (blk), err);
    }
    g = *gen (blk);
  }
  if (plugin_block (next, blk, buf, err) == -1)
    return -1;
  LOCK_FOR_SCOPE (stripe (blk));
  enum blk_state st = bitmap_get_blk (&cache.state, blk);
  if (st != NOT_CACHED)
    return store_read (buf, cache.blksize, blk_offset (blk), err);
  if (*gen (blk) == g) {
    if (store_write (buf, cache.blksize, blk_offset (blk), false, err) == -1)
      return -1;
    set_state_locked (blk, CLEAN);
    NBDKIT_PROBE (cache_fill, nbdkit_connection_id (),
                  nbdkit_request_cookie (), blk_offset (blk),
                  UINT64_C (1) << cache.shift, blk);
  }
  return 0;
}

/* Fill every block of [OFFSET, OFFSET + COUNT), copying the requested
 * bytes to BUF if not NULL.
 */
static int
fill_range (nbdkit_next *next, uint8_t *buf, uint32_t count,
            uint64_t offset, int *err)
{
  CLEANUP_FREE uint8_t *block = alloc_block (err);
  if (block == NULL)
    return -1;
  while (count > 0) {
    uint64_t blk = offset >> cache.shift;
    uint64_t blkoffs = offset & (cache.blksize - 1);
    uint32_t n = MIN (cache.blksize - blkoffs, count);
    if (fill_block (next, blk, block, err) == -1)
      return -1;
    if (buf) {
      memcpy (buf, block + blkoffs, n);
      buf += n;
    }
    offset += n;
    count -= n;
    wb_maybe_reclaim (next);
  }
  return 0;
}

/* The end of the run from OFFSET (at most END) of blocks whose state
 * is cached (if CACHED) or not; used blocks are touched.
 */
static uint64_t
run_end (bool cached, uint64_t offset, uint64_t end)
{
  uint64_t e = MIN (end, ((offset >> cache.shift) + 1) << cache.shift);
  while (e < end && (get_state (e >> cache.shift, cached) != NOT_CACHED)
         == cached)
    e = MIN (end, e + cache.blksize);
  return e;
}

static int
cache_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  uint8_t *p = buf;
  uint64_t end = offset + count;
  bool on_read = fill_on_read ();
  bool missed = false;

  while (offset < end) {
    bool cached = get_state (offset >> cache.shift, true) != NOT_CACHED;
    uint64_t e = run_end (cached, offset, end);
    uint32_t n = e - offset;
    if (cached) {
      /* Each block is copied under its stripe: an eviction zeroes a
       * block's bytes in the store before it marks the block
       * NOT_CACHED, so an unlocked copy could return those zeroes.
       * The run stops at a block evicted since run_end saw it, which
       * the next turn reads as a miss.
       */
      uint64_t o = offset;
      while (o < e) {
        uint64_t blk = o >> cache.shift;
        uint32_t m = MIN (e, blk_offset (blk) + cache.blksize) - o;
        LOCK_FOR_SCOPE (stripe (blk));
        if (bitmap_get_blk (&cache.state, blk) == NOT_CACHED)
          break;
        if (store_read (p + (o - offset), m, o, err) == -1)
          return -1;
        o += m;
      }
      if (o > offset)
        NBDKIT_PROBE (cache_hit, nbdkit_connection_id (),
                      nbdkit_request_cookie (), offset, o - offset);
      e = o;
      n = e - offset;
    }
    else {
      NBDKIT_PROBE (cache_miss, nbdkit_connection_id (),
                    nbdkit_request_cookie (), offset, n);
      /* A request is one miss however many runs it misses. */
      if (!missed)
        nbdkit_metric_add (cache.misses, NULL, 1);
      missed = true;
      if (on_read) {
        if (fill_range (next, p, n, offset, err) == -1)
          return -1;
      }
      else if (next->pread (next, p, n, offset, 0, err) == -1)
        return -1;
    }
    p += n;
    offset = e;
  }
  if (!missed)
    nbdkit_metric_add (cache.hits, NULL, 1);
  return 0;
}

static int
cache_cache (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  return fill_range (next, NULL, count, offset, err);
}

/* --- Writing ------------------------------------------------------ */

/* cache=writeback: COUNT bytes of BUF (zeroes if NULL) into the cache
 * at byte BLKOFFS of block BLK, which becomes DIRTY.  A block not yet
 * cached that is only partly written is read from the plugin first.
 */
static int
write_back_block (nbdkit_next *next, uint64_t blk, uint64_t blkoffs,
                  uint32_t count, const uint8_t *buf, int *err)
{
  uint64_t offset = blk_offset (blk) + blkoffs;
  uint64_t g;
  if (buf == NULL)
    buf = cache.zeroes;
  {
    LOCK_FOR_SCOPE (stripe (blk));
    bool held = bitmap_get_blk (&cache.state, blk) != NOT_CACHED;
    if (count == cache.blksize || held) {
      if (store_write (buf, count, offset, held, err) == -1)
        return -1;
      set_state_locked (blk, DIRTY);
      return 0;
    }
    g = *gen (blk);
  }

  CLEANUP_FREE uint8_t *block = alloc_block (err);
  if (block == NULL || plugin_block (next, blk, block, err) == -1)
    return -1;
  LOCK_FOR_SCOPE (stripe (blk));
  if (bitmap_get_blk (&cache.state, blk) == NOT_CACHED) {
    /* The plugin changed under our read: read it again, holding the
     * stripe this time (rare).
     */
    if (*gen (blk) != g && plugin_block (next, blk, block, err) == -1)
      return -1;
    memcpy (block + blkoffs, buf, count);
    if (store_write (block, cache.blksize, blk_offset (blk), false,
                     err) == -1)
      return -1;
    NBDKIT_PROBE (cache_fill, nbdkit_connection_id (),
                  nbdkit_request_cookie (), blk_offset (blk),
                  UINT64_C (1) << cache.shift, blk);
  }
  else if (store_write (buf, count, offset, true, err) == -1)
    return -1;
  set_state_locked (blk, DIRTY);
  return 0;
}

static int
write_back_range (nbdkit_next *next, const uint8_t *buf, uint32_t count,
                  uint64_t offset, int *err)
{
  while (count > 0) {
    uint64_t blk = offset >> cache.shift;
    uint64_t blkoffs = offset & (cache.blksize - 1);
    uint32_t n = MIN (cache.blksize - blkoffs, count);
    if (write_back_block (next, blk, blkoffs, n, buf, err) == -1)
      return -1;
    if (buf)
      buf += n;
    offset += n;
    count -= n;
    wb_maybe_reclaim (next);
  }
  return 0;
}

/* A trim goes to the plugin at once in every mode, as in nbdkit.
 * First the cache drops the blocks it covers (a partly trimmed DIRTY
 * block is kept, zeroed there, so its other dirty bytes are not lost),
 * so that a write-back running meanwhile cannot write old bytes over
 * the trim.
 */
static int
trim_cached (uint32_t count, uint64_t offset, int *err)
{
  while (count > 0) {
    uint64_t blk = offset >> cache.shift;
    uint64_t blkoffs = offset & (cache.blksize - 1);
    uint32_t n = MIN (cache.blksize - blkoffs, count);
    LOCK_FOR_SCOPE (stripe (blk));
    ++*gen (blk);
    enum blk_state st = bitmap_get_blk (&cache.state, blk);
    if (st == CLEAN || (st == DIRTY && n == cache.blksize)) {
      filestore_discard (cache.store, cache.blksize, blk_offset (blk));
      set_state_locked (blk, NOT_CACHED);
    }
    else if (st == DIRTY &&
             store_write (cache.zeroes, n, offset, true, err) == -1)
      return -1;
    offset += n;
    count -= n;
  }
  return 0;
}

/* After the plugin was changed under [OFFSET, OFFSET + COUNT): bump
 * the generations again, so a fill that read before the change and
 * stores after it is refused.
 */
static void
bump_gens (uint32_t count, uint64_t offset)
{
  if (count == 0)
    return;
  uint64_t last = (offset + count - 1) >> cache.shift;
  for (uint64_t blk = offset >> cache.shift; blk <= last; ++blk) {
    LOCK_FOR_SCOPE (stripe (blk));
    ++*gen (blk);
  }
}

/* FUA for the plugin's writes, if it takes it; otherwise *FLUSH is set
 * and the caller flushes afterwards.
 */
static uint32_t
plugin_fua (nbdkit_next *next, uint32_t flags, bool *flush)
{
  *flush = false;
  if (!(flags & NBDKIT_FLAG_FUA))
    return 0;
  if (next->can_fua (next) > NBDKIT_FUA_NONE)
    return NBDKIT_FLAG_FUA;
  *flush = next->can_flush (next) > 0;
  return 0;
}

/* cache=writethrough, or FUA in writeback: the cache is written as in
 * writeback, then every block touched is written whole to the plugin
 * (as nbdkit does, so the plugin sees the same writes and its map the
 * same data), under its stripe so writers of one block stay in order.
 * BUF NULL writes zeroes.
 */
static int
write_through_range (nbdkit_next *next, const uint8_t *buf, uint32_t count,
                     uint64_t offset, uint32_t flags, int *err)
{
  if (count == 0)
    return 0;
  if (write_back_range (next, buf, count, offset, err) == -1)
    return -1;

  bool flush;
  uint32_t f = plugin_fua (next, flags, &flush);
  CLEANUP_FREE uint8_t *bounce = alloc_block (err);
  if (bounce == NULL)
    return -1;
  uint64_t last = (offset + count - 1) >> cache.shift;
  for (uint64_t blk = offset >> cache.shift; blk <= last; ++blk) {
    LOCK_FOR_SCOPE (stripe (blk));
    /* Not DIRTY: another request wrote it back (or evicted it) since. */
    if (bitmap_get_blk (&cache.state, blk) == DIRTY &&
        wb_writeback_locked (next, blk, bounce, f, err) == -1)
      return -1;
  }
  if (flush)
    return next->flush (next, 0, err);
  return 0;
}

static bool
through (uint32_t flags)
{
  return cache.mode == WRITETHROUGH ||
    (cache.mode == WRITEBACK && (flags & NBDKIT_FLAG_FUA));
}

static int
cache_pwrite (nbdkit_next *next, void *handle, const void *buf,
              uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (through (flags))
    return write_through_range (next, buf, count, offset, flags, err);
  return write_back_range (next, buf, count, offset, err);
}

/* Zeroes are written like data: never by the plugin's zero. */
static int
cache_zero (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    *err = ENOTSUP;
    return -1;
  }
  if (through (flags))
    return write_through_range (next, NULL, count, offset, flags, err);
  return write_back_range (next, NULL, count, offset, err);
}

static int
cache_trim (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  bool flush;
  uint32_t f = plugin_fua (next, flags, &flush);
  int r = trim_cached (count, offset, err);
  if (r == 0)
    r = next->trim (next, count, offset, f, err);
  if (r == 0 && flush)
    r = next->flush (next, 0, err);
  bump_gens (count, offset);
  return r;
}

static int
cache_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  if (cache.mode == UNSAFE)
    return 0;

  uint64_t written;
  if (wb_flush_dirty (next, &written, err) == -1)
    return -1;
  NBDKIT_PROBE (cache_flush, nbdkit_connection_id (), nbdkit_request_cookie (),
                written, written << cache.shift);
  if (next->can_flush (next) > 0)
    return next->flush (next, 0, err);
  return 0;
}

/* --- Block status ------------------------------------------------- */

/* Dirty blocks are data; for the rest the plugin knows. */
static int
cache_extents (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags,
               struct nbdkit_extents *extents, int *err)
{
  uint64_t end = offset + count;

  while (offset < end) {
    bool dirty = get_state (offset >> cache.shift, false) == DIRTY;
    uint64_t e = MIN (end, ((offset >> cache.shift) + 1) << cache.shift);
    while (e < end && (get_state (e >> cache.shift, false) == DIRTY) == dirty)
      e = MIN (end, e + cache.blksize);

    if (dirty) {
      if (nbdkit_add_extent (extents, offset, e - offset, 0) == -1) {
        *err = errno;
        return -1;
      }
    }
    else {
      struct nbdkit_extents *sub = nbdkit_extents_new (offset, e);
      if (sub == NULL) {
        *err = errno;
        return -1;
      }
      int r = next->extents (next, e - offset, offset, flags, sub, err);
      uint64_t covered = offset;
      for (size_t i = 0; r == 0 && i < nbdkit_extents_count (sub); ++i) {
        struct nbdkit_extent x = nbdkit_get_extent (sub, i);
        if (nbdkit_add_extent (extents, x.offset, x.length, x.type) == -1) {
          *err = errno;
          r = -1;
        }
        covered = x.offset + x.length;
      }
      nbdkit_extents_free (sub);
      if (r == -1)
        return -1;
      if (covered < e)
        break;
    }
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
    offset = e;
  }
  return 0;
}

static int
cache_async_prepare (nbdkit_next *next, void *handle, int cmd,
                     uint32_t *count, uint64_t *offset, uint32_t *flags,
                     int *err)
{
  uint64_t end = *offset + *count;
  if (cmd != NBDKIT_ASYNC_CMD_PREAD || fill_on_read () ||
      get_state (*offset >> cache.shift, false) != NOT_CACHED ||
      run_end (false, *offset, end) < end)
    return NBDKIT_ASYNC_SYNC;
  /* Fired as the read is passed on (see cow.c for the same). */
  NBDKIT_PROBE (cache_miss, nbdkit_connection_id (), nbdkit_request_cookie (),
                *offset, *count);
  nbdkit_metric_add (cache.misses, NULL, 1);
  return NBDKIT_ASYNC_PASS;
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_filter_ops
nbdkit_async_filter_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .prepare = cache_async_prepare,
};

static struct nbdkit_filter filter = {
  .name              = "cache",
  .longname          = "nbdkit caching filter",
  .load              = cache_load,
  .unload            = cache_unload,
  .config            = cache_config,
  .config_complete   = cache_config_complete,
  .config_help       = cache_config_help,
  .thread_model      = cache_thread_model,
  .get_ready         = cache_get_ready,
  .prepare           = cache_prepare,
  .block_size        = cache_block_size,
  .can_flush         = cache_can_flush,
  .can_fua           = cache_can_fua,
  .can_fast_zero     = cache_can_fast_zero,
  .can_cache         = cache_can_cache,
  .can_multi_conn    = cache_can_multi_conn,
  .pread             = cache_pread,
  .pwrite            = cache_pwrite,
  .zero              = cache_zero,
  .trim              = cache_trim,
  .flush             = cache_flush,
  .cache             = cache_cache,
  .extents           = cache_extents,
};

NBDKIT_REGISTER_FILTER (filter)
