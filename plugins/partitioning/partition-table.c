/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The partitioning plugin's virtual disk: where each piece goes, and the
 * bytes of the MBR (with extended boot records past four partitions) or
 * of the GPT (protective MBR, primary and secondary headers and entry
 * arrays).
 *
 * Input: the files of partitioning.h (sizes, alignments, types) and
 * PARTTYPE.  Output: LAYOUT, a region list the data path reads and
 * writes through, whose REGION_DATA regions point at the table sectors
 * allocated here.  Everything is built once, in get_ready.
 *
 * The layout and the bytes are nbdkit 1.32's, so the same files give
 * the same disk under either server (GPT unique partition GUIDs aside:
 * they are random in both).
 *
 *   MBR:  MBR | pad | file 0 | pad | file 1 | ... | file 2 | pad
 *         | EBR | pad | file 3 | pad | EBR | pad | file 4 | ...
 *   GPT:  protective MBR, header, entries | pad | file 0 | pad | ...
 *         | entries, header
 *
 * Each file starts at a multiple of its alignment; the padding after
 * it makes the next piece start on a sector.  Only the MBR's fourth
 * slot is extended (type 0x0f), and only with more than four files.
 */
#include <config.h>

#include <assert.h>
#include <inttypes.h>
#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "include/minmax.h"
#include "include/rounding.h"
#include "partitioning.h"

#define GPT_MIN_ENTRIES 128
#define GPT_ENTRY_SIZE 128
#define GPT_HEADER_SIZE 96      /* what nbdkit writes (the spec's 92 + 4) */

struct regions layout;

/* The table sectors the REGION_DATA regions point at. */
static uint8_t *primary;        /* MBR, or protective MBR + GPT + entries */
static uint8_t *secondary;      /* GPT only: entries + backup header */
static uint8_t **ebrs;          /* MBR with > 4 files: one per logical */
static size_t nr_ebrs;
static uint64_t *ebr_offsets;   /* where each EBR lies in the disk */

void
pt_free_layout (void)
{
  regions_free (&layout);
  free (primary);
  free (secondary);
  for (size_t i = 0; i < nr_ebrs; ++i)
    free (ebrs[i]);
  free (ebrs);
  free (ebr_offsets);
  primary = secondary = NULL;
  ebrs = NULL;
  ebr_offsets = NULL;
  nr_ebrs = 0;
}

/* --- CRC-32 (IEEE 802.3, reflected), as GPT uses --------------------- */

static uint32_t
crc32_ieee (const uint8_t *buf, size_t len)
{
  static uint32_t table[256];
  static bool ready;            /* built in get_ready: one thread */
  uint32_t crc = 0xffffffff;

  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;

      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xedb88320 ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  for (size_t i = 0; i < len; ++i)
    crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffff;
}

/* --- GUIDs ------------------------------------------------------------ */

static int
hex_value (char c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int
pt_parse_guid (const char *str, uint8_t out[16])
{
  /* Textual byte order is big endian per field; on disk the first
   * three fields are little endian.
   */
  static const int order[16] = {
    3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15
  };
  const size_t len = strlen (str);
  uint8_t bytes[16];
  size_t i, n = 0;

  if (len == 38 && str[0] == '{' && str[37] == '}')
    str++;
  else if (len != 36)
    return -1;

  for (i = 0; i < 36; ) {
    int hi, lo;

    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (str[i] != '-')
        return -1;
      i++;
      continue;
    }
    hi = hex_value (str[i]);
    lo = hex_value (str[i + 1]);
    if (hi == -1 || lo == -1)
      return -1;
    bytes[n++] = hi << 4 | lo;
    i += 2;
  }
  assert (n == 16);
  for (i = 0; i < 16; ++i)
    out[order[i]] = bytes[i];
  return 0;
}

/* --- Little endian stores --------------------------------------------- */

static void
put_le32 (uint8_t *p, uint32_t v)
{
  v = htole32 (v);
  memcpy (p, &v, 4);
}

static void
put_le64 (uint8_t *p, uint64_t v)
{
  v = htole64 (v);
  memcpy (p, &v, 8);
}

/* --- MBR -------------------------------------------------------------- */

/* One 16 byte MBR entry.  CHS fields say "too large, use LBA". */
static void
mbr_entry (uint8_t *e, bool bootable, uint8_t type,
           uint64_t start_sector, uint64_t nr_sectors)
{
  static const uint8_t chs_max[3] = { 0xfe, 0xff, 0xff };

  assert (start_sector <= UINT32_MAX && nr_sectors <= UINT32_MAX);
  e[0] = bootable ? 0x80 : 0;
  memcpy (&e[1], chs_max, 3);
  e[4] = type;
  memcpy (&e[5], chs_max, 3);
  put_le32 (&e[8], start_sector);
  put_le32 (&e[12], nr_sectors);
}

