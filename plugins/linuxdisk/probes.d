/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The linuxdisk plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-linuxdisk-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Once at start-up (image size 0 if the build failed). Arguments:
   * directory, image size, duration ns. */
  probe linuxdisk_build (const char *directory, uint64_t image_size,
                         uint64_t duration_ns);
};
