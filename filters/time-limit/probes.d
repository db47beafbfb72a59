/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The time-limit filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-time-limit-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The first request of a connection past its time limit: it and
   * every later one fail with ESHUTDOWN, and the connection is asked to
   * end; elapsed_ns counts from when the client opened the export.
   * Arguments: id, cookie (of that request), elapsed_ns, limit_ns. */
  probe time_limit_expired (uint64_t id, uint64_t cookie,
                            uint64_t elapsed_ns, uint64_t limit_ns);
};
