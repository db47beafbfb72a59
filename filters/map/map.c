/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The map filter: move regions of the layer below to other offsets.
 *
 * Each map=START-END:DEST parameter sends the bytes START..END
 * (inclusive) of the export to DEST.. in the layer below; where
 * parameters overlap, the one given first wins, and bytes that no
 * parameter covers map to the same offset below.  At config_complete
 * the parameters are resolved into a sorted list of disjoint regions
 * (what is left of each one once the earlier ones have taken their
 * share), read-only afterwards, so a request finds its region by
 * binary search.  A request is cut at region boundaries and each piece
 * goes down on its own; a piece that would land past the end of the
 * layer below fails with EIO instead.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "checked-overflow.h"
#include "cleanup.h"
#include "minmax.h"
#include "vector.h"

/* A region of the export, [start, end), served from dest.. below.
 * INDEX is the map= parameter it came from (0 for the first).
 */
struct region {
  uint64_t start, end, dest;
  int32_t index;
};
DEFINE_VECTOR_TYPE (region_list, struct region);

/* The map= parameters in command-line order, then (config_complete)
 * the disjoint regions sorted by start.  Both are set before any
 * connection and read-only afterwards.
 */
static region_list params = empty_vector;
static region_list regions = empty_vector;
static int64_t map_size = -1;   /* map-size=, or -1: the size below */

static void
map_unload (void)
{
  region_list_reset (&params);
  region_list_reset (&regions);
}

/* Parse one size of a map= value: the text from P for LEN bytes. */
static int64_t
parse_part (const char *value, const char *p, size_t len)
{
  CLEANUP_FREE char *s = strndup (p, len);
  if (s == NULL) {
    nbdkit_error ("strndup: %m");
    return -1;
  }
  if (*s == '\0') {
    nbdkit_error ("map=%s: expected START-END:DEST", value);
    return -1;
  }
  return nbdkit_parse_size (s);
}

static int
parse_map (const char *value)
{
  const char *dash = strchr (value, '-');
  const char *colon = dash ? strchr (dash, ':') : NULL;
  if (dash == NULL || colon == NULL) {
    nbdkit_error ("map=%s: expected START-END:DEST", value);
    return -1;
  }
  int64_t start = parse_part (value, value, dash - value);
  if (start == -1)
    return -1;
  int64_t end = parse_part (value, dash + 1, colon - dash - 1);
  if (end == -1)
    return -1;
  int64_t dest = parse_part (value, colon + 1, strlen (colon + 1));
  if (dest == -1)
    return -1;
  if (end < start) {
    nbdkit_error ("map=%s: END is before START", value);
    return -1;
  }
  /* Keep [start, end + 1) and its destination end inside int64_t. */
  int64_t end_excl, dest_end;
  if (ADD_OVERFLOW (end, (int64_t) 1, &end_excl) ||
      ADD_OVERFLOW (dest, end - start + 1, &dest_end)) {
    nbdkit_error ("map=%s: the range is too large", value);
    return -1;
  }
  struct region r = {
    .start = start, .end = end_excl, .dest = dest,
    .index = params.len,
  };
  if (params.len >= INT32_MAX || region_list_append (&params, r) == -1) {
    nbdkit_error ("too many map parameters");
    return -1;
  }
  return 0;
}

static int
map_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  if (strcmp (key, "map") == 0)
    return parse_map (value);
  if (strcmp (key, "map-size") == 0) {
    map_size = nbdkit_parse_size (value);
    return map_size == -1 ? -1 : 0;
  }
  return next (nxdata, key, value);
}

