/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The qcow2 format's header and table entries, decoded and checked
 * (see qcow2.h).  No I/O here: the caller hands in the bytes and the
 * image's size, and every offset that comes out is inside the image.
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "checked-overflow.h"
#include "qcow2.h"

#define QCOW2_MAGIC 0x514649fbU         /* "QFI\xfb" */

/* Header field offsets. */
#define H_MAGIC 0
#define H_VERSION 4
#define H_BACKING_OFFSET 8
#define H_BACKING_SIZE 16
#define H_CLUSTER_BITS 20
#define H_SIZE 24
#define H_CRYPT_METHOD 32
#define H_L1_SIZE 36
#define H_L1_OFFSET 40
#define H_V2_LENGTH 72
#define H_INCOMPATIBLE 72
#define H_HEADER_LENGTH 100
#define H_V3_LENGTH 104
#define H_COMPRESSION_TYPE 104

/* Incompatible feature bits (version 3). */
#define INCOMPAT_DIRTY (1 << 0)
#define INCOMPAT_CORRUPT (1 << 1)
#define INCOMPAT_DATA_FILE (1 << 2)
#define INCOMPAT_COMPRESSION (1 << 3)
#define INCOMPAT_EXTENDED_L2 (1 << 4)

/* Bits 9-55 of an L1 or standard L2 entry: a host offset. */
#define OFFSET_MASK UINT64_C (0x00fffffffffffe00)
#define L2_COMPRESSED (UINT64_C (1) << 62)
#define L2_ZERO UINT64_C (1)

/* QEMU caps the L1 table at 32 MiB; so does this filter, so that a
 * corrupt size cannot make it allocate without bound.
 */
#define MAX_L1_ENTRIES (32 * 1024 * 1024 / 8)

static uint32_t
get32 (const unsigned char *p)
{
  return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 |
    (uint32_t) p[2] << 8 | p[3];
}

static uint64_t
get64 (const unsigned char *p)
{
  return (uint64_t) get32 (p) << 32 | get32 (p + 4);
}

/* Is [offset, offset+len) inside the image? */
static bool
in_image (const struct qcow2_image *img, uint64_t offset, uint64_t len)
{
  uint64_t end;
  return !ADD_OVERFLOW (offset, len, &end) && end <= img->file_size;
}

int
qcow2_parse_header (const unsigned char *buf, size_t len,
                    uint64_t file_size, struct qcow2_image *img)
{
  memset (img, 0, sizeof *img);
  img->file_size = file_size;

  if (len < H_V2_LENGTH || get32 (buf + H_MAGIC) != QCOW2_MAGIC) {
    nbdkit_error ("the image is not qcow2 (no QFI\\xfb magic at the "
                  "start)");
    return -1;
  }
  img->version = get32 (buf + H_VERSION);
  if (img->version != 2 && img->version != 3) {
    nbdkit_error ("qcow2 version %u is not supported (only 2 and 3)",
                  img->version);
    return -1;
  }

  if (img->version == 3) {
    if (len < H_V3_LENGTH) {
      nbdkit_error ("the qcow2 image is shorter than its header");
      return -1;
    }
    uint32_t header_length = get32 (buf + H_HEADER_LENGTH);
    if (header_length < H_V3_LENGTH) {
      nbdkit_error ("qcow2 header_length %" PRIu32 " is too short",
                    header_length);
      return -1;
    }
    uint64_t incompat = get64 (buf + H_INCOMPATIBLE);
    if (incompat & INCOMPAT_DATA_FILE) {
      nbdkit_error ("the qcow2 image keeps its data in an external data "
                    "file, which this filter does not support");
      return -1;
    }
    if (incompat & INCOMPAT_EXTENDED_L2) {
      nbdkit_error ("the qcow2 image has extended L2 entries "
                    "(subclusters), which this filter does not support");
      return -1;
    }
    if (incompat & INCOMPAT_CORRUPT) {
      nbdkit_error ("the qcow2 image is marked corrupt; repair it with "
                    "qemu-img check -r all");
      return -1;
    }
    if (incompat & INCOMPAT_COMPRESSION) {
      if (header_length <= H_COMPRESSION_TYPE ||
          len <= H_COMPRESSION_TYPE) {
        nbdkit_error ("the qcow2 header is too short for its "
                      "compression type");
        return -1;
      }
      unsigned type = buf[H_COMPRESSION_TYPE];
      switch (type) {
      case QCOW2_COMPRESSION_DEFLATE:
        break;
      case QCOW2_COMPRESSION_ZSTD:
#ifdef HAVE_LIBZSTD
        break;
#else
        nbdkit_error ("the qcow2 image is compressed with zstd, and this "
                      "filter was built without libzstd");
        return -1;
#endif
      default:
        nbdkit_error ("qcow2 compression type %u is not supported", type);
        return -1;
      }
      img->compression = type;
    }
    /* A dirty image (lazy refcounts) has stale refcounts only, which
     * reading does not use.
     */
    uint64_t unknown = incompat & ~(uint64_t) (INCOMPAT_DIRTY |
                                               INCOMPAT_CORRUPT |
                                               INCOMPAT_DATA_FILE |
                                               INCOMPAT_COMPRESSION |
                                               INCOMPAT_EXTENDED_L2);
    if (unknown) {
      nbdkit_error ("the qcow2 image has unknown incompatible features "
                    "(0x%" PRIx64 ")", unknown);
      return -1;
    }
  }

  img->cluster_bits = get32 (buf + H_CLUSTER_BITS);
  if (img->cluster_bits < 9 || img->cluster_bits > 21) {
    nbdkit_error ("qcow2 cluster_bits %u is out of range (9 to 21)",
                  img->cluster_bits);
    return -1;
  }
  img->cluster_size = UINT64_C (1) << img->cluster_bits;
  img->l2_bits = img->cluster_bits - 3;   /* 8-byte entries */

  if (get32 (buf + H_CRYPT_METHOD) != 0) {
    nbdkit_error ("the qcow2 image is encrypted, which this filter does "
                  "not support");
    return -1;
  }

  img->size = get64 (buf + H_SIZE);
  if (img->size > INT64_MAX) {
    nbdkit_error ("qcow2 virtual size %" PRIu64 " is too large",
                  img->size);
    return -1;
  }

  /* The L1 table must cover the virtual size. */
  uint64_t per_l1 = img->cluster_size << img->l2_bits;
  img->l1_entries = img->size / per_l1 + (img->size % per_l1 != 0);
  uint32_t l1_size = get32 (buf + H_L1_SIZE);
  if (l1_size < img->l1_entries || img->l1_entries > MAX_L1_ENTRIES) {
    nbdkit_error ("the qcow2 L1 table (%" PRIu32 " entries) does not "
                  "cover the virtual size %" PRIu64 " (needs %" PRIu64 ")",
                  l1_size, img->size, img->l1_entries);
    return -1;
  }
  img->l1_table_offset = get64 (buf + H_L1_OFFSET);
  if (img->l1_entries > 0 &&
      ((img->l1_table_offset & (img->cluster_size - 1)) != 0 ||
       !in_image (img, img->l1_table_offset, img->l1_entries * 8))) {
    nbdkit_error ("the qcow2 L1 table offset %" PRIu64 " is misaligned "
                  "or past the end of the image (%" PRIu64 " bytes)",
                  img->l1_table_offset, img->file_size);
    return -1;
  }

  img->backing_file_offset = get64 (buf + H_BACKING_OFFSET);
  if (img->backing_file_offset != 0) {
    img->backing_file_size = get32 (buf + H_BACKING_SIZE);
    if (img->backing_file_size == 0 ||
        img->backing_file_size > QCOW2_MAX_BACKING_NAME ||
        !in_image (img, img->backing_file_offset,
                   img->backing_file_size)) {
      nbdkit_error ("the qcow2 image has a backing file whose name "
                    "(%" PRIu32 " bytes at %" PRIu64 ") is not inside "
                    "the image", img->backing_file_size,
                    img->backing_file_offset);
      return -1;
    }
  }
  return 0;
}

