/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cc plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-cc-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Once at start-up, when the compiler has finished. Arguments:
   * source, duration ns, exit status. */
  probe cc_compile (const char *source, uint64_t duration_ns,
                    int32_t exit_status);
};