static int
compare_start (const void *a, const void *b)
{
  const struct region *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Add to REGIONS what P covers that no earlier parameter does.
 * REGIONS is sorted and disjoint on entry; the new pieces are appended
 * (the caller sorts again).
 */
static int
add_uncovered (const struct region *p)
{
  size_t n = regions.len;
  uint64_t pos = p->start;
  for (size_t i = 0; i < n + 1 && pos < p->end; i++) {
    /* The next covered region, or the end of P past the last one. */
    uint64_t next_start = i < n ? regions.ptr[i].start : p->end;
    uint64_t next_end = i < n ? regions.ptr[i].end : p->end;
    if (next_end <= pos)
      continue;
    uint64_t gap_end = MIN (next_start, p->end);
    if (gap_end > pos) {
      struct region piece = {
        .start = pos, .end = gap_end,
        .dest = p->dest + (pos - p->start), .index = p->index,
      };
      if (region_list_append (&regions, piece) == -1) {
        nbdkit_error ("realloc: %m");
        return -1;
      }
    }
    pos = MAX (pos, next_end);
  }
  return 0;
}

static int
map_config_complete (nbdkit_next_config_complete *next,
                     nbdkit_backend *nxdata)
{
  for (size_t i = 0; i < params.len; i++) {
    if (add_uncovered (&params.ptr[i]) == -1)
      return -1;
    region_list_sort (&regions, compare_start);
  }
  for (size_t i = 0; i < regions.len; i++)
    nbdkit_debug ("map: [%" PRIu64 ", %" PRIu64 ") -> %" PRIu64
                  " (map parameter %" PRIi32 ")", regions.ptr[i].start,
                  regions.ptr[i].end, regions.ptr[i].dest,
                  regions.ptr[i].index + 1);
  return next (nxdata);
}

#define map_config_help \
  "map=<START>-<END>:<DEST>  Serve bytes START..END from DEST below.\n" \
  "map-size=<SIZE>           The export's size (default: the size below)."

static int64_t
map_get_size (nbdkit_next *next, void *handle)
{
  if (map_size >= 0)
    return map_size;
  return next->get_size (next);
}

/* Where the piece of a request at OFFSET (at most COUNT bytes) goes:
 * *LEN bytes of it to *DEST below, from map parameter *INDEX (-1 for
 * bytes no parameter covers).
 */
static void
find_piece (uint64_t offset, uint64_t count, uint64_t *dest, uint64_t *len,
            int32_t *index)
{
  /* The last region starting at or before OFFSET. */
  size_t lo = 0, hi = regions.len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (regions.ptr[mid].start <= offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo > 0 && offset < regions.ptr[lo - 1].end) {
    const struct region *r = &regions.ptr[lo - 1];
    *dest = r->dest + (offset - r->start);
    *len = MIN (count, r->end - offset);
    *index = r->index;
    return;
  }
  /* Not mapped: the same offset below, up to the next region. */
  *dest = offset;
  *len = lo < regions.len ? MIN (count, regions.ptr[lo].start - offset)
                          : count;
  *index = -1;
}

/* The pieces of one request, in order. */
struct piece_iter {
  uint64_t offset, remaining;
  uint64_t dest, len;
};

/* Step to the next piece; false when done.  Fails (*ERR = EIO) if the
 * piece would go past the end of the layer below.
 */
static int
next_piece (nbdkit_next *next, struct piece_iter *it, int *err)
{
  if (it->remaining == 0)
    return 0;
  int32_t index;
  find_piece (it->offset, it->remaining, &it->dest, &it->len, &index);
  NBDKIT_PROBE (map_piece, nbdkit_connection_id (), nbdkit_request_cookie (),
                it->offset, it->len, it->dest, index);
  int64_t size = next->get_size (next);
  if (size == -1) {
    *err = EIO;
    return -1;
  }
  if (it->dest > (uint64_t) size || it->len > (uint64_t) size - it->dest) {
    *err = EIO;
    nbdkit_error ("map: bytes %" PRIu64 "-%" PRIu64 " map to %" PRIu64
                  "-%" PRIu64 ", past the end of the plugin (%" PRIi64
                  " bytes)", it->offset, it->offset + it->len - 1,
                  it->dest, it->dest + it->len - 1, size);
    return -1;
  }
  return 1;
}

static void
advance (struct piece_iter *it)
{
  it->offset += it->len;
  it->remaining -= it->len;
}

static int
map_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
           uint64_t offset, uint32_t flags, int *err)
{
  struct piece_iter it = { .offset = offset, .remaining = count };
  unsigned char *p = buf;
  int r;
  while ((r = next_piece (next, &it, err)) == 1) {
    if (next->pread (next, p, it.len, it.dest, flags, err) == -1)
      return -1;
    p += it.len;
    advance (&it);
  }
  return r;
}

