/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The data plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-data-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Once, when the disk has been built from data=, base64= or raw=,
   * before the server serves. Arguments: size, bytes set, duration ns. */
  probe data_parsed (uint64_t size, uint64_t bytes_set, int64_t duration_ns);
};
