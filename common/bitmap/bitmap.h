/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A block bitmap: a small value (1, 2, 4 or 8 bits) for each block of a
 * device, such as "cached / dirty / clean" in a cache filter or
 * "allocated in the overlay" in a copy-on-write filter.
 *
 *   struct bitmap bm;
 *   if (bitmap_init (&bm, 4096, 2) == -1) ...       (errno EINVAL)
 *   if (bitmap_resize (&bm, size) == -1) ...        (errno ENOMEM)
 *   bitmap_set_blk (&bm, offset >> bm.blksize_shift, 3);
 *   ... bitmap_get_blk (&bm, blk) ... bitmap_next (&bm, blk) ...
 *   bitmap_free (&bm);
 *
 * The caller owns the struct and may read its fields; only these
 * functions change them.  Block numbers outside the device are a
 * caller bug (asserted), except in bitmap_set_range, which takes
 * counts that may come from a client and refuses a range that wraps or
 * runs past the end.  New blocks read as 0.  Nothing here locks.
 */
#ifndef NBDKIT_BITMAP_H
#define NBDKIT_BITMAP_H

#include <stddef.h>
#include <stdint.h>

struct bitmap {
  uint64_t blksize;             /* bytes per block, a power of two */
  unsigned blksize_shift;       /* log2 (blksize) */
  unsigned bpb;                 /* bits per block: 1, 2, 4 or 8 */
  uint64_t nr_blocks;           /* blocks covering the device */
  uint8_t *bits;                /* the values, NULL while empty */
  size_t len;                   /* bytes in BITS */
};

/* An empty bitmap (no blocks) for blocks of BLKSIZE bytes (a power of
 * two) holding BPB bits each.  -1 with errno EINVAL if either is bad.
 */
extern int bitmap_init (struct bitmap *bm, uint64_t blksize, unsigned bpb);

/* Cover a device of SIZE bytes: DIV_ROUND_UP (SIZE, blksize) blocks, so
 * a last partial block counts.  Blocks added read as 0; blocks cut off
 * are forgotten (and read as 0 if the device grows again).  -1 with
 * errno ENOMEM, leaving the bitmap as it was, if memory runs out (or
 * EOVERFLOW if there would be more than INT64_MAX blocks).
 */
extern int bitmap_resize (struct bitmap *bm, uint64_t size);

/* Free the storage; the bitmap is empty (but keeps its block size) and
 * may be resized again.
 */
extern void bitmap_free (struct bitmap *bm);

/* The value of block BLK, which must be < nr_blocks. */
extern unsigned bitmap_get_blk (const struct bitmap *bm, uint64_t blk);

/* Set block BLK (< nr_blocks) to V (< 2^bpb). */
extern void bitmap_set_blk (struct bitmap *bm, uint64_t blk, unsigned v);

/* Set NR blocks from FIRST to V.  NR == 0 does nothing.  -1 with errno
 * ERANGE, changing nothing, if the range wraps or ends past nr_blocks.
 */
extern int bitmap_set_range (struct bitmap *bm, uint64_t first, uint64_t nr,
                             unsigned v);

/* The first block at or after BLK with a nonzero value, or -1 if there
 * is none (including BLK >= nr_blocks).
 */
extern int64_t bitmap_next (const struct bitmap *bm, uint64_t blk);

/* The first block at or after BLK whose value is V, or -1. */
extern int64_t bitmap_next_value (const struct bitmap *bm, uint64_t blk,
                                  unsigned v);

#endif /* NBDKIT_BITMAP_H */
