/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The truncate filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-truncate-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A read went past the plugin's end: count bytes from offset were
   * filled with zeroes. Fires during that read. Arguments: id, cookie,
   * offset, count. */
  probe truncate_read_tail (uint64_t id, uint64_t cookie, uint64_t offset,
                            uint32_t count);

  /* A write of non-zero data past the plugin's end failed with ENOSPC
   * (offset: the first byte past the end). Fires during that write.
   * Arguments: id, cookie, offset, count. */
  probe truncate_write_refused (uint64_t id, uint64_t cookie,
                                uint64_t offset, uint32_t count);
};
