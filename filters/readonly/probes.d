/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The readonly filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-readonly-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A write, zero or trim is refused with EPERM because the
   * readonly-file exists; fires during that request. Arguments: id,
   * cookie, command, offset, count. */
  probe readonly_refuse (uint64_t id, uint64_t cookie, const char *command,
                         uint64_t offset, uint32_t count);
  /* A request saw the readonly-file appear (1: read-only from now on)
   * or disappear (0: writable again); fires once per change seen,
   * during that request. Arguments: id, cookie, readonly. */
  probe readonly_switch (uint64_t id, uint64_t cookie, int32_t readonly);
};
