/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cow filter: a writable, throw-away overlay over a plugin opened
 * read-only.  Writes and trims land in the overlay, block by block;
 * reads of blocks never written go to the plugin.  Every connection
 * shares the one overlay, which vanishes when the server exits.
 *
 * The overlay's bytes live in an unnamed sparse file in $TMPDIR
 * (common/filestore, made at get_ready as nbdkit makes its own), so an
 * overlay may grow to the size of the disk under it: the process keeps
 * only the bitmap, and the kernel's page cache is the memory in front
 * of the file, written back and reclaimed under pressure.  (It once
 * lived in a page store in process memory, a little faster, until a
 * large copy through the filter got the server killed for memory.)
 *
 * Each block is in one of three states (a 2-bit bitmap):
 *   BLK_PLUGIN   not in the overlay: the plugin's bytes are current
 *   BLK_OVERLAY  the overlay file holds the whole block
 *   BLK_TRIMMED  trimmed: reads as zeroes, a hole in the map
 * States only leave BLK_PLUGIN, never return to it, and the plugin
 * never changes, so a reader that saw BLK_PLUGIN may read the plugin
 * without any lock.
 *
 * Locking: no lock is global and none is held across a plugin call.
 * Block BLK's state bits, and writes to its overlay bytes, are guarded
 * by stripes[(BLK >> 3) % NR_STRIPES] (eight neighbouring blocks share
 * a stripe, so the bitmap bytes they share are guarded by one lock).
 * A partial write to a block still in the plugin reads the plugin's
 * block unlocked, then takes the stripe and copies it up only if no
 * other request did so meanwhile.  Overlay reads need no stripe: the
 * file may be read and written from many threads at once.  size_lock
 * guards only the sizing of the bitmap, once, at the first
 * connection's prepare.
 *
 * For a plugin that completes requests later (nbdkit-async(3)), a read
 * whose blocks are all still BLK_PLUGIN (and no copy-on-read) passes on
 * to it as it stands; everything else takes the synchronous path.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-async.h>
#include <nbdkit-probe.h>

#include "bitmap.h"
#include "cleanup.h"
#include "filestore.h"
#include "ispowerof2.h"
#include "minmax.h"
#include "rounding.h"

#define NR_STRIPES 1024

enum blk_state { BLK_PLUGIN = 0, BLK_OVERLAY = 1, BLK_TRIMMED = 2 };

struct cow {
  /* Parameters: set by config, read-only afterwards. */
  uint64_t blksize;
  unsigned shift;               /* log2 (blksize) */
  bool on_cache;
  bool on_read;
  char *on_read_path;           /* cow-on-read=/PATH, or NULL */

  /* Set by get_ready, freed by unload. */
  uint8_t *zeroes;              /* blksize zero bytes */
  struct filestore *store;      /* whole blocks, at their own offsets */
  pthread_mutex_t stripes[NR_STRIPES];

  pthread_mutex_t size_lock;
  bool sized;                   /* under size_lock; then read-only */
  uint64_t size;                /* the plugin's size, once sized */
  struct bitmap bm;             /* bits under the stripes */
};

static struct cow cow = {
  .blksize = 65536, .shift = 16,
  .size_lock = PTHREAD_MUTEX_INITIALIZER,
};

static pthread_mutex_t *
stripe (uint64_t blk)
{
  return &cow.stripes[(blk >> 3) % NR_STRIPES];
}

static enum blk_state
get_state (uint64_t blk)
{
  LOCK_FOR_SCOPE (stripe (blk));
  return bitmap_get_blk (&cow.bm, blk);
}

static bool
copy_on_read (void)
{
  if (cow.on_read_path)
    return access (cow.on_read_path, F_OK) == 0;
  return cow.on_read;
}

static void
cow_load (void)
{
  for (size_t i = 0; i < NR_STRIPES; ++i)
    pthread_mutex_init (&cow.stripes[i], NULL);
}

static void
cow_unload (void)
{
  filestore_destroy (cow.store);
  free (cow.zeroes);
  free (cow.on_read_path);
  bitmap_free (&cow.bm);
  for (size_t i = 0; i < NR_STRIPES; ++i)
    pthread_mutex_destroy (&cow.stripes[i]);
}

