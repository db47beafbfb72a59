/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The shared page stores' USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-memory-plugin.so and
 * nbdkit-data-plugin.so, the plugins that link the shared page stores.
 * Not compiled: the declarations, in the syntax of server/probes.d,
 * are what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 *
 * @so nbdkit-memory-plugin nbdkit-data-plugin
 */
provider nbdkit {
  /* With allocator=zstd (the memory and data plugins), a 32 KiB page
   * was compressed to be stored (a page written all zero is dropped
   * instead).  Request-time: id and cookie are the connection and
   * request it serves (0 when the data plugin builds its disk before
   * any connection). Arguments: id, cookie, offset, size, compressed
   * size. */
  probe allocator_zstd_compress (uint64_t id, uint64_t cookie,
                                 uint64_t offset, uint64_t size,
                                 uint64_t compressed_size);

  /* With allocator=zstd, a stored page was decompressed, for a read or
   * a partial write.  Request-time, as allocator_zstd_compress.
   * Arguments: id, cookie, offset, compressed size, size. */
  probe allocator_zstd_decompress (uint64_t id, uint64_t cookie,
                                   uint64_t offset, uint64_t compressed_size,
                                   uint64_t size);
};
