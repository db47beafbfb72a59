/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The scan filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-scan-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The scanning thread is about to prefetch this block. It fires in
   * the filter's own thread, on behalf of no request: no id, no
   * cookie. Arguments: offset, count. */
  probe scan_progress (uint64_t offset, uint32_t count);
};
