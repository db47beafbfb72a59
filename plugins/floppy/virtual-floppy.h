/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The floppy plugin's image: what a FAT32 disk made from a directory
 * looks like, shared by the files of plugins/floppy/.
 *
 * virtual-floppy.c scans the directory and lays the disk out as a list
 * of regions (common/regions): the MBR, the file system's reserved
 * sectors, two copies of the FAT, then each directory's entries and
 * each file's clusters, and zeroes for everything else.  Only the
 * metadata is made in memory; a file's bytes stay in the file, and a
 * REGION_FILE region names the file by its index in FILES.
 * directory.c turns one directory's listing into FAT directory entries
 * (short names, long name entries, timestamps).
 *
 * Once built the image is never changed, so any number of threads may
 * read it without a lock.
 */
#ifndef NBDKIT_VIRTUAL_FLOPPY_H
#define NBDKIT_VIRTUAL_FLOPPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "regions.h"
#include "vector.h"

#define SECTOR_SIZE 512
#define DIRENT_SIZE 32

/* Where the partition starts, in sectors (1 MiB, as partitioning tools
 * do), and the file system's reserved sectors, in which sector 0 is the
 * boot sector, 1 the FSInfo sector, 6 and 7 their backups.
 */
#define PARTITION_START 2048
#define RESERVED_SECTORS 32
#define BACKUP_BOOT_SECTOR 6

/* Cluster numbers: data clusters start at 2; a FAT entry holds 28 bits,
 * and the numbers from 0x0ffffff7 up are markers, so a file system has
 * at most this many data clusters.
 */
#define FIRST_CLUSTER 2
#define MAX_CLUSTERS (UINT32_C (0x0ffffff6) - FIRST_CLUSTER)
#define FAT_END_OF_CHAIN UINT32_C (0x0fffffff)

/* A FAT directory holds at most 65536 entries (2 MiB). */
#define MAX_DIRENTS 65536

DEFINE_VECTOR_TYPE (byte_vector, uint8_t);

/* A regular file of the tree. */
struct vf_file {
  char *host_path;              /* where to read it */
  uint32_t size;                /* bytes (FAT holds at most 4 GiB - 1) */
  uint32_t first_cluster;       /* 0 if empty */
};
DEFINE_VECTOR_TYPE (vf_file_vector, struct vf_file);

/* One name in a directory: a file or a subdirectory. */
struct vf_entry {
  char *name;                   /* the host name (UTF-8, we hope) */
  bool is_dir;
  size_t index;                 /* into FILES or DIRS */
  struct stat st;               /* for timestamps */
  size_t short_entry;           /* offset of its 8.3 entry in the dir */
};
DEFINE_VECTOR_TYPE (vf_entry_vector, struct vf_entry);

/* A directory of the tree; DIRS[0] is the root. */
struct vf_dir {
  char *host_path;
  size_t parent;                /* index in DIRS; the root is its own */
  struct stat st;
  vf_entry_vector entries;      /* sorted by name */
  byte_vector dirents;          /* the FAT directory, as on disk */
  uint32_t first_cluster;
  uint32_t nr_clusters;         /* >= 1 */
};
DEFINE_VECTOR_TYPE (vf_dir_vector, struct vf_dir);

struct virtual_floppy {
  vf_file_vector files;
  vf_dir_vector dirs;

  /* Geometry of the FAT32 file system. */
  uint32_t sectors_per_cluster;
  uint32_t cluster_size;        /* bytes */
  uint32_t fat_sectors;         /* sectors in each FAT */
  uint32_t partition_sectors;   /* the whole file system */
  uint32_t data_clusters;       /* clusters in the data area */
  uint32_t used_clusters;       /* by directories and files */

  /* The metadata, made in memory; the regions point into these. */
  uint8_t mbr[SECTOR_SIZE];
  uint8_t boot[SECTOR_SIZE];
  uint8_t fsinfo[SECTOR_SIZE];
  uint32_t *fat;                /* entries 0 .. used clusters + 1 */
  size_t fat_bytes;             /* their size, rounded up to a sector */

  struct regions regions;       /* the whole disk */
};

/* Build the image of directory DIR (an absolute path) with volume label
 * LABEL (11 bytes, already checked and padded with spaces).  SIZE is
 * the size of the whole disk, or 0 for just big enough.  -1 after
 * nbdkit_error on failure; vf_free is safe either way.
 */
extern void vf_init (struct virtual_floppy *vf);
extern int vf_create (struct virtual_floppy *vf, const char *dir,
                      const char label[11], uint64_t size);
extern void vf_free (struct virtual_floppy *vf);

/* directory.c: fill DIRS[I].dirents from its entries, leaving cluster
 * numbers to be filled in by vf_dir_set_clusters once every directory
 * and file has its clusters.  LABEL is written in the root only.
 */
extern int vf_dir_make_entries (struct virtual_floppy *vf, size_t i,
                                const char label[11]);
extern void vf_dir_set_clusters (struct virtual_floppy *vf, size_t i);

/* Little-endian stores, used by both files. */
static inline void
put_le16 (uint8_t *p, uint16_t v)
{
  p[0] = v;
  p[1] = v >> 8;
}

static inline void
put_le32 (uint8_t *p, uint32_t v)
{
  p[0] = v;
  p[1] = v >> 8;
  p[2] = v >> 16;
  p[3] = v >> 24;
}

#endif /* NBDKIT_VIRTUAL_FLOPPY_H */