static int
map_pwrite (nbdkit_next *next, void *handle, const void *buf,
            uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct piece_iter it = { .offset = offset, .remaining = count };
  const unsigned char *p = buf;
  int r;
  while ((r = next_piece (next, &it, err)) == 1) {
    if (next->pwrite (next, p, it.len, it.dest, flags, err) == -1)
      return -1;
    p += it.len;
    advance (&it);
  }
  return r;
}

/* Trim, zero and cache take the same arguments: send each piece to
 * OP of the layer below.
 */
typedef int range_op (nbdkit_next *next, uint32_t count, uint64_t offset,
                      uint32_t flags, int *err);

static int
each_piece (nbdkit_next *next, range_op *op, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct piece_iter it = { .offset = offset, .remaining = count };
  int r;
  while ((r = next_piece (next, &it, err)) == 1) {
    if (op (next, it.len, it.dest, flags, err) == -1)
      return -1;
    advance (&it);
  }
  return r;
}

static int
map_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  return each_piece (next, next->trim, count, offset, flags, err);
}

static int
map_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  return each_piece (next, next->zero, count, offset, flags, err);
}

static int
map_cache (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  return each_piece (next, next->cache, count, offset, flags, err);
}

/* Ask below about each piece in its own coordinates and shift the
 * answers back.  Extents must be contiguous, so this stops at the
 * first piece below answers only in part (the client asks again).
 */
static int
map_extents (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags,
             struct nbdkit_extents *extents, int *err)
{
  struct piece_iter it = { .offset = offset, .remaining = count };
  int r;
  while ((r = next_piece (next, &it, err)) == 1) {
    struct nbdkit_extents *below =
      nbdkit_extents_new (it.dest, it.dest + it.len);
    if (below == NULL) {
      *err = errno;
      return -1;
    }
    if (next->extents (next, it.len, it.dest, flags, below, err) == -1) {
      nbdkit_extents_free (below);
      return -1;
    }
    uint64_t covered = 0;
    for (size_t i = 0; i < nbdkit_extents_count (below); i++) {
      struct nbdkit_extent e = nbdkit_get_extent (below, i);
      /* Clip to the piece: below may answer past it. */
      uint64_t lo = MAX (e.offset, it.dest);
      uint64_t hi = MIN (e.offset + e.length, it.dest + it.len);
      if (hi <= lo)
        continue;
      if (nbdkit_add_extent (extents, it.offset + (lo - it.dest), hi - lo,
                             e.type) == -1) {
        *err = errno;
        nbdkit_extents_free (below);
        return -1;
      }
      covered = hi - it.dest;
    }
    nbdkit_extents_free (below);
    if (covered < it.len || (flags & NBDKIT_FLAG_REQ_ONE))
      return 0;
    advance (&it);
  }
  return r;
}

static struct nbdkit_filter filter = {
  .name = "map",
  .longname = "nbdkit map filter",
  .unload = map_unload,
  .config = map_config,
  .config_complete = map_config_complete,
  .config_help = map_config_help,
  .get_size = map_get_size,
  .pread = map_pread,
  .pwrite = map_pwrite,
  .trim = map_trim,
  .zero = map_zero,
  .cache = map_cache,
  .extents = map_extents,
};

NBDKIT_REGISTER_FILTER (filter)