static void
boot_signature (uint8_t *sector)
{
  sector[0x1fe] = 0x55;
  sector[0x1ff] = 0xaa;
}

/* Sectors a file's partition covers (a partial last sector counts). */
static uint64_t
file_sectors (const struct file *f)
{
  return DIV_ROUND_UP (f->size, SECTOR_SIZE);
}

/* Every MBR number must fit in 32 bits; with many files and large
 * alignments the layout can outgrow what the size check foresaw.
 */
static int
check_mbr_limits (void)
{
  const uint64_t total = regions_size (&layout) / SECTOR_SIZE;

  if (total > UINT32_MAX) {
    nbdkit_error ("partition-type: the MBR disk would have %" PRIu64
                  " sectors, more than an MBR can address: "
                  "try partition-type=gpt", total);
    return -1;
  }
  return 0;
}

static void
fill_mbr (void)
{
  const size_t n = files.len;
  const uint64_t total = regions_size (&layout) / SECTOR_SIZE;
  const size_t nr_primary = n <= 4 ? n : 3;
  size_t i;

  boot_signature (primary);
  for (i = 0; i < nr_primary; ++i) {
    const struct file *f = &files.ptr[i];

    mbr_entry (&primary[0x1be + 16 * i], i == 0, f->mbr_id,
               f->offset / SECTOR_SIZE, file_sectors (f));
  }
  if (n <= 4)
    return;

  /* The extended partition runs from the first EBR to the end. */
  const uint64_t ext_start = ebr_offsets[0] / SECTOR_SIZE;
  mbr_entry (&primary[0x1ee], false, 0x0f, ext_start, total - ext_start);

  for (i = 3; i < n; ++i) {
    const size_t k = i - 3;
    const struct file *f = &files.ptr[i];
    uint8_t *ebr = ebrs[k];

    boot_signature (ebr);
    /* This logical partition, relative to its own EBR. */
    mbr_entry (&ebr[0x1be], false, f->mbr_id,
               (f->offset - ebr_offsets[k]) / SECTOR_SIZE,
               file_sectors (f));
    /* The next EBR, relative to the extended partition, covering up
     * to the end of the next logical partition.
     */
    if (i + 1 < n) {
      const struct file *next = &files.ptr[i + 1];
      const uint64_t next_ebr = ebr_offsets[k + 1] / SECTOR_SIZE;

      mbr_entry (&ebr[0x1ce], false, 0x0f, next_ebr - ext_start,
                 next->offset / SECTOR_SIZE + file_sectors (next)
                 - next_ebr);
    }
  }
}

/* --- GPT -------------------------------------------------------------- */

static void
gpt_header (uint8_t *h, uint64_t current_lba, uint64_t backup_lba,
            uint64_t first_usable, uint64_t last_usable,
            uint64_t entries_lba, uint32_t nr_entries, uint32_t entries_crc)
{
  memcpy (&h[0], "EFI PART", 8);
  put_le32 (&h[8], 0x00010000);         /* revision 1.0 */
  put_le32 (&h[12], GPT_HEADER_SIZE);
  put_le32 (&h[16], 0);                 /* CRC, below */
  put_le64 (&h[24], current_lba);
  put_le64 (&h[32], backup_lba);
  put_le64 (&h[40], first_usable);
  put_le64 (&h[48], last_usable);
  /* 56..71: the disk GUID, left zero as nbdkit leaves it. */
  put_le64 (&h[72], entries_lba);
  put_le32 (&h[80], nr_entries);
  put_le32 (&h[84], GPT_ENTRY_SIZE);
  put_le32 (&h[88], entries_crc);
  put_le32 (&h[16], crc32_ieee (h, GPT_HEADER_SIZE));
}

/* The partition name: the file name as given, in UTF-16LE, if it is
 * ASCII and fits with its terminator in 36 units; else no name.
 */
static void
gpt_name (uint8_t *out, const char *filename)
{
  const size_t len = strlen (filename);

  if (len >= 36)
    return;
  for (size_t i = 0; i < len; ++i)
    if ((unsigned char) filename[i] >= 0x80)
      return;
  for (size_t i = 0; i < len; ++i)
    out[2 * i] = filename[i];
}

