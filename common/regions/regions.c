/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The region list of regions.h: a vector of regions, checked on the
 * way in (contiguous, non-empty, within INT64_MAX) so that lookups can
 * binary-search without further checks.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "checked-overflow.h"
#include "ispowerof2.h"
#include "regions.h"
#include "rounding.h"

void
regions_init (struct regions *rs)
{
  rs->v = (region_vector) empty_vector;
}

void
regions_free (struct regions *rs)
{
  region_vector_reset (&rs->v);
}

size_t
regions_count (const struct regions *rs)
{
  return rs->v.len;
}

uint64_t
regions_size (const struct regions *rs)
{
  if (rs->v.len == 0)
    return 0;
  return region_end (&rs->v.ptr[rs->v.len - 1]);
}

const struct region *
regions_get (const struct regions *rs, size_t i)
{
  assert (i < rs->v.len);
  return &rs->v.ptr[i];
}

/* bsearch comparator: KEY is a uint64_t offset. */
static int
compare_offset (const void *key, const void *elem)
{
  const uint64_t offset = *(const uint64_t *) key;
  const struct region *r = elem;

  if (offset < r->start)
    return -1;
  if (offset >= region_end (r))
    return 1;
  return 0;
}

const struct region *
regions_find (const struct regions *rs, uint64_t offset)
{
  return region_vector_search (&rs->v, &offset, compare_offset);
}

int
regions_append (struct regions *rs, const struct region *r)
{
  uint64_t end;

  if (r->start != regions_size (rs)) {
    errno = EINVAL;
    return -1;
  }
  if (ADD_OVERFLOW (r->start, r->len, &end) || end > INT64_MAX) {
    errno = EOVERFLOW;
    return -1;
  }
  if (r->len == 0)
    return 0;
  return region_vector_append (&rs->v, *r);
}

int
regions_append_file (struct regions *rs, uint64_t len, size_t index)
{
  const struct region r = {
    .start = regions_size (rs), .len = len, .type = REGION_FILE,
    .index = index,
  };

  return regions_append (rs, &r);
}

int
regions_append_data (struct regions *rs, uint64_t len, const void *data)
{
  const struct region r = {
    .start = regions_size (rs), .len = len, .type = REGION_DATA,
    .data = data,
  };

  return regions_append (rs, &r);
}

int
regions_append_zero (struct regions *rs, uint64_t len)
{
  const struct region r = {
    .start = regions_size (rs), .len = len, .type = REGION_ZERO,
  };

  return regions_append (rs, &r);
}

int
regions_pad_to (struct regions *rs, uint64_t alignment)
{
  const uint64_t size = regions_size (rs);

  if (!is_power_of_2 (alignment)) {
    errno = EINVAL;
    return -1;
  }
  /* ROUND_UP wraps near UINT64_MAX; the size is <= INT64_MAX, so only
   * an alignment of 2^63 can take the padded size past the limit.
   */
  if (size > UINT64_MAX - (alignment - 1)) {
    errno = EOVERFLOW;
    return -1;
  }
  return regions_append_zero (rs, ROUND_UP (size, alignment) - size);
}
