/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of regions.c: an empty device, lookups at every region
 * boundary, padding, and the appends it must refuse (gaps, overlaps,
 * sizes past INT64_MAX).
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "regions.h"

static void
test_empty (void)
{
  struct regions rs;

  regions_init (&rs);
  assert (regions_count (&rs) == 0);
  assert (regions_size (&rs) == 0);
  assert (regions_find (&rs, 0) == NULL);
  assert (regions_find (&rs, UINT64_MAX) == NULL);
  /* Empty regions and padding of an empty device add nothing. */
  assert (regions_append_zero (&rs, 0) == 0);
  assert (regions_pad_to (&rs, 4096) == 0);
  assert (regions_count (&rs) == 0);
  regions_free (&rs);
  regions_free (&rs);           /* twice is harmless */
}

static void
test_layout (void)
{
  static const char mbr[512];
  struct regions rs;
  const struct region *r;
  uint64_t off;

  regions_init (&rs);
  assert (regions_append_data (&rs, 512, mbr) == 0);
  assert (regions_pad_to (&rs, 4096) == 0);
  assert (regions_pad_to (&rs, 4096) == 0);     /* already aligned */
  assert (regions_append_file (&rs, 10000, 0) == 0);
  assert (regions_pad_to (&rs, 1) == 0);        /* any size is aligned */
  assert (regions_pad_to (&rs, 512) == 0);
  assert (regions_append_file (&rs, 1, 1) == 0);

  assert (regions_count (&rs) == 5);
  assert (regions_size (&rs) == 4096 + 10240 + 1);
  r = regions_get (&rs, 0);
  assert (r->start == 0 && r->len == 512 && r->type == REGION_DATA &&
          r->data == mbr);
  r = regions_get (&rs, 1);
  assert (r->start == 512 && region_end (r) == 4096 &&
          r->type == REGION_ZERO);
  r = regions_get (&rs, 2);
  assert (r->start == 4096 && r->len == 10000 && r->type == REGION_FILE &&
          r->index == 0);
  r = regions_get (&rs, 3);
  assert (r->start == 14096 && region_end (r) == 14336 &&
          r->type == REGION_ZERO);
  r = regions_get (&rs, 4);
  assert (r->start == 14336 && r->len == 1 && r->index == 1);

  /* Every boundary: the last byte of one region, the first of the next. */
  for (size_t i = 0; i < regions_count (&rs); ++i) {
    const struct region *want = regions_get (&rs, i);

    assert (regions_find (&rs, want->start) == want);
    assert (regions_find (&rs, region_end (want) - 1) == want);
    if (i > 0)
      assert (regions_find (&rs, want->start - 1) == regions_get (&rs, i - 1));
  }
  assert (regions_find (&rs, regions_size (&rs)) == NULL);
  assert (regions_find (&rs, UINT64_MAX) == NULL);

  /* Each byte lies in exactly the region that covers it. */
  for (off = 0; off < regions_size (&rs); ++off) {
    r = regions_find (&rs, off);
    assert (r != NULL && r->start <= off && off < region_end (r));
  }
  regions_free (&rs);
}

static void
test_refused (void)
{
  struct regions rs;
  struct region r = { .type = REGION_ZERO };

  regions_init (&rs);
  assert (regions_append_zero (&rs, 100) == 0);

  /* A gap, an overlap. */
  errno = 0;
  r.start = 101; r.len = 1;
  assert (regions_append (&rs, &r) == -1 && errno == EINVAL);
  r.start = 99;
  assert (regions_append (&rs, &r) == -1 && errno == EINVAL);
  r.start = 100;
  assert (regions_append (&rs, &r) == 0);
  assert (regions_size (&rs) == 101);

  /* Bad alignments. */
  errno = 0;
  assert (regions_pad_to (&rs, 0) == -1 && errno == EINVAL);
  assert (regions_pad_to (&rs, 3) == -1 && errno == EINVAL);

  /* Sizes past INT64_MAX, and wrapping, change nothing. */
  errno = 0;
  assert (regions_append_file (&rs, UINT64_MAX, 0) == -1 &&
          errno == EOVERFLOW);
  assert (regions_append_file (&rs, INT64_MAX - 100, 0) == -1 &&
          errno == EOVERFLOW);
  assert (regions_pad_to (&rs, UINT64_C (1) << 63) == -1 &&
          errno == EOVERFLOW);
  assert (regions_count (&rs) == 2 && regions_size (&rs) == 101);

  /* Up to exactly INT64_MAX is fine, and findable at the end. */
  assert (regions_append_file (&rs, INT64_MAX - 101, 7) == 0);
  assert (regions_size (&rs) == INT64_MAX);
  assert (regions_find (&rs, INT64_MAX - 1)->index == 7);
  assert (regions_find (&rs, INT64_MAX) == NULL);
  errno = 0;
  assert (regions_append_zero (&rs, 1) == -1 && errno == EOVERFLOW);
  assert (regions_pad_to (&rs, 2) == -1 && errno == EOVERFLOW);
  assert (regions_pad_to (&rs, 1) == 0);
  regions_free (&rs);
}

/* Many regions: the binary search still finds each one. */
static void
test_many (void)
{
  struct regions rs;

  regions_init (&rs);
  for (size_t i = 0; i < 10000; ++i)
    assert (regions_append_file (&rs, i % 7 + 1, i) == 0);
  for (size_t i = 0; i < 10000; ++i) {
    const struct region *r = regions_get (&rs, i);

    assert (regions_find (&rs, r->start)->index == i);
    assert (regions_find (&rs, region_end (r) - 1)->index == i);
  }
  regions_free (&rs);
}

int
main (void)
{
  test_empty ();
  test_layout ();
  test_refused ();
  test_many ();
  printf ("test-regions: ok\n");
  return 0;
}
