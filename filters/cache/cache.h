/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cache filter's state, shared by cache.c (the filter's callbacks:
 * reads, writes, fills) and writeback.c (writing dirty blocks back, and
 * evicting).  cache.c's top comment explains the states and the
 * locking.
 */
#ifndef NBDKIT_CACHE_FILTER_H
#define NBDKIT_CACHE_FILTER_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <nbdkit-filter.h>

#include "bitmap.h"
#include "cleanup.h"
#include "filestore.h"
#include "minmax.h"

#define NR_STRIPES 1024

enum blk_state { NOT_CACHED = 0, CLEAN = 1, DIRTY = 2 };
enum cache_mode { WRITEBACK, WRITETHROUGH, UNSAFE };

struct cache {
  /* Parameters: set by config, read-only afterwards. */
  enum cache_mode mode;
  uint64_t blksize;
  unsigned shift;               /* log2 (blksize) */
  int64_t max_size;             /* -1: no limit */
  unsigned high, low;           /* thresholds, % of max_size */
  bool on_read;
  char *on_read_path;           /* cache-on-read=/PATH, or NULL */

  uint8_t *zeroes;              /* blksize zero bytes, from get_ready */
  struct filestore *store;      /* whole blocks at their own offsets */
  pthread_mutex_t stripes[NR_STRIPES];
  uint64_t gens[NR_STRIPES];    /* each under its stripe */

  pthread_mutex_t size_lock;
  bool sized;                   /* under size_lock; then read-only */
  uint64_t size;                /* the plugin's size, once sized */
  struct bitmap state;          /* enum blk_state, under the stripes */
  struct bitmap accessed;       /* 1 if used since the hand passed */
  uint64_t nr_cached;           /* CLEAN + DIRTY blocks, atomic */
  uint64_t nr_dirty;            /* DIRTY blocks, atomic */

  pthread_mutex_t reclaim_lock; /* only tried: one sweeper at a time */
  uint64_t hand;                /* under reclaim_lock */

  /* --metrics' read requests served from the cache alone, and those
   * that went to the plugin for some part: NULL without --metrics.
   */
  struct nbdkit_metric *hits, *misses;
};

extern struct cache cache;  /* defined in cache.c */

static inline pthread_mutex_t *
stripe (uint64_t blk)
{
  return &cache.stripes[(blk >> 3) % NR_STRIPES];
}

static inline uint64_t *
gen (uint64_t blk)
{
  return &cache.gens[(blk >> 3) % NR_STRIPES];
}

static inline uint64_t
blk_offset (uint64_t blk)
{
  return blk << cache.shift;
}

/* The plugin's bytes in block BLK (the last block may be short). */
static inline uint32_t
blk_len (uint64_t blk)
{
  return MIN (cache.blksize, cache.size - blk_offset (blk));
}

/* Change block BLK's state, keeping the counts; under its stripe. */
static inline void
set_state_locked (uint64_t blk, enum blk_state st)
{
  enum blk_state old = bitmap_get_blk (&cache.state, blk);
  if (old == st)
    return;
  bitmap_set_blk (&cache.state, blk, st);
  int64_t cached = (st != NOT_CACHED) - (old != NOT_CACHED);
  int64_t dirty = (st == DIRTY) - (old == DIRTY);
  __atomic_add_fetch (&cache.nr_cached, cached, __ATOMIC_RELAXED);
  __atomic_add_fetch (&cache.nr_dirty, dirty, __ATOMIC_RELAXED);
  if (st != NOT_CACHED)
    bitmap_set_blk (&cache.accessed, blk, 1);
}

/* Block BLK's state; a cached block counts as used if TOUCH. */
static inline enum blk_state
get_state (uint64_t blk, bool touch)
{
  LOCK_FOR_SCOPE (stripe (blk));
  enum blk_state st = bitmap_get_blk (&cache.state, blk);
  if (touch && st != NOT_CACHED)
    bitmap_set_blk (&cache.accessed, blk, 1);
  return st;
}

/* Cached bytes from the cache file; the caller knows they are cached. */
static inline int
store_read (void *buf, uint32_t count, uint64_t offset, int *err)
{
  if (filestore_read (cache.store, buf, count, offset) == -1) {
    *err = errno;
    nbdkit_error ("cache: reading the cache file: %m");
    return -1;
  }
  return 0;
}

static inline uint8_t *
alloc_block (int *err)
{
  uint8_t *p = malloc (cache.blksize);
  if (p == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
  }
  return p;
}

/* writeback.c */

/* Write DIRTY block BLK to the plugin (FLAGS: FUA or 0) and make it
 * CLEAN; under its stripe.  BOUNCE is blksize bytes.
 */
extern int wb_writeback_locked (nbdkit_next *next, uint64_t blk,
                                uint8_t *bounce, uint32_t flags, int *err);

/* Evict blocks if the cache is above cache-high-threshold. */
extern void wb_maybe_reclaim (nbdkit_next *next);

/* Write back every DIRTY block; *WRITTEN is how many. */
extern int wb_flush_dirty (nbdkit_next *next, uint64_t *written, int *err);

#endif /* NBDKIT_CACHE_FILTER_H */
