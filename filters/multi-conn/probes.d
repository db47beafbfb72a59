/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The multi-conn filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-multi-conn-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A flush was handled, for the request with this id and cookie (a
   * flush, or a FUA write whose flush is emulated): plugin flushes
   * issued, and the size of the flushing connection's group (1 outside
   * emulate; flushed 0 when a clean flush was skipped). Arguments: id,
   * cookie, flushed, connections. */
  probe multi_conn_flush (uint64_t id, uint64_t cookie, int32_t flushed,
                          int32_t connections);
};
