/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The floppy plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-floppy-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The image has been laid out (once, before the server accepts
   * connections). Arguments: files, directories, image size, duration
   * ns. */
  probe floppy_build (uint64_t files, uint64_t directories,
                      uint64_t image_size, uint64_t duration_ns);
};
