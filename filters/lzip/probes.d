/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The lzip filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-lzip-filter.so.  Not
 * compiled: tools/probes-gen.py reads the declarations (see
 * filters/gzip/probes.d).
 */
provider nbdkit {
  /* A member missing from the connection's cache has been decompressed
   * (members count from 1 in file order), during the read that needed
   * it. Arguments: id, cookie, member number, compressed size (the
   * whole member), uncompressed size. */
  probe lzip_member_decompress (uint64_t id, uint64_t cookie,
                                uint64_t member_number,
                                uint64_t compressed_size,
                                uint64_t uncompressed_size);

  /* A read finds a member it needs in the cache (once per member a
   * read touches). Arguments: id, cookie, member number, uncompressed
   * size. */
  probe lzip_cache_hit (uint64_t id, uint64_t cookie, uint64_t member_number,
                        uint64_t uncompressed_size);
};
