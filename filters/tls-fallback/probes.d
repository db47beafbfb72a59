/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tls-fallback filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-tls-fallback-filter.so.
 * Not compiled: the declarations, in the syntax of server/probes.d,
 * are what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A client without TLS gets the message instead of the data. It
   * fires as the client opens the export, outside any request: no id,
   * no cookie. Arguments: export name. */
  probe tls_fallback_plaintext (const char *export_name);
};
