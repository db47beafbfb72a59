/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cacheextents filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-cacheextents-filter.so.
 * Not compiled: the declarations, in the syntax of server/probes.d,
 * are what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A block status request is answered from the cache. Request-time: id
   * and cookie are those of the request it serves. Arguments: id,
   * cookie, offset, count. */
  probe cacheextents_hit (uint64_t id, uint64_t cookie, uint64_t offset,
                          uint32_t count);

  /* A block status request falls outside the cache; the plugin's answer
   * replaces it. Request-time: id and cookie are those of the request it
   * serves. Arguments: id, cookie, offset, count. */
  probe cacheextents_miss (uint64_t id, uint64_t cookie, uint64_t offset,
                           uint32_t count);
};
