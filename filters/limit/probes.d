/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The limit filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-limit-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A client is turned away at the limit. It fires as the client
   * connects, outside any request: no id, no cookie. Arguments:
   * connections, limit. */
  probe limit_refused (uint32_t connections, uint32_t max);
};
