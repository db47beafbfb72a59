/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The split plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-split-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Once for each piece of a read, write or cache request, before it
   * goes to its file; id and cookie are the request's. Arguments: id,
   * cookie, file index, offset in the file, count. */
  probe split_file (uint64_t id, uint64_t cookie, uint64_t file_index,
                    uint64_t offset_in_the_file, uint32_t count);
};
