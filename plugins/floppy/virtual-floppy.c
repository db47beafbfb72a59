/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The floppy plugin: laying out a FAT32 disk from a directory tree.
 *
 * vf_create scans the tree (breadth first, so DIRS[0] is the root),
 * has directory.c write each directory's entries, picks the geometry,
 * gives every directory and file a run of consecutive clusters (the
 * directories first, then the files, each in scan order), writes the
 * FAT chains, the boot sector and the MBR, and lists the regions of
 * the disk:
 *
 *   sector 0         MBR, one partition of type 0x0c (FAT32, LBA)
 *   sector 2048      boot sector, FSInfo, their backups at 6 and 7
 *   +32 sectors      FAT 1, FAT 2 (the same buffer twice)
 *   then             the data area: clusters 2, 3, ...
 *
 * Only the used part of each FAT is in memory; free clusters' entries,
 * the slack after each directory and file, and any free space asked
 * for with size= are zero regions.  File bytes are REGION_FILE regions
 * read from the file by the plugin on demand.
 */
#include <config.h>

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <nbdkit-plugin.h>

#include "checked-overflow.h"
#include "rounding.h"
#include "virtual-floppy.h"

/* Cluster sizes, in sectors: 4 KiB by default, the size most file
 * systems use; see choose_geometry for when it changes.
 */
#define DEFAULT_SECTORS_PER_CLUSTER 8
#define MAX_SECTORS_PER_CLUSTER 128
#define MIN_FAT32_CLUSTERS 65525

void
vf_init (struct virtual_floppy *vf)
{
  memset (vf, 0, sizeof *vf);
  regions_init (&vf->regions);
}

void
vf_free (struct virtual_floppy *vf)
{
  for (size_t i = 0; i < vf->files.len; i++)
    free (vf->files.ptr[i].host_path);
  vf_file_vector_reset (&vf->files);
  for (size_t i = 0; i < vf->dirs.len; i++) {
    struct vf_dir *d = &vf->dirs.ptr[i];

    free (d->host_path);
    for (size_t j = 0; j < d->entries.len; j++)
      free (d->entries.ptr[j].name);
    vf_entry_vector_reset (&d->entries);
    byte_vector_reset (&d->dirents);
  }
  vf_dir_vector_reset (&vf->dirs);
  free (vf->fat);
  vf->fat = NULL;
  regions_free (&vf->regions);
}

/* --- scanning --------------------------------------------------------- */

/* FAT looks names up ignoring case, so sort that way, and then two
 * names that differ only in case end up side by side.
 */
static int
compare_entries (const void *a, const void *b)
{
  const struct vf_entry *x = a, *y = b;
  int r = strcasecmp (x->name, y->name);

  return r ? r : strcmp (x->name, y->name);
}

/* Read directory DIRS[I]: append its subdirectories to DIRS (to be
 * scanned in turn) and its regular files to FILES.  Anything else
 * (symbolic links, devices, sockets) is left out.
 */
static int
scan_dir (struct virtual_floppy *vf, size_t i)
{
  const char *path = vf->dirs.ptr[i].host_path;
  vf_entry_vector entries = empty_vector;
  DIR *dir;
  struct dirent *de;
  int r = -1;

  dir = opendir (path);
  if (dir == NULL) {
    nbdkit_error ("dir: opendir: %s: %m", path);
    return -1;
  }
  for (;;) {
    struct vf_entry ent = { .name = NULL };
    char *child;

    errno = 0;
    de = readdir (dir);
    if (de == NULL) {
      if (errno != 0) {
        nbdkit_error ("dir: readdir: %s: %m", path);
        goto out;
      }
      break;
    }
    if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
      continue;

    if (asprintf (&child, "%s/%s", path, de->d_name) == -1) {
      nbdkit_error ("asprintf: %m");
      goto out;
    }
    if (lstat (child, &ent.st) == -1) {
      nbdkit_error ("dir: lstat: %s: %m", child);
      free (child);
      goto out;
    }

    if (S_ISREG (ent.st.st_mode)) {
      struct vf_file f = { .host_path = child };

      if (ent.st.st_size > UINT32_MAX) {
        nbdkit_error ("dir: %s: too big for FAT32, whose files are at "
                      "most 4 GiB - 1 bytes", child);
        free (child);
        goto out;
      }
      f.size = ent.st.st_size;
      ent.index = vf->files.len;
      if (vf_file_vector_append (&vf->files, f) == -1) {
        nbdkit_error ("realloc: %m");
        free (child);
        goto out;
      }
    }
    else if (S_ISDIR (ent.st.st_mode)) {
      struct vf_dir d = { .host_path = child, .parent = i, .st = ent.st };

      ent.is_dir = true;
      ent.index = vf->dirs.len;
      if (vf_dir_vector_append (&vf->dirs, d) == -1) {
        nbdkit_error ("realloc: %m");
        free (child);
        goto out;
      }
    }
    else {
      nbdkit_debug ("floppy: %s: not a regular file or directory, left out",
                    child);
      free (child);
      continue;
    }

    ent.name = strdup (de->d_name);
    if (ent.name == NULL || vf_entry_vector_append (&entries, ent) == -1) {
      nbdkit_error ("strdup: %m");
      free (ent.name);
      goto out;
    }
  }

  vf_entry_vector_sort (&entries, compare_entries);
  for (size_t j = 1; j < entries.len; j++) {
    if (strcasecmp (entries.ptr[j - 1].name, entries.ptr[j].name) == 0) {
      nbdkit_error ("dir: %s: \"%s\" and \"%s\" differ only in case, "
                    "which FAT cannot tell apart",
                    path, entries.ptr[j - 1].name, entries.ptr[j].name);
      goto out;
    }
  }
  r = 0;

 out:
  /* DIRS may have moved: store through the index, not a pointer. */
  vf->dirs.ptr[i].entries = entries;
  closedir (dir);
  return r;
}

