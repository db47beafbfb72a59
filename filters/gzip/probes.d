/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The gzip filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-gzip-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The first connection has decompressed the file (gzip data of every
   * member, then the export size). It fires as that connection opens
   * the export, outside any request: no id, no cookie. Arguments: compressed bytes,
   * uncompressed bytes. */
  probe gzip_inflated (int64_t compressed_bytes, int64_t uncompressed_bytes);
};
