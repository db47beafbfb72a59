/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: extent lists, filled by a layer's extents callback and
 * read back by the server (block status) or by filters.  A list covers
 * [start, end): extents must be added in order and without gaps;
 * anything outside the range is clipped, adjacent extents of the same
 * type are merged.  A list may also know how much its reader wants
 * (extents_new_wanted, for block status replies): once what it holds
 * reaches that far it keeps only growing its last extent, so a layer
 * that describes the whole disk costs no more than the reply needs.
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

DEFINE_VECTOR_TYPE (extent_list, struct nbdkit_extent);

struct nbdkit_extents {
  extent_list v;
  uint64_t start, end;
  uint64_t wanted;              /* start <= wanted <= end */
  uint64_t next;                /* where the next extent must begin */
  bool any;                     /* has anything been added */
  bool done;                    /* full, or past wanted: keep no more */
};

struct nbdkit_extents *
nbdkit_extents_new (uint64_t start, uint64_t end)
{
  return extents_new_wanted (start, end, end);
}

struct nbdkit_extents *
extents_new_wanted (uint64_t start, uint64_t wanted, uint64_t end)
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
  e->wanted = wanted < start ? start : wanted > end ? end : wanted;
  return e;
}

void
nbdkit_extents_free (struct nbdkit_extents *e)
{
  if (e) {
    extent_list_reset (&e->v);
    free (e);
  }
}

size_t
nbdkit_extents_count (const struct nbdkit_extents *e)
{
  return e->v.len;
}

struct nbdkit_extent
nbdkit_get_extent (const struct nbdkit_extents *e, size_t i)
{
  return e->v.ptr[i];
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
  if (lo >= hi || e->done)
    return 0;

  if (e->v.len > 0) {
    struct nbdkit_extent *last = &e->v.ptr[e->v.len - 1];

    if (last->type == type) {
      last->length += hi - lo;
      return 0;
    }
    /* The reader has all it wants, or the list is full: from here on
     * nothing is kept, or the last extent would grow over what was
     * dropped.
     */
    if (last->offset + last->length >= e->wanted ||
        e->v.len >= MAX_EXTENTS) {
      e->done = true;
      return 0;
    }
  }
  if (extent_list_append (&e->v, (struct nbdkit_extent) {
        .offset = lo, .length = hi - lo, .type = type }) == -1) {
    nbdkit_error ("realloc: %m");
    return -1;
  }
  return 0;
}

/* ---- helpers for filters ---- */

/* Ask next for [offset, offset+count) until it is covered. */
struct nbdkit_extents *
nbdkit_extents_full (nbdkit_next *next, uint32_t count, uint64_t offset,
                     uint32_t flags, int *err)
{
  int scratch;
  if (!err)
    err = &scratch;
  const uint64_t end = offset + count;
  struct nbdkit_extents *all = nbdkit_extents_new (offset, end);
  if (!all) {
    *err = errno ? errno : ENOMEM;
    return NULL;
  }
  flags &= ~NBDKIT_FLAG_REQ_ONE;

  uint64_t pos = offset;
  while (pos < end) {
    struct nbdkit_extents *part = nbdkit_extents_new (pos, end);
    if (!part) {
      *err = errno ? errno : ENOMEM;
      goto fail;
    }
    if (next->extents (next, end - pos, pos, flags, part, err) == -1) {
      nbdkit_extents_free (part);
      goto fail;
    }
    size_t n = nbdkit_extents_count (part);
    for (size_t i = 0; i < n; i++) {
      struct nbdkit_extent e = nbdkit_get_extent (part, i);
      if (nbdkit_add_extent (all, e.offset, e.length, e.type) == -1) {
        *err = errno ? errno : EIO;
        nbdkit_extents_free (part);
        goto fail;
      }
      pos = e.offset + e.length;
    }
    nbdkit_extents_free (part);
    if (n == 0) {
      nbdkit_error ("nbdkit_extents_full: the layer below returned no "
                    "extents at %" PRIu64, pos);
      *err = EIO;
      goto fail;
    }
  }
  return all;

 fail:
  nbdkit_extents_free (all);
  return NULL;
}

/* Block status in whole blocks of align bytes.  A block that next
 * describes with several extents gets the type bits all of them share
 * (a block is a hole, or reads as zeroes, only if all of it does).
 * Like a plugin's answer, this may stop short of count: it stops after
 * the first batch of whole blocks next described.  It may also go past
 * count, as far as extents allows, when next describes whole blocks
 * beyond it anyway.
 */
int
nbdkit_extents_aligned (nbdkit_next *next, uint32_t count, uint64_t offset,
                        uint32_t flags, uint32_t align,
                        struct nbdkit_extents *extents, int *err)
{
  int scratch;
  if (!err)
    err = &scratch;
  if (!is_power_of_2 (align) || !IS_ALIGNED (offset, align) ||
      !IS_ALIGNED (count, align) || count == 0) {
    nbdkit_error ("nbdkit_extents_aligned: offset %" PRIu64 " and count %"
                  PRIu32 " must be multiples of %" PRIu32 ", a power of 2",
                  offset, count, align);
    *err = EINVAL;
    return -1;
  }

  const uint64_t end = offset + count;
  uint64_t pos = offset;        /* everything before pos is handled */
  bool partial = false;         /* inside a block next split up */
  uint64_t block = 0;           /* ... which starts here */
  uint32_t shared = 0;          /* ... with the bits its pieces share */
  bool added = false;

  /* What next says past end is kept as far as its first extent that
   * reaches end.
   */
  const uint64_t part_end = extents->end > end ? extents->end : end;

  while (pos < end && (partial || !added)) {
    struct nbdkit_extents *part = extents_new_wanted (pos, end, part_end);
    if (!part) {
      *err = errno ? errno : ENOMEM;
      return -1;
    }
    if (next->extents (next, end - pos, pos, flags, part, err) == -1) {
      nbdkit_extents_free (part);
      return -1;
    }
    size_t n = nbdkit_extents_count (part);
    for (size_t i = 0; i < n; i++) {
      struct nbdkit_extent e = nbdkit_get_extent (part, i);
      const uint64_t e_end = e.offset + e.length;
      uint64_t add_off = 0, add_len = 0;
      uint32_t add_type = 0;
      while (pos < e_end) {
        if (!partial) {
          /* Whole blocks of this extent go out as they are. */
          uint64_t whole_end = ROUND_DOWN (e_end, (uint64_t) align);
          if (whole_end > pos) {
            add_off = pos;
            add_len = whole_end - pos;
            add_type = e.type;
            pos = whole_end;
          }
          else {
            partial = true;
            block = pos;
            shared = e.type;
            pos = e_end;
            continue;
          }
        }
        else {
          shared &= e.type;
          if (e_end >= block + align) {
            add_off = block;
            add_len = align;
            add_type = shared;
            partial = false;
            pos = block + align;
          }
          else {
            pos = e_end;
            continue;
          }
        }
        if (nbdkit_add_extent (extents, add_off, add_len, add_type) == -1) {
          *err = errno ? errno : EIO;
          nbdkit_extents_free (part);
          return -1;
        }
        added = true;
      }
    }
    nbdkit_extents_free (part);
    if (n == 0) {
      nbdkit_error ("nbdkit_extents_aligned: the layer below returned no "
                    "extents at %" PRIu64, pos);
      *err = EIO;
      return -1;
    }
  }
  return 0;
}
