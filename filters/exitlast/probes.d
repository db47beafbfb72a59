/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The exitlast filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-exitlast-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The last client has left and the server is exiting (outside any
   * request: no id, no cookie). Arguments: clients served. */
  probe exitlast_exit (uint64_t clients_served);
};
