/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The rotational filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-rotational-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A connection asks whether the export is rotational (once per
   * connection: the server keeps the answer); below is what the layer
   * below says (-1 if asking it failed). It fires during the
   * handshake, outside any request: no id, no cookie. Arguments:
   * answer given, below. */
  probe rotational_answer (int32_t rotational, int32_t below);
};
