/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ondemand plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-ondemand-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A new export's command has finished (not for exports that exist).
   * Arguments: export name, duration ns, exit status. */
  probe ondemand_create (const char *export_name, uint64_t duration_ns,
                         int32_t exit_status);
};
