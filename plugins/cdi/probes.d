/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cdi plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-cdi-plugin.so.  Not
 * compiled: tools/probes-gen.py reads these declarations, and
 * tests/test-probes-declared.sh keeps them equal to the notes in the
 * built .so.
 */
provider nbdkit {
  /* "podman pull" has ended (once, in get_ready). Arguments: image,
   * podman's exit status (0: pulled; -1: podman could not be run), ns
   * it took. */
  probe cdi_pull (const char *image, int32_t status, uint64_t ns);

  /* The layer to export is chosen and uncompressed. Arguments: image,
   * layer index, number of layers in the image, the layer's digest, its
   * media type, its uncompressed size (the export's size). */
  probe cdi_layer (const char *image, uint32_t layer, uint64_t layers,
                   const char *digest, const char *media_type,
                   int64_t size);
};
