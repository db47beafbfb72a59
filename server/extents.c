/* nbdkit server: extent lists, filled by a layer's extents callback and
 * read back by the server (block status) or by filters.  A list covers
 * [start, end): extents must be added in order and without gaps;
 * anything outside the range is clipped, adjacent extents of the same
 * type are merged.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Enough for any block status reply we would send; beyond this, the
 * list is silently truncated, which the protocol allows.
 */
#define MAX_EXTENTS (1024 * 1024)

struct nbdkit_extents {
  struct nbdkit_extent *v;
  size_t n, cap;
  uint64_t start, end;
  uint64_t next;                /* where the next extent must begin */
  bool any;                     /* has anything been added */
};

struct nbdkit_extents *
nbdkit_extents_new (uint64_t start, uint64_t end)
{
  if (start > INT64_MAX || end > INT64_MAX || start > end) {
    nbdkit_error ("nbdkit_extents_new: bad range [%" PRIu64 ", %" PRIu64
                  ")", start, end);
    errno = ERANGE;
    return NULL;
  }
  struct nbdkit_extents *e = calloc (1, sizeof *e);
  if (!e) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  e->start = e->next = start;
  e->end = end;
  return e;
}

void
nbdkit_extents_free (struct nbdkit_extents *e)
{
  if (e) {
    free (e->v);
    free (e);
  }
}

size_t
nbdkit_extents_count (const struct nbdkit_extents *e)
{
  return e->n;
}

struct nbdkit_extent
nbdkit_get_extent (const struct nbdkit_extents *e, size_t i)
{
  return e->v[i];
}

int
nbdkit_add_extent (struct nbdkit_extents *e, uint64_t offset,
                   uint64_t length, uint32_t type)
{
  if (length == 0)
    return 0;
  if (offset > UINT64_MAX - length) {
    nbdkit_error ("nbdkit_add_extent: extent wraps around");
    errno = ERANGE;
    return -1;
  }
  if (e->any ? offset != e->next : offset > e->start) {
    nbdkit_error ("nbdkit_add_extent: extents must be contiguous and "
                  "start at the requested offset (expected %" PRIu64
                  ", got %" PRIu64 ")", e->any ? e->next : e->start, offset);
    errno = ERANGE;
    return -1;
  }
  e->any = true;
  e->next = offset + length;

  /* Clip to [start, end). */
  uint64_t lo = offset < e->start ? e->start : offset;
  uint64_t hi = e->next > e->end ? e->end : e->next;
  if (lo >= hi)
    return 0;

  if (e->n > 0 && e->v[e->n - 1].type == type) {
    e->v[e->n - 1].length += hi - lo;
    return 0;
  }
  if (e->n >= MAX_EXTENTS)
    return 0;
  if (e->n == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 16;
    struct nbdkit_extent *v = realloc (e->v, cap * sizeof *v);
    if (!v) {
      nbdkit_error ("realloc: %m");
      return -1;
    }
    e->v = v;
    e->cap = cap;
  }
  e->v[e->n++] = (struct nbdkit_extent) {
    .offset = lo, .length = hi - lo, .type = type
  };
  return 0;
}
