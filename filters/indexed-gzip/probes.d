/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The indexed-gzip filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-indexed-gzip-filter.so.
 * Not compiled: tools/probes-gen.py reads the declarations (see
 * filters/gzip/probes.d).
 */
provider nbdkit {
  /* The first connection found no index file and made one by
   * inflating the whole gzip file; fires while it prepares, outside
   * any request. Arguments: seek points, compressed bytes,
   * uncompressed bytes (the export size). */
  probe indexed_gzip_index_built (uint64_t points,
                                  uint64_t compressed_bytes,
                                  uint64_t uncompressed_bytes);

  /* The first connection read the index from its file; fires while it
   * prepares, outside any request. Arguments: seek points,
   * uncompressed bytes (the export size). */
  probe indexed_gzip_index_loaded (uint64_t points,
                                   uint64_t uncompressed_bytes);

  /* A read starts inflating at a seek point. Arguments: the read's id,
   * its cookie, point number (0 is the start of the file), the point's
   * uncompressed offset, bytes inflated and thrown away to reach the
   * read's offset. */
  probe indexed_gzip_seek (uint64_t id, uint64_t cookie, uint64_t point,
                           uint64_t point_offset, uint64_t skip_bytes);

  /* A read carries on from where the connection's previous read
   * stopped (no seek point lies between). Arguments: the read's id,
   * its cookie, the stream's uncompressed offset, bytes inflated and
   * thrown away. */
  probe indexed_gzip_continue (uint64_t id, uint64_t cookie,
                               uint64_t stream_offset, uint64_t skip_bytes);
};
