/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The delay filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-delay-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Before each delay (read, write, zero, trim, extents, cache, open,
   * close). Request-time: id and cookie are those of the request it
   * serves (at open and close, the connection's id and cookie 0).
   * Arguments: id, cookie, command, nanoseconds. */
  probe delay_sleep (uint64_t id, uint64_t cookie, const char *command,
                     uint64_t nanoseconds);
};
