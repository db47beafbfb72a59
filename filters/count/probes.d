/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The count filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-count-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The totals, once, as the filter is unloaded when the server exits
   * (outside any request: no id, no cookie). Arguments: bytes read, written, zeroed, trimmed. */
  probe count_totals (uint64_t read, uint64_t written, uint64_t zeroed,
                      uint64_t trimmed);
};
