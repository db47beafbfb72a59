/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The linuxdisk plugin's parts: filesystem.c builds the ext2/3/4
 * image from the directory, gpt.c the partition table around it, and
 * linuxdisk.c lays them out and serves them.
 */
#ifndef NBDKIT_LINUXDISK_H
#define NBDKIT_LINUXDISK_H

#include <stdbool.h>
#include <stdint.h>

#define SECTOR_SIZE 512
/* Where the partition starts: 1 MiB, as partitioning tools align. */
#define PARTITION_START_SECTOR 2048
/* A GPT's partition array: 128 entries of 128 bytes, 32 sectors. */
#define GPT_ENTRIES 128
#define GPT_ENTRY_SIZE 128
#define GPT_ARRAY_SECTORS (GPT_ENTRIES * GPT_ENTRY_SIZE / SECTOR_SIZE)
/* Protective MBR, GPT header and the array, at the start of the disk. */
#define GPT_PRIMARY_SECTORS (2 + GPT_ARRAY_SECTORS)
/* The array and the backup header, at the end. */
#define GPT_SECONDARY_SECTORS (1 + GPT_ARRAY_SECTORS)

/* What the user asked for with size=. */
struct size_request {
  int64_t size;                 /* 0: not given */
  bool add;                     /* size=+SIZE: free space wanted */
};

/* Build the filesystem of TYPE (ext2, ext3, ext4) labelled LABEL (or
 * NULL) from DIR into a new unlinked temporary file.  Returns its
 * descriptor and its size in *SIZE (a multiple of SECTOR_SIZE), or -1
 * (reported, in one line).
 */
extern int build_filesystem (const char *dir, const char *type,
                             const char *label, struct size_request req,
                             uint64_t *size);

/* Fill PRIMARY (GPT_PRIMARY_SECTORS sectors) and SECONDARY
 * (GPT_SECONDARY_SECTORS) for a disk of TOTAL_SECTORS holding one
 * Linux filesystem partition of PART_SECTORS sectors at
 * PARTITION_START_SECTOR.  Returns 0, or -1 (reported).
 */
extern int build_gpt (uint8_t *primary, uint8_t *secondary,
                      uint64_t total_sectors, uint64_t part_sectors);

#endif /* NBDKIT_LINUXDISK_H */