/* --- geometry --------------------------------------------------------- */

/* The FAT sectors needed for CLUSTERS data clusters (plus the two
 * reserved entries at the start), each entry 4 bytes.
 */
static uint64_t
fat_sectors_for (uint64_t clusters)
{
  return DIV_ROUND_UP ((clusters + FIRST_CLUSTER) * 4, SECTOR_SIZE);
}

/* The clusters every directory and file takes with clusters of SPC
 * sectors.
 */
static uint64_t
clusters_needed (const struct virtual_floppy *vf, uint32_t spc)
{
  uint64_t cs = (uint64_t) spc * SECTOR_SIZE, n = 0;

  for (size_t i = 0; i < vf->dirs.len; i++)
    n += DIV_ROUND_UP ((uint64_t) vf->dirs.ptr[i].dirents.len, cs);
  for (size_t i = 0; i < vf->files.len; i++)
    n += DIV_ROUND_UP ((uint64_t) vf->files.ptr[i].size, cs);
  return n;
}

/* How many clusters of SPC sectors fit in a partition of PARTITION
 * sectors, with the FAT that counts them: the FAT's size and the
 * number of clusters depend on each other, so start with a small FAT
 * and grow it until it covers the clusters left after it.  The FAT
 * only grows and the clusters only shrink, so this ends.
 */
static uint64_t
clusters_in (uint64_t partition, uint32_t spc, uint64_t *fat)
{
  uint64_t clusters;

  *fat = 1;
  for (;;) {
    if (partition < RESERVED_SECTORS + 2 * *fat)
      return 0;
    clusters = (partition - RESERVED_SECTORS - 2 * *fat) / spc;
    if (fat_sectors_for (clusters) <= *fat)
      return clusters;
    *fat = fat_sectors_for (clusters);
  }
}

/* The cluster size, in sectors, for a partition of PARTITION sectors:
 * 4 KiB up to 8 GiB, then doubling up to 32 KiB from 32 GiB, the sizes
 * Microsoft recommends.  Fewer clusters keep the FAT small, which
 * matters to tools that hold it in memory: fsck.fat 4.2 crashes on a
 * volume of 144 million 8 KiB clusters.
 */
static uint32_t
spc_for (uint64_t partition)
{
  const uint64_t gib = UINT64_C (1024) * 1024 * 1024 / SECTOR_SIZE;

  if (partition <= 8 * gib)
    return DEFAULT_SECTORS_PER_CLUSTER;
  if (partition <= 16 * gib)
    return 16;
  if (partition <= 32 * gib)
    return 32;
  return 64;
}

/* Choose the cluster size, the FAT size and the partition size.
 *
 * Microsoft's specification, Windows and mtools decide that a volume
 * is FAT32 by counting its clusters: at least MIN_FAT32_CLUSTERS.  (A
 * smaller one with FAT32 structures is read by Linux, but taken for
 * FAT12 or FAT16 by the others.)  So we prefer the cluster size of
 * spc_for, fall back to smaller ones to reach that count, and without
 * size= add free clusters (which are only zero regions, costing
 * nothing) up to it.  A size= too small for it even with 512 byte
 * clusters (about 33 MiB) still works, for Linux.
 */
