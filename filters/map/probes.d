/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The map filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-map-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* One piece of a request (cut at region boundaries) is about to go to
   * the layer below; mapping is the map= parameter that placed it (0 for
   * the first given) or -1 where none covers it. Request-time: id and
   * cookie are those of the request it serves. Arguments: id, cookie,
   * offset, count, offset below, mapping. */
  probe map_piece (uint64_t id, uint64_t cookie, uint64_t offset,
                   uint64_t count, uint64_t dest, int32_t mapping);
};