static void
fill_gpt (uint64_t nr_entries, uint64_t entry_lbas)
{
  const uint64_t total = regions_size (&layout) / SECTOR_SIZE;
  uint8_t *entries = &primary[2 * SECTOR_SIZE];
  const size_t entries_len = entry_lbas * SECTOR_SIZE;
  uint32_t crc;

  /* Protective MBR: one partition of type 0xee over the whole disk. */
  boot_signature (primary);
  mbr_entry (&primary[0x1be], false, 0xee, 1, MIN (total - 1,
                                                   (uint64_t) UINT32_MAX));

  for (size_t i = 0; i < files.len; ++i) {
    const struct file *f = &files.ptr[i];
    uint8_t *e = &entries[i * GPT_ENTRY_SIZE];
    const uint64_t first = f->offset / SECTOR_SIZE;

    memcpy (&e[0], f->type_guid, 16);
    memcpy (&e[16], f->guid, 16);
    put_le64 (&e[32], first);
    put_le64 (&e[40], first + file_sectors (f) - 1);
    /* The first partition is marked legacy BIOS bootable. */
    put_le64 (&e[48], i == 0 ? 4 : 0);
    gpt_name (&e[56], f->filename);
  }
  crc = crc32_ieee (entries, entries_len);
  memcpy (secondary, entries, entries_len);

  gpt_header (&primary[SECTOR_SIZE], 1, total - 1,
              2 + entry_lbas, total - 2 - entry_lbas,
              2, nr_entries, crc);
  gpt_header (&secondary[entries_len], total - 1, 1,
              2 + entry_lbas, total - 2 - entry_lbas,
              total - 1 - entry_lbas, nr_entries, crc);
}

/* --- The layout ------------------------------------------------------- */

static int
append_failed (void)
{
  nbdkit_error ("partitioning: building the disk layout: %m");
  return -1;
}

int
pt_create_layout (void)
{
  const size_t n = files.len;
  uint64_t nr_entries = 0, entry_lbas = 0;
  size_t i;

  assert (n > 0);
  assert (parttype == PARTTYPE_MBR || parttype == PARTTYPE_GPT);
  regions_init (&layout);

  if (parttype == PARTTYPE_MBR) {
    primary = calloc (1, SECTOR_SIZE);
    if (primary == NULL)
      return append_failed ();
    if (n > 4) {
      nr_ebrs = n - 3;
      ebrs = calloc (nr_ebrs, sizeof *ebrs);
      ebr_offsets = calloc (nr_ebrs, sizeof *ebr_offsets);
      if (ebrs == NULL || ebr_offsets == NULL)
        return append_failed ();
      for (i = 0; i < nr_ebrs; ++i)
        if ((ebrs[i] = calloc (1, SECTOR_SIZE)) == NULL)
          return append_failed ();
    }
    if (regions_append_data (&layout, SECTOR_SIZE, primary) == -1)
      return append_failed ();
  }
  else {
    nr_entries = ROUND_UP ((uint64_t) n, GPT_MIN_ENTRIES);
    entry_lbas = nr_entries * GPT_ENTRY_SIZE / SECTOR_SIZE;
    primary = calloc (2 + entry_lbas, SECTOR_SIZE);
    secondary = calloc (entry_lbas + 1, SECTOR_SIZE);
    if (primary == NULL || secondary == NULL)
      return append_failed ();
    if (regions_append_data (&layout, (2 + entry_lbas) * SECTOR_SIZE,
                             primary) == -1)
      return append_failed ();
  }

  for (i = 0; i < n; ++i) {
    struct file *f = &files.ptr[i];

    if (parttype == PARTTYPE_MBR && n > 4 && i >= 3) {
      ebr_offsets[i - 3] = regions_size (&layout);
      if (regions_append_data (&layout, SECTOR_SIZE, ebrs[i - 3]) == -1)
        return append_failed ();
    }
    if (regions_pad_to (&layout, f->alignment) == -1)
      return append_failed ();
    f->offset = regions_size (&layout);
    if (regions_append_file (&layout, f->size, i) == -1 ||
        regions_pad_to (&layout, SECTOR_SIZE) == -1)
      return append_failed ();
  }

  if (parttype == PARTTYPE_GPT) {
    if (regions_append_data (&layout, (entry_lbas + 1) * SECTOR_SIZE,
                             secondary) == -1)
      return append_failed ();
    fill_gpt (nr_entries, entry_lbas);
  }
  else {
    if (check_mbr_limits () == -1)
      return -1;
    fill_mbr ();
  }
  return 0;
}
