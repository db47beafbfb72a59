/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The partition filter's table readers: given the disk below, find
 * where partition PARTNUM starts and how long it is.  partition.c owns
 * the connection; partition-mbr.c and partition-gpt.c only read.
 */
#ifndef NBDKIT_PARTITION_H
#define NBDKIT_PARTITION_H

#include <stdint.h>

#include <nbdkit-filter.h>

#define SECTOR_SIZE 512

/* The smallest disk read as GPT: the protective MBR, the header and
 * the usual 32 sectors of entries, at both ends.
 */
#define GPT_MIN_DISK (2 * 34 * SECTOR_SIZE)

/* Each reads what it needs through next (the disk is SIZE bytes, at
 * least two sectors), and on success sets *OFFSET and *LEN to the
 * partition's bytes, checked to lie inside the disk.  On failure it
 * has called nbdkit_error and returns -1.  LBA01 is the disk's first
 * two sectors, already read.
 */
extern int partition_find_mbr (nbdkit_next *next, uint64_t size,
                               unsigned partnum, const uint8_t *lba01,
                               uint64_t *offset, uint64_t *len);
extern int partition_find_gpt (nbdkit_next *next, uint64_t size,
                               unsigned partnum, const uint8_t *lba01,
                               uint64_t *offset, uint64_t *len);

/* Helpers shared by both readers. */
struct partition_span {
  uint64_t start;               /* bytes */
  uint64_t len;                 /* bytes, > 0 */
  unsigned number;              /* 1-based; 0: the table itself */
};

/* Check that no two of SPANS (N of them, reordered by this call)
 * overlap, by laying them out as a region list; KIND names the table
 * for the error message.  0 if they do not, -1 with an error if they do.
 */
extern int partition_check_overlaps (struct partition_span *spans, size_t n,
                                     const char *kind);

static inline uint32_t
partition_le32 (const uint8_t *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
    (uint32_t) p[3] << 24;
}

static inline uint64_t
partition_le64 (const uint8_t *p)
{
  return (uint64_t) partition_le32 (p) |
    (uint64_t) partition_le32 (p + 4) << 32;
}

#endif /* NBDKIT_PARTITION_H */
