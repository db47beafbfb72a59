/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The partitioning plugin's shared state, between partitioning.c (the
 * parameters, the files and the data path) and partition-table.c (the
 * layout of the virtual disk and its MBR or GPT bytes).
 */
#ifndef NBDKIT_PARTITIONING_H
#define NBDKIT_PARTITIONING_H

#include <stdbool.h>
#include <stdint.h>

#include "regions.h"
#include "vector.h"

#define SECTOR_SIZE 512
#define MAX_ALIGNMENT (2048 * SECTOR_SIZE)
/* The largest total of file sizes an MBR disk may hold, as in nbdkit
 * 1.32 (2^32-1 sectors, less room for alignment padding).
 */
#define MAX_MBR_DISK_SIZE \
  (UINT32_MAX * (uint64_t) SECTOR_SIZE - 5 * (uint64_t) MAX_ALIGNMENT)

enum parttype { PARTTYPE_UNSET, PARTTYPE_MBR, PARTTYPE_GPT };

/* One file given on the command line, with the settings in force
 * where it was named.  Read-only once the server serves.
 */
struct file {
  char *filename;               /* as given (for the GPT name, messages) */
  int fd;
  bool readonly;                /* opened O_RDONLY: it refused writes */
  uint64_t size;                /* bytes in the file */
  uint64_t alignment;           /* where its partition may start */
  uint8_t mbr_id;               /* MBR partition type byte */
  uint8_t type_guid[16];        /* GPT partition type, on-disk order */
  uint8_t guid[16];             /* GPT unique partition GUID */
  uint64_t offset;              /* set by the layout: start in the disk */
};
DEFINE_VECTOR_TYPE (file_vector, struct file);

/* The virtual disk, made by pt_create_layout.  The MBR/GPT bytes are
 * owned by partition-table.c and referred to by REGION_DATA regions.
 */
extern file_vector files;
extern enum parttype parttype;
extern struct regions layout;

/* Lay out the disk (tables, padding, files) and fill in the tables.
 * PARTTYPE must be MBR or GPT.  -1 on error, reported.
 */
extern int pt_create_layout (void);
extern void pt_free_layout (void);

/* Parse a GUID "XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX" (optionally in
 * braces) into its on-disk (mixed endian) bytes.  -1 if malformed.
 */
extern int pt_parse_guid (const char *str, uint8_t out[16]);

#endif /* NBDKIT_PARTITIONING_H */
