/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The xz filter's view of an .xz file: its index (where each block
 * lies, compressed and uncompressed) and the decompression of one
 * block.  Bytes come from the layer below through next->pread; nothing
 * here caches or locks.
 */
#ifndef NBDKIT_XZFILE_H
#define NBDKIT_XZFILE_H

#include <stdint.h>

#include <nbdkit-filter.h>

struct xzfile;

/* One decompressed block: bytes [start, start+size) of the export. */
struct xzblock {
  uint64_t number;              /* 1-based, as xz --list -vv counts */
  uint64_t start;
  uint64_t size;
  char *data;                   /* malloc'd, size bytes */
};

/* Read and check the index of the .xz file below; NULL after an error
 * (a truncated or corrupt file, or not an .xz file at all).
 */
extern struct xzfile *xzfile_open (nbdkit_next *next);
extern void xzfile_close (struct xzfile *xz);

extern uint64_t xzfile_uncompressed_size (const struct xzfile *xz);
extern uint64_t xzfile_max_block_size (const struct xzfile *xz);
extern uint64_t xzfile_block_count (const struct xzfile *xz);

/* Decompress the whole block that holds uncompressed byte OFFSET into
 * *BLOCK.  -1 with *err set (EIO for a corrupt block) on failure.
 */
extern int xzfile_read_block (struct xzfile *xz, nbdkit_next *next,
                              uint64_t offset, struct xzblock *block,
                              int *err);

#endif /* NBDKIT_XZFILE_H */
