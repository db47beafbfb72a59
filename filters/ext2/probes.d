/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ext2 filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-ext2-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A connection has opened the file inside the filesystem (absolute
   * path, size in bytes). It fires as the connection opens the export,
   * outside any request: no id, no cookie. Arguments: file name,
   * size. */
  probe ext2_open (const char *file_name, uint64_t size);
};
