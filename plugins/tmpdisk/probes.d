/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tmpdisk plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-tmpdisk-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* After each per-connection run of the command (128+N if killed by
   * signal N, -1 if it could not start). Arguments: command, duration
   * ns, exit status. */
  probe tmpdisk_command (const char *command, uint64_t duration_ns,
                         int32_t exit_status);
};
