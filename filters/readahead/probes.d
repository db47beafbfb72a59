/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The readahead filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-readahead-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The background thread is about to send a prefetch below, on
   * behalf of the client read that asked for it: that read's id and
   * cookie. Arguments: id, cookie, offset, count. */
  probe readahead_issued (uint64_t id, uint64_t cookie, uint64_t offset,
                          uint32_t count);

  /* A client read covers bytes this connection prefetched; fires
   * during that read. Arguments: id, cookie, offset, count. */
  probe readahead_used (uint64_t id, uint64_t cookie, uint64_t offset,
                        uint64_t count);

  /* Prefetched bytes will not be read (the next read went elsewhere,
   * or the client left); an estimate. Fires during that next read, or
   * as the connection closes (cookie 0). Arguments: id, cookie, offset,
   * count. */
  probe readahead_wasted (uint64_t id, uint64_t cookie, uint64_t offset,
                          uint64_t count);
};
