/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Reading an MBR partition table: the four primary entries in sector
 * 0, and for partitions 5 and up the chain of extended boot records
 * (EBRs) inside the extended partition, one logical partition each.
 * Every number read from the disk is checked before it is used: a
 * table is refused, never followed, when it points outside the disk
 * or the extended partition, loops, or has overlapping partitions.
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "partition.h"

/* The Linux kernel follows at most 100 EBRs; allow a few more, but
 * bound the walk so that a looping or endless chain ends it.
 */
#define MAX_EBRS 1024

struct mbr_entry {
  uint8_t type;
  uint64_t start;               /* bytes from the sector holding the entry,
                                 * or (EBR links) from the extended start */
  uint64_t len;                 /* bytes */
};

static void
get_entry (const uint8_t *sector, int i, struct mbr_entry *e)
{
  const uint8_t *p = &sector[0x1be + 16 * i];

  e->type = p[4];
  /* 32-bit sector numbers: at most 2 TiB, no overflow in 64 bits. */
  e->start = (uint64_t) partition_le32 (&p[8]) * SECTOR_SIZE;
  e->len = (uint64_t) partition_le32 (&p[12]) * SECTOR_SIZE;
}

static bool
is_empty (const struct mbr_entry *e)
{
  return e->type == 0 || e->len == 0;
}

static bool
is_extended (uint8_t type)
{
  return type == 0x05 || type == 0x0f || type == 0x85;
}

static bool
has_signature (const uint8_t *sector)
{
  return sector[0x1fe] == 0x55 && sector[0x1ff] == 0xaa;
}

static int
find_logical (nbdkit_next *next, uint64_t size, unsigned partnum,
              const struct mbr_entry *ext, uint64_t *offset, uint64_t *len)
{
  struct partition_span spans[MAX_EBRS];
  uint64_t visited[MAX_EBRS];
  size_t nspans = 0;
  uint64_t ext_end = ext->start + ext->len;
  uint64_t ebr = ext->start;
  uint8_t sector[SECTOR_SIZE];
  struct mbr_entry logical, link;
  unsigned n;
  int err;

  if (ext_end > size) {
    nbdkit_error ("MBR extended partition lies outside the disk");
    return -1;
  }

  for (n = 5; n <= partnum; n++) {
    size_t i = n - 5;

    if (i >= MAX_EBRS) {
      nbdkit_error ("MBR partition %u: more than %d logical partitions",
                    partnum, MAX_EBRS);
      return -1;
    }
    if (ebr < ext->start || ebr >= ext_end || ext_end - ebr < SECTOR_SIZE) {
      nbdkit_error ("MBR: the EBR of partition %u lies outside "
                    "the extended partition", n);
      return -1;
    }
    for (size_t j = 0; j < i; j++)
      if (visited[j] == ebr) {
        nbdkit_error ("MBR: the chain of EBRs loops back at partition %u", n);
        return -1;
      }
    visited[i] = ebr;

    if (next->pread (next, sector, sizeof sector, ebr, 0, &err) == -1) {
      nbdkit_error ("reading the EBR of partition %u: %s", n, strerror (err));
      return -1;
    }
    if (!has_signature (sector)) {
      nbdkit_error ("MBR: the EBR of partition %u has no 0x55 0xAA signature",
                    n);
      return -1;
    }

    get_entry (sector, 0, &logical);
    if (!is_empty (&logical)) {
      /* The start counts from this EBR, which it must not cover. */
      uint64_t start = ebr + logical.start;
      if (logical.start == 0 || start > ext_end ||
          logical.len > ext_end - start) {
        nbdkit_error ("MBR logical partition %u lies outside "
                      "the extended partition", n);
        return -1;
      }
      spans[nspans++] = (struct partition_span) {
        .start = start, .len = logical.len, .number = n
      };
      if (n == partnum) {
        if (partition_check_overlaps (spans, nspans, "MBR") == -1)
          return -1;
        *offset = start;
        *len = logical.len;
        return 0;
      }
    }
    else if (n == partnum)
      break;

    /* The link to the next EBR counts from the extended partition. */
    get_entry (sector, 1, &link);
    if (is_empty (&link))
      break;
    ebr = ext->start + link.start;
  }

  nbdkit_error ("MBR partition %u not found", partnum);
  return -1;
}

int
partition_find_mbr (nbdkit_next *next, uint64_t size, unsigned partnum,
                    const uint8_t *lba01, uint64_t *offset, uint64_t *len)
{
  struct partition_span spans[4];
  struct mbr_entry e[4];
  size_t nspans = 0;
  int ext = -1;

  for (int i = 0; i < 4; i++) {
    get_entry (lba01, i, &e[i]);
    if (is_empty (&e[i]))
      continue;
    spans[nspans++] = (struct partition_span) {
      .start = e[i].start, .len = e[i].len, .number = i + 1
    };
    if (is_extended (e[i].type) && ext == -1)
      ext = i;
  }
  if (partition_check_overlaps (spans, nspans, "MBR") == -1)
    return -1;

  if (partnum > 4) {
    if (ext == -1) {
      /* Nothing says a partition N exists: only where it would be. */
      nbdkit_error ("MBR partition %u not found: partitions 5 and up are "
                    "logical partitions, and the partition table has no "
                    "extended partition", partnum);
      return -1;
    }
    return find_logical (next, size, partnum, &e[ext], offset, len);
  }

  const struct mbr_entry *p = &e[partnum - 1];
  if (is_empty (p)) {
    nbdkit_error ("MBR partition %u not found", partnum);
    return -1;
  }
  if (is_extended (p->type)) {
    /* As nbdkit: the extended partition is not a partition to serve. */
    nbdkit_error ("MBR partition %u not found: it is the extended "
                  "partition, which holds logical partitions 5 and up",
                  partnum);
    return -1;
  }
  if (p->start > size || p->len > size - p->start) {
    nbdkit_error ("MBR partition %u lies outside the disk", partnum);
    return -1;
  }
  *offset = p->start;
  *len = p->len;
  return 0;
}
