/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The fua filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-fua-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Fuamode=force added FUA to a write, trim or zero. Request-time: id
   * and cookie are those of the request it serves. Arguments: id,
   * cookie, offset, count. */
  probe fua_forced (uint64_t id, uint64_t cookie, uint64_t offset,
                    uint32_t count);

  /* Fuamode=discard dropped FUA from a write, trim or zero.
   * Request-time: id and cookie are those of the request it serves.
   * Arguments: id, cookie, offset, count. */
  probe fua_discarded (uint64_t id, uint64_t cookie, uint64_t offset,
                       uint32_t count);

  /* Fuamode=force or discard turned a client flush into a no-op.
   * Request-time: id and cookie are those of the request it serves.
   * Arguments: id, cookie. */
  probe fua_flush_ignored (uint64_t id, uint64_t cookie);

  /* flush-on-close=true flushed the plugin as a client that could
   * write went away; status 0, or the errno of a failed flush.  Fires
   * at close, outside any request. Arguments: status. */
  probe fua_flush_on_close (int32_t status);
};
