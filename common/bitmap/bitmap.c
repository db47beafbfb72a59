/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The block bitmap of bitmap.h.  Values are packed little-end first:
 * block B lives in byte B / (8 / bpb), at bit (B % (8 / bpb)) * bpb.
 * Bits past nr_blocks in the last byte are kept at zero, so a bitmap
 * that shrinks and grows again reads 0 there and bitmap_next can skip
 * whole zero bytes without looking at the end.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bitmap.h"
#include "checked-overflow.h"
#include "ispowerof2.h"
#include "rounding.h"

/* Blocks held by one byte. */
static inline unsigned
blocks_per_byte (const struct bitmap *bm)
{
  return 8 / bm->bpb;
}

int
bitmap_init (struct bitmap *bm, uint64_t blksize, unsigned bpb)
{
  if (!is_power_of_2 (blksize) || (bpb != 1 && bpb != 2 && bpb != 4 &&
                                   bpb != 8)) {
    errno = EINVAL;
    return -1;
  }
  bm->blksize = blksize;
  bm->blksize_shift = log_2_bits (blksize);
  bm->bpb = bpb;
  bm->nr_blocks = 0;
  bm->bits = NULL;
  bm->len = 0;
  return 0;
}

int
bitmap_resize (struct bitmap *bm, uint64_t size)
{
  const unsigned bpB = blocks_per_byte (bm);
  uint64_t nr_blocks, bytes64;
  size_t bytes;
  uint8_t *p;

  /* DIV_ROUND_UP cannot overflow, unlike (size + blksize - 1). */
  nr_blocks = DIV_ROUND_UP (size, bm->blksize);
  /* bitmap_next returns block numbers as int64_t. */
  if (nr_blocks > INT64_MAX) {
    errno = EOVERFLOW;
    return -1;
  }
  bytes64 = DIV_ROUND_UP (nr_blocks, (uint64_t) bpB);
  if (bytes64 > SIZE_MAX) {
    errno = ENOMEM;
    return -1;
  }
  bytes = (size_t) bytes64;

  if (bytes == 0) {
    free (bm->bits);
    p = NULL;
  }
  else if (bytes != bm->len) {
    p = realloc (bm->bits, bytes);
    if (p == NULL)
      return -1;
    if (bytes > bm->len)
      memset (p + bm->len, 0, bytes - bm->len);
  }
  else
    p = bm->bits;

  bm->bits = p;
  bm->len = bytes;
  bm->nr_blocks = nr_blocks;

  /* Clear the values of blocks cut off in the last byte. */
  if (nr_blocks % bpB != 0)
    bm->bits[bytes - 1] &= (1u << (nr_blocks % bpB * bm->bpb)) - 1;
  return 0;
}

void
bitmap_free (struct bitmap *bm)
{
  free (bm->bits);
  bm->bits = NULL;
  bm->len = 0;
  bm->nr_blocks = 0;
}

unsigned
bitmap_get_blk (const struct bitmap *bm, uint64_t blk)
{
  const unsigned bpB = blocks_per_byte (bm);
  const unsigned shift = blk % bpB * bm->bpb;

  assert (blk < bm->nr_blocks);
  return (bm->bits[blk / bpB] >> shift) & ((1u << bm->bpb) - 1);
}

void
bitmap_set_blk (struct bitmap *bm, uint64_t blk, unsigned v)
{
  const unsigned bpB = blocks_per_byte (bm);
  const unsigned shift = blk % bpB * bm->bpb;
  const unsigned mask = (1u << bm->bpb) - 1;
  uint8_t *b;

  assert (blk < bm->nr_blocks);
  assert (v <= mask);
  b = &bm->bits[blk / bpB];
  *b = (uint8_t) ((*b & ~(mask << shift)) | (v << shift));
}

int
bitmap_set_range (struct bitmap *bm, uint64_t first, uint64_t nr, unsigned v)
{
  const unsigned bpB = blocks_per_byte (bm);
  uint64_t end, blk;
  unsigned fill = 0;

  assert (v < (1u << bm->bpb));
  if (ADD_OVERFLOW (first, nr, &end) || end > bm->nr_blocks) {
    errno = ERANGE;
    return -1;
  }

  /* Single blocks up to a byte boundary, whole bytes, then the tail. */
  blk = first;
  while (blk < end && blk % bpB != 0)
    bitmap_set_blk (bm, blk++, v);
  if (end - blk >= bpB) {
    for (unsigned i = 0; i < bpB; ++i)
      fill |= v << (i * bm->bpb);
    memset (&bm->bits[blk / bpB], (int) fill, (end - blk) / bpB);
    blk = ROUND_DOWN (end, (uint64_t) bpB);
  }
  while (blk < end)
    bitmap_set_blk (bm, blk++, v);
  return 0;
}

int64_t
bitmap_next (const struct bitmap *bm, uint64_t blk)
{
  const unsigned bpB = blocks_per_byte (bm);

  while (blk < bm->nr_blocks) {
    /* A zero byte at a byte boundary holds no nonzero block. */
    if (blk % bpB == 0 && bm->bits[blk / bpB] == 0) {
      blk += bpB;
      continue;
    }
    if (bitmap_get_blk (bm, blk) != 0)
      return (int64_t) blk;
    blk++;
  }
  return -1;
}

int64_t
bitmap_next_value (const struct bitmap *bm, uint64_t blk, unsigned v)
{
  if (v == 0) {
    for (; blk < bm->nr_blocks; ++blk)
      if (bitmap_get_blk (bm, blk) == 0)
        return (int64_t) blk;
    return -1;
  }
  /* Nonzero values are sparse in practice: hop between nonzero blocks. */
  for (int64_t b = bitmap_next (bm, blk); b >= 0;
       b = bitmap_next (bm, (uint64_t) b + 1))
    if (bitmap_get_blk (bm, (uint64_t) b) == v)
      return b;
  return -1;
}
