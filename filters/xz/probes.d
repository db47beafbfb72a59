/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The xz filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-xz-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A block missing from the connection's cache has been decompressed
   * (blocks count from 1, as xz --list -vv shows), during the read
   * that needed it. Arguments: id, cookie, block number, uncompressed
   * size. */
  probe xz_block_decompress (uint64_t id, uint64_t cookie,
                             uint64_t block_number,
                             uint64_t uncompressed_size);

  /* A read finds a block it needs in the cache (once per block a read
   * touches). Arguments: id, cookie, block number, uncompressed size. */
  probe xz_cache_hit (uint64_t id, uint64_t cookie, uint64_t block_number,
                      uint64_t uncompressed_size);
};
