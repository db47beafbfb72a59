/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The blocksize filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-blocksize-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A client request sent below as more than one piece has ended (also
   * on error). Request-time: id and cookie are those of the request it
   * serves. Arguments: id, cookie, offset, count, pieces. */
  probe blocksize_split (uint64_t id, uint64_t cookie, uint64_t offset,
                         uint32_t count, uint32_t pieces);

  /* A partial block is read, modified and written back; the request's
   * bytes in that block. Request-time: id and cookie are those of the
   * request it serves. Arguments: id, cookie, offset, count. */
  probe blocksize_rmw (uint64_t id, uint64_t cookie, uint64_t offset,
                       uint32_t count);
};
