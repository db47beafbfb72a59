/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Reading a GPT partition table: the header in sector 1 says where the
 * array of partition entries lies, how many entries it has and how
 * big each is; entry N-1 gives partition N's first and last sectors.
 * Every field is checked before it is used, and the table is refused
 * when its entries overlap each other or the table itself.  The CRCs
 * are not checked (nbdkit does not check them either).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "checked-overflow.h"
#include "cleanup.h"
#include "partition.h"

/* A real table has 128 entries of 128 bytes (16 KiB); refuse to read
 * more than this many bytes of entries.
 */
#define MAX_ARRAY_BYTES (32 * 1024 * 1024)
#define MIN_ENTRY_SIZE 128

static bool
is_unused (const uint8_t *entry)
{
  static const uint8_t zero_guid[16];
  return memcmp (entry, zero_guid, sizeof zero_guid) == 0;
}

/* An entry's bytes on the disk, or false if its fields make no sense. */
static bool
entry_span (const uint8_t *entry, uint64_t *start, uint64_t *len)
{
  uint64_t first = partition_le64 (&entry[32]);
  uint64_t last = partition_le64 (&entry[40]); /* inclusive */
  uint64_t end;

  if (last < first)
    return false;
  if (MUL_OVERFLOW (first, SECTOR_SIZE, start) ||
      ADD_OVERFLOW (last, 1, &end) || MUL_OVERFLOW (end, SECTOR_SIZE, &end))
    return false;
  *len = end - *start;
  return true;
}

int
partition_find_gpt (nbdkit_next *next, uint64_t size, unsigned partnum,
                    const uint8_t *lba01, uint64_t *offset, uint64_t *len)
{
  const uint8_t *header = &lba01[SECTOR_SIZE];
  uint64_t array_lba = partition_le64 (&header[72]);
  uint32_t nr_entries = partition_le32 (&header[80]);
  uint32_t entry_size = partition_le32 (&header[84]);
  uint64_t array_offset, array_bytes;
  CLEANUP_FREE uint8_t *array = NULL;
  CLEANUP_FREE struct partition_span *spans = NULL;
  size_t nspans = 0;
  const uint8_t *entry;
  int err;

  if (entry_size < MIN_ENTRY_SIZE) {
    nbdkit_error ("GPT: partition entries of %" PRIu32 " bytes are too small",
                  entry_size);
    return -1;
  }
  if (partnum > nr_entries) {
    nbdkit_error ("GPT partition %u not found: the table has %" PRIu32
                  " entries", partnum, nr_entries);
    return -1;
  }
  /* Two 32-bit numbers: the product fits. */
  array_bytes = (uint64_t) nr_entries * entry_size;
  if (array_bytes > MAX_ARRAY_BYTES) {
    nbdkit_error ("GPT: the partition entry array (%" PRIu64 " bytes) "
                  "is too large", array_bytes);
    return -1;
  }
  if (MUL_OVERFLOW (array_lba, SECTOR_SIZE, &array_offset) ||
      array_lba < 2 || array_offset > size ||
      array_bytes > size - array_offset) {
    nbdkit_error ("GPT: the partition entry array lies outside the disk");
    return -1;
  }

  array = malloc (array_bytes);
  spans = calloc (nr_entries + 2, sizeof *spans);
  if (array == NULL || spans == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (next->pread (next, array, array_bytes, array_offset, 0, &err) == -1) {
    nbdkit_error ("reading the GPT partition entries: %s", strerror (err));
    return -1;
  }

  entry = &array[(uint64_t) (partnum - 1) * entry_size];
  if (is_unused (entry)) {
    nbdkit_error ("GPT partition %u is unused", partnum);
    return -1;
  }
  if (!entry_span (entry, offset, len) || *offset > size ||
      *len > size - *offset) {
    nbdkit_error ("GPT partition %u lies outside the disk", partnum);
    return -1;
  }

  /* The table (header and entries) and every used entry that makes
   * sense must not overlap.  Entries pointing outside the disk are
   * left out: an image cut short may still serve its first partitions.
   */
  spans[nspans++] = (struct partition_span) {
    .start = 0, .len = 2 * SECTOR_SIZE, .number = 0
  };
  if (array_bytes > 0)
    spans[nspans++] = (struct partition_span) {
      .start = array_offset, .len = array_bytes, .number = 0
    };
  for (uint32_t i = 0; i < nr_entries; i++) {
    uint64_t start, n;
    entry = &array[(uint64_t) i * entry_size];
    if (is_unused (entry) || !entry_span (entry, &start, &n) ||
        start > size || n > size - start)
      continue;
    spans[nspans++] = (struct partition_span) {
      .start = start, .len = n, .number = i + 1
    };
  }
  return partition_check_overlaps (spans, nspans, "GPT");
}
