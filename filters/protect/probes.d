/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The protect filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-protect-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A request fails with EPERM; command is write, zero or trim.
   * Fires during that request. Arguments: id, cookie, offset, count,
   * command. */
  probe protect_refused (uint64_t id, uint64_t cookie, uint64_t offset,
                         uint32_t count, const char *command);
};
