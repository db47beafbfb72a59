/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The lzip filter's view of an .lz file: its member index (where each
 * member lies, compressed and uncompressed), built from the member
 * trailers, and the decompression of one member.  Bytes come from the
 * layer below through next->pread; nothing here caches or locks.
 */
#ifndef NBDKIT_LZIPFILE_H
#define NBDKIT_LZIPFILE_H

#include <stdint.h>

#include <nbdkit-filter.h>

struct lzipfile;

/* One decompressed member: bytes [start, start+size) of the export. */
struct lzipmember {
  uint64_t number;              /* 1-based, in file order */
  uint64_t start;
  uint64_t size;
  char *data;                   /* malloc'd, size bytes */
};

/* Read and check the member index of the .lz file below; NULL after an
 * error (not an lzip file, truncated, corrupt, or trailing data).
 */
extern struct lzipfile *lzipfile_open (nbdkit_next *next);
extern void lzipfile_close (struct lzipfile *lz);

extern uint64_t lzipfile_uncompressed_size (const struct lzipfile *lz);
extern uint64_t lzipfile_max_member_size (const struct lzipfile *lz);

/* Decompress the whole member that holds uncompressed byte OFFSET into
 * *MEMBER, and set *COMPRESSED to its compressed size.  -1 with *err
 * set (EIO for a corrupt member) on failure.
 */
extern int lzipfile_read_member (struct lzipfile *lz, nbdkit_next *next,
                                 uint64_t offset,
                                 struct lzipmember *member,
                                 uint64_t *compressed, int *err);

#endif /* NBDKIT_LZIPFILE_H */
