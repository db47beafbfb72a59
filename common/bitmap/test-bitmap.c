/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of bitmap.c: every width, a zero-sized device, a last
 * partial block, ranges at the end, shrinking and growing, and the
 * bad arguments and overflowing ranges it must refuse.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bitmap.h"
#include "array-size.h"

static void
test_bad_init (void)
{
  struct bitmap bm;

  errno = 0;
  assert (bitmap_init (&bm, 0, 1) == -1 && errno == EINVAL);
  assert (bitmap_init (&bm, 4095, 1) == -1 && errno == EINVAL);
  assert (bitmap_init (&bm, 4096, 0) == -1 && errno == EINVAL);
  assert (bitmap_init (&bm, 4096, 3) == -1 && errno == EINVAL);
  assert (bitmap_init (&bm, 4096, 16) == -1 && errno == EINVAL);
  assert (bitmap_init (&bm, UINT64_C (1) << 63, 8) == 0);
  assert (bm.blksize_shift == 63);
  /* UINT64_MAX bytes is two blocks of 2^63 (the last one partial). */
  assert (bitmap_resize (&bm, UINT64_MAX) == 0);
  assert (bm.nr_blocks == 2 && bm.len == 2);
  bitmap_free (&bm);
}

static void
test_empty (unsigned bpb)
{
  struct bitmap bm;

  assert (bitmap_init (&bm, 512, bpb) == 0);
  assert (bm.nr_blocks == 0 && bm.bits == NULL && bm.len == 0);
  assert (bitmap_resize (&bm, 0) == 0);
  assert (bm.nr_blocks == 0 && bm.len == 0);
  assert (bitmap_next (&bm, 0) == -1);
  assert (bitmap_next_value (&bm, 0, 0) == -1);
  assert (bitmap_set_range (&bm, 0, 0, 1) == 0);
  errno = 0;
  assert (bitmap_set_range (&bm, 0, 1, 1) == -1 && errno == ERANGE);
  bitmap_free (&bm);
  bitmap_free (&bm);            /* twice is harmless */
}

