/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The exportname filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-exportname-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Exportname-strict refused a client's export name ("" for the
   * default). It fires during the handshake, outside any request: no
   * id, no cookie. Arguments: name. */
  probe exportname_refused (const char *name);
};
