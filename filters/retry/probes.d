/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The retry filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-retry-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Before each retry's wait (attempts count from 1), during the
   * request that failed: its connection id and cookie. Arguments: id,
   * cookie, command, attempt, delay ns. */
  probe retry_attempt (uint64_t id, uint64_t cookie, const char *command,
                       uint32_t attempt, uint64_t delay_ns);

  /* After each attempt to reopen the plugin (result 0 or -1), during
   * the request that failed. Arguments: id, cookie, command, reopens,
   * readonly, result. */
  probe retry_reopen (uint64_t id, uint64_t cookie, const char *command,
                      uint32_t reopens, uint8_t readonly, int32_t result);
};
