/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The protect filter: byte ranges that clients may read but not
 * change.  protect=START-END (inclusive, either end optional) and its
 * complement protect=~START-END are collected at config time and
 * turned, in config_complete, into a region list (common/regions)
 * that covers every possible offset: each region is protected or not.
 * The list is read-only afterwards, so requests need no lock.
 *
 * A write, zero or trim that touches protected bytes is let through
 * only if it would leave them as they are: the protected bytes are
 * read from the layer below and compared (with the data written, or
 * with zeroes).  Otherwise it fails with EPERM and protect_refused
 * fires.  A trim never reaches the protected bytes themselves (their
 * content after a trim is not guaranteed), only the bytes around them.
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

#include "cleanup.h"
#include "iszero.h"
#include "minmax.h"
#include "regions.h"
#include "vector.h"

/* A protected interval [start, end), as parsed. */
struct range {
  uint64_t start, end;
};
DEFINE_VECTOR_TYPE (range_list, struct range);

/* Filled by config, turned into REGIONS by config_complete. */
static range_list ranges = empty_vector;

/* Every offset up to INT64_MAX; index 1 marks a protected region. */
static struct regions regions;
enum { UNPROTECTED = 0, PROTECTED = 1 };

/* Compare protected bytes in pieces of this size, so that a zero or
 * trim of gigabytes does not read them all into memory at once.
 */
#define CHUNK (1024 * 1024)

static void
protect_load (void)
{
  regions_init (&regions);
}

static void
protect_unload (void)
{
  range_list_reset (&ranges);
  regions_free (&regions);
}

/* One end of a range: empty means DEFAULT; decimal, 0octal or 0xhex. */
static int
parse_end (const char *what, const char *s, uint64_t dflt, uint64_t *r)
{
  if (*s == '\0') {
    *r = dflt;
    return 0;
  }
  return nbdkit_parse_uint64_t (what, s, r);
}

static int
add_range (uint64_t start, uint64_t end)
{
  struct range r = { .start = start, .end = end };
  if (start >= end)
    return 0;
  if (range_list_append (&ranges, r) == -1) {
    nbdkit_error ("protect: %m");
    return -1;
  }
  return 0;
}

static int
parse_protect (const char *value)
{
  const uint64_t limit = INT64_MAX;   /* no export is larger */
  bool complement = false;
  const char *s = value;
  uint64_t start, end;

  if (*s == '~') {
    complement = true;
    s++;
  }
  const char *dash = strchr (s, '-');
  if (!dash) {
    nbdkit_error ("protect: expected START-END, got \"%s\"", value);
    return -1;
  }
  CLEANUP_FREE char *first = strndup (s, dash - s);
  if (!first) {
    nbdkit_error ("strndup: %m");
    return -1;
  }
  if (parse_end ("protect: START", first, 0, &start) == -1 ||
      parse_end ("protect: END", dash + 1, limit - 1, &end) == -1)
    return -1;
  if (end < start) {
    nbdkit_error ("protect: END is before START in \"%s\"", value);
    return -1;
  }
  /* From here on, half-open and within what an export can be. */
  start = MIN (start, limit);
  end = MIN (end, limit - 1) + 1;

  if (!complement)
    return add_range (start, end);
  if (add_range (0, start) == -1)
    return -1;
  return add_range (end, limit);
}

static int
protect_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                const char *key, const char *value)
{
  if (strcmp (key, "protect") == 0)
    return parse_protect (value);
  return next (nxdata, key, value);
}

#define protect_config_help \
  "protect=START-END   Protect bytes START to END (inclusive).\n" \
  "protect=~START-END  Protect all bytes except START to END."

