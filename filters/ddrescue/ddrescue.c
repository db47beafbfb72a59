/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ddrescue filter: serve a disk image rescued by GNU ddrescue as
 * its mapfile describes it.  Only bytes in blocks the mapfile marks
 * finished ('+') can be read; a read touching anything else fails with
 * EIO, as the original disk's bad sectors did, instead of returning
 * the zeroes ddrescue left in the image.  The export is read-only.
 *
 * The mapfile is read once, at configuration time, into a sorted list
 * of finished ranges (adjacent ones merged); afterwards the list is
 * only read, so requests need no lock.
 *
 * Mapfile format (GNU ddrescue manual, "Mapfile structure"): lines
 * starting with '#' are comments; the first other line is the status
 * line "current_pos current_status [current_pass]"; every line after
 * it is a block "pos size status", numbers in C notation (ddrescue
 * writes 0x hex), blocks in increasing order without overlap.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "vector.h"

struct range {
  uint64_t start, end;          /* finished bytes [start, end) */
};
DEFINE_VECTOR_TYPE (range_vector, struct range);

/* Set by .config, read-only afterwards. */
static range_vector finished = empty_vector;
static bool have_mapfile = false;

static void
ddrescue_unload (void)
{
  range_vector_reset (&finished);
}

/* Parse the unsigned number at *P (C notation: 0x hex, leading-0
 * octal, decimal), skipping blanks before it, and move *P past it.
 */
static int
parse_number (const char **p, uint64_t *out)
{
  const char *s = *p + strspn (*p, " \t");
  char *end;
  unsigned long long v;

  if (*s < '0' || *s > '9')
    return -1;
  errno = 0;
  v = strtoull (s, &end, 0);
  if (errno != 0 || end == s || v > INT64_MAX)
    return -1;
  *out = v;
  *p = end;
  return 0;
}

/* Parse one status character, which must stand alone. */
static int
parse_char (const char **p, const char *allowed, char *out)
{
  const char *s = *p + strspn (*p, " \t");

  if (*s == '\0' || strchr (allowed, *s) == NULL ||
      (s[1] != '\0' && s[1] != ' ' && s[1] != '\t'))
    return -1;
  *out = *s;
  *p = s + 1;
  return 0;
}

static bool
at_end (const char *p)
{
  return p[strspn (p, " \t")] == '\0';
}

static int
add_finished (uint64_t start, uint64_t end)
{
  if (finished.len > 0 && finished.ptr[finished.len - 1].end == start) {
    finished.ptr[finished.len - 1].end = end;
    return 0;
  }
  return range_vector_append (&finished,
                              (struct range) { .start = start, .end = end });
}

