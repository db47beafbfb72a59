/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cow filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-cow-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A block was copied from the plugin into the overlay (partial write,
   * cow-on-read or cow-on-cache); once per block. Request-time: id and
   * cookie are those of the request it serves. Arguments: id, cookie,
   * offset, count, blocknum. */
  probe cow_copy_up (uint64_t id, uint64_t cookie, uint64_t offset,
                     uint64_t count, uint64_t blocknum);

  /* Bytes were read from the plugin. Request-time: id and cookie are
   * those of the request it serves. Arguments: id, cookie, offset,
   * count. */
  probe cow_read_through (uint64_t id, uint64_t cookie, uint64_t offset,
                          uint64_t count);

  /* A run of written or trimmed blocks was served from the overlay.
   * Request-time: id and cookie are those of the request it serves.
   * Arguments: id, cookie, offset, count. */
  probe cow_read_overlay (uint64_t id, uint64_t cookie, uint64_t offset,
                          uint32_t count);
};