static int
cow_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  if (strcmp (key, "cow-block-size") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    if (r < 4096 || r > UINT32_MAX / 2 + 1 || !is_power_of_2 (r)) {
      nbdkit_error ("cow-block-size=%s: must be a power of 2 from 4096 "
                    "to 2G", value);
      return -1;
    }
    cow.blksize = r;
    cow.shift = log_2_bits (r);
    return 0;
  }
  if (strcmp (key, "cow-on-cache") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    cow.on_cache = r;
    return 0;
  }
  if (strcmp (key, "cow-on-read") == 0) {
    if (value[0] == '/') {
      free (cow.on_read_path);
      cow.on_read_path = strdup (value);
      if (cow.on_read_path == NULL) {
        nbdkit_error ("cow-on-read: strdup: %m");
        return -1;
      }
      return 0;
    }
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    free (cow.on_read_path);
    cow.on_read_path = NULL;
    cow.on_read = r;
    return 0;
  }
  return next (nxdata, key, value);
}

#define cow_config_help \
  "cow-block-size=<N>     Overlay block size (default 64K).\n" \
  "cow-on-cache=<BOOL>    Copy cache (prefetch) requests into the overlay.\n" \
  "cow-on-read=<BOOL>|/PATH  Copy read data into the overlay."

static int
cow_get_ready (int thread_model)
{
  if (bitmap_init (&cow.bm, cow.blksize, 2) == -1) {
    nbdkit_error ("bitmap_init: %m");
    return -1;
  }
  cow.zeroes = calloc (1, cow.blksize);
  if (cow.zeroes == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  /* Made now, so that a TMPDIR that cannot hold it stops the server
   * at start-up rather than failing the first write.
   */
  cow.store = filestore_create ();
  if (cow.store == NULL) {
    nbdkit_error ("cow: making the overlay file in %s: %m",
                  filestore_dir ());
    return -1;
  }
  return 0;
}

static int
cow_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_PARALLEL;
}

