/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The exitwhen filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-exitwhen-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The exit condition happened (fires once): "file created: F", "file
   * deleted: F", "pipe closed: fd N", "process exited: PID" or
   * "script: S". It fires in the filter's polling thread, or as a
   * client connects or leaves, never for a request: no id, no cookie.
   * Arguments: reason. */
  probe exitwhen_triggered (const char *reason);
};
