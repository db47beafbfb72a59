/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cache filter's write-back: writing DIRTY blocks to the plugin at
 * flush (wb_flush_dirty) or one by one (wb_writeback_locked), and
 * keeping the cache under cache-max-size with a clock sweep that evicts
 * blocks not used since the hand last passed, writing dirty ones back
 * first (wb_maybe_reclaim).  Called from cache.c with no stripe held,
 * except wb_writeback_locked (its block's stripe held); takes stripes
 * one at a time.
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

#include "cache.h"

int
wb_writeback_locked (nbdkit_next *next, uint64_t blk, uint8_t *bounce,
                     uint32_t flags, int *err)
{
  uint32_t n = blk_len (blk);
  if (store_read (bounce, n, blk_offset (blk), err) == -1)
    return -1;
  ++*gen (blk);
  if (next->pwrite (next, bounce, n, blk_offset (blk), flags, err) == -1)
    return -1;
  ++*gen (blk);
  set_state_locked (blk, CLEAN);
  return 0;
}

/* Drop cached block BLK, writing it back first if DIRTY; under its
 * stripe.
 */
static int
evict_locked (nbdkit_next *next, uint64_t blk, uint8_t *bounce, int *err)
{
  enum blk_state st = bitmap_get_blk (&cache.state, blk);
  if (st == DIRTY && wb_writeback_locked (next, blk, bounce, 0, err) == -1)
    return -1;
  filestore_discard (cache.store, cache.blksize, blk_offset (blk));
  set_state_locked (blk, NOT_CACHED);
  ++*gen (blk);
  NBDKIT_PROBE (cache_evict, nbdkit_connection_id (), nbdkit_request_cookie (),
                blk_offset (blk), UINT64_C (1) << cache.shift, blk,
                st == DIRTY);
  return 0;
}

static bool
over (unsigned percent)
{
  uint64_t bytes = __atomic_load_n (&cache.nr_cached, __ATOMIC_RELAXED)
    << cache.shift;
  return bytes > (uint64_t) cache.max_size / 100 * percent;
}

/* Once the cache is above the high threshold, one thread sweeps the
 * clock hand until it is below the low one: a block used since the
 * hand last passed gets another round, others are evicted.  Two full
 * turns always suffice (the first clears every accessed bit).
 * Failures to write back leave the block DIRTY; the request that
 * triggered the sweep does not fail for them.
 */
void
wb_maybe_reclaim (nbdkit_next *next)
{
  if (cache.max_size == -1 || !over (cache.high))
    return;
  if (pthread_mutex_trylock (&cache.reclaim_lock) != 0)
    return;
  int err = 0;
  uint8_t *bounce = alloc_block (&err);
  uint64_t nr_blocks = cache.state.nr_blocks;
  for (uint64_t i = 0;
       bounce && nr_blocks && i < 2 * nr_blocks && over (cache.low);
       ++i) {
    uint64_t blk = cache.hand;
    cache.hand = (cache.hand + 1) % nr_blocks;
    LOCK_FOR_SCOPE (stripe (blk));
    if (bitmap_get_blk (&cache.state, blk) == NOT_CACHED)
      continue;
    if (bitmap_get_blk (&cache.accessed, blk)) {
      bitmap_set_blk (&cache.accessed, blk, 0);
      continue;
    }
    if (evict_locked (next, blk, bounce, &err) == -1)
      nbdkit_debug ("cache: evicting block %" PRIu64 ": %s", blk,
                    strerror (err));
  }
  free (bounce);
  pthread_mutex_unlock (&cache.reclaim_lock);
}

int
wb_flush_dirty (nbdkit_next *next, uint64_t *written, int *err)
{
  *written = 0;
  if (__atomic_load_n (&cache.nr_dirty, __ATOMIC_RELAXED) == 0)
    return 0;
  CLEANUP_FREE uint8_t *bounce = alloc_block (err);
  if (bounce == NULL)
    return -1;
  uint64_t nr_blocks = cache.state.nr_blocks;
  for (uint64_t blk = 0; blk < nr_blocks; ++blk) {
    /* Stop early once nothing is dirty (checked per stripe group). */
    if ((blk & 7) == 0 &&
        __atomic_load_n (&cache.nr_dirty, __ATOMIC_RELAXED) == 0)
      break;
    LOCK_FOR_SCOPE (stripe (blk));
    if (bitmap_get_blk (&cache.state, blk) != DIRTY)
      continue;
    if (wb_writeback_locked (next, blk, bounce, 0, err) == -1)
      return -1;
    ++*written;
  }
  return 0;
}
