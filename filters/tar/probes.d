/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tar filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-tar-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The first connection found the member in the archive. It fires
   * as that connection opens the export, outside any request: no id,
   * no cookie. Arguments: offset, size, name. */
  probe tar_entry_found (uint64_t offset, uint64_t size, const char *name);
};
