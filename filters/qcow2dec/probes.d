/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The qcow2dec filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-qcow2dec-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A guest cluster was looked up in the L1 and L2 tables (once per
   * cluster a read or block status covers). Kind: 0 unallocated, 1
   * zero, 2 normal, 3 compressed; host offset is where its data is in
   * the image (0 when none). Fires during that read or block status.
   * Arguments: id, cookie, guest offset of the cluster, kind, host
   * offset. */
  probe qcow2dec_lookup (uint64_t id, uint64_t cookie, uint64_t guest_offset,
                         int32_t kind, uint64_t host_offset);

  /* A lookup needed an L2 table: hit is 1 if the connection's cache
   * held it, 0 if it was read from the image. Fires during the request
   * that needed it. Arguments: id, cookie, offset of the L2 table in
   * the image, hit. */
  probe qcow2dec_l2_cache (uint64_t id, uint64_t cookie, uint64_t l2_offset,
                           int32_t hit);
};
