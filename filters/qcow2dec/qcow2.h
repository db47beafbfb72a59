/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The qcow2 format as the qcow2dec filter reads it: the header checked
 * against the image's size, and L1 and L2 entries decoded into what a
 * guest cluster is and where.  Pure functions of their inputs (no I/O),
 * so that every bound is checked in one place; qcow2dec.c does the
 * reading.  Numbers in the image are big-endian; the format is
 * QEMU's docs/interop/qcow2.txt.
 */
#ifndef NBDKIT_QCOW2_H
#define NBDKIT_QCOW2_H

#include <stddef.h>
#include <stdint.h>

/* Enough of the file's start for every header field used (the version
 * 3 header with its compression type byte).
 */
#define QCOW2_HEADER_READ 112

/* The format caps the backing file's name at this many bytes. */
#define QCOW2_MAX_BACKING_NAME 1023

enum qcow2_compression {
  QCOW2_COMPRESSION_DEFLATE = 0,
  QCOW2_COMPRESSION_ZSTD = 1,
};

struct qcow2_image {
  unsigned version;             /* 2 or 3 */
  unsigned cluster_bits;        /* 9 .. 21 */
  uint64_t cluster_size;
  unsigned l2_bits;             /* log2 of entries per L2 table */
  uint64_t size;                /* virtual size, bytes */
  uint64_t file_size;           /* size of the image itself */
  uint64_t l1_table_offset;
  uint64_t l1_entries;          /* the entries the virtual size needs */
  uint64_t backing_file_offset; /* 0: none */
  uint32_t backing_file_size;
  enum qcow2_compression compression;
};

/* What a guest cluster is (the value is the qcow2dec_lookup probe's
 * kind argument).
 */
enum qcow2_kind {
  QCOW2_UNALLOCATED = 0,        /* no data: reads as zeros */
  QCOW2_ZERO = 1,               /* version 3 zero flag: reads as zeros */
  QCOW2_NORMAL = 2,             /* stored as is at host_offset */
  QCOW2_COMPRESSED = 3,         /* compressed_len bytes at host_offset */
};

struct qcow2_cluster {
  enum qcow2_kind kind;
  uint64_t host_offset;         /* 0 unless NORMAL, COMPRESSED, or a
                                   preallocated ZERO cluster */
  uint32_t compressed_len;      /* COMPRESSED only */
};

/* Check the header (the first LEN bytes of an image of FILE_SIZE
 * bytes) and fill *IMG.  Refuses, with an error naming the reason,
 * what the filter cannot serve: not qcow2, an unknown version,
 * encryption, an external data file, extended L2 entries, unknown
 * incompatible features, a compression type other than deflate (or
 * zstd where built with it), and fields that point outside the image
 * or overflow.  A backing file is not refused here: the caller reads
 * its name (backing_file_offset and _size are checked) to say which.
 */
extern int qcow2_parse_header (const unsigned char *buf, size_t len,
                               uint64_t file_size,
                               struct qcow2_image *img);

/* Decode an L1 entry (host byte order): *L2_OFFSET is 0 when the L2
 * table is unallocated.  -1 (after nbdkit_error) if the table would be
 * misaligned or past the end of the image.
 */
extern int qcow2_l1_entry (const struct qcow2_image *img, uint64_t entry,
                           uint64_t *l2_offset);

/* Decode an L2 entry (host byte order; 0 for an unallocated L2
 * table).  -1 (after nbdkit_error) if the cluster it names is
 * misaligned, past the end of the image, or not valid in this version.
 */
extern int qcow2_l2_entry (const struct qcow2_image *img, uint64_t entry,
                           struct qcow2_cluster *c);

#endif /* NBDKIT_QCOW2_H */