static int
choose_geometry (struct virtual_floppy *vf, uint64_t size)
{
  uint64_t partition, needed, clusters, fat;
  uint32_t spc = DEFAULT_SECTORS_PER_CLUSTER;

  if (size == 0) {
    needed = clusters_needed (vf, spc);
    if (needed < MIN_FAT32_CLUSTERS) {
      spc = 1;
      needed = clusters_needed (vf, spc);
    }
    /* Bigger trees (over 8 GiB) get bigger clusters, as a disk of
     * that size would; bigger clusters only make the data take more
     * room, so this ends.
     */
    while (spc < MAX_SECTORS_PER_CLUSTER &&
           (needed > MAX_CLUSTERS ||
            (spc >= DEFAULT_SECTORS_PER_CLUSTER &&
             spc_for (needed * spc) > spc))) {
      spc *= 2;
      needed = clusters_needed (vf, spc);
    }
    if (needed > MAX_CLUSTERS) {
      nbdkit_error ("dir: the files need %" PRIu64 " clusters of %" PRIu32
                    " bytes, more than FAT32 can count",
                    needed, spc * SECTOR_SIZE);
      return -1;
    }
    clusters = needed < MIN_FAT32_CLUSTERS ? MIN_FAT32_CLUSTERS : needed;
    fat = fat_sectors_for (clusters);
    partition = RESERVED_SECTORS + 2 * fat + clusters * spc;
    if (partition > UINT32_MAX) {
      nbdkit_error ("dir: the files need a %" PRIu64 " sector partition, "
                    "more than FAT32's 2^32-1 sectors (2 TiB)", partition);
      return -1;
    }
  }
  else {
    if (size % SECTOR_SIZE != 0) {
      nbdkit_error ("size: %" PRIu64 " is not a multiple of %d bytes",
                    size, SECTOR_SIZE);
      return -1;
    }
    if (size / SECTOR_SIZE <= PARTITION_START + RESERVED_SECTORS) {
      nbdkit_error ("size: %" PRIu64 " bytes is too small for the disk's "
                    "partition table and file system", size);
      return -1;
    }
    partition = size / SECTOR_SIZE - PARTITION_START;
    if (partition > UINT32_MAX) {
      nbdkit_error ("size: %" PRIu64 " bytes is too big: a FAT32 "
                    "partition holds at most 2^32-1 sectors (2 TiB)", size);
      return -1;
    }
    spc = spc_for (partition);
    while (clusters_in (partition, spc, &fat) > MAX_CLUSTERS)
      spc *= 2;
    while (spc > 1 && clusters_in (partition, spc, &fat) < MIN_FAT32_CLUSTERS)
      spc /= 2;
    clusters = clusters_in (partition, spc, &fat);
    needed = clusters_needed (vf, spc);
    if (clusters < needed) {
      nbdkit_error ("size: %" PRIu64 " bytes is too small for the files, "
                    "which need %" PRIu64 " clusters of %" PRIu32 " bytes "
                    "but it has room for %" PRIu64,
                    size, needed, spc * SECTOR_SIZE, clusters);
      return -1;
    }
  }
  vf->sectors_per_cluster = spc;
  vf->cluster_size = spc * SECTOR_SIZE;
  vf->data_clusters = clusters;
  vf->fat_sectors = fat;
  vf->partition_sectors = partition;
  vf->used_clusters = needed;
  return 0;
}

/* Chain N > 0 clusters from *NEXT in the FAT; return the first. */
static uint32_t
chain (struct virtual_floppy *vf, uint32_t *next, uint32_t n)
{
  uint32_t first = *next;

  for (uint32_t k = 0; k < n; k++, (*next)++)
    vf->fat[*next] = htole32 (k + 1 < n ? *next + 1 : FAT_END_OF_CHAIN);
  return first;
}

/* Give each directory, then each non-empty file, its clusters, and
 * chain them in the FAT: each entry names the next cluster, the last
 * says end of chain.
 */