static void *
cow_open (nbdkit_next_open *next, nbdkit_context *context,
          int readonly, const char *exportname, int is_tls)
{
  /* The plugin is never written. */
  if (next (context, 1, exportname) == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

/* Size the bitmap at the first connection; later ones must agree. */
static int
cow_prepare (nbdkit_next *next, void *handle, int readonly)
{
  int64_t size = next->get_size (next);
  if (size == -1)
    return -1;
  LOCK_FOR_SCOPE (&cow.size_lock);
  if (!cow.sized) {
    if (bitmap_resize (&cow.bm, size) == -1) {
      nbdkit_error ("cow: bitmap for %" PRIi64 " bytes: %m", size);
      return -1;
    }
    /* The overlay holds whole blocks, the last one too. */
    if (ROUND_UP ((uint64_t) size, cow.blksize) > INT64_MAX) {
      nbdkit_error ("cow: the plugin's size %" PRIi64 " is too large",
                    size);
      return -1;
    }
    filestore_set_size (cow.store, ROUND_UP ((uint64_t) size, cow.blksize));
    nbdkit_debug ("cow: the overlay file in %s is %s", filestore_dir (),
                  filestore_mapped (cow.store)
                  ? "mapped" : "read and written by system calls");
    cow.size = size;
    cow.sized = true;
  }
  else if ((uint64_t) size != cow.size) {
    nbdkit_error ("cow: the plugin's size changed from %" PRIu64
                  " to %" PRIi64 ", which this filter cannot follow",
                  cow.size, size);
    return -1;
  }
  return 0;
}

static int
cow_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                uint32_t *preferred, uint32_t *maximum)
{
  if (next->block_size (next, minimum, preferred, maximum) == -1)
    return -1;
  *minimum = 1;
  *preferred = MAX (*preferred, cow.blksize);
  *maximum = 0xffffffff;
  return 0;
}

static int
cow_can_write (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_flush (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_trim (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_fua (nbdkit_next *next, void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
cow_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_NATIVE;
}

/* One overlay shared by every connection. */
static int
cow_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_extents (nbdkit_next *next, void *handle)
{
  return 1;
}

/* The overlay is thrown away at exit: there is nothing to make durable. */
static int
cow_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  return 0;
}

/* HELD: the bytes lie in a block in the overlay (BLK_OVERLAY), whose
 * disk space the file holds, so they may be copied in place.
 */
static int
overlay_pwrite (const void *buf, uint32_t count, uint64_t offset, bool held,
                int *err)
{
  int r = held
    ? filestore_overwrite (cow.store, buf, count, offset)
    : filestore_write (cow.store, buf, count, offset);
  if (r == -1) {
    *err = errno;
    nbdkit_error ("cow: writing the overlay file: %m");
    return -1;
  }
  return 0;
}

static int
overlay_pread (void *buf, uint32_t count, uint64_t offset, int *err)
{
  if (filestore_read (cow.store, buf, count, offset) == -1) {
    *err = errno;
    nbdkit_error ("cow: reading the overlay file: %m");
    return -1;
  }
  return 0;
}

/* The plugin's bytes of block BLK into BUF (blksize bytes), zero past
 * the end of the plugin.
 */
static int
plugin_block (nbdkit_next *next, uint64_t blk, uint8_t *buf, int *err)
{
  uint64_t offset = blk << cow.shift;
  uint64_t n = MIN (cow.blksize, cow.size - offset);
  if (next->pread (next, buf, n, offset, 0, err) == -1)
    return -1;
  memset (buf + n, 0, cow.blksize - n);
  NBDKIT_PROBE (cow_read_through, nbdkit_connection_id (),
                nbdkit_request_cookie (), offset, n);
  return 0;
}

/* Store BLOCK (a whole block) as block BLK and mark it; under its
 * stripe.
 */
static int
store_block_locked (uint64_t blk, const uint8_t *block, int *err)
{
  bool held = bitmap_get_blk (&cow.bm, blk) == BLK_OVERLAY;
  if (overlay_pwrite (block, cow.blksize, blk << cow.shift, held, err) == -1)
    return -1;
  bitmap_set_blk (&cow.bm, blk, BLK_OVERLAY);
  return 0;
}

/* Copy block BLK up from the plugin if it is still there.  BOUNCE
 * (blksize bytes) is left holding the plugin's bytes of the block,
 * which are current for any part no other request is writing.
 */
static int
copy_up (nbdkit_next *next, uint64_t blk, uint8_t *bounce, int *err)
{
  if (plugin_block (next, blk, bounce, err) == -1)
    return -1;
  LOCK_FOR_SCOPE (stripe (blk));
  if (bitmap_get_blk (&cow.bm, blk) != BLK_PLUGIN)
    return 0;
  if (store_block_locked (blk, bounce, err) == -1)
    return -1;
  NBDKIT_PROBE (cow_copy_up, nbdkit_connection_id (), nbdkit_request_cookie (),
                blk << cow.shift, UINT64_C (1) << cow.shift, blk);
  return 0;
}

/* Write COUNT bytes of BUF at byte BLKOFFS of block BLK, where they
 * do not cover the whole block (or BUF is NULL for zeroes).
 */
static int
write_part (nbdkit_next *next, uint64_t blk, uint64_t blkoffs,
            uint32_t count, const void *buf, int *err)
{
  uint64_t offset = (blk << cow.shift) + blkoffs;
  if (buf == NULL)
    buf = cow.zeroes;

  pthread_mutex_lock (stripe (blk));
  enum blk_state st = bitmap_get_blk (&cow.bm, blk);
  if (st == BLK_OVERLAY) {
    int r = overlay_pwrite (buf, count, offset, true, err);
    pthread_mutex_unlock (stripe (blk));
    return r;
  }
  pthread_mutex_unlock (stripe (blk));

  CLEANUP_FREE uint8_t *block = malloc (cow.blksize);
  if (block == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    return -1;
  }
  /* Read the plugin's block without holding the stripe. */
  if (st == BLK_PLUGIN && plugin_block (next, blk, block, err) == -1)
    return -1;

  LOCK_FOR_SCOPE (stripe (blk));
  enum blk_state now = bitmap_get_blk (&cow.bm, blk);
  if (now == BLK_OVERLAY)
    return overlay_pwrite (buf, count, offset, true, err);
  if (now == BLK_TRIMMED)
    memset (block, 0, cow.blksize);
  else
    NBDKIT_PROBE (cow_copy_up, nbdkit_connection_id (),
                  nbdkit_request_cookie (), blk << cow.shift,
                  UINT64_C (1) << cow.shift, blk);
  memcpy (block + blkoffs, buf, count);
  return store_block_locked (blk, block, err);
}

/* Write (BUF) or zero (BUF == NULL) COUNT bytes at OFFSET, which the
 * server has checked lie inside the export.
 */
static int
write_range (nbdkit_next *next, const uint8_t *buf, uint32_t count,
             uint64_t offset, int *err)
{
  while (count > 0) {
    uint64_t blk = offset >> cow.shift;
    uint64_t blkoffs = offset & (cow.blksize - 1);
    uint32_t n = MIN (cow.blksize - blkoffs, count);
    if (n == cow.blksize) {
      LOCK_FOR_SCOPE (stripe (blk));
      if (store_block_locked (blk, buf ? buf : cow.zeroes, err) == -1)
        return -1;
    }
    else if (write_part (next, blk, blkoffs, n, buf, err) == -1)
      return -1;
    if (buf)
      buf += n;
    offset += n;
    count -= n;
  }
  return 0;
}

static int
cow_pwrite (nbdkit_next *next, void *handle, const void *buf,
            uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  return write_range (next, buf, count, offset, err);
}

/* Whole blocks become BLK_TRIMMED (their overlay space is given back);
 * the parts of blocks at either end are written with zeroes.
 */
static int
cow_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  while (count > 0) {
    uint64_t blk = offset >> cow.shift;
    uint64_t blkoffs = offset & (cow.blksize - 1);
    uint32_t n = MIN (cow.blksize - blkoffs, count);
    if (n == cow.blksize) {
      LOCK_FOR_SCOPE (stripe (blk));
      /* A trimmed block is never read from the file again. */
      if (bitmap_get_blk (&cow.bm, blk) == BLK_OVERLAY)
        filestore_discard (cow.store, cow.blksize, blk << cow.shift);
      bitmap_set_blk (&cow.bm, blk, BLK_TRIMMED);
    }
    else if (write_part (next, blk, blkoffs, n, NULL, err) == -1)
      return -1;
    offset += n;
    count -= n;
  }
  return 0;
}

/* The end of the run of blocks in state ST that starts at OFFSET,
 * at most END.
 */
static uint64_t
run_end (enum blk_state st, uint64_t offset, uint64_t end)
{
  uint64_t e = MIN (end, ((offset >> cow.shift) + 1) << cow.shift);
  while (e < end && get_state (e >> cow.shift) == st)
    e = MIN (end, e + cow.blksize);
  return e;
}

/* Copy every block of [OFFSET, OFFSET + COUNT) up from the plugin,
 * copying the requested bytes into BUF (if not NULL) on the way.
 */
static int
copy_up_range (nbdkit_next *next, uint8_t *buf, uint32_t count,
               uint64_t offset, int *err)
{
  CLEANUP_FREE uint8_t *block = malloc (cow.blksize);
  if (block == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    return -1;
  }
  while (count > 0) {
    uint64_t blk = offset >> cow.shift;
    uint64_t blkoffs = offset & (cow.blksize - 1);
    uint32_t n = MIN (cow.blksize - blkoffs, count);
    if (copy_up (next, blk, block, err) == -1)
      return -1;
    if (buf) {
      memcpy (buf, block + blkoffs, n);
      buf += n;
    }
    offset += n;
    count -= n;
  }
  return 0;
}

static int
cow_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
           uint64_t offset, uint32_t flags, int *err)
{
  uint8_t *p = buf;
  uint64_t end = offset + count;
  bool on_read = copy_on_read ();

  while (offset < end) {
    enum blk_state st = get_state (offset >> cow.shift);
    uint64_t e = run_end (st, offset, end);
    uint32_t n = e - offset;
    switch (st) {
    case BLK_OVERLAY:
      if (overlay_pread (p, n, offset, err) == -1)
        return -1;
      NBDKIT_PROBE (cow_read_overlay, nbdkit_connection_id (),
                    nbdkit_request_cookie (), offset, n);
      break;
    case BLK_TRIMMED:
      memset (p, 0, n);
      NBDKIT_PROBE (cow_read_overlay, nbdkit_connection_id (),
                    nbdkit_request_cookie (), offset, n);
      break;
    default:
      if (on_read) {
        if (copy_up_range (next, p, n, offset, err) == -1)
          return -1;
      }
      else {
        /* Only the bytes asked for: the plugin's blocks stay put. */
        if (next->pread (next, p, n, offset, 0, err) == -1)
          return -1;
        NBDKIT_PROBE (cow_read_through, nbdkit_connection_id (),
                      nbdkit_request_cookie (), offset, n);
      }
    }
    p += n;
    offset = e;
  }
  return 0;
}

static int
cow_cache (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  uint64_t end = offset + count;

  while (offset < end) {
    enum blk_state st = get_state (offset >> cow.shift);
    uint64_t e = run_end (st, offset, end);
    if (st == BLK_PLUGIN) {
      if (cow.on_cache) {
        if (copy_up_range (next, NULL, e - offset, offset, err) == -1)
          return -1;
      }
      else if (next->can_cache (next) > NBDKIT_CACHE_NONE &&
               next->cache (next, e - offset, offset, 0, err) == -1)
        return -1;
    }
    offset = e;
  }
  return 0;
}

/* Add the plugin's extents of [OFFSET, END) to EXTENTS; sets *SHORT if
 * the plugin described less than all of it.
 */
static int
plugin_extents (nbdkit_next *next, uint64_t offset, uint64_t end,
                uint32_t flags, struct nbdkit_extents *extents,
                bool *short_, int *err)
{
  int r = next->can_extents (next);
  if (r == -1) {
    *err = EIO;
    return -1;
  }
  if (r == 0) {
    if (nbdkit_add_extent (extents, offset, end - offset, 0) == -1) {
      *err = errno;
      return -1;
    }
    return 0;
  }

  struct nbdkit_extents *sub = nbdkit_extents_new (offset, end);
  if (sub == NULL) {
    *err = errno;
    return -1;
  }
  r = next->extents (next, end - offset, offset, flags, sub, err);
  uint64_t covered = offset;
  for (size_t i = 0; r == 0 && i < nbdkit_extents_count (sub); ++i) {
    struct nbdkit_extent e = nbdkit_get_extent (sub, i);
    if (nbdkit_add_extent (extents, e.offset, e.length, e.type) == -1) {
      *err = errno;
      r = -1;
    }
    covered = e.offset + e.length;
  }
  nbdkit_extents_free (sub);
  *short_ = covered < end;
  return r;
}

static int
cow_extents (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags,
             struct nbdkit_extents *extents, int *err)
{
  uint64_t end = offset + count;

  while (offset < end) {
    enum blk_state st = get_state (offset >> cow.shift);
    uint64_t e = run_end (st, offset, end);
    bool short_ = false;
    int r;
    if (st == BLK_PLUGIN)
      r = plugin_extents (next, offset, e, flags, extents, &short_, err);
    else {
      uint32_t type = st == BLK_TRIMMED
        ? NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO : 0;
      r = nbdkit_add_extent (extents, offset, e - offset, type);
      if (r == -1)
        *err = errno;
    }
    if (r == -1)
      return -1;
    if (short_ || (flags & NBDKIT_FLAG_REQ_ONE))
      break;
    offset = e;
  }
  return 0;
}

static int
cow_async_prepare (nbdkit_next *next, void *handle, int cmd,
                   uint32_t *count, uint64_t *offset, uint32_t *flags,
                   int *err)
{
  uint64_t end = *offset + *count;
  if (cmd != NBDKIT_ASYNC_CMD_PREAD || copy_on_read () ||
      get_state (*offset >> cow.shift) != BLK_PLUGIN ||
      run_end (BLK_PLUGIN, *offset, end) < end)
    return NBDKIT_ASYNC_SYNC;
  /* Fired as the read is passed on: should the plugin's own stack
   * send it the synchronous way after all, it fires again there.
   */
  NBDKIT_PROBE (cow_read_through, nbdkit_connection_id (),
                nbdkit_request_cookie (), *offset, *count);
  return NBDKIT_ASYNC_PASS;
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_filter_ops
nbdkit_async_filter_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .prepare = cow_async_prepare,
};

static struct nbdkit_filter filter = {
  .name              = "cow",
  .longname          = "nbdkit copy-on-write (COW) filter",
  .load              = cow_load,
  .unload            = cow_unload,
  .config            = cow_config,
  .config_help       = cow_config_help,
  .thread_model      = cow_thread_model,
  .get_ready         = cow_get_ready,
  .open              = cow_open,
  .prepare           = cow_prepare,
  .block_size        = cow_block_size,
  .can_write         = cow_can_write,
  .can_flush         = cow_can_flush,
  .can_trim          = cow_can_trim,
  .can_fua           = cow_can_fua,
  .can_cache         = cow_can_cache,
  .can_multi_conn    = cow_can_multi_conn,
  .can_extents       = cow_can_extents,
  .pread             = cow_pread,
  .pwrite            = cow_pwrite,
  .flush             = cow_flush,
  .trim              = cow_trim,
  .cache             = cow_cache,
  .extents           = cow_extents,
};

NBDKIT_REGISTER_FILTER (filter)