static int
compare_ranges (const void *a, const void *b)
{
  const struct range *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Merge the ranges and lay the regions end to end up to INT64_MAX. */
static int
protect_config_complete (nbdkit_next_config_complete *next,
                         nbdkit_backend *nxdata)
{
  uint64_t pos = 0;
  size_t i = 0;

  range_list_sort (&ranges, compare_ranges);
  while (i < ranges.len) {
    uint64_t start = ranges.ptr[i].start, end = ranges.ptr[i].end;
    for (i++; i < ranges.len && ranges.ptr[i].start <= end; i++)
      end = MAX (end, ranges.ptr[i].end);
    if (regions_append_file (&regions, start - pos, UNPROTECTED) == -1 ||
        regions_append_file (&regions, end - start, PROTECTED) == -1)
      goto oom;
    nbdkit_debug ("protecting bytes %" PRIu64 "-%" PRIu64, start, end - 1);
    pos = end;
  }
  if (regions_append_file (&regions, INT64_MAX - pos, UNPROTECTED) == -1)
    goto oom;
  range_list_reset (&ranges);
  return next (nxdata);

 oom:
  nbdkit_error ("protect: building the region list: %m");
  return -1;
}

static void
refuse (const char *what, uint32_t count, uint64_t offset,
        const struct region *r, int *err)
{
  NBDKIT_PROBE (protect_refused, nbdkit_connection_id (),
                nbdkit_request_cookie (), offset, count, what);
  if (region_end (r) == INT64_MAX)
    nbdkit_error ("%s of %" PRIu32 " bytes at %" PRIu64
                  " would change protected bytes %" PRIu64 "-(end)",
                  what, count, offset, r->start);
  else
    nbdkit_error ("%s of %" PRIu32 " bytes at %" PRIu64
                  " would change protected bytes %" PRIu64 "-%" PRIu64,
                  what, count, offset, r->start, region_end (r) - 1);
  *err = EPERM;
}

/* Would writing DATA (or zeroes, if DATA is NULL) over
 * [offset, offset+count) change a protected byte?  0: no, 1: yes (and
 * *HIT is the region), -1: a read below failed (*err set).
 */
static int
changes_protected (nbdkit_next *next, const void *data, uint32_t count,
                   uint64_t offset, const struct region **hit, int *err)
{
  CLEANUP_FREE char *buf = NULL;
  const uint64_t end = offset + count;  /* checked at the edge */
  uint64_t pos = offset;

  while (pos < end) {
    const struct region *r = regions_find (&regions, pos);
    if (!r) {                   /* beyond INT64_MAX: cannot happen */
      *err = EINVAL;
      return -1;
    }
    const uint64_t piece_end = MIN (region_end (r), end);
    if (r->index == PROTECTED) {
      if (!buf && (buf = malloc (CHUNK)) == NULL) {
        *err = errno;
        nbdkit_error ("malloc: %m");
        return -1;
      }
      while (pos < piece_end) {
        const uint32_t n = MIN (piece_end - pos, (uint64_t) CHUNK);
        if (next->pread (next, buf, n, pos, 0, err) == -1)
          return -1;
        if (data ? memcmp (buf, (const char *) data + (pos - offset), n)
                 : !is_zero (buf, n)) {
          *hit = r;
          return 1;
        }
        pos += n;
      }
    }
    pos = piece_end;
  }
  return 0;
}

static int
protect_pwrite (nbdkit_next *next, void *handle, const void *buf,
                uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  const struct region *hit;
  switch (changes_protected (next, buf, count, offset, &hit, err)) {
  case -1: return -1;
  case 1: refuse ("write", count, offset, hit, err); return -1;
  }
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
protect_zero (nbdkit_next *next, void *handle, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  const struct region *hit;
  switch (changes_protected (next, NULL, count, offset, &hit, err)) {
  case -1: return -1;
  case 1: refuse ("zero", count, offset, hit, err); return -1;
  }
  return next->zero (next, count, offset, flags, err);
}

/* A trim may leave anything behind, so protected bytes that are zero
 * today are kept out of it: only the unprotected pieces are trimmed.
 */
static int
protect_trim (nbdkit_next *next, void *handle, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  const struct region *hit;
  const uint64_t end = offset + count;
  uint64_t pos = offset;

  switch (changes_protected (next, NULL, count, offset, &hit, err)) {
  case -1: return -1;
  case 1: refuse ("trim", count, offset, hit, err); return -1;
  }
  while (pos < end) {
    const struct region *r = regions_find (&regions, pos);
    if (!r) {
      *err = EINVAL;
      return -1;
    }
    const uint64_t piece_end = MIN (region_end (r), end);
    if (r->index == UNPROTECTED && (pos > offset || piece_end < end)) {
      /* A piece; FUA applies to each. */
      if (next->trim (next, piece_end - pos, pos, flags, err) == -1)
        return -1;
    }
    else if (r->index == UNPROTECTED)
      return next->trim (next, count, offset, flags, err);
    pos = piece_end;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "protect",
  .longname = "nbdkit protect filter",
  .load = protect_load,
  .unload = protect_unload,
  .config = protect_config,
  .config_complete = protect_config_complete,
  .config_help = protect_config_help,
  .pwrite = protect_pwrite,
  .zero = protect_zero,
  .trim = protect_trim,
};

NBDKIT_REGISTER_FILTER (filter)
