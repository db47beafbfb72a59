/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The bzip2 filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-bzip2-filter.so.  Not
 * compiled: tools/probes-gen.py reads the declarations (see
 * filters/gzip/probes.d).
 */
provider nbdkit {
  /* The first connection has decompressed the whole file into the
   * temporary file. It fires as that connection opens the export,
   * outside any request: no id, no cookie. Arguments: compressed bytes (of every bzip2 stream),
   * uncompressed bytes (the export size), number of bzip2 streams. */
  probe bzip2_decompressed (int64_t compressed_bytes,
                            int64_t uncompressed_bytes, int64_t streams);
};
