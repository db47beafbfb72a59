/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The partition table of the linuxdisk plugin's virtual disk: a
 * protective MBR and a GUID partition table (UEFI specification,
 * chapter 5) with one partition, of type "Linux filesystem", holding
 * the filesystem.  The disk and partition GUIDs are random (version 4).
 * Everything is built once, in memory, at start-up.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "minmax.h"

#include "linuxdisk.h"

/* 0FC63DAF-8483-4772-8E79-3D69D8477DE4 as stored: the first three
 * fields little-endian, the last two as bytes.
 */
static const uint8_t linux_filesystem_type[16] = {
  0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47,
  0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4,
};

/* Attribute bit 2: legacy BIOS bootable, for boot loaders that look. */
#define GPT_ATTR_LEGACY_BIOS_BOOTABLE (UINT64_C (1) << 2)

struct gpt_header {
  char signature[8];
  uint32_t revision;
  uint32_t header_size;
  uint32_t header_crc;
  uint32_t reserved;
  uint64_t current_lba;
  uint64_t backup_lba;
  uint64_t first_usable_lba;
  uint64_t last_usable_lba;
  uint8_t disk_guid[16];
  uint64_t entries_lba;
  uint32_t nr_entries;
  uint32_t entry_size;
  uint32_t entries_crc;
} __attribute__ ((packed));
_Static_assert (sizeof (struct gpt_header) == 92, "GPT header size");

struct gpt_entry {
  uint8_t type_guid[16];
  uint8_t unique_guid[16];
  uint64_t first_lba;
  uint64_t last_lba;
  uint64_t attributes;
  uint16_t name[36];
} __attribute__ ((packed));
_Static_assert (sizeof (struct gpt_entry) == GPT_ENTRY_SIZE,
                "GPT entry size");

/* CRC-32 as GPT uses it (IEEE 802.3, reflected). */
static uint32_t
crc32_ieee (const void *buf, size_t len)
{
  const uint8_t *p = buf;
  uint32_t crc = 0xffffffff;
  size_t i;
  int k;

  for (i = 0; i < len; i++) {
    crc ^= p[i];
    for (k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0xedb88320 & -(crc & 1));
  }
  return ~crc;
}

static int
random_guid (uint8_t *guid)
{
  if (getrandom (guid, 16, 0) != 16) {
    nbdkit_error ("getrandom: %m");
    return -1;
  }
  guid[7] = (guid[7] & 0x0f) | 0x40;   /* version 4 (third field, LE) */
  guid[8] = (guid[8] & 0x3f) | 0x80;   /* RFC 4122 variant */
  return 0;
}

static void
write_header (uint8_t *sector, const uint8_t *disk_guid,
              uint64_t current, uint64_t backup, uint64_t entries_lba,
              uint64_t total_sectors, uint32_t entries_crc)
{
  struct gpt_header h;

  memset (&h, 0, sizeof h);
  memcpy (h.signature, "EFI PART", 8);
  h.revision = htole32 (0x00010000);
  h.header_size = htole32 (sizeof h);
  h.current_lba = htole64 (current);
  h.backup_lba = htole64 (backup);
  h.first_usable_lba = htole64 (GPT_PRIMARY_SECTORS);
  h.last_usable_lba = htole64 (total_sectors - GPT_SECONDARY_SECTORS - 1);
  memcpy (h.disk_guid, disk_guid, 16);
  h.entries_lba = htole64 (entries_lba);
  h.nr_entries = htole32 (GPT_ENTRIES);
  h.entry_size = htole32 (GPT_ENTRY_SIZE);
  h.entries_crc = htole32 (entries_crc);
  h.header_crc = htole32 (crc32_ieee (&h, sizeof h));
  memcpy (sector, &h, sizeof h);
}

int
build_gpt (uint8_t *primary, uint8_t *secondary,
           uint64_t total_sectors, uint64_t part_sectors)
{
  uint8_t *mbr = primary;
  uint8_t *entries = primary + 2 * SECTOR_SIZE;
  const size_t array_size = GPT_ARRAY_SECTORS * SECTOR_SIZE;
  struct gpt_entry e;
  uint8_t disk_guid[16];
  uint32_t mbr_sectors, entries_crc;

  if (total_sectors < PARTITION_START_SECTOR + part_sectors +
      GPT_SECONDARY_SECTORS || part_sectors == 0) {
    nbdkit_error ("partition table: disk too small");
    errno = EINVAL;
    return -1;
  }
  memset (primary, 0, GPT_PRIMARY_SECTORS * SECTOR_SIZE);
  memset (secondary, 0, GPT_SECONDARY_SECTORS * SECTOR_SIZE);

  /* Protective MBR: one partition of type 0xee covering the disk (or
   * as much as 32 bits can say), so MBR-only tools leave it alone.
   */
  mbr_sectors = MIN (total_sectors - 1, (uint64_t) UINT32_MAX);
  mbr[446 + 1] = 0x00;          /* CHS of LBA 1: head 0, sector 2 */
  mbr[446 + 2] = 0x02;
  mbr[446 + 3] = 0x00;
  mbr[446 + 4] = 0xee;
  mbr[446 + 5] = 0xff;          /* CHS end: "beyond CHS" */
  mbr[446 + 6] = 0xff;
  mbr[446 + 7] = 0xff;
  mbr[446 + 8] = 1;             /* first LBA, little-endian */
  mbr[446 + 12] = mbr_sectors & 0xff;
  mbr[446 + 13] = (mbr_sectors >> 8) & 0xff;
  mbr[446 + 14] = (mbr_sectors >> 16) & 0xff;
  mbr[446 + 15] = (mbr_sectors >> 24) & 0xff;
  mbr[510] = 0x55;
  mbr[511] = 0xaa;

  /* The one partition entry. */
  memset (&e, 0, sizeof e);
  memcpy (e.type_guid, linux_filesystem_type, 16);
  if (random_guid (e.unique_guid) == -1 || random_guid (disk_guid) == -1)
    return -1;
  e.first_lba = htole64 (PARTITION_START_SECTOR);
  e.last_lba = htole64 (PARTITION_START_SECTOR + part_sectors - 1);
  e.attributes = htole64 (GPT_ATTR_LEGACY_BIOS_BOOTABLE);
  memcpy (entries, &e, sizeof e);
  entries_crc = crc32_ieee (entries, array_size);

  /* Primary header at LBA 1, its array at 2; the backup array just
   * before the backup header in the last sector.
   */
  write_header (primary + SECTOR_SIZE, disk_guid, 1, total_sectors - 1, 2,
                total_sectors, entries_crc);
  memcpy (secondary, entries, array_size);
  write_header (secondary + array_size, disk_guid, total_sectors - 1, 1,
                total_sectors - GPT_SECONDARY_SECTORS, total_sectors,
                entries_crc);
  return 0;
}