static int
read_mapfile (const char *path)
{
  FILE *fp = fopen (path, "r");
  CLEANUP_FREE char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  unsigned lineno = 0;
  bool seen_status = false;
  size_t blocks = 0;
  uint64_t prev_end = 0;
  int ret = -1;

  if (fp == NULL) {
    nbdkit_error ("ddrescue-mapfile: %s: %m", path);
    return -1;
  }

  while (errno = 0, (len = getline (&line, &cap, fp)) != -1) {
    const char *p = line;
    uint64_t pos, size;
    char status;

    lineno++;
    if ((size_t) len != strlen (line)) {
      nbdkit_error ("ddrescue-mapfile: %s:%u: NUL byte in line",
                    path, lineno);
      goto out;
    }
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = '\0';
    p += strspn (p, " \t");
    if (*p == '#' || *p == '\0')
      continue;

    if (!seen_status) {
      /* current_pos current_status [current_pass] */
      uint64_t pass;
      if (parse_number (&p, &pos) == -1 ||
          parse_char (&p, "?*/-FG+", &status) == -1 ||
          (!at_end (p) && (parse_number (&p, &pass) == -1 || pass == 0)) ||
          !at_end (p)) {
        nbdkit_error ("ddrescue-mapfile: %s:%u: bad status line "
                      "(expected: pos status [pass])", path, lineno);
        goto out;
      }
      seen_status = true;
      continue;
    }

    /* pos size status */
    if (parse_number (&p, &pos) == -1 || parse_number (&p, &size) == -1 ||
        parse_char (&p, "?*/-+", &status) == -1 || !at_end (p)) {
      nbdkit_error ("ddrescue-mapfile: %s:%u: bad block line "
                    "(expected: pos size status)", path, lineno);
      goto out;
    }
    if (size == 0 || size > INT64_MAX - pos) {
      nbdkit_error ("ddrescue-mapfile: %s:%u: bad block size", path, lineno);
      goto out;
    }
    if (pos < prev_end) {
      nbdkit_error ("ddrescue-mapfile: %s:%u: block overlaps or is out of "
                    "order", path, lineno);
      goto out;
    }
    prev_end = pos + size;
    blocks++;
    if (status == '+' && add_finished (pos, pos + size) == -1) {
      nbdkit_error ("realloc: %m");
      goto out;
    }
  }
  if (errno != 0) {
    nbdkit_error ("ddrescue-mapfile: %s: %m", path);
    goto out;
  }
  if (blocks == 0) {
    nbdkit_error ("ddrescue-mapfile: %s: no %s: not a ddrescue mapfile",
                  path, seen_status ? "blocks" : "status line");
    goto out;
  }
  nbdkit_debug ("ddrescue: %s: %zu blocks, %zu finished ranges",
                path, blocks, finished.len);
  ret = 0;

 out:
  fclose (fp);
  return ret;
}

static int
ddrescue_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  if (strcmp (key, "ddrescue-mapfile") == 0) {
    if (have_mapfile) {
      nbdkit_error ("ddrescue-mapfile: only one mapfile can be given");
      return -1;
    }
    have_mapfile = true;
    return read_mapfile (value);
  }
  return next (nxdata, key, value);
}

static int
ddrescue_config_complete (nbdkit_next_config_complete *next,
                          nbdkit_backend *nxdata)
{
  if (!have_mapfile) {
    nbdkit_error ("ddrescue-mapfile: the parameter ddrescue-mapfile=FILE "
                  "is required");
    return -1;
  }
  return next (nxdata);
}

#define ddrescue_config_help \
  "ddrescue-mapfile=FILE    (required) The GNU ddrescue mapfile to apply."

/* Read-only, and no prefetch: it would read what was not rescued. */
static int
ddrescue_can_write (nbdkit_next *next, void *handle)
{
  return 0;
}

static int
ddrescue_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_NONE;
}

/* Is all of [offset, offset+count) in finished ranges?  Adjacent
 * finished blocks were merged, so one range must hold it all.
 */
static bool
is_finished (uint64_t offset, uint32_t count)
{
  size_t lo = 0, hi = finished.len;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (finished.ptr[mid].end <= offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < finished.len && finished.ptr[lo].start <= offset &&
    offset + count <= finished.ptr[lo].end;
}

static int
ddrescue_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  if (!is_finished (offset, count)) {
    NBDKIT_PROBE (ddrescue_refused, nbdkit_connection_id (),
                  nbdkit_request_cookie (), offset, count);
    nbdkit_debug ("ddrescue: read at %" PRIu64 " for %" PRIu32
                  " bytes touches unrescued data: EIO", offset, count);
    *err = EIO;
    return -1;
  }
  return next->pread (next, buf, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "ddrescue",
  .longname = "nbdkit ddrescue mapfile filter",
  .unload = ddrescue_unload,
  .config = ddrescue_config,
  .config_complete = ddrescue_config_complete,
  .config_help = ddrescue_config_help,
  .can_write = ddrescue_can_write,
  .can_cache = ddrescue_can_cache,
  .pread = ddrescue_pread,
};

NBDKIT_REGISTER_FILTER (filter)
