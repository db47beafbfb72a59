/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The evil filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-evil-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A read's data had one bit changed on its way to the client: mode is
   * cosmic-rays, stuck-bits or stuck-wires; offset is the byte's offset
   * on the disk, bit its bit (0 the least significant), value what the
   * bit now reads. Request-time: id and cookie are those of the request
   * it serves. Arguments: id, cookie, mode, offset, bit, value. */
  probe evil_corrupt (uint64_t id, uint64_t cookie, const char *mode,
                      uint64_t offset, uint32_t bit, uint32_t value);
};
