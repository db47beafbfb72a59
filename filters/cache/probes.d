/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cache filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-cache-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A run of a read was served from the cache. Request-time: id and
   * cookie are those of the request it serves. Arguments: id, cookie,
   * offset, count. */
  probe cache_hit (uint64_t id, uint64_t cookie, uint64_t offset,
                   uint64_t count);

  /* A run of a read went to the plugin. Request-time: id and cookie are
   * those of the request it serves. Arguments: id, cookie, offset,
   * count. */
  probe cache_miss (uint64_t id, uint64_t cookie, uint64_t offset,
                    uint32_t count);

  /* A block read from the plugin was put in the cache. Request-time: id
   * and cookie are those of the request it serves. Arguments: id,
   * cookie, offset, count, blocknum. */
  probe cache_fill (uint64_t id, uint64_t cookie, uint64_t offset,
                    uint64_t count, uint64_t blocknum);

  /* A block was evicted; dirty is 1 if it was written back first.
   * Request-time: id and cookie are those of the request it serves.
   * Arguments: id, cookie, offset, count, blocknum, dirty. */
  probe cache_evict (uint64_t id, uint64_t cookie, uint64_t offset,
                     uint64_t count, uint64_t blocknum, int32_t dirty);

  /* A flush wrote back this many dirty blocks (0 when none; never with
   * cache=unsafe). Request-time: id and cookie are those of the request
   * it serves. Arguments: id, cookie, blocks, bytes. */
  probe cache_flush (uint64_t id, uint64_t cookie, uint64_t blocks,
                     uint64_t bytes);
};
