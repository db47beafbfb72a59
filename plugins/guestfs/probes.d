/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The guestfs plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-guestfs-plugin.so.  Not
 * compiled: tools/probes-gen.py reads these declarations, and
 * tests/test-probes-declared.sh keeps them equal to the notes in the
 * built .so.
 */
provider nbdkit {
  /* A connection's appliance finished launching (guestfs_launch, the
   * slow step: seconds under TCG): id, readonly (1 when the drives
   * were added read-only), ns spent launching, result 0 or -1. */
  probe guestfs_launch (uint64_t id, int32_t readonly, uint64_t ns,
                        int32_t result);

  /* A connection found its export: id, the export (device or file
   * inside the appliance), its size in bytes. */
  probe guestfs_export (uint64_t id, const char *export, int64_t size);

  /* After each piece of a read (requests are cut into pieces of at
   * most 1 MiB, below the appliance's message limit): id, cookie,
   * offset, count, ns, result (bytes read, or -1 when libguestfs
   * failed: the request fails with EIO). */
  probe guestfs_read (uint64_t id, uint64_t cookie, uint64_t offset,
                      uint32_t count, uint64_t ns, int64_t result);

  /* The same after each piece of a write. */
  probe guestfs_write (uint64_t id, uint64_t cookie, uint64_t offset,
                       uint32_t count, uint64_t ns, int64_t result);
};