static void
test_width (unsigned bpb)
{
  const unsigned max = (1u << bpb) - 1;
  const uint64_t nr = 37;       /* not a multiple of any blocks-per-byte */
  struct bitmap bm;
  uint64_t b;

  assert (bitmap_init (&bm, 4096, bpb) == 0);
  /* A last partial block counts. */
  assert (bitmap_resize (&bm, (nr - 1) * 4096 + 1) == 0);
  assert (bm.nr_blocks == nr);
  assert (bm.len == (nr * bpb + 7) / 8);
  for (b = 0; b < nr; ++b)
    assert (bitmap_get_blk (&bm, b) == 0);
  assert (bitmap_next (&bm, 0) == -1);
  assert (bitmap_next_value (&bm, 0, 0) == 0);
  assert (bitmap_next_value (&bm, 5, 0) == 5);

  /* Each block keeps its own value, neighbours untouched. */
  for (b = 0; b < nr; ++b)
    bitmap_set_blk (&bm, b, (unsigned) (b % (max + 1)));
  for (b = 0; b < nr; ++b)
    assert (bitmap_get_blk (&bm, b) == b % (max + 1));
  bitmap_set_blk (&bm, 10, max);
  assert (bitmap_get_blk (&bm, 9) == 9 % (max + 1));
  assert (bitmap_get_blk (&bm, 11) == 11 % (max + 1));

  /* Ranges: all, then one ending exactly at the end. */
  assert (bitmap_set_range (&bm, 0, nr, 0) == 0);
  for (b = 0; b < nr; ++b)
    assert (bitmap_get_blk (&bm, b) == 0);
  assert (bitmap_set_range (&bm, 3, nr - 3, max) == 0);
  for (b = 0; b < nr; ++b)
    assert (bitmap_get_blk (&bm, b) == (b < 3 ? 0 : max));
  assert (bitmap_next (&bm, 0) == 3);
  assert (bitmap_next (&bm, 3) == 3);
  assert (bitmap_next (&bm, nr - 1) == (int64_t) (nr - 1));
  assert (bitmap_next (&bm, nr) == -1);
  assert (bitmap_next (&bm, UINT64_MAX) == -1);
  assert (bitmap_next_value (&bm, 0, max) == 3);
  assert (bitmap_next_value (&bm, 4, 0) == -1);

  /* Past the end, and wrapping, are refused and change nothing. */
  errno = 0;
  assert (bitmap_set_range (&bm, 0, nr + 1, 0) == -1 && errno == ERANGE);
  assert (bitmap_set_range (&bm, nr, 1, 0) == -1 && errno == ERANGE);
  assert (bitmap_set_range (&bm, 2, UINT64_MAX, 0) == -1 && errno == ERANGE);
  assert (bitmap_set_range (&bm, UINT64_MAX, 2, 0) == -1 && errno == ERANGE);
  assert (bitmap_set_range (&bm, nr, 0, 0) == 0);
  assert (bitmap_get_blk (&bm, nr - 1) == max);
  assert (bitmap_get_blk (&bm, 2) == 0);

  /* A short range inside one byte, then the last block alone. */
  assert (bitmap_set_range (&bm, 0, nr, 0) == 0);
  assert (bitmap_set_range (&bm, 1, 1, 1) == 0);
  assert (bitmap_get_blk (&bm, 0) == 0 && bitmap_get_blk (&bm, 1) == 1 &&
          bitmap_get_blk (&bm, 2) == 0);
  bitmap_set_blk (&bm, nr - 1, max);
  assert (bitmap_next (&bm, 2) == (int64_t) (nr - 1));
  assert (bitmap_next_value (&bm, 0, max) == (max == 1 ? 1 : (int64_t) nr - 1));

  /* Shrinking forgets the blocks cut off; growing reads them as 0. */
  assert (bitmap_set_range (&bm, 0, nr, max) == 0);
  assert (bitmap_resize (&bm, 5 * 4096) == 0);
  assert (bm.nr_blocks == 5);
  assert (bitmap_get_blk (&bm, 4) == max);
  assert (bitmap_resize (&bm, nr * 4096) == 0);
  assert (bm.nr_blocks == nr);
  for (b = 0; b < nr; ++b)
    assert (bitmap_get_blk (&bm, b) == (b < 5 ? max : 0));
  assert (bitmap_next (&bm, 5) == -1);

  /* To zero size and back. */
  assert (bitmap_resize (&bm, 0) == 0);
  assert (bm.nr_blocks == 0 && bm.bits == NULL);
  assert (bitmap_resize (&bm, 4096) == 0);
  assert (bm.nr_blocks == 1 && bitmap_get_blk (&bm, 0) == 0);
  bitmap_free (&bm);
}

/* A large sparse bitmap: bitmap_next must cross many zero bytes. */
static void
test_sparse (void)
{
  struct bitmap bm;

  assert (bitmap_init (&bm, 1, 1) == 0);
  assert (bitmap_resize (&bm, 1 << 20) == 0);
  assert (bm.len == (1 << 17));
  bitmap_set_blk (&bm, (1 << 20) - 1, 1);
  assert (bitmap_next (&bm, 0) == (1 << 20) - 1);
  assert (bitmap_next_value (&bm, 0, 1) == (1 << 20) - 1);
  assert (bitmap_set_range (&bm, 0, 1 << 20, 1) == 0);
  assert (bitmap_next_value (&bm, 0, 0) == -1);
  bitmap_free (&bm);
}

int
main (void)
{
  static const unsigned widths[] = { 1, 2, 4, 8 };

  test_bad_init ();
  for (size_t i = 0; i < ARRAY_SIZE (widths); ++i) {
    test_empty (widths[i]);
    test_width (widths[i]);
  }
  test_sparse ();
  printf ("test-bitmap: ok\n");
  return 0;
}