int
qcow2_l1_entry (const struct qcow2_image *img, uint64_t entry,
                uint64_t *l2_offset)
{
  uint64_t offset = entry & OFFSET_MASK;
  if (offset != 0 &&
      ((offset & (img->cluster_size - 1)) != 0 ||
       !in_image (img, offset, img->cluster_size))) {
    nbdkit_error ("corrupt qcow2 image: L1 entry 0x%" PRIx64 " names an "
                  "L2 table that is misaligned or past the end of the "
                  "image (%" PRIu64 " bytes)", entry, img->file_size);
    return -1;
  }
  *l2_offset = offset;
  return 0;
}

int
qcow2_l2_entry (const struct qcow2_image *img, uint64_t entry,
                struct qcow2_cluster *c)
{
  memset (c, 0, sizeof *c);

  if (entry & L2_COMPRESSED) {
    /* The offset takes the low bits, the count of 512-byte sectors
     * after the first the rest, up to bit 61.
     */
    unsigned x = 62 - (img->cluster_bits - 8);
    uint64_t host = entry & ((UINT64_C (1) << x) - 1);
    uint64_t sectors = (entry >> x) &
      ((UINT64_C (1) << (img->cluster_bits - 8)) - 1);
    uint64_t len = (sectors + 1) * 512 - (host & 511);
    if (host == 0 || host >= img->file_size) {
      nbdkit_error ("corrupt qcow2 image: compressed cluster at %" PRIu64
                    " is outside the image (%" PRIu64 " bytes)",
                    host, img->file_size);
      return -1;
    }
    /* The sector count may round past the end of the file. */
    if (len > img->file_size - host)
      len = img->file_size - host;
    c->kind = QCOW2_COMPRESSED;
    c->host_offset = host;
    c->compressed_len = len;
    return 0;
  }

  uint64_t host = entry & OFFSET_MASK;
  if (entry & L2_ZERO) {
    if (img->version < 3) {
      nbdkit_error ("corrupt qcow2 image: zero flag in a version 2 L2 "
                    "entry (0x%" PRIx64 ")", entry);
      return -1;
    }
    /* A preallocated zero cluster keeps its offset, but reads as
     * zeros: its storage is never read.
     */
    c->kind = QCOW2_ZERO;
    c->host_offset = host;
    return 0;
  }
  if (host == 0) {
    c->kind = QCOW2_UNALLOCATED;
    return 0;
  }
  if ((host & (img->cluster_size - 1)) != 0 ||
      !in_image (img, host, img->cluster_size)) {
    nbdkit_error ("corrupt qcow2 image: L2 entry 0x%" PRIx64 " names a "
                  "cluster that is misaligned or past the end of the "
                  "image (%" PRIu64 " bytes)", entry, img->file_size);
    return -1;
  }
  c->kind = QCOW2_NORMAL;
  c->host_offset = host;
  return 0;
}