static int
allocate_clusters (struct virtual_floppy *vf)
{
  size_t entries = FIRST_CLUSTER + vf->used_clusters;
  uint32_t next = FIRST_CLUSTER;

  vf->fat_bytes = ROUND_UP (entries * 4, (size_t) SECTOR_SIZE);
  vf->fat = calloc (vf->fat_bytes, 1);
  if (vf->fat == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  /* Entry 0 holds the media byte, entry 1 the "clean" bits. */
  vf->fat[0] = htole32 (0x0ffffff8);
  vf->fat[1] = htole32 (FAT_END_OF_CHAIN);

  for (size_t i = 0; i < vf->dirs.len; i++) {
    struct vf_dir *d = &vf->dirs.ptr[i];

    d->nr_clusters = DIV_ROUND_UP (d->dirents.len, vf->cluster_size);
    d->first_cluster = chain (vf, &next, d->nr_clusters);
  }
  for (size_t i = 0; i < vf->files.len; i++) {
    struct vf_file *f = &vf->files.ptr[i];
    uint32_t n = DIV_ROUND_UP ((uint64_t) f->size, vf->cluster_size);

    f->first_cluster = n > 0 ? chain (vf, &next, n) : 0;
  }
  return 0;
}

/* --- the fixed sectors ------------------------------------------------ */

/* A volume serial number: not random, so that the same tree gives the
 * same image, but different for different labels and layouts.
 */
static uint32_t
volume_id (const struct virtual_floppy *vf, const char label[11])
{
  uint32_t h = 2166136261u;     /* FNV-1a */

  for (size_t i = 0; i < 11; i++)
    h = (h ^ (uint8_t) label[i]) * 16777619u;
  h = (h ^ vf->partition_sectors) * 16777619u;
  h = (h ^ vf->files.len) * 16777619u;
  return h;
}

static void
make_boot_sector (struct virtual_floppy *vf, const char label[11])
{
  uint8_t *b = vf->boot;

  memset (b, 0, SECTOR_SIZE);
  b[0] = 0xeb; b[1] = 0x58; b[2] = 0x90;        /* jmp 0x5a; nop */
  memcpy (b + 3, "NBDKIT  ", 8);                /* OEM name */
  put_le16 (b + 11, SECTOR_SIZE);
  b[13] = vf->sectors_per_cluster;
  put_le16 (b + 14, RESERVED_SECTORS);
  b[16] = 2;                                    /* number of FATs */
  /* 17: root entries, 19: 16-bit sector count, 22: 16-bit FAT size:
   * all 0 on FAT32.
   */
  b[21] = 0xf8;                                 /* media: fixed disk */
  put_le16 (b + 24, 63);                        /* sectors per track */
  put_le16 (b + 26, 255);                       /* heads */
  put_le32 (b + 28, PARTITION_START);           /* hidden sectors */
  put_le32 (b + 32, vf->partition_sectors);
  put_le32 (b + 36, vf->fat_sectors);
  /* 40: flags 0 = both FATs kept the same; 42: version 0.0. */
  put_le32 (b + 44, vf->dirs.ptr[0].first_cluster);     /* root */
  put_le16 (b + 48, 1);                         /* FSInfo sector */
  put_le16 (b + 50, BACKUP_BOOT_SECTOR);
  b[64] = 0x80;                                 /* BIOS drive number */
  b[66] = 0x29;                                 /* the next 3 are valid */
  put_le32 (b + 67, volume_id (vf, label));
  memcpy (b + 71, label, 11);
  memcpy (b + 82, "FAT32   ", 8);
  /* Not bootable: the code at 0x5a asks the BIOS to try the next
   * device (int 0x18), then stops.
   */
  b[0x5a] = 0xcd; b[0x5b] = 0x18; b[0x5c] = 0xeb; b[0x5d] = 0xfe;
  b[510] = 0x55; b[511] = 0xaa;
}

/* FSInfo: hints for the free cluster count and where to look for one. */
static void
make_fsinfo (struct virtual_floppy *vf)
{
  uint8_t *f = vf->fsinfo;
  uint32_t free_clusters = vf->data_clusters - vf->used_clusters;

  memset (f, 0, SECTOR_SIZE);
  put_le32 (f, 0x41615252);
  put_le32 (f + 484, 0x61417272);
  put_le32 (f + 488, free_clusters);
  put_le32 (f + 492, free_clusters > 0
            ? FIRST_CLUSTER + vf->used_clusters : 0xffffffff);
  put_le32 (f + 508, 0xaa550000);
}

static void
make_mbr (struct virtual_floppy *vf, uint32_t disk_id)
{
  uint8_t *m = vf->mbr;
  uint8_t *p = m + 0x1be;       /* the first partition entry */

  memset (m, 0, SECTOR_SIZE);
  put_le32 (m + 0x1b8, disk_id);
  p[0] = 0x00;                  /* not active */
  /* CHS fields that say "too big for CHS, use the LBA fields". */
  p[1] = 0xfe; p[2] = 0xff; p[3] = 0xff;
  p[4] = 0x0c;                  /* FAT32 with LBA */
  p[5] = 0xfe; p[6] = 0xff; p[7] = 0xff;
  put_le32 (p + 8, PARTITION_START);
  put_le32 (p + 12, vf->partition_sectors);
  m[510] = 0x55; m[511] = 0xaa;
}

/* --- regions ---------------------------------------------------------- */

static int
make_regions (struct virtual_floppy *vf)
{
  struct regions *rs = &vf->regions;
  uint64_t fat_size = (uint64_t) vf->fat_sectors * SECTOR_SIZE;
  uint64_t end = (uint64_t) (PARTITION_START + vf->partition_sectors)
    * SECTOR_SIZE;

  if (regions_append_data (rs, SECTOR_SIZE, vf->mbr) == -1 ||
      regions_append_zero (rs, (PARTITION_START - 1) * SECTOR_SIZE) == -1 ||
      regions_append_data (rs, SECTOR_SIZE, vf->boot) == -1 ||
      regions_append_data (rs, SECTOR_SIZE, vf->fsinfo) == -1 ||
      regions_append_zero (rs, (BACKUP_BOOT_SECTOR - 2) * SECTOR_SIZE) == -1 ||
      regions_append_data (rs, SECTOR_SIZE, vf->boot) == -1 ||
      regions_append_data (rs, SECTOR_SIZE, vf->fsinfo) == -1 ||
      regions_append_zero (rs, (RESERVED_SECTORS - BACKUP_BOOT_SECTOR - 2)
                           * SECTOR_SIZE) == -1)
    goto err;

  for (int i = 0; i < 2; i++) {
    if (regions_append_data (rs, vf->fat_bytes, vf->fat) == -1 ||
        regions_append_zero (rs, fat_size - vf->fat_bytes) == -1)
      goto err;
  }

  for (size_t i = 0; i < vf->dirs.len; i++) {
    const struct vf_dir *d = &vf->dirs.ptr[i];

    if (regions_append_data (rs, d->dirents.len, d->dirents.ptr) == -1 ||
        regions_append_zero (rs, (uint64_t) d->nr_clusters * vf->cluster_size
                             - d->dirents.len) == -1)
      goto err;
  }
  for (size_t i = 0; i < vf->files.len; i++) {
    uint32_t size = vf->files.ptr[i].size;

    /* The slack after the file's last byte, up to its last cluster's
     * end (the data area need not start on a cluster-aligned offset of
     * the disk, so regions_pad_to would not do).
     */
    if (regions_append_file (rs, size, i) == -1 ||
        regions_append_zero (rs, ROUND_UP ((uint64_t) size,
                                           (uint64_t) vf->cluster_size)
                             - size) == -1)
      goto err;
  }

  /* The clusters used must fit in the partition. */
  if (regions_size (rs) > end) {
    nbdkit_error ("floppy: internal error: the layout overflows the "
                  "partition (%" PRIu64 " > %" PRIu64 ")",
                  regions_size (rs), end);
    return -1;
  }
  if (regions_append_zero (rs, end - regions_size (rs)) == -1)
    goto err;
  return 0;

 err:
  nbdkit_error ("floppy: regions: %m");
  return -1;
}

/* --- putting it together ---------------------------------------------- */

int
vf_create (struct virtual_floppy *vf, const char *dir, const char label[11],
           uint64_t size)
{
  struct vf_dir root = { .parent = 0 };

  root.host_path = strdup (dir);
  if (root.host_path == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  if (stat (dir, &root.st) == -1) {
    nbdkit_error ("dir: %s: %m", dir);
    free (root.host_path);
    return -1;
  }
  if (vf_dir_vector_append (&vf->dirs, root) == -1) {
    nbdkit_error ("realloc: %m");
    free (root.host_path);
    return -1;
  }

  /* DIRS grows as it is scanned: a queue, breadth first. */
  for (size_t i = 0; i < vf->dirs.len; i++)
    if (scan_dir (vf, i) == -1)
      return -1;
  for (size_t i = 0; i < vf->dirs.len; i++)
    if (vf_dir_make_entries (vf, i, label) == -1)
      return -1;

  if (choose_geometry (vf, size) == -1 ||
      allocate_clusters (vf) == -1)
    return -1;
  for (size_t i = 0; i < vf->dirs.len; i++)
    vf_dir_set_clusters (vf, i);

  make_boot_sector (vf, label);
  make_fsinfo (vf);
  make_mbr (vf, volume_id (vf, label) ^ 0x5a5a5a5a);
  return make_regions (vf);
}
