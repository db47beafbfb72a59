/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The luks filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-luks-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A connection unlocked a key slot (not when the last disk's key is
   * reused).  Fires at open, outside any request: the server's
   * connection_accept and handshake probes name the connection.
   * Arguments: key slot, iterations. */
  probe luks_unlock (int32_t key_slot, uint32_t iterations);

  /* A write covers part of a sector (offset in the export, bytes written
   * into that sector). Request-time: id and cookie are those of the
   * request it serves. Arguments: id, cookie, offset, count. */
  probe luks_rmw (uint64_t id, uint64_t cookie, uint64_t offset,
                  uint32_t count);
};
