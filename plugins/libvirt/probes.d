/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The libvirt plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-libvirt-plugin.so.  Not
 * compiled: tools/probes-gen.py reads these declarations, and
 * tests/test-probes-declared.sh keeps them equal to the notes in the
 * built .so.
 */
provider nbdkit {
  /* A connection found its disk: domain, disk (as given), capacity in
   * bytes (the export's size). */
  probe libvirt_disk (const char *domain, const char *disk, int64_t size);

  /* After each virDomainBlockPeek (a read is cut into pieces of at
   * most 64 KiB): result 0, or -1 when it failed (the read fails with
   * EIO). Arguments: id, cookie, offset, count, ns, result. */
  probe libvirt_peek (uint64_t id, uint64_t cookie, uint64_t offset,
                      uint32_t count, uint64_t ns, int32_t result);
};
